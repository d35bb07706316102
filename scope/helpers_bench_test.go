package scope_test

import (
	"context"
	"testing"

	"github.com/goloom/loom/scope"
	"github.com/sourcegraph/conc/iter"
	"golang.org/x/sync/errgroup"
)

// BenchmarkMap: 10,000 cheap items, at most 8 at a time, against errgroup.SetLimit(8) and conc's
// iter.Mapper with 8 goroutines (issue 4).
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
	b.Run("errgroup-limit8", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			out := make([]int, len(in))
			g, ctx := errgroup.WithContext(ctx)
			g.SetLimit(8)
			for i, v := range in {
				g.Go(func() error {
					r, err := double(ctx, v)
					out[i] = r
					return err
				})
			}
			if err := g.Wait(); err != nil || out[len(out)-1] != 2*(len(in)-1) {
				b.Fatal(err)
			}
		}
	})
	b.Run("conc-iter-8", func(b *testing.B) {
		b.ReportAllocs()
		m := iter.Mapper[int, int]{MaxGoroutines: 8}
		for b.Loop() {
			out := m.Map(in, func(v *int) int { r, _ := double(ctx, *v); return r })
			if out[len(out)-1] != 2*(len(in)-1) {
				b.Fatal("wrong result")
			}
		}
	})
}
