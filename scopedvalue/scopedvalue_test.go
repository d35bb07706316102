package scopedvalue_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/goloom/loom/scopedvalue"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Get, Lookup, OrElse and IsBound on a bound key.
func TestGetReturnsBoundValue(t *testing.T) {
	k := scopedvalue.New[string]("request-id")
	ctx := scopedvalue.Where(k, "r-42").Context(t.Context())

	assert.Equal(t, "r-42", k.Get(ctx))
	v, ok := k.Lookup(ctx)
	assert.True(t, ok)
	assert.Equal(t, "r-42", v)
	assert.Equal(t, "r-42", k.OrElse(ctx, "default"))
	assert.True(t, k.IsBound(ctx))
}

// "Get(ctx) T (panics `scopedvalue: "request-id" is not bound` when unbound), Lookup(ctx) (T, bool),
// OrElse(ctx, def T) T, IsBound(ctx) bool."
func TestUnboundKey(t *testing.T) {
	k := scopedvalue.New[string]("request-id")
	other := scopedvalue.New[string]("other")
	tests := []struct {
		name string
		give context.Context
	}{
		{"no bindings at all", t.Context()},
		{"other keys bound", scopedvalue.Where(other, "x").Context(t.Context())},
		{"other keys bound below a wrapper", context.WithValue(scopedvalue.Where(other, "x").Context(t.Context()), peerKey(0), 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.PanicsWithValue(t, `scopedvalue: "request-id" is not bound`, func() { k.Get(tt.give) })
			v, ok := k.Lookup(tt.give)
			assert.False(t, ok)
			assert.Empty(t, v)
			assert.Equal(t, "default", k.OrElse(tt.give, "default"))
			assert.False(t, k.IsBound(tt.give))
		})
	}
}

// A binding to the zero value is a binding: OrElse returns it, not the default.
func TestZeroValueIsBound(t *testing.T) {
	t.Run("string", func(t *testing.T) { checkZeroBound(t, "fallback") })
	t.Run("int", func(t *testing.T) { checkZeroBound(t, 7) })
	t.Run("error", func(t *testing.T) { checkZeroBound[error](t, errors.New("fallback")) })
	t.Run("any", func(t *testing.T) { checkZeroBound[any](t, "fallback") })
	t.Run("pointer", func(t *testing.T) { five := 5; checkZeroBound(t, &five) })
	t.Run("slice", func(t *testing.T) { checkZeroBound(t, []int{1}) })
	t.Run("map", func(t *testing.T) { checkZeroBound(t, map[string]int{"a": 1}) })
	t.Run("func", func(t *testing.T) { checkZeroBound(t, func() {}) })
	t.Run("struct", func(t *testing.T) { checkZeroBound(t, struct{ A, B int }{1, 2}) })
}

// checkZeroBound binds the zero T and checks that every accessor reports it as bound, never as
// fallback, which must not be empty.
func checkZeroBound[T any](t *testing.T, fallback T) {
	t.Helper()
	k := scopedvalue.New[T]("zero")
	var zero T
	ctx := scopedvalue.Where(k, zero).Context(t.Context())

	assert.True(t, k.IsBound(ctx))
	v, ok := k.Lookup(ctx)
	assert.True(t, ok)
	assert.Empty(t, v)
	assert.NotPanics(t, func() { v = k.Get(ctx) })
	assert.Empty(t, v)
	assert.Empty(t, k.OrElse(ctx, fallback))

	// Shadowing a non-zero value with the zero value hides it.
	outer := scopedvalue.Where(k, fallback).Context(t.Context())
	inner := scopedvalue.Where(k, zero).Context(outer)
	assert.Empty(t, k.OrElse(inner, fallback))
	assert.NotEmpty(t, k.Get(outer))
}

// Keys are identities: two keys with one name and type do not collide.
func TestSameNameKeysDoNotCollide(t *testing.T) {
	a := scopedvalue.New[string]("user")
	b := scopedvalue.New[string]("user")
	c := scopedvalue.New[int]("user")
	ctx := scopedvalue.Where(a, "ada").Context(t.Context())

	assert.Equal(t, "ada", a.Get(ctx))
	assert.False(t, b.IsBound(ctx))
	assert.False(t, c.IsBound(ctx))

	ctx = scopedvalue.Where(b, "bob").And(scopedvalue.Where(c, 3)).Context(ctx)
	assert.Equal(t, "ada", a.Get(ctx))
	assert.Equal(t, "bob", b.Get(ctx))
	assert.Equal(t, 3, c.Get(ctx))
}

