package limiter

import (
	"context"
	"errors"
	"runtime/debug"
	"time"

	"github.com/goloom/loom/internal/registry"
	"github.com/goloom/loom/internal/window"
)

// The life of a call, the same for Do, Call and Submit:
//
//	begin    counted in Submitted
//	admit    a slot and its token from the FIFO queue (the first admission step), then the
//	         limiter's steps in order (the fleet's permit, then its token), then a last look at
//	         Shutdown; a call refused on the way never starts
//	run      fn, in one of two places: the caller's goroutine (runHere: Do and Call without a
//	         task timeout) or a task goroutine of the limiter's (Future.run: Submit, and Do and
//	         Call with one, which their caller admits and then watches: runTimed)
//	decide   the call's result and outcome: refusal, a caller that left while fn ran, or fn's
//	         return (the three places an outcome is chosen)
//	finish   the one sequence that ends every call: give back what the steps took (in reverse),
//	         then the slot (and, if fn never started, its token), tell the adaptive limit, count
//	         the outcome and write the records — in that order, so that a log handler finds the
//	         slot free
//
// A call whose caller left while fn runs (a task timeout, its ctx, Future.Cancel, a lost lease)
// is counted then; its task overruns, holding its slot, and ends later, without being counted
// again.

// A call is one Do, Call or Submit from its start to its end. It knows nothing of fn's type, so
// every step of its life is written once, for every entry point.
type call struct {
	l        *Limiter
	ctx      context.Context // the caller's (Submit's)
	mk       window.Mark     // the adaptive limit's mark of the task's start
	x        *extras         // what few calls need; nil unless the limiter stamps calls or has steps
	slotted  bool            // the call holds a slot
	ran      bool            // fn returned (runHere: what its deferred function asks)
	labelled bool            // runHere set this goroutine's pprof labels (Labels)
}

// extras are the parts of a call that only some limiters need, apart so that every other call
// (and every queued Submit) is smaller.
type extras struct {
	born      time.Duration      // when the call began, after l.epoch (l.stamp)
	start     time.Duration      // when its task started, after l.epoch (with a logger)
	holds     []hold             // what the steps after the slot took, in order
	waitTrace registry.AsyncWait // a trace task "loom.limiter.wait" while a task queues, if a trace records
}

// extras returns the call's extras, made now if need be (a task queueing while a trace records).
func (c *call) extras() *extras {
	if c.x == nil {
		c.x = &extras{}
	}
	return c.x
}

// How a call's function ended, for decide and finish.
type how uint8

const (
	returned how = iota // fn returned
	panicked            // recovered: the goroutine may run another task
	goexited            // runtime.Goexit: the goroutine is ending and cannot take another task
	refused             // fn never started: the call was refused on its way in
)

// begin counts the call in (c.l and c.ctx set), and gives it the extras a limiter that is not
// plain needs (a logger or steps). It must be the first thing a call does.
func (c *call) begin() {
	l := c.l
	l.count.submitted.Add(1)
	if !l.plain {
		c.x = &extras{}
		if l.stamp {
			c.x.born = time.Since(l.epoch)
		}
	}
}

// started marks the task's start: for the adaptive limit, and for the logger's records.
func (c *call) started() {
	if l := c.l; l.meter != nil || l.cfg.logger != nil {
		c.startedSlow(l)
	}
}

func (c *call) startedSlow(l *Limiter) {
	c.mk = l.started()
	if l.cfg.logger != nil {
		c.x.start = time.Since(l.epoch)
	}
}

// times returns when the call began and when its task started, for the records (zero times
// without a logger).
func (c *call) times() (t0, t1 time.Time) {
	if c.l.cfg.logger == nil {
		return
	}
	t0 = c.l.epoch.Add(c.x.born)
	if c.x.start == 0 {
		return t0, t0
	}
	return t0, c.l.epoch.Add(c.x.start)
}

