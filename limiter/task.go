package limiter

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goloom/loom/internal/registry"
	"github.com/goloom/loom/internal/sema"
)

// The life of a task — a Submitted call, or a Do or Call with a task timeout — is a call's (see
// call.go) with a queue place and a Future. Its phase moves only forward, under task.mu:
//
//	phase    meaning                                       left by                          to
//	-------  --------------------------------------------  -------------------------------  -------
//	queued   waiting for a slot in the FIFO queue (no       its start on a task goroutine    running
//	         goroutine), or granted one and about to start  leaving the queue (Cancel, ctx,  exited
//	                                                        acquire timeout, Shutdown)
//	running  holding its slot on a task goroutine: taking   fn's return, or the refusal of   exited
//	         the steps after the slot, then running fn      a step or of Shutdown
//	exited   its task is done, or will never run            -                                -
//
// Orthogonal to the phase, the Future's result is settled once (settled: val and err decided,
// under mu), then delivered (the call counted and recorded, Done closed), outside mu:
//
//   - queued: settled when it leaves the queue or is refused at its start; it never runs.
//   - running: settled when fn returns (exit), or earlier when its caller leaves — Cancel, the
//     ctx's end, the task timeout, a lost lease (left) — and the task then overruns: it keeps
//     its slot until it is done, counted in Overrunning, and its end counts nothing.
//
// Records (rejection, timeout, panic) are written only once the task holds no slot, by finish.
//
// Lock order: a task's mu is held while it leaves the queue (sema's Cancel and Expire), which
// may serve the requests behind it and call their granted on this goroutine. granted takes no
// lock for a grant, and only a Close fails a limiter's request (one permit is never too many),
// so granted never takes another task's mu while one is held.

// The phases of a task, guarded by task.mu.
const (
	phaseQueued uint8 = iota
	phaseRunning
	phaseExited
)

// task is the part of a Future that knows nothing of its function's type.
type task struct {
	call
	w sema.Waiter // its place in the limiter's queue; costs no goroutine

	// delivered is set once the result is out: val and err are final, the call is counted and
	// recorded, and done (if made) is closed. Wait reads it without the lock.
	delivered atomic.Bool

	// mu guards what follows. (The four one-byte fields sit next to it and delivered so that the
	// three share one word: every field of a queued task is paid a million times over in a long
	// queue.)
	mu        sync.Mutex
	phase     uint8              // phaseQueued, phaseRunning, phaseExited
	settled   bool               // the result is decided; delivered soon after, outside mu
	cancelled bool               // Cancel was called
	foreign   bool               // its goroutine may carry another task's pprof labels (see runner)
	leftAs    outcome            // what the call was counted as when its caller left (see overrunLocked)
	done      chan struct{}      // made by the first Done before delivery
	cancel    context.CancelFunc // ends the task's context, and the steps' wait (running); nil: the task is its context
	stop      func() bool        // stops the watcher: of ctx (queued) or of the task's context (running)
	timer     *time.Timer        // the acquire timeout, while queued
	cx        *ctxState          // the task's context's, once asked for (the task as its context)
	err       error
}

// A runner is a granted task, ready to run on a goroutine of the limiter's own: a *Future[T].
type runner interface {
	// runTask runs the task; foreign says that this goroutine may carry another task's pprof
	// labels (it ran one, or another task's goroutine started it), which must not stay on.
	runTask(foreign bool) (next runner)
	base() *task
}

// runTasks is the body of the limiter's task goroutines: it runs r, then whatever task it is
// handed next. foreign: see runner.
func runTasks(r runner, foreign bool) {
	for r != nil {
		r = r.runTask(foreign)
		foreign = true
	}
}

