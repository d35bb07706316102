package scopedvalue_test

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

// BenchmarkGet reads the innermost and the outermost of depth keys, each bound by its own nested
// Where; the peer reads the same positions through depth nested context.WithValue layers,
// with the type assertion a typed accessor needs (impl=WithValue) and without (impl=Value-raw).
func BenchmarkGet(b *testing.B) {
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

// BenchmarkGetWrapped reads a key bound below layers the caller added afterwards: the cost of
// the caller's own chain, walked once by ctx.Value, whatever the number of scoped values.
func BenchmarkGetWrapped(b *testing.B) {
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
