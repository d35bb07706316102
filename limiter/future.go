package limiter

import (
	"context"
	"runtime/debug"
)

// A Future is the pending result of a task started by [Submit]. Its methods are safe for
// concurrent use by multiple goroutines.
type Future[T any] struct {
	t   task // the part of its life that knows nothing of T (task.go)
	fn  func(context.Context) (T, error)
	val T // fn's value, when the call's result is what fn returned; written before delivery
}

// Submit starts fn with a slot of l and returns at once with its [Future]; it never blocks.
//
// The task waits for a slot exactly as [Limiter.Do] does — in the one FIFO queue it shares with
// Do and [Call], under the same acquire timeout, waiting bound and shutdown — but the waiting
// costs no goroutine: the task is queued, and its goroutine starts only when the slot is granted.
// A task that gets no slot completes its Future with an error matching [ErrRejected], and one
// whose ctx ends (or that is cancelled) while it waits completes it with ctx's error (or
// context.Canceled) and is taken off the queue.
//
// fn always runs on a goroutine of its own, never the caller's. While tasks queue, a goroutine
// whose task has returned goes on to run the task its slot was granted to, instead of starting
// a new one; so do not leave goroutine-bound state (pprof labels) behind in a task.
//
// fn gets a context derived from ctx: it carries ctx's values, and it is cancelled when ctx
// ends, when the task times out ([WithTaskTimeout]; cause [ErrTaskTimeout]) and by
// [Future.Cancel]. The Future completes when fn returns, with what fn returned, or at once when
// one of those happens first, with ctx's error, ErrTaskTimeout or context.Canceled. In the
// second case fn keeps its slot until it returns and is counted in [Stats].Overrunning
// meanwhile. A panic in fn completes the Future with a [*PanicError], a runtime.Goexit with
// [ErrGoexit]; either way the slot is released. A Future that fn's return completes does so
// after the slot is back and the call is counted, so Stats read after Wait include both.
//
// A task waiting for a slot costs a few hundred bytes; to wait on ctx it uses
// context.AfterFunc, which costs no goroutine for the standard library's contexts. It panics if
// ctx or fn is nil.
func Submit[T any](ctx context.Context, l *Limiter, fn func(context.Context) (T, error)) *Future[T] {
	l.check(ctx, "Submit")
	if fn == nil {
		panic("limiter: Submit: nil function")
	}
	return submit(ctx, l, fn)
}

// submit begins a task and puts it on its way (Submit).
func submit[T any](ctx context.Context, l *Limiter, fn func(context.Context) (T, error)) *Future[T] {
	f := &Future[T]{fn: fn}
	f.t.l, f.t.ctx = l, ctx
	f.t.begin()
	f.t.enqueue(f)
	return f
}

// base is the runner's task.
func (f *Future[T]) base() *task { return &f.t }

// runTask admits the task (its slot is held already) and runs it, on a task goroutine. It
// returns a task handed to this goroutine to run next, if any.
func (f *Future[T]) runTask(foreign bool) (next runner) {
	tctx, err := f.t.start(foreign)
	if err != nil {
		e := f.t.exit(refused, err, nil, nil)
		return f.t.complete(&e)
	}
	return f.run(tctx)
}

// runLaunched is the body of a task goroutine started for a Do or Call with a task timeout,
// admitted on its caller's goroutine (see runTimed): it runs the task, then whatever task it is
// handed next.
func (f *Future[T]) runLaunched(tctx context.Context) { runTasks(f.run(tctx), true) }

// run is the place where a task goroutine runs fn, under the task's context: it runs fn and
// ends the task. The deferred function tells a panic (recover returns non-nil) from
// runtime.Goexit (nil). It returns a task handed to this goroutine to run next, if any.
func (f *Future[T]) run(tctx context.Context) (next runner) {
	tctx = f.t.l.labels.Task(tctx, f.t.foreign) // loom.limiter with Labels; never another task's
	normal := false
	defer func() {
		if normal {
			return
		}
		if r := recover(); r != nil {
			pe := &PanicError{Value: r, Stack: debug.Stack()}
			e := f.t.exit(panicked, pe, pe, tctx)
			next = f.t.complete(&e)
			return
		}
		e := f.t.exit(goexited, ErrGoexit, nil, tctx)
		f.t.complete(&e) // the goroutine is ending: it takes no next task
	}()
	v, err := f.fn(tctx)
	normal = true
	e := f.t.exit(returned, err, nil, tctx)
	if !e.counted && !e.overrides {
		f.val = v // the call's result is what fn returned
	}
	return f.t.complete(&e)
}

// Wait waits for the task's result and returns what fn returned, or the error that completed
// the Future first (see [Submit]). If ctx ends first, Wait returns ctx's error and the task goes
// on; Wait may be called again, by any number of goroutines. When the Future was completed by
// fn's return, everything the task did happens-before Wait returns (and before Done is closed).
// It panics if ctx is nil.
func (f *Future[T]) Wait(ctx context.Context) (T, error) {
	if ctx == nil {
		panic("limiter: Wait: nil context")
	}
	if f.t.delivered.Load() {
		return f.val, f.t.err
	}
	select {
	case <-f.Done():
		return f.val, f.t.err
	case <-ctx.Done():
		var zero T
		return zero, ctxErr(ctx)
	}
}

// Done returns a channel that is closed when the Future completes; Wait then returns at once.
func (f *Future[T]) Done() <-chan struct{} { return f.t.doneChan() }

// Cancel cancels the task. A task still waiting for a slot is taken off the queue and never
// runs; its Future completes with context.Canceled. A running task's context is cancelled, and
// its Future completes at once with context.Canceled while fn, keeping its slot, runs on until
// it returns (a task still waiting for what [WithFleet] or [WithFleetRate] grant stops waiting,
// and never runs). Either way the call is counted Cancelled. On a completed Future, Cancel does
// nothing. It never blocks for long and may be called any number of times.
func (f *Future[T]) Cancel() { f.t.cancelTask() }
