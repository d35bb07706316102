package scopedvalue_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/goloom/loom/scopedvalue"
)

var sinkCtx context.Context

// BenchmarkBind applies a prebuilt Carrier of k bindings: at most 2 allocations whatever k.
func BenchmarkBind(b *testing.B) {
	for _, k := range []int{1, 2, 4, 16, 64} {
		var c scopedvalue.Carrier
		for i := range k {
			c = c.And(scopedvalue.Where(scopedvalue.New[any](fmt.Sprint("key-", i)), any(fmt.Sprint("value-", i))))
		}
		parent := context.Background()
		b.Run(fmt.Sprintf("keys=%d/impl=scopedvalue", k), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sinkCtx = c.Context(parent)
			}
		})
	}
}

// BenchmarkWhereRun is the whole idiom, building the Carrier each time: Where per key (boxing a
// string allocates), And, then Run.
func BenchmarkWhereRun(b *testing.B) {
	keys := []*scopedvalue.Key[string]{
		scopedvalue.New[string]("request-id"),
		scopedvalue.New[string]("user"),
		scopedvalue.New[string]("tenant"),
	}
	id, user, tenant := "r-42", "ada", "acme"
	fn := func(ctx context.Context) { sinkCtx = ctx }
	parent := context.Background()
	b.Run("keys=1/impl=scopedvalue", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			scopedvalue.Where(keys[0], id).Run(parent, fn)
		}
	})
	b.Run("keys=3/impl=scopedvalue", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			scopedvalue.Where(keys[0], id).
				And(scopedvalue.Where(keys[1], user)).
				And(scopedvalue.Where(keys[2], tenant)).
				Run(parent, fn)
		}
	})
}

// BenchmarkNestedWhere binds depth keys by separate nested Where calls: each copies the table
// it inherits, so the total is quadratic in depth; the price of Get being constant.
func BenchmarkNestedWhere(b *testing.B) {
	for _, depth := range []int{1, 8, 64} {
		keys := make([]*scopedvalue.Key[int], depth)
		for i := range keys {
			keys[i] = scopedvalue.New[int](fmt.Sprint("key-", i))
		}
		b.Run(fmt.Sprintf("depth=%d/impl=scopedvalue", depth), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ctx := context.Background()
				for i, k := range keys {
					ctx = scopedvalue.Where(k, i).Context(ctx)
				}
				sinkCtx = ctx
			}
		})
	}
}