// "func New[T any](name string) *Key[T]; (*Key[T]).Name() string."
func TestName(t *testing.T) {
	assert.Equal(t, "request-id", scopedvalue.New[string]("request-id").Name())
	assert.Empty(t, scopedvalue.New[int]("").Name())
}

func TestKeyString(t *testing.T) {
	assert.Equal(t, `scopedvalue.Key[string]("request-id")`, scopedvalue.New[string]("request-id").String())
	assert.Equal(t, `scopedvalue.Key[error]("err")`, scopedvalue.New[error]("err").String())
	var nilKey *scopedvalue.Key[int]
	assert.Equal(t, `scopedvalue.Key[int](nil)`, nilKey.String())
	assert.Equal(t, `scopedvalue.Key[int](nil)`, fmt.Sprint(nilKey))
}

// "a nil ctx or nil key is a clear panic, not a silent miss" — also on a context where other keys
// are bound, so that a lookup would find something to compare the nil key with.
func TestNilKeyPanics(t *testing.T) {
	var k *scopedvalue.Key[string]
	bound := scopedvalue.Where(scopedvalue.New[string]("real"), "v").Context(t.Context())
	for _, ctx := range []context.Context{t.Context(), bound} {
		require.PanicsWithValue(t, "scopedvalue: Get: nil key", func() { k.Get(ctx) })
		require.PanicsWithValue(t, "scopedvalue: Lookup: nil key", func() { k.Lookup(ctx) })
		require.PanicsWithValue(t, "scopedvalue: OrElse: nil key", func() { k.OrElse(ctx, "") })
		require.PanicsWithValue(t, "scopedvalue: IsBound: nil key", func() { k.IsBound(ctx) })
	}
	require.PanicsWithValue(t, "scopedvalue: Name: nil key", func() { k.Name() })
	require.PanicsWithValue(t, "scopedvalue: Where: nil key", func() { scopedvalue.Where(k, "v") })
}

func TestZeroKeyPanics(t *testing.T) {
	var k scopedvalue.Key[string] // not made by New
	ctx := t.Context()
	require.PanicsWithValue(t, "scopedvalue: Get: key not made by New", func() { k.Get(ctx) })
	require.PanicsWithValue(t, "scopedvalue: Lookup: key not made by New", func() { k.Lookup(ctx) })
	require.PanicsWithValue(t, "scopedvalue: OrElse: key not made by New", func() { k.OrElse(ctx, "") })
	require.PanicsWithValue(t, "scopedvalue: IsBound: key not made by New", func() { k.IsBound(ctx) })
	require.PanicsWithValue(t, "scopedvalue: Name: key not made by New", func() { k.Name() })
	require.PanicsWithValue(t, "scopedvalue: Where: key not made by New", func() { scopedvalue.Where(&k, "v") })
}

// "a nil ctx or nil key is a clear panic, not a silent miss." (Run, Call and Context: TestMisusePanics.)
func TestNilContextPanics(t *testing.T) {
	k := scopedvalue.New[string]("request-id")
	var ctx context.Context // a nil ctx is a bug, never "unbound"
	require.PanicsWithValue(t, "scopedvalue: Get: nil context", func() { k.Get(ctx) })
	require.PanicsWithValue(t, "scopedvalue: Lookup: nil context", func() { k.Lookup(ctx) })
	require.PanicsWithValue(t, "scopedvalue: OrElse: nil context", func() { k.OrElse(ctx, "") })
	require.PanicsWithValue(t, "scopedvalue: IsBound: nil context", func() { k.IsBound(ctx) })
}

