package limiter

import (
	"context"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goloom/loom/internal/registry"
	"github.com/goloom/loom/internal/window"
)

// Do runs fn with a slot of the limiter and returns fn's error as is.
//
// Do first waits for a slot, in one FIFO queue with every other waiting Do, [Call] and [Submit].
// It waits until a slot frees, or until ctx ends (it returns ctx's error and fn never runs), or
// for as long as [WithAcquireTimeout] allows, and it does not wait at all beyond the bound of
// [WithMaxWaiting]; when it gets no slot it returns an error matching [ErrRejected]. A ctx that is
// already done never gets a slot. After [Limiter.Shutdown] began, Do returns [ErrClosed].
//
// fn gets ctx, or with [WithTaskTimeout] a context derived from ctx that is also cancelled when
// the task times out, so it carries ctx's values and cancellation. Without a task timeout, fn
// runs on the caller's goroutine and Do returns when fn does. With one, fn runs on a goroutine
// of its own and Do returns when fn does, when the timeout fires ([ErrTaskTimeout]) or when ctx
// ends (ctx's error), whichever is first; a task that is still running keeps its slot until fn
// returns. With a task timeout Do may thus return while fn still runs: fn's effects are then not
// ordered before Do's return. Otherwise everything fn did happens-before Do returns.
//
// A panic in fn is recovered: Do returns a [*PanicError] and the slot is released. If fn calls
// runtime.Goexit on the caller's goroutine, the goroutine ends as it would without the limiter,
// after the slot is released (the call is counted Failed); on a goroutine of its own Do returns
// [ErrGoexit].
//
// Calling Do from a task of the same limiter needs a second slot: with every slot taken it waits
// like any other caller, so give such a limiter an acquire timeout. It panics if ctx or fn is
// nil.
func (l *Limiter) Do(ctx context.Context, fn func(context.Context) error) error {
	l.check(ctx, "Do")
	if fn == nil {
		panic("limiter: Do: nil function")
	}
	// Two literals, not one shared: the one callHere gets does not escape and costs nothing.
	if l.cfg.taskTimeout > 0 {
		_, err := callTimed(ctx, l, func(ctx context.Context) (struct{}, error) { return struct{}{}, fn(ctx) })
		return err
	}
	_, err := callHere(ctx, l, func(ctx context.Context) (struct{}, error) { return struct{}{}, fn(ctx) })
	return err
}

// Call runs fn with a slot of l and returns what fn returned, as is. It waits for a slot, runs
// fn and handles its timeout, panics and Goexit exactly as [Limiter.Do] does; when fn does not
// run or its call ends first (rejection, ctx's end, task timeout) the value is T's zero value.
// With a task timeout Call may return while fn still runs; otherwise everything fn did
// happens-before Call returns. It panics if ctx or fn is nil.
func Call[T any](ctx context.Context, l *Limiter, fn func(context.Context) (T, error)) (v T, err error) {
	l.check(ctx, "Call")
	if fn == nil {
		panic("limiter: Call: nil function")
	}
	if l.cfg.taskTimeout > 0 {
		return callTimed(ctx, l, fn)
	}
	return callHere(ctx, l, fn)
}

// callHere runs fn on the caller's goroutine, for a limiter without a task timeout: the fast path
// of Do and Call, written for speed (no call but the semaphore's and fn on the way in).
func callHere[T any](ctx context.Context, l *Limiter, fn func(context.Context) (T, error)) (v T, err error) {
	t0 := l.begin()
	ok, mark := false, int64(0)
	if ctx.Done() == nil {
		ok, mark = l.slots.TryAcquireMark(1)
	}
	if !ok {
		if mark, err = l.enter(ctx, t0); err != nil {
			return v, err
		}
	} else if l.closed.Load() {
		return v, l.admitted(ctx, t0)
	}
	if l.plain && !registry.LabelsOn() {
		// runHere, with everything a plain limiter lacks left out, inline: a call of runHere
		// costs an uncontended Do a quarter of its time (BenchmarkDo: 66 ns against 50 ns).
		// An adaptive limit's mark and look (started, held, observe) stay: without a meter
		// they are a nil test each.
		mk := l.started()
		normal := false
		defer func() {
			if !normal {
				err = l.abortHere(ctx, recover(), t0, time.Time{}, mk)
			}
		}()
		v, err = fn(ctx)
		normal = true
		held := l.held()
		l.release()
		l.observe(ctx, mk, err, false, false, held)
		l.end(ctx, ran(ctx, err, false), err, t0, time.Time{})
		return v, err
	}
	if l.cfg.fleeted() {
		return callFleet(ctx, l, fn, t0, mark)
	}
	return runHere(ctx, l, fn, ctx, nil, t0)
}

