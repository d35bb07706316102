package contract_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/scopedvalue"
)

// DESIGN: "New[T any](name string) *Key[T]; (*Key[T]).Name() string."
func TestScopedValueNewName(t *testing.T) {
	k := scopedvalue.New[string]("request-id")
	require.NotNil(t, k)
	assert.Equal(t, "request-id", k.Name())
}

// DESIGN: "Get(ctx) T (panics `scopedvalue: "request-id" is not bound` when unbound)"
func TestScopedValueGetUnboundPanicMessage(t *testing.T) {
	k := scopedvalue.New[string]("request-id")
	msg, ok := panicMsg(func() { k.Get(context.Background()) })
	require.True(t, ok, "Get on an unbound key must panic")
	assert.Equal(t, `scopedvalue: "request-id" is not bound`, msg)
}

func TestScopedValueUnboundAccessors(t *testing.T) {
	k := scopedvalue.New[int]("n")
	ctx := context.Background()
	v, ok := k.Lookup(ctx)
	assert.False(t, ok)
	assert.Equal(t, 0, v)
	assert.Equal(t, 42, k.OrElse(ctx, 42))
	assert.False(t, k.IsBound(ctx))
}

// DESIGN: Get / Lookup / OrElse / IsBound on a bound key — a binding to the zero value is a binding.
func TestScopedValueBoundAccessors(t *testing.T) {
	k := scopedvalue.New[int]("n")
	scopedvalue.Where(k, 7).Run(context.Background(), func(ctx context.Context) {
		assert.Equal(t, 7, k.Get(ctx))
		v, ok := k.Lookup(ctx)
		assert.True(t, ok)
		assert.Equal(t, 7, v)
		assert.Equal(t, 7, k.OrElse(ctx, 42))
		assert.True(t, k.IsBound(ctx))
	})
	scopedvalue.Where(k, 0).Run(context.Background(), func(ctx context.Context) {
		assert.True(t, k.IsBound(ctx), "bound to the zero value is bound")
		v, ok := k.Lookup(ctx)
		assert.True(t, ok)
		assert.Equal(t, 0, v)
		assert.Equal(t, 0, k.OrElse(ctx, 42), "OrElse returns the bound zero value, not the default")
		assert.NotPanics(t, func() { k.Get(ctx) })
	})
}

// Keys are identities: two keys with one name and type do not collide.
func TestScopedValueKeysDoNotCollide(t *testing.T) {
	a := scopedvalue.New[string]("same")
	b := scopedvalue.New[string]("same")
	scopedvalue.Where(a, "A").Run(context.Background(), func(ctx context.Context) {
		assert.Equal(t, "A", a.Get(ctx))
		assert.False(t, b.IsBound(ctx))
	})
}

// DESIGN: "(Carrier).And(Carrier) Carrier for several bindings"
func TestScopedValueAnd(t *testing.T) {
	name := scopedvalue.New[string]("name")
	n := scopedvalue.New[int]("n")
	flag := scopedvalue.New[bool]("flag")
	c := scopedvalue.Where(name, "x").And(scopedvalue.Where(n, 3)).And(scopedvalue.Where(flag, true))
	c.Run(context.Background(), func(ctx context.Context) {
		assert.Equal(t, "x", name.Get(ctx))
		assert.Equal(t, 3, n.Get(ctx))
		assert.True(t, flag.Get(ctx))
	})
}

// A Carrier binds nothing until applied.
func TestScopedValueWhereBindsNothingUntilApplied(t *testing.T) {
	k := scopedvalue.New[string]("k")
	ctx := context.Background()
	_ = scopedvalue.Where(k, "v")
	assert.False(t, k.IsBound(ctx))
}

// DESIGN: "(Carrier).Run(ctx, fn)" — fn's ctx is derived from ctx.
func TestScopedValueRunDerivesFromCtx(t *testing.T) {
	type plain struct{}
	k := scopedvalue.New[string]("k")
	parent, cancel := context.WithCancel(context.WithValue(context.Background(), plain{}, "p"))
	ran := false
	scopedvalue.Where(k, "v").Run(parent, func(ctx context.Context) {
		ran = true
		assert.Equal(t, "p", ctx.Value(plain{}))
		cancel()
		assert.Error(t, ctx.Err(), "parent cancellation reaches fn's ctx")
	})
	assert.True(t, ran)
	assert.False(t, k.IsBound(parent), "Run does not bind anything in the parent")
}

// DESIGN: "func Call[R any](ctx, c Carrier, fn func(context.Context) (R, error)) (R, error)"
func TestScopedValueCall(t *testing.T) {
	k := scopedvalue.New[string]("k")
	boom := errors.New("boom")
	v, err := scopedvalue.Call(context.Background(), scopedvalue.Where(k, "v"), func(ctx context.Context) (string, error) {
		return k.Get(ctx) + "!", boom
	})
	assert.Equal(t, "v!", v)
	assert.True(t, isSame(boom, err), "Call returns fn's error as is")
	n, err := scopedvalue.Call(context.Background(), scopedvalue.Where(k, "v"), func(ctx context.Context) (int, error) {
		return len(k.Get(ctx)), nil
	})
	assert.NoError(t, err)
	assert.Equal(t, 1, n)
}

