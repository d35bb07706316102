package scopedvalue_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/scopedvalue"
)

// "(Carrier).Run(ctx, fn func(context.Context))": fn's ctx is derived from ctx (its values and its
// cancellation) with the bindings added; a Carrier binds nothing until applied, and nothing in ctx.
func TestRunBindsForTheCallOnly(t *testing.T) {
	k := scopedvalue.New[string]("request-id")
	ctx, cancel := context.WithCancel(context.WithValue(t.Context(), peerKey(0), "peer"))
	defer cancel()
	c := scopedvalue.Where(k, "r-42")
	assert.False(t, k.IsBound(ctx), "a Carrier binds nothing until applied")
	ran := false
	c.Run(ctx, func(inner context.Context) {
		ran = true
		assert.Equal(t, "r-42", k.Get(inner))
		assert.False(t, k.IsBound(ctx))
		assert.Equal(t, "peer", inner.Value(peerKey(0)), "ctx's values")
		require.NoError(t, inner.Err())
		cancel()
		assert.ErrorIs(t, inner.Err(), context.Canceled, "ctx's cancellation")
	})
	assert.True(t, ran)
	assert.False(t, k.IsBound(ctx))
}

// "A binding can be shadowed by a nested Where and is never mutated", by Run and by Context.
func TestNestedWhereShadows(t *testing.T) {
	k := scopedvalue.New[string]("user")
	other := scopedvalue.New[int]("other")
	scopedvalue.Where(k, "outer").And(scopedvalue.Where(other, 1)).Run(t.Context(), func(outer context.Context) {
		scopedvalue.Where(k, "inner").Run(outer, func(inner context.Context) {
			assert.Equal(t, "inner", k.Get(inner))
			assert.Equal(t, 1, other.Get(inner))
			assert.Equal(t, "outer", k.Get(outer))
		})
		assert.Equal(t, "outer", k.Get(outer))
		assert.Equal(t, 1, other.Get(outer))
		mw := scopedvalue.Where(k, "mw").Context(outer)
		assert.Equal(t, "mw", k.Get(mw))
		assert.Equal(t, 1, other.Get(mw))
		assert.Equal(t, "outer", k.Get(outer))
	})
}

func TestShadowingSurvivesPanic(t *testing.T) {
	k := scopedvalue.New[string]("user")
	scopedvalue.Where(k, "outer").Run(t.Context(), func(outer context.Context) {
		require.PanicsWithValue(t, "boom", func() {
			scopedvalue.Where(k, "inner").Run(outer, func(inner context.Context) {
				require.Equal(t, "inner", k.Get(inner))
				panic("boom")
			})
		})
		assert.Equal(t, "outer", k.Get(outer))

		require.PanicsWithValue(t, "boom", func() {
			_, _ = scopedvalue.Call(outer, scopedvalue.Where(k, "inner"), func(ctx context.Context) (int, error) {
				panic("boom")
			})
		})
		assert.Equal(t, "outer", k.Get(outer))

		// The same holds on a goroutine of its own: nothing is attached to goroutines.
		done := make(chan string)
		go func() {
			defer func() {
				recover()
				done <- k.Get(outer)
			}()
			scopedvalue.Where(k, "inner").Run(outer, func(context.Context) { panic("boom") })
		}()
		assert.Equal(t, "outer", <-done)
	})
}

// "func Call[R any](ctx context.Context, c Carrier, fn func(context.Context) (R, error)) (R, error)":
// fn's results as they are, its error the very value it returned.
func TestCall(t *testing.T) {
	k := scopedvalue.New[int]("n")
	errBoom := errors.New("boom")

	got, err := scopedvalue.Call(t.Context(), scopedvalue.Where(k, 21), func(ctx context.Context) (int, error) {
		return 2 * k.Get(ctx), nil
	})
	require.NoError(t, err)
	assert.Equal(t, 42, got)

	got, err = scopedvalue.Call(t.Context(), scopedvalue.Where(k, 1), func(ctx context.Context) (int, error) {
		return k.Get(ctx), errBoom
	})
	assert.Same(t, errBoom, err)
	assert.Equal(t, 1, got, "Call returns fn's results as they are")
}

// "(Carrier).And(Carrier) Carrier for several bindings"
func TestAndCombines(t *testing.T) {
	a := scopedvalue.New[string]("a")
	b := scopedvalue.New[int]("b")
	c := scopedvalue.New[error]("c")
	errC := errors.New("c")
	carrier := scopedvalue.Where(a, "x").And(scopedvalue.Where(b, 2)).And(scopedvalue.Where(c, errC))
	scopedvalue.Where(b, 0).Run(t.Context(), func(ctx context.Context) {
		carrier.Run(ctx, func(ctx context.Context) {
			assert.Equal(t, "x", a.Get(ctx))
			assert.Equal(t, 2, b.Get(ctx))
			assert.Equal(t, errC, c.Get(ctx))
		})
	})
}