// admitRest takes the steps after the slot under parent, the context the task's derives from,
// and has a last look at Shutdown: past it, the task starts. It returns the task's context, or
// why the call will not start; what it took until then is in c, for finish to give back.
func (c *call) admitRest(parent context.Context) (context.Context, error) {
	tctx := parent
	if len(c.l.steps) > 0 {
		var err error
		if tctx, err = c.takeSteps(parent); err != nil {
			return nil, err
		}
	}
	if c.l.closed.Load() {
		return nil, ErrClosed // Shutdown began as the call was admitted: no task starts now
	}
	return tctx, nil
}

// takeSteps takes the limiter's steps in order, each under parent joined with Shutdown's start,
// within what the acquire timeout leaves.
func (c *call) takeSteps(parent context.Context) (context.Context, error) {
	l := c.l
	wctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	defer context.AfterFunc(l.closing, func() { cancel(ErrClosed) })()
	w := stepWait{ctx: wctx, parent: parent, timed: l.cfg.acquireTimed}
	for _, s := range l.steps {
		if w.timed {
			w.left = max(0, l.cfg.acquireTimeout-(time.Since(l.epoch)-c.x.born))
		}
		h, tctx, err := s.take(w)
		if err != nil {
			switch {
			case l.closed.Load():
				return nil, ErrClosed
			case parent.Err() != nil:
				return nil, ctxErr(parent)
			}
			return nil, err
		}
		if h != nil {
			c.x.holds = append(c.x.holds, h)
		}
		w.parent = tctx
	}
	return w.parent, nil
}

// lost returns the error a call's result must be because a hold was lost before fn returned (a
// fleet lease); nil if every hold held.
func (c *call) lost() error {
	if c.x == nil {
		return nil
	}
	return c.x.lost()
}

func (x *extras) lost() error {
	for _, h := range x.holds {
		if err := h.lost(); err != nil {
			return err
		}
	}
	return nil
}

// refusal is the outcome of a call that never started: Rejected for an error that says so (no
// slot, too many waiting, closed, the fleet's refusals), else Cancelled (its ctx ended, or its
// Future was cancelled).
func refusal(err error) outcome {
	if errors.Is(err, ErrRejected) {
		return outRejected
	}
	return outCancelled
}

// decide sets the outcome and result of a call whose fn has ended as e.how says, having returned
// e.fnErr, and whether the result overrides fn's (and fn's value with it): a hold lost before
// fn returned (a fleet lease) makes the result that hold's error, and a task timeout that fired
// first (e.timedOut) makes it ErrTaskTimeout, whatever fn returned (unless it panicked); a
// Goexit is Failed; otherwise nil is Completed, and an error is Cancelled once the caller's ctx
// (or its Future: cancelled) was cancelled, else Failed — the rules of Stats.
func (c *call) decide(e *ending, cancelled bool) {
	if e.fnErr == nil && c.x == nil && !e.timedOut { // fnErr is ErrGoexit for a Goexit, the panic for a panic
		return // the common call, holding nothing but its slot: Completed, nil — e's zero values
	}
	c.decideEach(e, cancelled)
}

// decideEach is decide, rule by rule.
func (c *call) decideEach(e *ending, cancelled bool) {
	switch err := e.fnErr; {
	case e.how == returned && c.lost() != nil:
		e.o, e.overrides, e.err = outFailed, true, c.lost()
	case e.how == returned && e.timedOut:
		e.o, e.overrides, e.err = outTimedOut, true, ErrTaskTimeout
	case e.how == goexited:
		e.o, e.overrides, e.err = outFailed, true, ErrGoexit
	case err == nil:
		e.o, e.err = outCompleted, nil
	case cancelled || c.ctx.Err() != nil:
		e.o, e.err = outCancelled, err
	default:
		e.o, e.err = outFailed, err
	}
}