// DESIGN: "(Carrier).Context(parent) context.Context for middleware."
func TestScopedValueCarrierContext(t *testing.T) {
	type plain struct{}
	k := scopedvalue.New[string]("k")
	parent, cancel := context.WithCancel(context.WithValue(context.Background(), plain{}, "p"))
	defer cancel()
	ctx := scopedvalue.Where(k, "v").Context(parent)
	assert.Equal(t, "v", k.Get(ctx))
	assert.Equal(t, "p", ctx.Value(plain{}))
	assert.False(t, k.IsBound(parent))
	cancel()
	assert.Error(t, ctx.Err(), "derived from parent: parent's cancellation reaches it")
}

// DESIGN: "A binding can be shadowed by a nested Where and is never mutated".
func TestScopedValueShadowing(t *testing.T) {
	k := scopedvalue.New[string]("k")
	other := scopedvalue.New[int]("other")
	scopedvalue.Where(k, "outer").And(scopedvalue.Where(other, 1)).Run(context.Background(), func(outer context.Context) {
		scopedvalue.Where(k, "inner").Run(outer, func(inner context.Context) {
			assert.Equal(t, "inner", k.Get(inner))
			assert.Equal(t, 1, other.Get(inner), "other bindings stay visible")
			assert.Equal(t, "outer", k.Get(outer), "the outer binding is never mutated")
		})
		ctx := scopedvalue.Where(k, "mw").Context(outer)
		assert.Equal(t, "mw", k.Get(ctx))
		assert.Equal(t, "outer", k.Get(outer))
	})
}

// DESIGN: "a nil ctx or nil key is a clear panic, not a silent miss."
func TestScopedValueNilCtxPanics(t *testing.T) {
	k := scopedvalue.New[string]("k")
	var nilCtx context.Context
	c := scopedvalue.Where(k, "v")
	cases := map[string]func(){
		"Get":     func() { k.Get(nilCtx) },
		"Lookup":  func() { k.Lookup(nilCtx) },
		"OrElse":  func() { k.OrElse(nilCtx, "d") },
		"IsBound": func() { k.IsBound(nilCtx) },
		"Run":     func() { c.Run(nilCtx, func(context.Context) {}) },
		"Call": func() {
			_, _ = scopedvalue.Call(nilCtx, c, func(context.Context) (int, error) { return 0, nil })
		},
		"Context": func() { c.Context(nilCtx) },
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			msg, ok := panicMsg(f)
			require.True(t, ok, "%s(nil ctx) must panic", name)
			assert.True(t, strings.HasPrefix(msg, "scopedvalue:"), "message %q should start with scopedvalue:", msg)
		})
	}
}

func TestScopedValueNilKeyPanics(t *testing.T) {
	var k *scopedvalue.Key[string]
	ctx := context.Background()
	cases := map[string]func(){
		"Where":   func() { scopedvalue.Where(k, "v") },
		"Get":     func() { k.Get(ctx) },
		"Lookup":  func() { k.Lookup(ctx) },
		"OrElse":  func() { k.OrElse(ctx, "d") },
		"IsBound": func() { k.IsBound(ctx) },
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			msg, ok := panicMsg(f)
			require.True(t, ok, "%s on a nil key must panic", name)
			assert.True(t, strings.HasPrefix(msg, "scopedvalue:"), "message %q should start with scopedvalue:", msg)
		})
	}
}

// A run-time nil key must not be a silent miss in Lookup/IsBound even on a bound context.
func TestScopedValueNilKeyOnBoundCtxPanics(t *testing.T) {
	real := scopedvalue.New[string]("real")
	var k *scopedvalue.Key[string]
	scopedvalue.Where(real, "v").Run(context.Background(), func(ctx context.Context) {
		_, ok := panicMsg(func() { k.Lookup(ctx) })
		assert.True(t, ok)
	})
}

// Cost: "Get must not grow with the number of other bindings in the chain." Checked as allocations only
// (timing is not asserted): Get allocates nothing however deep the chain.
func TestScopedValueGetDoesNotAllocate(t *testing.T) {
	k := scopedvalue.New[int]("k")
	ctx := scopedvalue.Where(k, 1).Context(context.Background())
	for i := range 200 {
		o := scopedvalue.New[int]("o")
		ctx = scopedvalue.Where(o, i).Context(ctx)
	}
	assert.Equal(t, 1, k.Get(ctx))
	allocs := testing.AllocsPerRun(100, func() { _ = k.Get(ctx) })
	assert.Zero(t, allocs)
}

// DESIGN: "Cost: Get must not grow with the number of other bindings in the chain." Measured as a
// ratio with a generous bound (a linear walk over 1000 bindings would be hundreds of times slower).
func TestScopedValueGetCostFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("timing")
	}
	k := scopedvalue.New[int]("k")
	shallow := scopedvalue.Where(k, 1).Context(context.Background())
	deep := shallow
	for i := range 1000 {
		deep = scopedvalue.Where(scopedvalue.New[int]("o"), i).Context(deep)
	}
	measure := func(ctx context.Context) time.Duration {
		best := time.Duration(1<<63 - 1)
		for range 7 {
			start := time.Now()
			for range 2000 {
				_ = k.Get(ctx)
			}
			if d := time.Since(start); d < best {
				best = d
			}
		}
		return max(best, time.Microsecond)
	}
	s, d := measure(shallow), measure(deep)
	t.Logf("2000 Gets: shallow %v, deep %v", s, d)
	assert.Less(t, float64(d)/float64(s), 50.0, "Get with 1000 other bindings: %v vs %v for 2000 calls", d, s)
}
