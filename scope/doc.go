// Package scope provides structured concurrency for Go: fork/join with cancel-on-failure, in the
// manner of Java's StructuredTaskScope.
//
// A [Scope] is opened on a context, subtasks are forked into it, and [Scope.Join] waits for all of
// them and returns the outcome its policy decides:
//
//	s := scope.Open(ctx, scope.WithTimeout(2*time.Second))
//	defer s.Close()
//	user := scope.Fork(s, func(ctx context.Context) (User, error) { return users.Get(ctx, id) })
//	orders := scope.Fork(s, func(ctx context.Context) ([]Order, error) { return orders.List(ctx, id) })
//	if err := s.Join(); err != nil {
//		return err
//	}
//	return Profile{user.Get(), orders.Get()}, nil
//
// The guarantees callers rely on:
//
//   - No goroutine outlives the scope: when Join or Close returns, every subtask has returned, and
//     the scope's context is done, so nothing stays registered on a long-lived parent.
//   - Every [Subtask] ends in exactly one [State]: Succeeded, Failed, or Cancelled — the latter
//     when it had not completed when the scope was cancelled (its outcome is then discarded and
//     never counts as a failure; its Err is the scope's cancellation cause). Which came first, a
//     completion or the cancellation, is decided atomically.
//   - The policy ([FailFast] by default, [AwaitAll], [FirstSuccess], [CancelWhen], or any
//     [Joiner]) decides when the scope is cancelled and what Join returns. Under FailFast the first
//     failure is what Join returns, never a sibling's context.Canceled.
//   - An end from outside — the parent context, or the [WithTimeout] deadline ([ErrTimeout]) —
//     while a subtask still runs is what Join reports; after every subtask has completed it
//     changes nothing. Subtasks that succeeded before it keep their results.
//   - A panic in a subtask cancels the scope at once and is never lost: Join re-panics it on the
//     owner's goroutine as a [*PanicError] carrying the child's stack (or returns it, with
//     [PanicsAsErrors]); Close re-panics it if no Join did. runtime.Goexit in a subtask is a
//     failure with [ErrGoexit].
//   - [WithLimit] bounds the subtasks running at once; a Fork waiting for a slot gives up (with a
//     Cancelled subtask) as soon as the scope is cancelled.
//
// Scopes nest through the context: a scope opened on a subtask's context is cancelled with its
// parent scope. Context values (see package scopedvalue) bound where the scope was opened are
// what every fork sees.
//
// [All], [Race] and [Map] cover the common shapes in one call; [Stream] runs a function over an
// iterator concurrently and yields the results in input order, in constant memory. [TryFork] and
// [Scope.TryGo] fork only when a [WithLimit] slot is free.
//
// A Scope is owned by the goroutine that opened it: Join and Close belong to the owner; Fork may
// also be called from the scope's own subtasks until Join has returned. Subtask methods are safe
// from any goroutine.
package scope