// callFleet is callHere, once the local slot is held, for a limiter whose calls the fleet must
// admit too (WithFleet, WithFleetRate): fn runs under the permit's context, and the permit goes
// back when fn returns.
func callFleet[T any](ctx context.Context, l *Limiter, fn func(context.Context) (T, error), t0 time.Time, mark int64) (T, error) {
	tctx, le, o, err := l.fleetEnter(ctx, t0)
	if err != nil {
		var zero T
		l.unused(mark)
		l.end(ctx, o, err, t0, time.Time{})
		return zero, err
	}
	return runHere(ctx, l, fn, tctx, le, t0)
}

// runHere runs fn, which holds its slot, on the caller's goroutine under tctx (ctx, or the fleet
// permit's context, whose leave gives the permit back) and ends the call: where Do's and Call's
// function runs without a task timeout — on a plain limiter, without labels, callHere does the
// same inline. A lease lost while fn ran is the call's error.
func runHere[T any](ctx context.Context, l *Limiter, fn func(context.Context) (T, error), tctx context.Context, le *lease, t0 time.Time) (v T, err error) {
	var t1 time.Time
	if l.cfg.logger != nil {
		t1 = time.Now()
	}
	mk := l.started()
	tctx, labelled := l.labels.Enter(tctx) // with package inspect's Labels: loom.limiter, on this goroutine
	normal := false
	defer func() {
		if labelled {
			registry.RestoreLabels(ctx) // back to the caller's, as pprof.Do does
		}
		if !normal {
			le.leave()
			err = l.abortHere(ctx, recover(), t0, t1, mk)
		}
	}()
	v, err = fn(tctx)
	normal = true
	lerr := le.leave()
	held := l.held()
	l.release()
	l.observe(ctx, mk, err, false, false, held)
	if lerr != nil {
		var zero T
		v, err = zero, lerr // the lease went before fn returned: whatever fn returned, it is not to be trusted
	}
	l.end(ctx, ran(ctx, err, false), err, t0, t1)
	return v, err
}

// abortHere ends a call whose fn, running on the caller's goroutine, panicked (r != nil) or
// called runtime.Goexit (r == nil; the goroutine goes on ending after us).
func (l *Limiter) abortHere(ctx context.Context, r any, t0, t1 time.Time, mk window.Mark) error {
	held := l.held()
	l.release()
	l.observe(ctx, mk, nil, false, true, held)
	if r == nil {
		l.end(ctx, outFailed, ErrGoexit, t0, t1)
		return ErrGoexit
	}
	pe := &PanicError{Value: r, Stack: debug.Stack()}
	l.recordPanic(ctx, pe, t0, t1)
	l.end(ctx, ran(ctx, pe, false), pe, t0, t1)
	return pe
}

// The states of a timedCall; the caller and the task's goroutine race to move it out of
// running, and the winner decides how the call is counted.
const (
	timedRunning   int32 = iota
	timedFinished        // fn returned (or panicked) first: the caller reports its result
	timedAbandoned       // the caller went first (timeout or ctx): the task overruns
)

// A timedCall is a Do or Call with a task timeout: fn runs on a goroutine of its own, so that
// the caller can leave when the timeout fires even if fn does not.
type timedCall[T any] struct {
	state  atomic.Int32
	l      *Limiter
	ctx    context.Context // the task's: the caller's, with the timeout
	cancel context.CancelFunc
	fn     func(context.Context) (T, error)
	val    T
	err    error
	broken bool            // fn panicked or called runtime.Goexit; err says which
	t0, t1 time.Time       // call and task start, with a logger
	le     *lease          // the fleet's permit; nil without one
	caller context.Context // the caller's ctx: did the caller give up?
	mk     window.Mark     // the adaptive limit's mark of the task's start

	// exiting is held by the task's goroutine from the moment fn has returned until its slot is
	// back and its records are written. A caller that finds the call timedFinished takes it
	// once, so that it returns only after both (the timeout may have woken it before exit began).
	exiting  sync.Mutex
	timedOut bool // set by exit before timedFinished: the call's result is ErrTaskTimeout
}

