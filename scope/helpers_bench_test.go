package scope_test

import (
	"context"
	"testing"

	"github.com/goloom/loom/scope"
)

// BenchmarkMap: 10,000 cheap items, at most 8 at a time. bench/scope_test.go runs the same beside
// errgroup's SetLimit(8) and conc's iter.Mapper.
func BenchmarkMap(b *testing.B) {
	ctx := context.Background()
	in := make([]int, 10_000)
	for i := range in {
		in[i] = i
	}
	double := func(_ context.Context, v int) (int, error) { return 2 * v, nil }
	b.Run("scope-limit8", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			out, err := scope.Map(ctx, in, double, scope.WithLimit(8))
			if err != nil || out[len(out)-1] != 2*(len(in)-1) {
				b.Fatal(err)
			}
		}
	})
}