// enqueue puts the task r (t's) on its way: refused at once, started on a goroutine of its own
// if a slot is free, or queued for one.
func (t *task) enqueue(r runner) {
	l, ctx := t.l, t.ctx
	if done := ctx.Done(); done != nil {
		select {
		case <-done:
			t.refuseUnqueued(ctxErr(ctx))
			return
		default:
		}
	}
	if l.closed.Load() {
		t.refuseUnqueued(ErrClosed)
		return
	}
	if l.slots.TryAcquireFor(&t.w, 1) {
		go runTasks(r, false)
		return
	}
	if err := l.refusal(ctx); err != nil {
		t.refuseUnqueued(err)
		return
	}
	if aw := registry.StartAsyncWait(ctx); aw != (registry.AsyncWait{}) {
		t.extras().waitTrace = aw // before queueing: nobody else sees t yet
	}
	// With watchers to arm, hold t.mu while queueing and arming them: a grant can come from
	// another goroutine the moment we are queued, and start waits for t.mu. Without (ctx has no
	// Done, no acquire timeout), nothing is left to do once queued.
	watch := ctx.Done() != nil || l.cfg.acquireTimed
	if watch {
		t.mu.Lock()
	}
	acquired, err := l.slots.AcquireFuncFor(&t.w, 1, r, granted)
	if acquired || err != nil {
		if watch {
			t.mu.Unlock()
		}
		if err != nil {
			t.refuseUnqueued(l.queueErr(ctx, err)) // closed, or full: one permit is never too many
			return
		}
		go runTasks(r, false)
		return
	}
	if !watch {
		return
	}
	if ctx.Done() != nil {
		t.stop = context.AfterFunc(ctx, t.onQueuedDone)
	}
	if l.cfg.acquireTimed {
		t.timer = time.AfterFunc(l.cfg.acquireTimeout, t.onAcquireTimeout)
	}
	t.mu.Unlock()
}

// granted is the queue's callback, for a slot that no task goroutine took over (see
// releaseAndTake): the slot is the task's (err == nil), or Shutdown failed the queue. It runs on
// the goroutine that released the slot, so it only hands the task on, to a goroutine of its own.
func granted(w *sema.Waiter, err error) {
	r := w.Owner().(runner)
	t := r.base()
	if err == nil {
		go runTasks(r, true) // started from the releasing goroutine, maybe another task's
		return
	}
	t.mu.Lock()
	t.settleUnqueuedLocked(ErrClosed)
	t.mu.Unlock()
	t.refused(ErrClosed)
}

// onQueuedDone runs when ctx ends while the task is queued.
func (t *task) onQueuedDone() { t.leaveQueue(ctxErr(t.ctx), false) }

// onAcquireTimeout runs when the acquire timeout fires while the task is queued: one last try
// at the slot and its token (sema's Expire), then off the queue.
func (t *task) onAcquireTimeout() { t.leaveQueue(ErrAcquireTimeout, true) }

// leaveQueue takes a queued task off the queue and ends it with err; expired: at its acquire
// timeout, with one last try. If the slot was granted meanwhile, it does nothing: start sees why
// the task must not run, or the task runs (granted at its deadline).
func (t *task) leaveQueue(err error, expired bool) {
	t.mu.Lock()
	if t.settled || t.phase != phaseQueued {
		t.mu.Unlock()
		return
	}
	var left bool
	if expired {
		left = t.l.slots.Expire(&t.w)
	} else {
		left = t.l.slots.Cancel(&t.w)
	}
	if !left {
		t.mu.Unlock()
		return
	}
	t.settleUnqueuedLocked(err)
	t.mu.Unlock()
	t.refused(err)
}

// refuseUnqueued ends a task that never queued.
func (t *task) refuseUnqueued(err error) {
	t.mu.Lock()
	t.settleUnqueuedLocked(err)
	t.mu.Unlock()
	t.refused(err)
}

// settleUnqueuedLocked settles the result of a task that never got a slot, and stops what waited
// with it. t.mu is held.
func (t *task) settleUnqueuedLocked(err error) {
	t.endWaitTrace()
	t.phase, t.err, t.settled = phaseExited, err, true
	if t.stop != nil {
		t.stop()
		t.stop = nil
	}
	if t.timer != nil {
		t.timer.Stop()
		t.timer = nil
	}
}