func TestInheritedThroughDerivedContexts(t *testing.T) {
	k := scopedvalue.New[string]("request-id")
	bound := scopedvalue.Where(k, "r-42").Context(t.Context())

	cancelCtx, cancel := context.WithCancel(bound)
	timeoutCtx, cancelTimeout := context.WithTimeout(bound, time.Hour)
	deadlineCtx, cancelDeadline := context.WithDeadline(cancelCtx, time.Now().Add(time.Hour))
	causeCtx, cancelCause := context.WithCancelCause(timeoutCtx)
	tests := []struct {
		name string
		give context.Context
	}{
		{"WithCancel", cancelCtx},
		{"WithTimeout", timeoutCtx},
		{"WithDeadline over WithCancel", deadlineCtx},
		{"WithCancelCause over WithTimeout", causeCtx},
		{"WithoutCancel", context.WithoutCancel(bound)},
		{"WithValue", context.WithValue(bound, peerKey(1), "x")},
		{"many layers", context.WithoutCancel(context.WithValue(causeCtx, peerKey(2), "y"))},
	}
	check := func(t *testing.T) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				assert.Equal(t, "r-42", k.Get(tt.give))
				assert.True(t, k.IsBound(tt.give))
			})
		}
	}
	t.Run("live", check)
	cancel()
	cancelTimeout()
	cancelDeadline()
	cancelCause(errors.New("done"))
	require.Error(t, causeCtx.Err())
	t.Run("after cancel", check)
	assert.Equal(t, "r-42", k.Get(bound))
}

func TestInheritedByGoroutines(t *testing.T) {
	k := scopedvalue.New[int]("n")
	got := make(chan int, 16)
	scopedvalue.Where(k, 7).Run(t.Context(), func(ctx context.Context) {
		for range cap(got) {
			go func() { got <- k.Get(ctx) }()
		}
	})
	for range cap(got) {
		assert.Equal(t, 7, <-got)
	}
}

func TestBindingBelowWrappersIsMerged(t *testing.T) {
	a := scopedvalue.New[string]("a")
	b := scopedvalue.New[string]("b")
	ctx := scopedvalue.Where(a, "a1").And(scopedvalue.Where(b, "b1")).Context(t.Context())
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ctx = context.WithValue(ctx, peerKey(0), "peer")

	inner := scopedvalue.Where(b, "b2").Context(ctx) // found below the wrappers and shadowed
	assert.Equal(t, "a1", a.Get(inner))
	assert.Equal(t, "b2", b.Get(inner))
	assert.Equal(t, "peer", inner.Value(peerKey(0)))
	assert.Equal(t, "b1", b.Get(ctx))

	cancel()
	assert.ErrorIs(t, inner.Err(), context.Canceled)
}

func TestManyKeysAcrossLayers(t *testing.T) {
	const n = 300
	keys := make([]*scopedvalue.Key[int], n)
	ctx := t.Context()
	for i := range keys {
		keys[i] = scopedvalue.New[int](fmt.Sprint("key-", i))
		ctx = scopedvalue.Where(keys[i], i).Context(ctx)
		if i%50 == 0 { // interleave ordinary layers
			ctx = context.WithValue(ctx, peerKey(i), i)
		}
		if i%7 == 0 { // and rebind an earlier key
			ctx = scopedvalue.Where(keys[i/2], -i).Context(ctx)
		}
	}
	want := make([]int, n)
	for i := range want {
		want[i] = i
	}
	for i := 0; i < n; i += 7 {
		want[i/2] = -i
	}
	for i, k := range keys {
		assert.Equal(t, want[i], k.Get(ctx), "key %d", i)
	}
	assert.False(t, scopedvalue.New[int]("unbound").IsBound(ctx))
}

// "(Carrier).Context(parent context.Context) context.Context for middleware": derived from parent,
// whose values, deadline and cancellation it keeps, binding nothing in parent itself.
func TestBindingsContextDelegates(t *testing.T) {
	k := scopedvalue.New[string]("k")
	deadline := time.Now().Add(time.Hour)
	parent, cancel := context.WithDeadlineCause(context.WithValue(t.Context(), peerKey(0), "peer"), deadline, errors.New("cause"))
	ctx := scopedvalue.Where(k, "v").Context(parent)
	assert.Equal(t, "v", k.Get(ctx))
	assert.False(t, k.IsBound(parent))

	assert.Equal(t, "peer", ctx.Value(peerKey(0)))
	assert.Nil(t, ctx.Value(peerKey(1)))
	d, ok := ctx.Deadline()
	assert.True(t, ok)
	assert.Equal(t, deadline, d)
	require.NoError(t, ctx.Err())

	cancel()
	<-ctx.Done()
	assert.ErrorIs(t, ctx.Err(), context.Canceled)
	assert.ErrorIs(t, context.Cause(ctx), context.Canceled)
}

