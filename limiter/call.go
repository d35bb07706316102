package limiter

import (
	"context"
	"runtime/debug"
	"sync/atomic"
	"time"
)

// Call runs fn with a slot of l and returns what fn returned, as is. It waits for a slot, runs
// fn and handles its timeout, panics and Goexit exactly as [Limiter.Do] does; when fn does not
// run or its call ends first (rejection, ctx's end, task timeout) the value is T's zero value.
func Call[T any](ctx context.Context, l *Limiter, fn func(context.Context) (T, error)) (v T, err error) {
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
	var t0, t1 time.Time
	if l.cfg.logger != nil {
		t0 = time.Now()
	}
	count := l.count.pick() // one shard for the call: its two adds hit one cache line
	count.submitted.Add(1)
	if ctx.Done() != nil || !l.slots.TryAcquire(1) {
		if err := l.enter(ctx, t0); err != nil {
			return v, err
		}
	} else if l.closed.Load() {
		l.release()
		return v, l.reject(ctx, ErrClosed, t0)
	}
	if l.cfg.logger != nil {
		t1 = time.Now()
	}
	normal := false
	defer func() {
		if !normal {
			err = l.abortHere(ctx, recover(), t0, t1)
		}
	}()
	v, err = fn(ctx)
	normal = true
	l.release()
	if err == nil {
		count.completed.Add(1)
		return v, nil
	}
	count.add(failure(ctx, false))
	return v, err
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
	broken bool      // fn panicked or called runtime.Goexit; err says which
	t0, t1 time.Time // call and task start, with a logger
}

// callTimed runs fn under the task timeout: one timer (the context's) and one goroutine per call.
func callTimed[T any](ctx context.Context, l *Limiter, fn func(context.Context) (T, error)) (T, error) {
	var zero T
	c := &timedCall[T]{l: l, fn: fn}
	if l.cfg.logger != nil {
		c.t0 = time.Now()
	}
	l.count.pick().submitted.Add(1)
	if err := l.enter(ctx, c.t0); err != nil {
		return zero, err
	}
	if l.cfg.logger != nil {
		c.t1 = time.Now()
	}
	c.ctx, c.cancel = context.WithTimeoutCause(ctx, l.cfg.taskTimeout, ErrTaskTimeout)
	// The task's context ends when the timeout fires, when ctx ends, or when the task's
	// goroutine cancels it on its way out: one channel tells the caller all three.
	done := c.ctx.Done()
	go c.run()
	<-done
	if c.state.Load() == timedRunning {
		l.overrunning.Add(1) // before the task's goroutine can see it abandoned and take it back
		if c.state.CompareAndSwap(timedRunning, timedAbandoned) {
			if context.Cause(c.ctx) == ErrTaskTimeout {
				l.count.pick().timedOut.Add(1)
				l.logTimeout(ctx, c.t0, c.t1)
				return zero, ErrTaskTimeout
			}
			l.count.pick().cancelled.Add(1)
			return zero, ctxErr(ctx)
		}
		l.overrunning.Add(-1)
	}
	// fn is done, and its result is ours.
	switch {
	case !c.broken && context.Cause(c.ctx) == ErrTaskTimeout:
		// fn returned after its time was up, most likely because it was up: the timeout
		// stands, whatever fn returned.
		l.count.pick().timedOut.Add(1)
		l.logTimeout(ctx, c.t0, c.t1)
		return zero, ErrTaskTimeout
	case c.err == nil:
		l.count.pick().completed.Add(1)
		return c.val, nil
	default:
		l.count.pick().add(failure(ctx, false))
		return c.val, c.err
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
	c.val, c.err = c.fn(c.ctx)
	normal = true
}

// abort records a panic (r != nil) or a Goexit (r == nil) of fn.
func (c *timedCall[T]) abort(r any) {
	c.broken = true
	if r == nil {
		c.err = ErrGoexit
		return
	}
	pe := &PanicError{Value: r, Stack: debug.Stack()}
	c.err = pe
	c.l.count.pick().panicked.Add(1)
	c.l.logPanic(c.ctx, pe, c.t0, c.t1)
}

// exit gives the slot back and, if the caller still waits, hands it the result.
func (c *timedCall[T]) exit() {
	l := c.l
	if c.state.CompareAndSwap(timedRunning, timedFinished) {
		l.release()
		c.cancel() // wakes the caller, now that the slot is back
		return
	}
	c.cancel()
	l.overrunning.Add(-1)
	l.release()
}