// refused finishes and delivers a task settled with err that never got a slot.
func (t *task) refused(err error) {
	t.finish(&ending{how: refused, err: err, o: refusal(err)})
	t.deliver()
}

// start begins the task on its goroutine, holding its slot: it stops what watched it in the
// queue, refuses it if it must not run (cancelled, its ctx ended, Shutdown began), takes the
// steps after the slot and arms the watcher of its running task. It returns the task's context,
// or the error of a task that will not run (to end through exit).
func (t *task) start(foreign bool) (context.Context, error) {
	l := t.l
	t.mu.Lock()
	t.slotted, t.foreign = true, foreign
	t.endWaitTrace()
	if t.timer != nil {
		t.timer.Stop()
		t.timer = nil
	}
	if t.stop != nil {
		t.stop()
		t.stop = nil
	}
	switch {
	case t.cancelled:
		t.mu.Unlock()
		return nil, context.Canceled
	case t.ctx.Err() != nil:
		t.mu.Unlock()
		return nil, ctxErr(t.ctx)
	}
	// The task's context: t.ctx, which Cancel must be able to end, as must the steps (a lost
	// lease) and the task timeout.
	var tctx context.Context
	d := l.cfg.taskTimeout
	switch {
	case !t.watched():
		tctx = t // only Cancel can end it: the task is its context, and no WithCancel is paid for
	case len(l.steps) == 0 && d > 0:
		tctx, t.cancel = context.WithTimeoutCause(t.ctx, d, ErrTaskTimeout)
	default:
		tctx, t.cancel = context.WithCancel(t.ctx)
	}
	t.phase = phaseRunning
	t.mu.Unlock()

	tctx, err := t.admitRest(tctx) // the steps, and the last look at Shutdown
	if err != nil {
		return nil, err
	}
	if len(l.steps) > 0 {
		t.mu.Lock()
		cancelled := t.cancelled
		t.mu.Unlock()
		if cancelled {
			return nil, context.Canceled // Cancel came while the steps admitted the task: it never runs
		}
	}
	if len(l.steps) > 0 && d > 0 {
		var stopTimer context.CancelFunc
		tctx, stopTimer = context.WithTimeoutCause(tctx, d, ErrTaskTimeout)
		t.mu.Lock()
		cancel := t.cancel
		t.cancel = func() { stopTimer(); cancel() }
		t.mu.Unlock()
	}
	t.started()
	if t.watched() {
		t.mu.Lock()
		if !t.settled {
			t.stop = context.AfterFunc(tctx, func() { t.onRunningDone(tctx) })
		}
		t.mu.Unlock()
	}
	return tctx, nil
}

// launch readies a task whose caller admitted it (runTimed) to run on a goroutine of its own,
// under the task timeout, its caller watching: nobody else sees the task yet. It returns the
// task's context.
func (t *task) launch(tctx context.Context) context.Context {
	t.phase = phaseRunning
	tctx, t.cancel = context.WithTimeoutCause(tctx, t.l.cfg.taskTimeout, ErrTaskTimeout)
	t.started()
	return tctx
}

// endWaitTrace ends the trace task of the wait in the queue, if one was begun. t.mu is held.
func (t *task) endWaitTrace() {
	if t.x != nil {
		t.x.waitTrace.End()
		t.x.waitTrace = registry.AsyncWait{}
	}
}

// watched reports whether anything but Cancel (which settles the task itself) may end the
// running task's context: its ctx, the task timeout, a step (a lost lease).
func (t *task) watched() bool {
	return t.ctx.Done() != nil || t.l.cfg.taskTimeout > 0 || len(t.l.steps) > 0
}

