package scopedvalue

import (
	"cmp"
	"context"
	"fmt"
	"math/bits"
	"reflect"
	"slices"
	"strings"
)

// A binding pairs a key with its value, in a Carrier or in a table slot.
type binding struct {
	key *keyCore // nil marks an empty table slot
	val any
}

// bindingsCtx is the context a Carrier binds onto: its parent plus one immutable table holding
// every scoped value visible in it, inherited ones included. Get therefore finds any key with
// one lookup of the table (Get must not grow with the number of bindings), and the
// table is never written after bind returns, so readers need no synchronization.
//
// Invariant: the embedded Context is never itself a *bindingsCtx. Binding directly onto a
// bindingsCtx copies its table and takes its parent, so nested Where calls do not lengthen the
// chain that ctx.Value walks for other keys.
type bindingsCtx struct {
	context.Context // Deadline, Done, Err and other values come from here

	slots []binding  // open addressing, linear probing; len is a power of two, see tableSize
	shift uint32     // the hash of a key is the top bits of id*fibMul: (id*fibMul)>>shift & mask
	n     int32      // occupied slots
	small [2]binding // backs slots for one or two bindings, saving an allocation
}

// fibMul is 2⁶⁴/φ. Multiplying by it spreads consecutive key ids evenly over the table
// (Fibonacci hashing), so keys made one after another rarely share a probe sequence.
const fibMul = 0x9E3779B97F4A7C15

// snapshotKey is the private context key under which a bindingsCtx answers Value with itself.
type snapshotKey struct{}

// Value returns the table's context for the package's private key and asks the parent for
// every other key.
func (b *bindingsCtx) Value(key any) any {
	if _, ok := key.(snapshotKey); ok {
		return b
	}
	return b.Context.Value(key)
}

// String names the parent and the bound keys, in the order they were made. It never shows the
// values, which may be secrets.
func (b *bindingsCtx) String() string {
	keys := make([]*keyCore, 0, b.n)
	for _, e := range b.slots {
		if e.key != nil {
			keys = append(keys, e.key)
		}
	}
	slices.SortFunc(keys, func(x, y *keyCore) int { return cmp.Compare(x.id, y.id) })
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = fmt.Sprintf("%q", k.name)
	}
	return contextName(b.Context) + ".WithScopedValues(" + strings.Join(names, ", ") + ")"
}

func contextName(c context.Context) string {
	if s, ok := c.(fmt.Stringer); ok {
		return s.String()
	}
	return reflect.TypeOf(c).String()
}

// bindingsBelow returns the innermost table visible in ctx, found by ctx.Value, or nil.
func bindingsBelow(ctx context.Context) *bindingsCtx {
	b, _ := ctx.Value(snapshotKey{}).(*bindingsCtx)
	return b
}

// find returns the value bound to k in the table.
func (b *bindingsCtx) find(k *keyCore) (any, bool) {
	mask := uint64(len(b.slots) - 1)
	i := (k.id * fibMul) >> b.shift & mask
	for range b.slots { // a full table (one or two bindings) ends a miss here
		e := &b.slots[i]
		if e.key == k {
			return e.val, true
		}
		if e.key == nil {
			break
		}
		i = (i + 1) & mask
	}
	return nil, false
}

// put binds e.key to e.val in a table under construction, replacing an earlier binding. The
// table has a free slot or a slot for e.key.
func (b *bindingsCtx) put(e binding) {
	mask := uint64(len(b.slots) - 1)
	for i := (e.key.id * fibMul) >> b.shift & mask; ; i = (i + 1) & mask {
		s := &b.slots[i]
		if s.key == e.key {
			s.val = e.val
			return
		}
		if s.key == nil {
			*s = e
			b.n++
			return
		}
	}
}

// tableSize returns the number of slots for n ≥ 1 bindings and the shift that hashes into them.
// One or two bindings fill their table (a miss probes both slots at most); from three on, the
// table is at most half full, so probe sequences stay short.
func tableSize(n int) (size int, shift uint32) {
	size = n
	if n > 2 {
		size = 1 << bits.Len(uint(2*n-1)) // the smallest power of two ≥ 2n
	}
	return size, 64 - uint32(max(bits.Len(uint(size-1)), 1))
}

// bind returns a context derived from parent in which add (distinct keys) are bound on top of
// whatever parent already binds. It allocates the context and, beyond two bindings in all, the
// table: two allocations at most, however many keys are bound.
func bind(parent context.Context, add []binding) *bindingsCtx {
	base, inherited := parent, (*bindingsCtx)(nil)
	if p, ok := parent.(*bindingsCtx); ok {
		// p contributes nothing but its table, which the new table includes: skip it.
		base, inherited = p.Context, p
	} else {
		inherited = bindingsBelow(parent)
	}
	n := len(add)
	if inherited != nil {
		n += int(inherited.n)
	}
	size, shift := tableSize(n)
	b := &bindingsCtx{Context: base, shift: shift}
	if size <= len(b.small) {
		b.slots = b.small[:size:size]
	} else {
		b.slots = make([]binding, size)
	}
	switch {
	case inherited == nil:
	case len(inherited.slots) == size:
		// Same size, same hash: the inherited layout is valid as is.
		copy(b.slots, inherited.slots)
		b.n = inherited.n
	default:
		for _, e := range inherited.slots {
			if e.key != nil {
				b.put(e)
			}
		}
	}
	for _, e := range add {
		b.put(e)
	}
	return b
}