// left returns the outcome and result of a call whose caller leaves while its task runs on: by
// Future.Cancel (cancelled: Cancelled, context.Canceled), or because the task's context tctx
// ended — the task timeout (TimedOut), a hold lost (a fleet lease: Failed, as a timeout would
// be), or the caller's ctx (Cancelled).
func (c *call) left(tctx context.Context, cancelled bool) (outcome, error) {
	switch {
	case cancelled:
		return outCancelled, context.Canceled
	case context.Cause(tctx) == ErrTaskTimeout:
		return outTimedOut, ErrTaskTimeout
	case c.lost() != nil:
		return outFailed, c.lost()
	}
	return outCancelled, ctxErr(c.ctx)
}

// An ending is how a call ended, for finish.
type ending struct {
	err       error       // the call's result
	fnErr     error       // what fn returned (ErrGoexit for a Goexit, the *PanicError for a panic)
	pe        *PanicError // a panic to count and record
	how       how
	o         outcome // its outcome, counted unless counted is set
	overrides bool    // the result is not what fn returned (nor fn's value the call's)
	counted   bool    // counted already: its caller left while fn ran, and the task overran
	timedOut  bool    // the task timeout fired before fn returned, for the adaptive limit
	take      bool    // on a task goroutine that may run the queued task its slot goes to
	mark      int64   // refused: the mark of the slot's token, with a rate (it goes back)
}

// finish is the one sequence that ends every call, once its outcome is chosen. It gives back what
// the steps took, in reverse, then the slot — and, for a call whose fn never started, its token
// — tells the adaptive limit how the task went, and then, the slot being free, counts the
// outcome (unless counted) and writes the call's records. With e.take it returns the queued task
// the slot went to, for this goroutine to run next.
func (c *call) finish(e *ending) (next runner) {
	l := c.l
	if c.x != nil {
		for i := len(c.x.holds) - 1; i >= 0; i-- {
			c.x.holds[i].give()
		}
		c.x.holds = nil
	}
	held := l.held()
	if c.slotted {
		if e.how == refused && l.rate != nil {
			l.rate.Return(e.mark) // fn never started: its token goes back
		}
		if e.take {
			next = l.releaseAndTake()
		} else {
			l.release()
		}
	}
	if e.how != refused && l.meter != nil {
		l.observe(c.ctx, c.mk, e.fnErr, e.timedOut, e.how != returned, held)
	}
	// The slot is free: the records about the call may be written now.
	if l.cfg.logger == nil && e.pe == nil {
		if !e.counted {
			l.tally(e.o)
		}
		return next
	}
	c.records(e)
	return next
}

// records counts e's outcome (unless counted) and panic, and writes their records: finish, for a
// call with something to record.
func (c *call) records(e *ending) {
	l := c.l
	t0, t1 := c.times()
	if e.pe != nil {
		l.recordPanic(c.ctx, e.pe, t0, t1)
	}
	switch {
	case !e.counted:
		l.record(c.ctx, e.o, e.err, t0, t1)
	case e.o == outTimedOut:
		l.recordTimeout(c.ctx, t0, t1) // the call was counted when its timeout fired
	}
}

// refuse finishes a call that will not start, with err, and returns err; mark is its slot's
// token's, if it got a slot.
func (c *call) refuse(err error, mark int64) error {
	c.finish(&ending{how: refused, err: err, o: refusal(err), mark: mark})
	return err
}

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
	// Two literals, not one shared: the one runHere gets does not escape and costs nothing.
	if l.cfg.taskTimeout > 0 {
		_, err := runTimed(ctx, l, func(ctx context.Context) (struct{}, error) { return struct{}{}, fn(ctx) })
		return err
	}
	_, err := runHere(ctx, l, func(ctx context.Context) (struct{}, error) { return struct{}{}, fn(ctx) })
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
		return runTimed(ctx, l, fn)
	}
	return runHere(ctx, l, fn)
}