func TestLaterBindingWins(t *testing.T) {
	k := scopedvalue.New[int]("k")
	other := scopedvalue.New[int]("other")
	keys := make([]*scopedvalue.Key[int], 10)
	for i := range keys {
		keys[i] = scopedvalue.New[int](fmt.Sprint("key-", i))
	}
	many := func(base int) scopedvalue.Carrier {
		var c scopedvalue.Carrier
		for i, key := range keys {
			c = c.And(scopedvalue.Where(key, base+i))
		}
		return c
	}
	tests := []struct {
		name string
		give scopedvalue.Carrier
		want int
	}{
		{"twice", scopedvalue.Where(k, 1).And(scopedvalue.Where(k, 2)), 2},
		{"three times", scopedvalue.Where(k, 1).And(scopedvalue.Where(k, 2)).And(scopedvalue.Where(k, 3)), 3},
		{"around another key", scopedvalue.Where(k, 1).And(scopedvalue.Where(other, 9)).And(scopedvalue.Where(k, 2)), 2},
		{"carrier on carrier", scopedvalue.Where(k, 1).And(scopedvalue.Where(other, 9)).And(scopedvalue.Where(other, 8).And(scopedvalue.Where(k, 3))), 3},
		{"after many", many(0).And(scopedvalue.Where(k, 1)).And(scopedvalue.Where(k, 4)), 4},
		{"many rebind many", scopedvalue.Where(k, 5).And(many(0)).And(many(100)), 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.give.Run(t.Context(), func(ctx context.Context) {
				assert.Equal(t, tt.want, k.Get(ctx))
			})
		})
	}
	many(0).And(many(100)).Run(t.Context(), func(ctx context.Context) {
		for i, key := range keys {
			assert.Equal(t, 100+i, key.Get(ctx))
		}
	})
}

func TestCarrierIsImmutable(t *testing.T) {
	keys := make([]*scopedvalue.Key[int], 8)
	for i := range keys {
		keys[i] = scopedvalue.New[int](fmt.Sprint("key-", i))
	}
	// check applies c and compares what each key reads with want (-1: unbound).
	check := func(t *testing.T, c scopedvalue.Carrier, want ...int) {
		t.Helper()
		c.Run(t.Context(), func(ctx context.Context) {
			for i, k := range keys {
				assert.Equal(t, want[i], k.OrElse(ctx, -1), "key %d", i)
			}
		})
	}
	for _, size := range []int{1, 3, 4, 5, 7} { // below, at and above what a Carrier holds inline
		t.Run(fmt.Sprint("size=", size), func(t *testing.T) {
			var base scopedvalue.Carrier
			want := []int{-1, -1, -1, -1, -1, -1, -1, -1}
			for i := range size {
				base = base.And(scopedvalue.Where(keys[i], i))
				want[i] = i
			}
			copied := base
			extended := base.And(scopedvalue.Where(keys[size], 100))
			rebound := base.And(scopedvalue.Where(keys[0], 200))
			both := extended.And(rebound)

			check(t, base, want...)
			check(t, copied, want...)
			wantExtended := append([]int(nil), want...)
			wantExtended[size] = 100
			check(t, extended, wantExtended...)
			wantRebound := append([]int(nil), want...)
			wantRebound[0] = 200
			check(t, rebound, wantRebound...)
			wantBoth := append([]int(nil), wantExtended...)
			wantBoth[0] = 200
			check(t, both, wantBoth...)
			check(t, base, want...) // still, after all of that
		})
	}
}

func TestZeroCarrierBindsNothing(t *testing.T) {
	k := scopedvalue.New[string]("k")
	parent := scopedvalue.Where(k, "v").Context(t.Context())
	var zero scopedvalue.Carrier

	assert.Equal(t, parent, zero.Context(parent))
	zero.Run(parent, func(ctx context.Context) { assert.Equal(t, parent, ctx) })
	got, err := scopedvalue.Call(parent, zero, func(ctx context.Context) (string, error) { return k.Get(ctx), nil })
	require.NoError(t, err)
	assert.Equal(t, "v", got)

	one := scopedvalue.Where(k, "w")
	for _, c := range []scopedvalue.Carrier{zero.And(one), one.And(zero), zero.And(zero).And(one)} {
		assert.Equal(t, "w", k.Get(c.Context(parent)))
	}
	assert.Equal(t, parent, zero.And(zero).Context(parent))
}

// "(Carrier).Context(parent context.Context) context.Context for middleware."
func TestContextForMiddleware(t *testing.T) {
	requestID := scopedvalue.New[string]("request-id")
	user := scopedvalue.New[string]("user")
	withRequestID := func(next func(context.Context) string) func(context.Context) string {
		return func(ctx context.Context) string {
			return next(scopedvalue.Where(requestID, "r-42").Context(ctx))
		}
	}
	withUser := func(next func(context.Context) string) func(context.Context) string {
		return func(ctx context.Context) string {
			return next(scopedvalue.Where(user, "ada").Context(ctx))
		}
	}
	handler := withRequestID(withUser(func(ctx context.Context) string {
		return requestID.Get(ctx) + " " + user.Get(ctx)
	}))
	assert.Equal(t, "r-42 ada", handler(t.Context()))
}

