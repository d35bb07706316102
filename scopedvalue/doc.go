// Package scopedvalue provides typed, immutable values bound to a [context.Context] for a
// dynamic extent: Go's counterpart of Java's ScopedValue.
//
// A [Key] is declared once, usually as a package-level variable, and bound with [Where]:
//
//	var RequestID = scopedvalue.New[string]("request-id")
//
//	scopedvalue.Where(RequestID, id).Run(ctx, func(ctx context.Context) {
//		handle(ctx) // RequestID.Get(ctx) == id here, and in every goroutine handed this ctx
//	})
//
// The guarantees callers rely on:
//
//   - A binding is never mutated. A nested [Where] on the same key shadows the outer value for
//     the contexts derived inside it only; the outer context still holds the outer value
//     afterwards, whether fn returned or panicked, because nothing was changed to begin with.
//   - Keys are compared by identity: two keys with the same name never collide, and a key is
//     only readable by code that holds it. A bound zero value (for example "" or nil) is bound.
//   - A binding is inherited by every context derived from the one it was made on, including
//     through [context.WithCancel], [context.WithTimeout] and [context.WithoutCancel], and it
//     stays visible after that context is cancelled. Reading it is safe from any number of
//     goroutines at once.
//   - [Key.Get] costs the same however many other scoped values are bound in the chain: all the
//     bindings visible in a context sit in one immutable table, found with a single
//     [context.Context.Value] lookup (none when the context is the one a binding returned) and
//     indexed by key. Get does not allocate. Binding any number of values with one [Carrier]
//     allocates at most two objects.
//   - Misuse panics at once with a message that starts with "scopedvalue:": a nil context, a
//     nil key, a key not made by [New], a nil function, or [Key.Get] of a key that is not bound.
//
// Unlike Java, the binding belongs to the context, not to the goroutine or the call: a context
// obtained inside [Carrier.Run] keeps its bindings if it is stored or handed to a goroutine
// that outlives the call. Values are not copied, so bind values that are not mutated afterwards.
package scopedvalue