// runTimed runs fn under the task timeout: the caller takes the slot and the steps here, as
// runHere does, and fn runs on a task goroutine, as a Submitted task's does, while the caller
// watches the task's context. It returns when fn does, when the timeout fires or when ctx ends
// (or a lease is lost); a task still running then overruns.
func runTimed[T any](ctx context.Context, l *Limiter, fn func(context.Context) (T, error)) (v T, err error) {
	f := &Future[T]{fn: fn}
	t := &f.t
	t.l, t.ctx = l, ctx
	t.begin()
	tctx, err := t.admitHere()
	if err != nil {
		return v, err
	}
	tctx = t.launch(tctx)
	go f.runLaunched(tctx)
	<-tctx.Done()            // the timeout, ctx, a lost lease — or the task's own end, once delivered
	t.onRunningDone(tctx)    // the caller leaves, unless the task has ended
	if !t.delivered.Load() { // it ended just as the caller woke: its end is on the way
		<-t.doneChan()
	}
	return f.val, t.err
}

// runHere is the place where fn runs on the caller's goroutine: Do and Call without a task
// timeout. It admits the call here, runs fn under the task's context (ctx, or what the steps made
// of it), and ends the call. Uncontended on a plain limiter it allocates nothing: the call lives
// on this stack.
func runHere[T any](ctx context.Context, l *Limiter, fn func(context.Context) (T, error)) (v T, err error) {
	c := call{l: l, ctx: ctx}
	c.begin()
	tctx, err := c.admitHere()
	if err != nil {
		return v, err
	}
	if registry.LabelsOn() { // with package inspect's Labels: loom.limiter, on this goroutine
		tctx, c.labelled = l.labels.Enter(tctx)
	}
	c.started()
	defer c.unwindHere(&err)
	v, err = fn(tctx)
	c.ran = true
	e := ending{how: returned, fnErr: err}
	c.decide(&e, false)
	c.finish(&e)
	if e.overrides {
		var zero T
		v, err = zero, e.err // a lost lease: whatever fn returned is not to be trusted
	}
	return v, err
}

// unwindHere is runHere's deferred function: it puts the caller's pprof labels back and, if fn
// did not return (recover tells a panic from runtime.Goexit), ends the call, setting the error
// the call returns.
func (c *call) unwindHere(err *error) {
	if c.labelled {
		registry.RestoreLabels(c.ctx) // back to the caller's, as pprof.Do does
	}
	if !c.ran {
		*err = c.abortHere(recover())
	}
}

// admitHere admits c on the caller's goroutine: a slot (and its token) from the FIFO queue, then
// the steps. It returns the task's context; or, for a call that will not start, ends it and
// returns why.
func (c *call) admitHere() (context.Context, error) {
	l := c.l
	var mark int64           // the slot's token's, with a rate: it goes back if the call does not start
	if c.ctx.Done() == nil { // the fast path of slotHere: a ctx that cannot end, a free slot
		c.slotted, mark = l.slots.TryAcquireMark(1)
	}
	if !c.slotted {
		var err error
		if mark, err = c.slotHere(); err != nil {
			return nil, c.refuse(err, 0)
		}
	}
	if len(l.steps) == 0 && !l.closed.Load() {
		return c.ctx, nil
	}
	tctx, err := c.admitRest(c.ctx)
	if err != nil {
		return nil, c.refuse(err, mark)
	}
	return tctx, nil
}

// abortHere ends a call whose fn, running on the caller's goroutine, panicked (r != nil) or
// called runtime.Goexit (r == nil; the goroutine goes on ending after us).
func (c *call) abortHere(r any) error {
	e := ending{how: goexited, fnErr: ErrGoexit}
	if r != nil {
		e.pe = &PanicError{Value: r, Stack: debug.Stack()}
		e.how, e.fnErr = panicked, e.pe
	}
	c.decide(&e, false)
	c.finish(&e)
	return e.err
}
