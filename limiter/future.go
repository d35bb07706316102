package limiter

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goloom/loom/internal/registry"
	"github.com/goloom/loom/internal/sema"
	"github.com/goloom/loom/internal/window"
)

// A Future is the pending result of a task started by [Submit]. Its methods are safe for
// concurrent use by multiple goroutines.
type Future[T any] struct {
	w   sema.Waiter // our place in the limiter's queue; costs no goroutine
	l   *Limiter
	ctx context.Context // Submit's
	fn  func(context.Context) (T, error)

	// delivered is set once the result is out: val and err are final, the call is counted and
	// recorded, and done (if made) is closed. Wait reads it without the lock.
	delivered atomic.Bool

	// mu guards what follows; see task.go for the life it follows. (The four one-byte fields
	// sit next to it and delivered so that the three share one word: every field of a queued
	// Future is paid a million times over in a long queue.)
	mu        sync.Mutex
	phase     uint8              // phaseQueued, phaseRunning, phaseExited
	settled   bool               // val and err are decided (endLocked); delivered soon after, outside mu
	cancelled bool               // Cancel was called
	foreign   bool               // its goroutine may carry another task's pprof labels (see runner)
	done      chan struct{}      // made by the first Done before completion
	cancel    context.CancelFunc // the task's context's
	stop      func() bool        // stops the watcher of ctx (queued, or running without timeout) or of the task's context
	timer     *time.Timer        // the acquire timeout, while queued
	at        *stamps            // when the call began and its task started, if the limiter notes it (see begin)
	le        *lease             // the fleet's permit, while the task runs; nil without one
	mk        window.Mark        // the adaptive limit's mark of the task's start
	waitTrace registry.AsyncWait // a trace task "loom.limiter.wait" while it queues, if a trace records

	val T
	err error
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
	f := &Future[T]{l: l, ctx: ctx, fn: fn}
	if t0 := l.begin(); !t0.IsZero() {
		f.at = &stamps{born: t0.Sub(l.epoch)}
	}
	if done := ctx.Done(); done != nil {
		select {
		case <-done:
			f.endUnqueued(ctxErr(ctx), outCancelled)
			return f
		default:
		}
	}
	if l.closed.Load() {
		f.endUnqueued(ErrClosed, outRejected)
		return f
	}
	if l.slots.TryAcquireFor(&f.w, 1) {
		go runTasks(f, false)
		return f
	}
	if err := l.refusal(ctx); err != nil {
		f.endUnqueued(err, outRejected)
		return f
	}
	// Hold f.mu while queueing and arming the watchers: a grant can come from another goroutine
	// the moment we are queued, and runTask waits for f.mu.
	f.mu.Lock()
	acquired, err := l.slots.AcquireFuncFor(&f.w, 1, runner(f), f.granted)
	if acquired || err != nil {
		l.waiting.Add(-1)
		f.mu.Unlock()
		if err != nil {
			f.endUnqueued(ErrClosed, outRejected) // the only way AcquireFunc fails for one permit
			return f
		}
		go runTasks(f, false)
		return f
	}
	f.waitTrace = registry.StartAsyncWait(ctx)
	if ctx.Done() != nil {
		f.stop = context.AfterFunc(ctx, f.onCtxDone)
	}
	if l.cfg.acquireTimed {
		f.timer = time.AfterFunc(l.cfg.acquireTimeout, f.onAcquireTimeout)
	}
	f.mu.Unlock()
	return f
}

// stamps are a Future's times, after the limiter's epoch, for a limiter that notes them (its
// logger, its fleet's share of the acquire timeout): few limiters do, so they live apart.
type stamps struct {
	born time.Duration // when Submit was called
	wait time.Duration // from Submit to the task's start, with a logger
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
	if f.delivered.Load() {
		return f.val, f.err
	}
	select {
	case <-f.Done():
		return f.val, f.err
	case <-ctx.Done():
		var zero T
		return zero, ctxErr(ctx)
	}
}

// Done returns a channel that is closed when the Future completes; Wait then returns at once.
func (f *Future[T]) Done() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done == nil {
		if f.delivered.Load() {
			return closedChan
		}
		f.done = make(chan struct{}) // made on demand: most Futures are waited for once, or late
	}
	return f.done
}

var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// Cancel cancels the task. A task still waiting for a slot is taken off the queue and never
// runs; its Future completes with context.Canceled. A running task's context is cancelled, and
// its Future completes at once with context.Canceled while fn, keeping its slot, runs on until
// it returns. Either way the call is counted Cancelled. On a completed Future, Cancel does
// nothing. It never blocks for long and may be called any number of times.
func (f *Future[T]) Cancel() {
	f.mu.Lock()
	if f.settled || f.cancelled {
		f.mu.Unlock()
		return
	}
	f.cancelled = true
	var e ending
	var cancel context.CancelFunc
	switch f.phase {
	case phaseQueued:
		var left bool
		if e, left = f.leaveQueueLocked(context.Canceled, outCancelled); !left {
			f.mu.Unlock() // granted just now: runTask sees f.cancelled before it starts fn
			return
		}
	case phaseRunning:
		e = f.overrunLocked(context.Canceled, outCancelled)
		cancel = f.cancel
	}
	f.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	f.publish(e)
}
