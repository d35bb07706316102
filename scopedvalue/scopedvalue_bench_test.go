package scopedvalue_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/goloom/loom/scopedvalue"
)

// The benchmarks against context.WithValue, with these loops as their scopedvalue rows, are in
// the bench module (bench/scopedvalue_test.go); these are for comparing scopedvalue with itself.

// peerKey is the kind of key context.WithValue users declare; the tests wrap contexts with it.
type peerKey int

var sinkString string

// nestWhere binds keys[i] to values[i] with one Where per key, each nested inside the previous
// one's Run, and calls fn in the innermost context.
func nestWhere(ctx context.Context, keys []*scopedvalue.Key[string], values []string, fn func(context.Context)) {
	if len(keys) == 0 {
		fn(ctx)
		return
	}
	scopedvalue.Where(keys[0], values[0]).Run(ctx, func(ctx context.Context) {
		nestWhere(ctx, keys[1:], values[1:], fn)
	})
}

// BenchmarkGet reads the innermost and the outermost of depth keys, each bound by its own nested
// Where: the time must not grow with depth.
func BenchmarkGet(b *testing.B) {
	for _, depth := range []int{1, 8, 64} {
		keys := make([]*scopedvalue.Key[string], depth)
		values := make([]string, depth)
		for i := range keys {
			keys[i] = scopedvalue.New[string](fmt.Sprint("key-", i))
			values[i] = fmt.Sprint("value-", i)
		}
		positions := []struct {
			name string
			i    int
		}{{"innermost", depth - 1}, {"outermost", 0}}
		nestWhere(context.Background(), keys, values, func(ctx context.Context) {
			for _, pos := range positions {
				k := keys[pos.i]
				b.Run(fmt.Sprintf("depth=%d/key=%s/impl=scopedvalue", depth, pos.name), func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						sinkString = k.Get(ctx)
					}
				})
			}
		})
	}
}

// BenchmarkGetWrapped reads a key bound below a layer the caller added afterwards: the cost of
// the caller's own chain, walked once by ctx.Value, whatever the number of scoped values.
func BenchmarkGetWrapped(b *testing.B) {
	k := scopedvalue.New[string]("k")
	ctx := scopedvalue.Where(k, "v").Context(context.Background())
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	b.Run("impl=scopedvalue", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkString = k.Get(ctx)
		}
	})
}
