package limiter

import (
	"context"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goloom/loom/internal/sema"
)

// A Future is the pending result of a task started by [Submit]. Its methods are safe for
// concurrent use by multiple goroutines.
type Future[T any] struct {
	w   sema.Waiter // our place in the limiter's queue; costs no goroutine
	l   *Limiter
	ctx context.Context // Submit's
	fn  func(context.Context) (T, error)

	published atomic.Bool // val and err are final, and done (if made) is closed

	mu        sync.Mutex
	done      chan struct{}      // made by the first Done before completion
	phase     uint8              // phaseQueued, phaseRunning, phaseExited
	completed bool               // val and err are final; published soon
	cancelled bool               // Cancel was called
	cancel    context.CancelFunc // the task's context's
	stop      func() bool        // stops the watcher of ctx (queued, or running without timeout) or of the task's context
	timer     *time.Timer        // the acquire timeout, while queued
	born      time.Duration      // when Submit was called, after the limiter's epoch; with a logger
	wait      time.Duration      // from Submit to the task's start, with a logger

	val T
	err error
}

// The phases of a Future's task, guarded by Future.mu.
const (
	phaseQueued  uint8 = iota // waiting for a slot, or granted one and about to start
	phaseRunning              // fn runs on the task's goroutine
	phaseExited               // fn has returned, or will never run
)

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
// context.AfterFunc, which costs no goroutine for the standard library's contexts.
func Submit[T any](ctx context.Context, l *Limiter, fn func(context.Context) (T, error)) *Future[T] {
	l.check(ctx, "Submit")
	if fn == nil {
		panic("limiter: Submit: nil function")
	}
	f := &Future[T]{l: l, ctx: ctx, fn: fn}
	if l.cfg.logger != nil {
		f.born = time.Since(l.epoch)
	}
	l.count.pick().submitted.Add(1)
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
	if l.slots.TryAcquire(1) {
		go runTasks(f)
		return f
	}
	d := l.cfg.acquireTimeout
	if l.cfg.acquireTimed && d <= 0 {
		f.endUnqueued(ErrAcquireTimeout, outRejected)
		return f
	}
	if !l.reserve() {
		f.endUnqueued(ErrTooManyWaiting, outRejected)
		return f
	}
	// Hold f.mu while queueing and arming the watchers: a grant can come from another goroutine
	// the moment we are queued, and runTask waits for f.mu.
	f.mu.Lock()
	acquired, err := l.slots.AcquireFunc(&f.w, 1, f.granted)
	if acquired || err != nil {
		l.waiting.Add(-1)
		f.mu.Unlock()
		if err != nil {
			f.endUnqueued(ErrClosed, outRejected) // the only way AcquireFunc fails for one permit
			return f
		}
		go runTasks(f)
		return f
	}
	if ctx.Done() != nil {
		f.stop = context.AfterFunc(ctx, f.onCtxDone)
	}
	if l.cfg.acquireTimed {
		f.timer = time.AfterFunc(d, f.onAcquireTimeout)
	}
	f.mu.Unlock()
	return f
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
	if f.published.Load() {
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
		if f.published.Load() {
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
	if f.completed || f.cancelled {
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
			f.mu.Unlock() // granted just now: run sees f.cancelled before it starts fn
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

// granted is the queue's callback: the slot is ours (err == nil), or Shutdown failed the queue.
// It runs on the goroutine that released the slot, so it only hands the task on: to a task
// goroutine that is releasing its own slot and will run it next, else to a new goroutine.
func (f *Future[T]) granted(err error) {
	f.l.waiting.Add(-1)
	if err == nil {
		f.l.handOff(f)
		return
	}
	f.mu.Lock()
	e := f.endQueuedLocked(ErrClosed, outRejected)
	f.mu.Unlock()
	f.publish(e)
}

// onAcquireTimeout runs when the acquire timeout fires while the task is queued.
func (f *Future[T]) onAcquireTimeout() {
	f.mu.Lock()
	if f.completed || f.phase != phaseQueued {
		f.mu.Unlock()
		return
	}
	e, left := f.leaveQueueLocked(ErrAcquireTimeout, outRejected)
	f.mu.Unlock()
	if !left {
		return // granted just in time: then it runs
	}
	f.publish(e)
}

// onCtxDone runs when Submit's ctx ends while the task is queued or running without a task
// timeout.
func (f *Future[T]) onCtxDone() { f.onDone(false) }

// onDone is onCtxDone, and also runs when the task's context ends while it runs under a task
// timeout; timedOut tells whether the timeout ended it.
func (f *Future[T]) onDone(timedOut bool) {
	f.mu.Lock()
	if f.completed {
		f.mu.Unlock()
		return
	}
	var e ending
	switch f.phase {
	case phaseQueued:
		var left bool
		if e, left = f.leaveQueueLocked(ctxErr(f.ctx), outCancelled); !left {
			f.mu.Unlock() // granted just now: run sees ctx's end before it starts fn
			return
		}
	case phaseRunning:
		if timedOut {
			e = f.overrunLocked(ErrTaskTimeout, outTimedOut)
		} else {
			e = f.overrunLocked(ctxErr(f.ctx), outCancelled)
		}
	default:
		f.mu.Unlock()
		return
	}
	f.mu.Unlock()
	f.publish(e)
}

// runTask runs the task, which holds a slot, on a goroutine of the limiter's own. It returns a
// task handed to this goroutine to run next, if any.
func (f *Future[T]) runTask() (next runner) {
	l := f.l
	f.mu.Lock()
	if f.timer != nil {
		f.timer.Stop()
		f.timer = nil
	}
	var refuse error
	o := outCancelled
	switch {
	case f.cancelled:
		refuse = context.Canceled
	case f.ctx.Err() != nil:
		refuse = ctxErr(f.ctx)
	case l.closed.Load():
		refuse, o = ErrClosed, outRejected
	}
	if refuse != nil {
		// The slot came too late to be of use.
		e := f.endQueuedLocked(refuse, o)
		f.mu.Unlock()
		next = l.releaseAndTake()
		f.publish(e)
		return next
	}
	if l.cfg.logger != nil {
		f.wait = time.Since(l.epoch) - f.born
	}
	var tctx context.Context
	if d := l.cfg.taskTimeout; d > 0 {
		timed, cancel := context.WithTimeoutCause(f.ctx, d, ErrTaskTimeout)
		if f.stop != nil {
			f.stop()
		}
		f.stop = context.AfterFunc(timed, func() { f.onDone(context.Cause(timed) == ErrTaskTimeout) })
		tctx, f.cancel = timed, cancel
	} else {
		tctx, f.cancel = context.WithCancel(f.ctx)
		if f.stop == nil && f.ctx.Done() != nil {
			f.stop = context.AfterFunc(f.ctx, f.onCtxDone)
		}
	}
	f.phase = phaseRunning
	f.mu.Unlock()

	normal := false
	defer func() {
		if !normal {
			next = f.abort(tctx, recover())
		}
	}()
	v, err := f.fn(tctx)
	normal = true
	return f.exit(tctx, v, err, false, true)
}

// abort ends a task whose fn panicked (r != nil) or called runtime.Goexit (r == nil).
func (f *Future[T]) abort(tctx context.Context, r any) runner {
	var zero T
	if r == nil {
		// The goroutine is ending: it cannot take another task.
		return f.exit(tctx, zero, ErrGoexit, true, false)
	}
	pe := &PanicError{Value: r, Stack: debug.Stack()}
	f.l.count.pick().panicked.Add(1)
	return f.exit(tctx, zero, pe, true, true) // logged there, once the slot is back
}

// exit ends a task whose fn has returned: it completes the Future unless that happened already
// (the task overran), and gives the slot back first. If take, the goroutine may be handed the
// next task, which exit returns.
func (f *Future[T]) exit(tctx context.Context, v T, err error, broken, take bool) (next runner) {
	l := f.l
	f.mu.Lock()
	f.phase = phaseExited
	stop := f.stop
	f.stop = nil
	overran := f.completed
	var e ending
	if !overran {
		switch {
		case !broken && context.Cause(tctx) == ErrTaskTimeout:
			// fn returned after its time was up (the watcher had not settled the Future yet):
			// the timeout stands, whatever fn returned.
			var zero T
			e = f.endLocked(zero, ErrTaskTimeout, outTimedOut)
		case err == nil:
			e = f.endLocked(v, nil, outCompleted)
		default:
			e = f.endLocked(v, err, failure(f.ctx, f.cancelled))
		}
	}
	f.mu.Unlock()
	// Stop the watcher before cancelling tctx, so that it does not take our own cancel for news.
	if stop != nil {
		stop()
	}
	if l.cfg.taskTimeout > 0 || f.ctx.Done() != nil {
		// Stop the timer, or leave the parent's list of children. A tctx with neither is
		// garbage once fn is done; cancelling it would only cost time (#5: Submit throughput).
		f.cancel()
	}
	if overran {
		l.overrunning.Add(-1)
	}
	if take {
		next = l.releaseAndTake()
	} else {
		l.release()
	}
	// The records about the call, now that its slot is free (a handler may call back in).
	pe, _ := err.(*PanicError)
	if !broken {
		pe = nil
	}
	if !overran {
		e.pe = pe
		f.publish(e) // logs, then completes the Future
		return next
	}
	if f.err == ErrTaskTimeout {
		f.logTimeout() // the Future completed at the timeout; its record waited for the slot
	}
	if pe != nil {
		f.logPanic(pe)
	}
	return next
}

// A runner is a granted task, ready to run on a goroutine of the limiter's own.
type runner interface {
	runTask() (next runner)
}

// runTasks is the body of the limiter's task goroutines: it runs r, then whatever task it is
// handed next.
func runTasks(r runner) {
	for r != nil {
		r = r.runTask()
	}
}

// handOff starts a task that has just been granted its slot. If a task goroutine is giving its
// slot back right now (a taker, see releaseAndTake), it takes the task and runs it next, which
// saves a goroutine start per task while the queue is long; else the task gets a new goroutine.
func (l *Limiter) handOff(r runner) {
	l.hmu.Lock()
	if l.takers > 0 {
		l.ready = append(l.ready, r)
		l.hmu.Unlock()
		return
	}
	l.hmu.Unlock()
	go runTasks(r)
}

// releaseAndTake gives the caller's slot back, as a taker: a task handed off meanwhile — most
// likely the one our release granted — is returned for the caller to run next. The last taker
// to leave takes every task still handed off and starts goroutines for all but one, so none
// is left behind.
func (l *Limiter) releaseAndTake() runner {
	l.hmu.Lock()
	l.takers++
	l.hmu.Unlock()
	l.release()
	l.hmu.Lock()
	l.takers--
	var next runner
	var rest []runner
	if k := len(l.ready); k > 0 {
		next = l.ready[k-1]
		l.ready[k-1] = nil
		l.ready = l.ready[:k-1]
		if l.takers == 0 && len(l.ready) > 0 {
			rest = append(rest, l.ready...)
			clear(l.ready)
			l.ready = l.ready[:0]
		}
	}
	l.hmu.Unlock()
	for _, r := range rest {
		go runTasks(r)
	}
	return next
}

// An ending is what is left to do, outside f.mu, once a Future's result is settled.
type ending struct {
	stop  func() bool // the ctx watcher, if nothing else will stop it
	timer *time.Timer // the acquire timeout, likewise
	log   uint8       // logNone, logReject or logTimeout
	pe    *PanicError // a panic to record, once the slot is back
}

const (
	logNone uint8 = iota
	logReject
	logTimeout
)

// endLocked settles the Future's result and counts the call. f.mu is held.
func (f *Future[T]) endLocked(v T, err error, o outcome) ending {
	f.val, f.err = v, err
	f.completed = true
	f.l.count.pick().add(o)
	var e ending
	switch o {
	case outRejected:
		e.log = logReject
	case outTimedOut:
		e.log = logTimeout
	}
	return e
}

// leaveQueueLocked takes a queued task off the queue and settles it with err, counted as o. It
// reports false, settling nothing, when the slot was granted meanwhile: the task's goroutine then
// sees why it must not run. f.mu is held.
func (f *Future[T]) leaveQueueLocked(err error, o outcome) (ending, bool) {
	if !f.l.slots.Cancel(&f.w) {
		return ending{}, false
	}
	f.l.waiting.Add(-1)
	return f.endQueuedLocked(err, o), true
}

// endQueuedLocked settles the result of a task that will never run. f.mu is held.
func (f *Future[T]) endQueuedLocked(err error, o outcome) ending {
	var zero T
	f.phase = phaseExited
	e := f.endLocked(zero, err, o)
	e.stop, e.timer = f.stop, f.timer
	f.stop, f.timer = nil, nil
	return e
}

// overrunLocked settles the result of a task whose fn runs on, keeping its slot. f.mu is held.
// Nothing is logged now: a timeout's record is written by exit, once the slot is back.
func (f *Future[T]) overrunLocked(err error, o outcome) ending {
	var zero T
	f.l.overrunning.Add(1) // under f.mu, so before exit can take it back
	e := f.endLocked(zero, err, o)
	e.log = logNone
	return e
}

// endUnqueued completes the Future of a task that never queued.
func (f *Future[T]) endUnqueued(err error, o outcome) {
	f.mu.Lock()
	e := f.endQueuedLocked(err, o)
	f.mu.Unlock()
	f.publish(e)
}

// publish does what is left once the result is settled: stop what waited for the slot, log,
// and complete the Future last, so that Wait returns after the record is written.
func (f *Future[T]) publish(e ending) {
	if e.stop != nil {
		e.stop()
	}
	if e.timer != nil {
		e.timer.Stop()
	}
	switch e.log {
	case logReject:
		f.l.logReject(f.ctx, f.err, f.l.epoch.Add(f.born))
	case logTimeout:
		f.logTimeout()
	}
	if e.pe != nil {
		f.logPanic(e.pe)
	}
	f.mu.Lock()
	f.published.Store(true)
	done := f.done
	f.mu.Unlock()
	if done != nil {
		close(done)
	}
}

// logTimeout and logPanic write the records of the Future's task, with its wait and run times.
func (f *Future[T]) logTimeout() {
	t0 := f.l.epoch.Add(f.born)
	f.l.logTimeout(f.ctx, t0, t0.Add(f.wait))
}

func (f *Future[T]) logPanic(pe *PanicError) {
	t0 := f.l.epoch.Add(f.born)
	f.l.logPanic(f.ctx, pe, t0, t0.Add(f.wait))
}
