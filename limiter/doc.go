// Package limiter provides a concurrency-limiting executor: a bulkhead that lets at most a fixed
// number of task bodies run at once, with the time limits that keep it from clogging.
//
// It is what one builds around a downstream that must not be flooded — a small database pool, a
// rate-limited API — and what Java's executors, bounded with a semaphore, are used for:
//
//	api := limiter.New(40,
//		limiter.WithAcquireTimeout(30*time.Second), // no slot within 30s: ErrRejected
//		limiter.WithTaskTimeout(5*time.Minute))     // running longer: ErrTaskTimeout
//	reply, err := limiter.Call(ctx, api, func(ctx context.Context) (*Reply, error) {
//		return client.Generate(ctx, req)
//	})
//
// [Limiter.Do] and [Call] wait for a slot and run the task; [Submit] queues it and returns a
// [Future] at once. All three share one FIFO queue of waiting calls.
//
// The guarantees callers rely on:
//
//   - The limit is a hard bound on task bodies running at once. A slot is held from before the
//     task starts until its function really returns: a task that outlives its timeout, or whose
//     caller has stopped waiting for it, keeps its slot (and is counted in [Stats].Overrunning),
//     so no later task runs in its place.
//   - A call that gets no slot — its acquire timeout fires ([WithAcquireTimeout]), too many calls
//     wait already ([WithMaxWaiting]), or the limiter is shut down — returns an error matching
//     [ErrRejected] and never runs. A call whose context ends while it waits returns the
//     context's error and never runs.
//   - The task's context carries the caller's values and cancellation. With [WithTaskTimeout] it
//     is also cancelled, with cause [ErrTaskTimeout], when the task runs too long, and the call
//     returns ErrTaskTimeout at once even if the task ignores its context.
//   - A panic in a task is returned to its call as a [*PanicError] and hurts nothing else; its
//     slot is released.
//   - Waiting costs no goroutine for a Submitted task: it is queued, and its goroutine starts when
//     its slot is granted.
//   - [Limiter.Shutdown] fails waiting and new calls with [ErrClosed] and waits for the tasks that
//     still hold slots.
//   - [Limiter.Stats] counts every call in exactly one outcome, so the counters add up at rest.
//
// Without a task timeout, Do and Call run the task on the caller's goroutine; uncontended, they
// cost two atomic additions (the counters of [Stats]) more than the semaphore alone and allocate
// nothing. A
// [Limiter] is safe for concurrent use by multiple goroutines. Under testing/synctest, use a
// Limiter from one bubble only: the timers and channels it keeps belong to the bubble that made
// them.
package limiter
