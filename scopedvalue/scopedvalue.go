package scopedvalue

import (
	"context"
	"fmt"
	"reflect"
	"sync/atomic"
)

// A Key identifies a scoped value of type T. Create keys with [New]; the pointer New returns is
// the identity of the key, so two keys never collide, whatever their names. A Key is immutable
// and safe for concurrent use by multiple goroutines. The zero Key is not a key: using one
// panics.
type Key[T any] struct {
	core keyCore
}

// keyCore is the part of a Key that does not depend on T; bindings refer to keys through it.
type keyCore struct {
	id   uint64 // from lastKeyID, never 0 for a key made by New; the hash of the key
	name string
}

var lastKeyID atomic.Uint64

// New returns a new key named name. The name is used in messages and for debugging only; it
// need not be unique. New is safe to call concurrently, typically to initialize a package-level
// variable:
//
//	var RequestID = scopedvalue.New[string]("request-id")
func New[T any](name string) *Key[T] {
	return &Key[T]{core: keyCore{id: lastKeyID.Add(1), name: name}}
}

// Name returns the name given to [New].
func (k *Key[T]) Name() string {
	k.check("Name")
	return k.core.name
}

// String returns a description of k for debugging, such as scopedvalue.Key[string]("request-id").
// It does not panic for a nil key.
func (k *Key[T]) String() string {
	if k == nil {
		return fmt.Sprintf("scopedvalue.Key[%v](nil)", reflect.TypeFor[T]())
	}
	return fmt.Sprintf("scopedvalue.Key[%v](%q)", reflect.TypeFor[T](), k.core.name)
}

// Get returns the value bound to k in ctx. It panics with the message
// `scopedvalue: "NAME" is not bound` when ctx has no binding for k; use [Key.Lookup],
// [Key.OrElse] or [Key.IsBound] where that is not a bug. Get never blocks or allocates, and its
// cost does not depend on how many other scoped values ctx carries.
func (k *Key[T]) Get(ctx context.Context) T {
	if k == nil {
		panicNilKey("Get")
	}
	v, ok := k.core.lookup(ctx, "Get")
	if !ok {
		panicUnbound(k.core.name)
	}
	return as[T](v)
}

// Lookup returns the value bound to k in ctx and true, or the zero value and false when ctx has
// no binding for k. A bound zero value is reported with true.
func (k *Key[T]) Lookup(ctx context.Context) (T, bool) {
	if k == nil {
		panicNilKey("Lookup")
	}
	v, ok := k.core.lookup(ctx, "Lookup")
	return as[T](v), ok
}

// OrElse returns the value bound to k in ctx, or def when ctx has no binding for k. A bound
// zero value is returned as is, not replaced by def.
func (k *Key[T]) OrElse(ctx context.Context, def T) T {
	if k == nil {
		panicNilKey("OrElse")
	}
	if v, ok := k.core.lookup(ctx, "OrElse"); ok {
		return as[T](v)
	}
	return def
}

// IsBound reports whether ctx has a binding for k, even one to the zero value.
func (k *Key[T]) IsBound(ctx context.Context) bool {
	if k == nil {
		panicNilKey("IsBound")
	}
	_, ok := k.core.lookup(ctx, "IsBound")
	return ok
}

// as returns v as a T. A bound nil of an interface type T is stored as a nil any, which does
// not assert to T; the zero T is the bound value then. An unbound key's v is nil too.
func as[T any](v any) T {
	t, _ := v.(T)
	return t
}

// lookup is the one read path: the innermost binding of k visible in ctx. It is not generic,
// so every Key[T] shares it; op names the caller for misuse panics.
func (k *keyCore) lookup(ctx context.Context, op string) (any, bool) {
	if k.id == 0 {
		panicZeroKey(op)
	}
	if ctx == nil {
		panicNilContext(op)
	}
	b, ok := ctx.(*bindingsCtx) // the usual case: ctx is what Run, Call or Context handed out
	if !ok {
		if b = bindingsBelow(ctx); b == nil {
			return nil, false
		}
	}
	return b.find(k)
}

// check panics when k cannot be a key: nil, or not made by New.
func (k *Key[T]) check(op string) {
	if k == nil {
		panicNilKey(op)
	}
	if k.core.id == 0 {
		panicZeroKey(op)
	}
}

func panicUnbound(name string)  { panic(fmt.Sprintf("scopedvalue: %q is not bound", name)) }
func panicNilKey(op string)     { panic("scopedvalue: " + op + ": nil key") }
func panicZeroKey(op string)    { panic("scopedvalue: " + op + ": key not made by New") }
func panicNilContext(op string) { panic("scopedvalue: " + op + ": nil context") }