func TestBindingsContextCause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := scopedvalue.New[string]("k")
		parent, cancel := context.WithTimeoutCause(t.Context(), time.Second, errors.New("too slow"))
		defer cancel()
		ctx := scopedvalue.Where(k, "v").Context(parent)
		<-ctx.Done()
		assert.ErrorIs(t, ctx.Err(), context.DeadlineExceeded)
		assert.EqualError(t, context.Cause(ctx), "too slow")
		assert.Equal(t, "v", k.Get(ctx))
	})
}

// A context derived with WithCancel from a bindings context must find the cancelCtx beneath it,
// as with any standard context, instead of starting a goroutine to watch the parent.
func TestDerivedCancelStartsNoGoroutine(t *testing.T) {
	k := scopedvalue.New[string]("k")
	parent, cancelParent := context.WithCancel(t.Context())
	defer cancelParent()
	ctx := scopedvalue.Where(k, "v").Context(parent)

	const n = 200
	before := runtime.NumGoroutine()
	cancels := make([]context.CancelFunc, n)
	for i := range cancels {
		_, cancels[i] = context.WithCancel(ctx)
	}
	grown := runtime.NumGoroutine() - before
	for _, c := range cancels {
		c()
	}
	assert.Less(t, grown, n/2)
}

func TestBindingsContextString(t *testing.T) {
	a := scopedvalue.New[string]("request-id")
	b := scopedvalue.New[string]("token")
	ctx := scopedvalue.Where(b, "secret").And(scopedvalue.Where(a, "r-42")).Context(context.Background())
	ctx = scopedvalue.Where(a, "r-43").Context(ctx)

	assert.Equal(t, `context.Background.WithScopedValues("request-id", "token")`, fmt.Sprint(ctx))
	assert.NotContains(t, fmt.Sprint(ctx), "secret")

	ctx = scopedvalue.Where(a, "r-44").Context(plainCtx{context.Background()})
	assert.Equal(t, `scopedvalue_test.plainCtx.WithScopedValues("request-id")`, fmt.Sprint(ctx))
}

// plainCtx is a context type of a user's that has no String method.
type plainCtx struct{ context.Context }

// "Cost: Get must not grow with the number of other bindings in the chain." In allocations: none,
// with 64 bindings and below a wrapper. (In time: BenchmarkGet; in work: the test below.)
func TestGetDoesNotAllocate(t *testing.T) {
	keys := make([]*scopedvalue.Key[string], 64)
	ctx := t.Context()
	for i := range keys {
		keys[i] = scopedvalue.New[string](fmt.Sprint("key-", i))
		ctx = scopedvalue.Where(keys[i], fmt.Sprint("value-", i)).Context(ctx)
	}
	wrapped := context.WithValue(ctx, peerKey(0), 0)
	unbound := scopedvalue.New[string]("unbound")
	var sink string
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		sink = keys[0].Get(ctx)
		sink = keys[63].Get(wrapped)
		sink, _ = unbound.Lookup(ctx)
		sink = unbound.OrElse(wrapped, "x")
	}))
	_ = sink
}

// countingCtx is a layer of the caller's own; it counts the Value calls that reach it.
type countingCtx struct {
	context.Context
	calls *atomic.Int64
}

func (c countingCtx) Value(key any) any {
	c.calls.Add(1)
	return c.Context.Value(key)
}

// "Cost: Get must not grow with the number of other bindings in the chain." Checked without a
// clock: with a layer of the caller's own between every two bindings, a Get of the outermost key
// on the innermost context asks the layers below it as often with 1000 other bindings as with 1.
// A walk down the chain would ask every layer.
func TestGetCostDoesNotGrowWithOtherBindings(t *testing.T) {
	k := scopedvalue.New[int]("k")
	asked := func(others int) int64 {
		var calls atomic.Int64
		ctx := scopedvalue.Where(k, 1).Context(t.Context())
		for i := range others {
			ctx = countingCtx{ctx, &calls}
			ctx = scopedvalue.Where(scopedvalue.New[int]("other"), i).Context(ctx)
		}
		calls.Store(0) // binding may look below the layers; only Get counts
		require.Equal(t, 1, k.Get(ctx))
		return calls.Load()
	}
	assert.Equal(t, asked(1), asked(1000))
}
