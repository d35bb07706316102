package scopedvalue

import "context"

// inlineBindings is how many bindings a Carrier holds without allocating.
const inlineBindings = 4

// A Carrier is a set of bindings to apply together: make one with [Where], add more with
// [Carrier.And], then apply it with [Carrier.Run], [Call] or [Carrier.Context]. A Carrier is an
// immutable value: And returns a new Carrier and leaves its operands unchanged, so a Carrier may
// be kept, copied and used from many goroutines at once.
//
// Each key is bound at most once in a Carrier; when a key is bound twice, the later binding
// wins. The zero Carrier binds nothing: Run and Call pass ctx through unchanged and Context
// returns its parent.
type Carrier struct {
	n      int                     // number of bindings
	inline [inlineBindings]binding // the bindings while spill is nil
	spill  []binding               // all the bindings when there are more than inlineBindings; never written once shared
}

// Where returns a Carrier that binds k to v. Nothing is bound until the Carrier is applied.
// Where panics if k is nil or was not made by [New]. v is stored as an interface value, which
// allocates as converting v to any would (not for pointers, for example); what it refers to is
// not copied, so bind values that are not mutated afterwards.
func Where[T any](k *Key[T], v T) Carrier {
	k.check("Where")
	c := Carrier{n: 1}
	c.inline[0] = binding{key: &k.core, val: v}
	return c
}

// And returns a Carrier with the bindings of c and of other; where both bind a key, other's
// binding wins. c and other are unchanged. And allocates only when the result holds more than
// four bindings.
func (c Carrier) And(other Carrier) Carrier {
	switch {
	case other.n == 0:
		return c
	case c.n == 0:
		return other
	}
	if c.n+other.n <= inlineBindings {
		out := c
		for _, e := range other.inline[:other.n] {
			out.inline[out.n] = e
			out.n = upsert(out.inline[:out.n+1], out.n)
		}
		return out
	}
	list := make([]binding, 0, c.n+other.n)
	list = append(list, c.bindings()...)
	for _, e := range other.bindings() {
		list = append(list, e)
		list = list[:upsert(list, len(list)-1)]
	}
	out := Carrier{n: len(list)}
	if len(list) <= inlineBindings { // only when other rebinds many of c's keys
		copy(out.inline[:], list)
	} else {
		out.spill = list
	}
	return out
}

// upsert makes list[i], just added, the binding of its key in list[:i]: it overwrites an
// earlier binding of the same key, or stays. It returns the new length, i or i+1.
func upsert(list []binding, i int) int {
	for j := range list[:i] {
		if list[j].key == list[i].key {
			list[j].val = list[i].val
			return i
		}
	}
	return i + 1
}

// bindings returns c's bindings; the caller must not modify them.
func (c *Carrier) bindings() []binding {
	if c.spill != nil {
		return c.spill
	}
	return c.inline[:c.n]
}

// Run calls fn with a context derived from ctx in which c's bindings are in effect, and returns
// when fn returns. The bindings belong to that context, not to the goroutine: ctx itself is
// unchanged, so after Run returns — or panics, since Run does not recover — the caller sees
// exactly the values it saw before, and a goroutine handed the inner context keeps seeing c's
// bindings for as long as it holds it. Run panics if ctx or fn is nil.
func (c Carrier) Run(ctx context.Context, fn func(ctx context.Context)) {
	if ctx == nil {
		panicNilContext("Run")
	}
	if fn == nil {
		panic("scopedvalue: Run: nil function")
	}
	fn(c.context(ctx))
}

// Call calls fn with a context derived from ctx in which c's bindings are in effect, and returns
// what fn returns. It is [Carrier.Run] for functions with a result; fn's panic propagates to the
// caller. Call panics if ctx or fn is nil.
func Call[R any](ctx context.Context, c Carrier, fn func(ctx context.Context) (R, error)) (R, error) {
	if ctx == nil {
		panicNilContext("Call")
	}
	if fn == nil {
		panic("scopedvalue: Call: nil function")
	}
	return fn(c.context(ctx))
}

// Context returns a context derived from parent in which c's bindings are in effect, on top of
// parent's own: for middleware that hands a context on rather than calling a function, such as
// an HTTP handler passing r.WithContext(c.Context(r.Context())) to the next one. The result
// carries parent's deadline, cancellation and values, and is never cancelled by itself, so there
// is nothing to release. Context allocates at most two objects, however many bindings c holds.
// For the zero Carrier it returns parent. Context panics if parent is nil.
func (c Carrier) Context(parent context.Context) context.Context {
	if parent == nil {
		panicNilContext("Context")
	}
	return c.context(parent)
}

func (c *Carrier) context(parent context.Context) context.Context {
	if c.n == 0 {
		return parent
	}
	return bind(parent, c.bindings())
}