// "a nil ctx or nil key is a clear panic, not a silent miss": Run, Call and Context.
func TestMisusePanics(t *testing.T) {
	c := scopedvalue.Where(scopedvalue.New[int]("k"), 1)
	var zero scopedvalue.Carrier
	var nilCtx context.Context
	fn := func(context.Context) {}
	callFn := func(context.Context) (int, error) { return 0, nil }
	for _, c := range []scopedvalue.Carrier{c, zero} {
		require.PanicsWithValue(t, "scopedvalue: Run: nil context", func() { c.Run(nilCtx, fn) })
		require.PanicsWithValue(t, "scopedvalue: Run: nil function", func() { c.Run(t.Context(), nil) })
		require.PanicsWithValue(t, "scopedvalue: Call: nil context", func() { _, _ = scopedvalue.Call(nilCtx, c, callFn) })
		require.PanicsWithValue(t, "scopedvalue: Call: nil function", func() { _, _ = scopedvalue.Call[int](t.Context(), c, nil) })
		require.PanicsWithValue(t, "scopedvalue: Context: nil context", func() { c.Context(nilCtx) })
	}
}

func TestBindingAllocatesAtMostTwice(t *testing.T) {
	for _, k := range []int{1, 2, 3, 4, 5, 16, 64} {
		t.Run(fmt.Sprint("keys=", k), func(t *testing.T) {
			var c scopedvalue.Carrier
			for i := range k {
				c = c.And(scopedvalue.Where(scopedvalue.New[int](fmt.Sprint("key-", i)), i))
			}
			below := scopedvalue.Where(scopedvalue.New[int]("below"), 0).Context(t.Context())
			wrapped := context.WithValue(below, peerKey(0), 0)
			assert.LessOrEqual(t, testing.AllocsPerRun(100, func() { sinkCtx = c.Context(t.Context()) }), 2.0)
			assert.LessOrEqual(t, testing.AllocsPerRun(100, func() { sinkCtx = c.Context(below) }), 2.0)
			assert.LessOrEqual(t, testing.AllocsPerRun(100, func() { sinkCtx = c.Context(wrapped) }), 2.0)
		})
	}
	// A carrier of pointer-shaped values holds up to four bindings without allocating.
	a, b := scopedvalue.New[*int]("a"), scopedvalue.New[*int]("b")
	x, y := new(int), new(int)
	assert.LessOrEqual(t, testing.AllocsPerRun(100, func() {
		scopedvalue.Where(a, x).And(scopedvalue.Where(b, y)).Run(t.Context(), func(ctx context.Context) { sinkCtx = ctx })
	}), 1.0)
}

// TestConcurrentReadersAndRebinders runs 64 goroutines that read the bindings of shared
// contexts while others keep binding new values on top of them: every context read must be
// consistent (its two values bound together), and the race detector must stay silent.
func TestConcurrentReadersAndRebinders(t *testing.T) {
	const (
		readers    = 64
		rebinders  = 8
		iterations = 1000
	)
	a := scopedvalue.New[int]("a")
	b := scopedvalue.New[int]("b")
	id := scopedvalue.New[string]("id")
	root := scopedvalue.Where(a, 0).And(scopedvalue.Where(b, 0)).And(scopedvalue.Where(id, "root")).Context(t.Context())

	var latest atomic.Pointer[context.Context] // the context most recently published by a rebinder
	latest.Store(&root)
	var stop atomic.Bool // set once every rebinder is done
	var rebinding, reading sync.WaitGroup
	for r := range rebinders {
		rebinding.Go(func() {
			for i := range iterations {
				n := r*iterations + i + 1
				parent := *latest.Load()
				scopedvalue.Where(a, n).And(scopedvalue.Where(b, -n)).Run(parent, func(ctx context.Context) {
					if a.Get(ctx) != n || b.Get(ctx) != -n || id.Get(ctx) != "root" {
						t.Errorf("rebinder %d: got a=%d b=%d, want %d %d", r, a.Get(ctx), b.Get(ctx), n, -n)
						return
					}
					latest.Store(&ctx)
				})
				if id.Get(parent) != "root" || a.Get(parent) != -b.Get(parent) {
					t.Errorf("rebinder %d: parent changed", r)
					return
				}
			}
		})
	}
	for range readers {
		reading.Go(func() {
			for i := 0; i < iterations || !stop.Load(); i++ {
				ctx := *latest.Load()
				if x, y := a.Get(ctx), b.Get(ctx); x != -y {
					t.Errorf("reader: inconsistent a=%d b=%d", x, y)
					return
				}
				if a.Get(root) != 0 || id.Get(ctx) != "root" {
					t.Error("reader: root changed")
					return
				}
			}
		})
	}
	rebinding.Wait()
	stop.Store(true)
	reading.Wait()
}
