package bench_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/goloom/loom/scopedvalue"
)

// peerKey is the kind of key context.WithValue users declare.
type peerKey int

var (
	sinkString string
	sinkAny    any
	sinkCtx    context.Context
)

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

// BenchmarkScopedValueGet reads the innermost and the outermost of depth keys, each bound by its
// own nested Where; the peer reads the same positions through depth nested context.WithValue
// layers, with the type assertion a typed accessor needs (impl=WithValue) and without
// (impl=Value-raw).
func BenchmarkScopedValueGet(b *testing.B) {
	for _, depth := range []int{1, 8, 64} {
		keys := make([]*scopedvalue.Key[string], depth)
		values := make([]string, depth)
		peer := context.Background()
		for i := range keys {
			keys[i] = scopedvalue.New[string](fmt.Sprint("key-", i))
			values[i] = fmt.Sprint("value-", i)
			peer = context.WithValue(peer, peerKey(i), values[i])
		}
		positions := []struct {
			name string
			i    int
		}{{"innermost", depth - 1}, {"outermost", 0}}
		nestWhere(context.Background(), keys, values, func(ctx context.Context) {
			for _, pos := range positions {
				k, pk := keys[pos.i], peerKey(pos.i)
				b.Run(fmt.Sprintf("depth=%d/key=%s/impl=scopedvalue", depth, pos.name), func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						sinkString = k.Get(ctx)
					}
				})
				b.Run(fmt.Sprintf("depth=%d/key=%s/impl=WithValue", depth, pos.name), func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						sinkString, _ = peer.Value(pk).(string)
					}
				})
				b.Run(fmt.Sprintf("depth=%d/key=%s/impl=Value-raw", depth, pos.name), func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						sinkAny = peer.Value(pk)
					}
				})
			}
		})
	}
}

// BenchmarkScopedValueGetWrapped reads a key bound below layers the caller added afterwards: the
// cost of the caller's own chain, walked once by ctx.Value, whatever the number of scoped values.
func BenchmarkScopedValueGetWrapped(b *testing.B) {
	k := scopedvalue.New[string]("k")
	ctx := scopedvalue.Where(k, "v").Context(context.Background())
	peer := context.WithValue(context.Background(), peerKey(0), "v")
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	peer, cancelPeer := context.WithCancel(peer)
	defer cancelPeer()
	b.Run("impl=scopedvalue", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkString = k.Get(ctx)
		}
	})
	b.Run("impl=WithValue", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkString, _ = peer.Value(peerKey(0)).(string)
		}
	})
}

// BenchmarkScopedValueBind applies a prebuilt Carrier of k bindings (impl=scopedvalue, at most 2
// allocations whatever k); the peer adds k context.WithValue layers (k allocations), values boxed
// beforehand on both sides.
func BenchmarkScopedValueBind(b *testing.B) {
	for _, k := range []int{1, 2, 4, 16, 64} {
		var c scopedvalue.Carrier
		values := make([]any, k)
		for i := range k {
			values[i] = fmt.Sprint("value-", i)
			c = c.And(scopedvalue.Where(scopedvalue.New[any](fmt.Sprint("key-", i)), values[i]))
		}
		parent := context.Background()
		b.Run(fmt.Sprintf("keys=%d/impl=scopedvalue", k), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sinkCtx = c.Context(parent)
			}
		})
		b.Run(fmt.Sprintf("keys=%d/impl=WithValue", k), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ctx := parent
				for i, v := range values {
					ctx = context.WithValue(ctx, peerKey(i), v)
				}
				sinkCtx = ctx
			}
		})
	}
}

// BenchmarkScopedValueWhereRun is the whole idiom, building the Carrier each time: Where per key
// (boxing a string allocates, as in the peer), And, then Run.
func BenchmarkScopedValueWhereRun(b *testing.B) {
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
	b.Run("keys=1/impl=WithValue", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			fn(context.WithValue(parent, peerKey(0), id))
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
	b.Run("keys=3/impl=WithValue", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ctx := context.WithValue(parent, peerKey(0), id)
			ctx = context.WithValue(ctx, peerKey(1), user)
			fn(context.WithValue(ctx, peerKey(2), tenant))
		}
	})
}

// BenchmarkScopedValueNestedWhere binds depth keys by separate nested Where calls: each copies the
// table it inherits, so the total is quadratic in depth, where the peer's is linear; the price of
// Get being constant.
func BenchmarkScopedValueNestedWhere(b *testing.B) {
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
		b.Run(fmt.Sprintf("depth=%d/impl=WithValue", depth), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ctx := context.Background()
				for i := range keys {
					ctx = context.WithValue(ctx, peerKey(i), i)
				}
				sinkCtx = ctx
			}
		})
	}
}