// callTimed runs fn under the task timeout: one timer (the context's) and one goroutine per call.
func callTimed[T any](ctx context.Context, l *Limiter, fn func(context.Context) (T, error)) (T, error) {
	var zero T
	c := &timedCall[T]{l: l, fn: fn, caller: ctx}
	c.t0 = l.begin()
	mark, err := l.enter(ctx, c.t0)
	if err != nil {
		return zero, err
	}
	parent := ctx
	if l.cfg.fleeted() {
		fctx, le, o, err := l.fleetEnter(ctx, c.t0)
		if err != nil {
			l.unused(mark)
			l.end(ctx, o, err, c.t0, time.Time{})
			return zero, err
		}
		parent, c.le = fctx, le
	}
	if l.cfg.logger != nil {
		c.t1 = time.Now()
	}
	c.ctx, c.cancel = context.WithTimeoutCause(parent, l.cfg.taskTimeout, ErrTaskTimeout)
	// The task's context ends when the timeout fires, when ctx ends, or when the task's
	// goroutine cancels it on its way out: one channel tells the caller all three.
	done := c.ctx.Done()
	go c.run()
	<-done
	if c.state.Load() == timedRunning {
		l.overrunning.Add(1) // before the task's goroutine can see it abandoned and take it back
		if c.state.CompareAndSwap(timedRunning, timedAbandoned) {
			// fn runs on with its slot: the call is counted now, and its record is written by
			// the task's goroutine once the slot is back (see exit).
			switch cause := context.Cause(c.ctx); {
			case cause == ErrTaskTimeout:
				l.tally(outTimedOut)
				return zero, ErrTaskTimeout
			case c.le.lost() != nil:
				l.tally(outFailed) // like a task timeout: the task overruns without its lease
				return zero, c.le.lost()
			}
			l.tally(outCancelled)
			return zero, ctxErr(ctx)
		}
		l.overrunning.Add(-1)
	}
	// fn is done, and its result is ours once exit has given the slot back.
	c.exiting.Lock()
	timedOut, val, err := c.timedOut, c.val, c.err
	c.exiting.Unlock()
	switch {
	case timedOut:
		// fn returned after its time was up, most likely because it was up: the timeout
		// stands, whatever fn returned.
		l.end(ctx, outTimedOut, ErrTaskTimeout, c.t0, c.t1)
		return zero, ErrTaskTimeout
	default:
		l.end(ctx, ran(ctx, err, false), err, c.t0, c.t1)
		return val, err
	}
}

func (c *timedCall[T]) run() {
	normal := false
	defer func() {
		if !normal {
			c.abort(recover())
		}
		c.exit()
	}()
	c.mk = c.l.started()
	c.val, c.err = c.fn(c.l.labels.Task(c.ctx, false)) // a fresh goroutine: the caller's labels
	normal = true
}

// abort records a panic (r != nil) or a Goexit (r == nil) of fn.
func (c *timedCall[T]) abort(r any) {
	c.broken = true
	if r == nil {
		c.err = ErrGoexit
		return
	}
	c.err = &PanicError{Value: r, Stack: debug.Stack()}
}

// exit gives the slot back, then writes the task's records — so that a log handler calling back
// into the limiter finds the slot free — and, if the caller still waits, hands it the result.
func (c *timedCall[T]) exit() {
	l := c.l
	c.exiting.Lock()
	// Decided before the caller can read it: the timeout stands if it fired before fn returned,
	// and so does a lost lease.
	c.timedOut = !c.broken && context.Cause(c.ctx) == ErrTaskTimeout
	if lerr := c.le.lost(); lerr != nil && !c.broken && !c.timedOut {
		var zero T
		c.val, c.err = zero, lerr
	}
	finished := c.state.CompareAndSwap(timedRunning, timedFinished)
	c.le.leave() // after the state is settled: giving the permit back ends c.ctx, which wakes the caller
	if !finished {
		// The caller left (timeout or ctx): the task overran. The context is done already, so
		// its cause is final.
		l.overrunning.Add(-1)
	}
	held := l.held()
	l.release()
	timedOut := c.timedOut || !finished && context.Cause(c.ctx) == ErrTaskTimeout
	l.observe(c.caller, c.mk, c.err, timedOut, c.broken, held)
	if !finished && context.Cause(c.ctx) == ErrTaskTimeout {
		l.recordTimeout(c.ctx, c.t0, c.t1) // the call's, tallied when the caller left
	}
	if pe, ok := c.err.(*PanicError); ok && c.broken {
		l.recordPanic(c.ctx, pe, c.t0, c.t1)
	}
	c.exiting.Unlock()
	c.cancel() // wakes the caller, now that the slot is back
}
