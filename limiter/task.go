package limiter

import (
	"context"
	"runtime/debug"
	"time"

	"github.com/goloom/loom/internal/registry"
)

// The life of a submitted task. A Future's phase moves only forward, under Future.mu:
//
//	phase     meaning                                   left by                       to
//	--------  ----------------------------------------  ----------------------------  -------
//	queued    waiting for a slot in the FIFO queue, or  runTask starts fn             running
//	          granted one and about to start            leaves the queue (Cancel, ctx,  exited
//	                                                    acquire timeout, Shutdown) or
//	                                                    refused at the start
//	running   fn runs on a task goroutine, with a slot  fn returns (exit)             exited
//	exited    fn has returned, or will never run        -                             -
//
// Orthogonal to the phase, the Future's result is settled once (settled: val and err decided,
// under mu), then delivered (delivered: the call counted and recorded, Done closed), outside mu:
//
//   - queued: completed when it leaves the queue or is refused; it never runs.
//   - running: completed by fn's return (exit), or earlier by Cancel, the ctx's end or the task
//     timeout — the task then overruns: it keeps its slot until fn returns, counted in
//     Overrunning, and exit completes nothing.
//
// Records (rejection, timeout, panic) are written only once the task holds no slot: at once for
// a task that never ran, in exit for one that did — so that a log handler may call back into the
// limiter.

// The phases of a Future's task, guarded by Future.mu.
const (
	phaseQueued  uint8 = iota // waiting for a slot, or granted one and about to start
	phaseRunning              // fn runs on the task's goroutine
	phaseExited               // fn has returned, or will never run
)

// A runner is a granted task, ready to run on a goroutine of the limiter's own.
type runner interface {
	// runTask runs the task; foreign says that this goroutine may carry another task's pprof
	// labels (it ran one, or another task's goroutine started it), which must not stay on.
	runTask(foreign bool) (next runner)
}

// runTasks is the body of the limiter's task goroutines: it runs r, then whatever task it is
// handed next. foreign: see runner.
func runTasks(r runner, foreign bool) {
	for r != nil {
		r = r.runTask(foreign)
		foreign = true
	}
}

// releaseAndTake gives the caller's slot back and returns the queued task the slot went to, if
// any, for the caller — a task goroutine whose task has returned — to run next: a goroutine start
// saved per task while the queue is long.
func (l *Limiter) releaseAndTake() runner {
	owner := l.slots.ReleaseAndTake(1)
	if owner == nil {
		return nil
	}
	l.waiting.Add(-1) // what granted would have done
	return owner.(runner)
}

// granted is the queue's callback, for a slot that no task goroutine took over (see
// releaseAndTake): the slot is ours (err == nil), or Shutdown failed the queue. It runs on the
// goroutine that released the slot, so it only hands the task on, to a goroutine of its own.
func (f *Future[T]) granted(err error) {
	f.l.waiting.Add(-1)
	if err == nil {
		go runTasks(f, true) // started from the releasing goroutine, maybe another task's
		return
	}
	f.mu.Lock()
	e := f.endQueuedLocked(ErrClosed, outRejected)
	f.mu.Unlock()
	f.publish(e)
}

// onAcquireTimeout runs when the acquire timeout fires while the task is queued: one last try
// at the slot and its token (sema's Expire), then off the queue.
func (f *Future[T]) onAcquireTimeout() {
	f.mu.Lock()
	if f.settled || f.phase != phaseQueued {
		f.mu.Unlock()
		return
	}
	if !f.l.slots.Expire(&f.w) {
		f.mu.Unlock() // granted at the deadline, or just before: then it runs
		return
	}
	f.l.waiting.Add(-1)
	e := f.endQueuedLocked(ErrAcquireTimeout, outRejected)
	f.mu.Unlock()
	f.publish(e)
}

// onCtxDone runs when Submit's ctx ends while the task is queued or running without a task
// timeout.
func (f *Future[T]) onCtxDone() { f.onDone(f.ctx) }