// onRunningDone runs when the running task's context ends: the task timeout, a lost lease, or the
// caller's ctx — unless its own end did it (exit stops the watcher first) or Cancel, which
// settled it.
func (t *task) onRunningDone(tctx context.Context) {
	t.mu.Lock()
	if t.settled || t.phase != phaseRunning {
		t.mu.Unlock()
		return
	}
	o, err := t.left(tctx, false)
	t.overrunLocked(o, err)
	t.mu.Unlock()
	t.l.tally(o)
	t.deliver()
}

// overrunLocked settles the result of a task whose caller leaves while it runs on, keeping its
// slot: it is counted now as o (by the caller), and finished without a count once done. t.mu is
// held.
func (t *task) overrunLocked(o outcome, err error) {
	t.err, t.leftAs, t.settled = err, o, true
	t.l.overrunning.Add(1) // under t.mu, so before exit can take it back
}

// cancelTask is Future.Cancel.
func (t *task) cancelTask() {
	t.mu.Lock()
	if t.settled || t.cancelled {
		t.mu.Unlock()
		return
	}
	t.cancelled = true
	switch t.phase {
	case phaseQueued:
		t.mu.Unlock()
		t.leaveQueue(context.Canceled, false) // granted just now: start sees t.cancelled
	case phaseRunning:
		o, err := t.left(t.ctx, true)
		t.overrunLocked(o, err)
		cancel := t.cancel
		if cancel == nil {
			cancel = t.cancelOwn // the task is its context (see start)
		}
		t.mu.Unlock()
		cancel()
		t.l.tally(o)
		t.deliver()
	default:
		t.mu.Unlock()
	}
}

// exit decides how the task, whose fn has ended as h says (with err; pe: the panic) — or which
// will not run (refused, err says why) — ends: its result, unless its caller left already (it
// overran: counted then). It stops the watcher, and ends the task's context. tctx is the task's
// context, nil for a task that never ran.
func (t *task) exit(h how, err error, pe *PanicError, tctx context.Context) ending {
	e := ending{how: h, fnErr: err, pe: pe, take: h != goexited, mark: t.w.Mark()}
	if tctx != nil && t.l.cfg.taskTimeout > 0 {
		e.timedOut = context.Cause(tctx) == ErrTaskTimeout // before the task's context ends (complete)
	}
	t.mu.Lock()
	t.phase = phaseExited
	stop := t.stop
	t.stop = nil
	if t.settled { // the caller left while it ran: counted then, and its record waited for the slot
		e.counted, e.err, e.o = true, t.err, t.leftAs
	} else {
		if h == refused {
			e.err, e.o = err, refusal(err)
		} else {
			t.decide(&e, t.cancelled)
		}
		t.err, t.settled = e.err, true
	}
	t.mu.Unlock()
	// Stop the watcher before the task's context ends (complete), so that it does not take our
	// own end for news.
	if stop != nil {
		stop()
	}
	if e.counted {
		t.l.overrunning.Add(-1)
	}
	return e
}

// complete finishes the task as exit decided, delivers its result unless its caller left
// earlier, and then ends the task's context — last, since the caller of a timed Do watches it
// (see runTimed). It returns the queued task this goroutine runs next, if any.
func (t *task) complete(e *ending) (next runner) {
	next = t.finish(e)
	if !e.counted {
		t.deliver()
	}
	if t.cancel != nil {
		// Stop the timer, or leave the parent's list of children. Only a watched task has a
		// context of its own to cancel (see start): an unwatched one runs under the task itself,
		// and pays for no WithCancel (Submit's throughput).
		t.cancel()
	}
	return next
}

// deliver completes the Future, once its result is settled and, unless its task overruns, the
// call is counted and recorded: Wait returns after both.
func (t *task) deliver() {
	t.mu.Lock()
	t.delivered.Store(true)
	done := t.done
	t.mu.Unlock()
	if done != nil {
		close(done)
	}
}

// doneChan is Future.Done.
func (t *task) doneChan() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done == nil {
		if t.delivered.Load() {
			return closedChan
		}
		t.done = make(chan struct{}) // made on demand: most Futures are waited for once, or late
	}
	return t.done
}

var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()
