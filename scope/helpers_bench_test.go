package scope_test

import (
	"context"
	"testing"

	"github.com/goloom/loom/scope"
)

// nopJoiner is the least a custom policy can be: it never refuses a fork nor cancels.
type nopJoiner struct{}

func (nopJoiner) OnFork(scope.Task) error    { return nil }
func (nopJoiner) OnComplete(scope.Task) bool { return false }
func (nopJoiner) Result() error              { return nil }

// BenchmarkMap: 10,000 cheap items, at most 8 at a time, under the default policy, a CancelWhen
// (whose predicate looks at every call) and a custom Joiner (asked about every fork).
// bench/scope_test.go runs the first beside errgroup's SetLimit(8) and conc's iter.Mapper.
func BenchmarkMap(b *testing.B) {
	ctx := context.Background()
	in := make([]int, 10_000)
	for i := range in {
		in[i] = i
	}
	double := func(_ context.Context, v int) (int, error) { return 2 * v, nil }
	for _, p := range []struct {
		name string
		opt  scope.Option
	}{
		{"failfast", scope.FailFast()},
		{"cancelwhen", scope.CancelWhen(func(scope.Task) bool { return false })},
		{"joiner", scope.WithJoiner(nopJoiner{})},
	} {
		b.Run("scope-limit8/policy="+p.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				out, err := scope.Map(ctx, in, double, scope.WithLimit(8), p.opt)
				if err != nil || out[len(out)-1] != 2*(len(in)-1) {
					b.Fatal(err)
				}
			}
		})
	}
}