// onDone runs when ctx, the one its watcher watches, ends: Submit's ctx while the task is queued,
// or the task's context while it runs — its end then says why: the task timeout, a lost fleet
// lease, or Submit's ctx.
func (f *Future[T]) onDone(ctx context.Context) {
	f.mu.Lock()
	if f.settled {
		f.mu.Unlock()
		return
	}
	var e ending
	switch f.phase {
	case phaseQueued:
		var left bool
		if e, left = f.leaveQueueLocked(ctxErr(f.ctx), outCancelled); !left {
			f.mu.Unlock() // granted just now: runTask sees ctx's end before it starts fn
			return
		}
	case phaseRunning:
		switch cause := context.Cause(ctx); {
		case cause == ErrTaskTimeout:
			e = f.overrunLocked(ErrTaskTimeout, outTimedOut)
		case f.le.lost() != nil:
			e = f.overrunLocked(f.le.lost(), outFailed) // like a timeout: the task runs on without its lease
		default:
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
func (f *Future[T]) runTask(foreign bool) (next runner) {
	l := f.l
	f.mu.Lock()
	f.waitTrace.End()
	f.waitTrace, f.foreign = registry.AsyncWait{}, foreign
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
		// The slot came too late to be of use; so did its token.
		e := f.endQueuedLocked(refuse, o)
		f.mu.Unlock()
		if l.rate != nil {
			l.rate.Return(f.w.Mark())
		}
		next = l.releaseAndTake()
		f.publish(e)
		return next
	}
	if l.cfg.logger != nil {
		f.at.wait = time.Since(l.epoch) - f.at.born
	}
	if l.cfg.fleeted() {
		return f.runFleet() // unlocks f.mu
	}
	var tctx context.Context
	if d := l.cfg.taskTimeout; d > 0 {
		timed, cancel := context.WithTimeoutCause(f.ctx, d, ErrTaskTimeout)
		if f.stop != nil {
			f.stop()
		}
		f.stop = context.AfterFunc(timed, func() { f.onDone(timed) })
		tctx, f.cancel = timed, cancel
	} else {
		tctx, f.cancel = context.WithCancel(f.ctx)
		if f.stop == nil && f.ctx.Done() != nil {
			f.stop = context.AfterFunc(f.ctx, f.onCtxDone)
		}
	}
	f.phase = phaseRunning
	f.mu.Unlock()
	return f.call(tctx)
}

// call runs fn under tctx and ends the task: the one place a Submitted task's function runs.
// The deferred function tells a panic (recover returns non-nil) from runtime.Goexit (nil).
func (f *Future[T]) call(tctx context.Context) (next runner) {
	tctx = f.l.labels.Task(tctx, f.foreign) // loom.limiter with Labels; never another task's
	f.mk = f.l.started()
	normal := false
	defer func() {
		if !normal {
			next = f.abort(tctx, recover())
		}
	}()
	v, err := f.fn(tctx)
	normal = true
	return f.exit(tctx, v, err, nil, returned)
}

// runFleet is runTask, from the start of the task on (f.mu held, unlocked here), for a limiter
// whose calls the fleet must admit too: the task counts as running while it waits for the fleet,
// so that Cancel and its ctx reach that wait, and its context — with the task timeout, if any —
// is the permit's.
func (f *Future[T]) runFleet() (next runner) {
	l := f.l
	base, cancel := context.WithCancel(f.ctx)
	f.cancel = cancel
	if f.stop == nil && f.ctx.Done() != nil {
		f.stop = context.AfterFunc(f.ctx, f.onCtxDone)
	}
	f.phase = phaseRunning
	f.mu.Unlock()

	var zero T
	fctx, le, _, err := l.fleetEnter(base, f.began())
	if err != nil {
		if lerr := base.Err(); lerr != nil {
			err = ctxErr(f.ctx) // Cancel or the ctx ended the wait: the Future says so already
		}
		return f.exit(base, zero, err, nil, refused)
	}
	tctx := fctx
	var stopTimer context.CancelFunc = func() {}
	if d := l.cfg.taskTimeout; d > 0 {
		tctx, stopTimer = context.WithTimeoutCause(fctx, d, ErrTaskTimeout)
	}
	f.mu.Lock()
	f.le = le
	f.cancel = func() { stopTimer(); cancel() }
	old := f.stop
	f.stop = context.AfterFunc(tctx, func() { f.onDone(tctx) }) // the timeout, the lease, the ctx
	f.mu.Unlock()
	if old != nil {
		old()
	}
	return f.call(tctx)
}

// abort ends a task whose fn panicked (r != nil) or called runtime.Goexit (r == nil).
func (f *Future[T]) abort(tctx context.Context, r any) runner {
	var zero T
	if r == nil {
		return f.exit(tctx, zero, ErrGoexit, nil, goexited)
	}
	pe := &PanicError{Value: r, Stack: debug.Stack()}
	return f.exit(tctx, zero, pe, pe, panicked)
}

// How fn ended, for exit.
const (
	returned = iota
	panicked // recovered: the goroutine may run another task
	goexited // the goroutine is ending: it cannot take another task
	refused  // fn never ran: the fleet did not admit the task (err says why)
)

// exit ends a task whose fn has ended, as how says (pe: the panic): it completes the Future
// unless that happened already (the task overran), gives the slot back, then writes the task's
// records and publishes. Unless the goroutine is ending, it may be handed the next task, which
// exit returns.
func (f *Future[T]) exit(tctx context.Context, v T, err error, pe *PanicError, how int) (next runner) {
	l := f.l
	broken := how != returned
	f.mu.Lock()
	f.phase = phaseExited
	stop, le := f.stop, f.le
	f.stop, f.le = nil, nil
	overran := f.settled
	var e ending
	if !overran {
		var zero T
		switch {
		case how == refused:
			o := outRejected
			if f.cancelled || f.ctx.Err() != nil {
				o = outCancelled
			}
			e = f.endLocked(zero, err, o)
		case !broken && context.Cause(tctx) == ErrTaskTimeout:
			// fn returned after its time was up (the watcher had not settled the Future yet):
			// the timeout stands, whatever fn returned.
			e = f.endLocked(zero, ErrTaskTimeout, outTimedOut)
		case !broken && le.lost() != nil:
			e = f.endLocked(zero, le.lost(), outFailed) // so does a lost fleet lease (asked before it is given back)
		default:
			e = f.endLocked(v, err, ran(f.ctx, err, f.cancelled))
		}
	}
	f.mu.Unlock()
	// Stop the watcher before cancelling tctx, so that it does not take our own cancel for news.
	if stop != nil {
		stop()
	}
	le.leave() // the fleet's permit, once fn has returned
	if how == refused && l.rate != nil {
		l.rate.Return(f.w.Mark()) // fn never started: its local token goes back
	}
	if l.cfg.taskTimeout > 0 || f.ctx.Done() != nil {
		// Stop the timer, or leave the parent's list of children. A tctx with neither is
		// garbage once fn is done; cancelling it would only cost time (Submit's throughput).
		f.cancel()
	}
	if overran {
		l.overrunning.Add(-1)
	}
	held := l.held()
	if how == goexited {
		l.release()
	} else {
		next = l.releaseAndTake()
	}
	if how != refused && l.meter != nil { // context.Cause takes tctx's lock: only when it counts
		l.observe(f.ctx, f.mk, err, context.Cause(tctx) == ErrTaskTimeout, broken, held)
	}
	// The slot is free: the records about the call may be written now.
	if !overran {
		e.pe = pe
		f.publish(e)
		return next
	}
	if f.err == ErrTaskTimeout {
		f.recordTimeout() // the Future completed at the timeout; its record waited for the slot
	}
	if pe != nil {
		f.recordPanic(pe)
	}
	return next
}

// An ending is what is left to do, outside f.mu, once a Future's result is settled.
type ending struct {
	o      outcome
	record bool        // write the call's record now (false: its task still holds the slot)
	pe     *PanicError // a panic to record first
	stop   func() bool // the ctx watcher, if nothing else will stop it
	timer  *time.Timer // the acquire timeout, likewise
}

// endLocked settles the Future's result as o. f.mu is held.
func (f *Future[T]) endLocked(v T, err error, o outcome) ending {
	f.val, f.err = v, err
	f.settled = true
	return ending{o: o, record: true}
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
	f.waitTrace.End()
	f.waitTrace = registry.AsyncWait{}
	f.phase = phaseExited
	e := f.endLocked(zero, err, o)
	e.stop, e.timer = f.stop, f.timer
	f.stop, f.timer = nil, nil
	return e
}

// overrunLocked settles the result of a task whose fn runs on, keeping its slot: it is counted
// now, and its record is written by exit once the slot is back. f.mu is held.
func (f *Future[T]) overrunLocked(err error, o outcome) ending {
	var zero T
	f.l.overrunning.Add(1) // under f.mu, so before exit can take it back
	e := f.endLocked(zero, err, o)
	e.record = false
	return e
}

// endUnqueued completes the Future of a task that never queued.
func (f *Future[T]) endUnqueued(err error, o outcome) {
	f.mu.Lock()
	e := f.endQueuedLocked(err, o)
	f.mu.Unlock()
	f.publish(e)
}

// publish does what is left once the result is settled: stop what waited for the slot, count
// the call (and write its records, if its slot is free), and complete the Future last, so that
// Wait returns after both.
func (f *Future[T]) publish(e ending) {
	if e.stop != nil {
		e.stop()
	}
	if e.timer != nil {
		e.timer.Stop()
	}
	if e.pe != nil {
		f.recordPanic(e.pe)
	}
	if e.record {
		t0, t1 := f.times()
		f.l.end(f.ctx, e.o, f.err, t0, t1)
	} else {
		f.l.tally(e.o)
	}
	f.mu.Lock()
	f.delivered.Store(true)
	done := f.done
	f.mu.Unlock()
	if done != nil {
		close(done)
	}
}

// began returns when Submit was called, or the zero time if the limiter does not note it.
func (f *Future[T]) began() time.Time {
	if !f.l.stamp {
		return time.Time{}
	}
	return f.l.epoch.Add(f.at.born)
}

// times returns when the call began and when its task started (zero times without a logger).
func (f *Future[T]) times() (t0, t1 time.Time) {
	if f.l.cfg.logger == nil {
		return
	}
	t0 = f.began()
	return t0, t0.Add(f.at.wait)
}

func (f *Future[T]) recordTimeout() {
	t0, t1 := f.times()
	f.l.recordTimeout(f.ctx, t0, t1)
}

func (f *Future[T]) recordPanic(pe *PanicError) {
	t0, t1 := f.times()
	f.l.recordPanic(f.ctx, pe, t0, t1)
}
