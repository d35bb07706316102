package limiter

import (
	"context"
	"math"
	"time"

	"github.com/goloom/loom/internal/registry"
	"github.com/goloom/loom/internal/sema"
)

// Admission is a list of steps, each with one way to take and one way to give back:
//
//	slot          the FIFO queue's permit (Do, Call and Submit in one order)   release
//	rate token    WithRate's, the queue's gate, taken with the slot            its mark goes back, if fn never started
//	fleet permit  WithFleet's lease (a step)                                   Permit.Release
//	fleet token   WithFleetRate's reservation (a step)                         nothing: it is spent once due
//
// The slot and its token are taken together in the queue, where a Submitted task waits without a
// goroutine; the steps after them are built once, by New, from the options, and are taken on the
// goroutine that will run the task. Every wait ends when Shutdown begins.

// A step is an admission step after the slot: it takes what a call needs before its task may
// start, and the call holds it until its task is done.
type step interface {
	// take waits for what the step grants, within w's bounds, and returns what the call holds
	// until its task is done (nil: nothing to give back) and the task's context: w.parent, or a
	// context derived from it that the step can end (a lease that is lost). It returns an error
	// matching ErrRejected for a refusal of its own (a wait that ran out, an unreachable backend),
	// or the error of w.ctx's end.
	take(w stepWait) (hold, context.Context, error)
	// describe tells a dump (package inspect) how the step was set up, one setting at a time.
	describe(add func(name, value string))
}

// A hold is what a step took for a call, held until the call's task is done.
type hold interface {
	// lost returns the error the call's result must be from the moment the hold is lost (a
	// fleet lease), whatever fn returns; nil while it holds. It is asked when fn has returned,
	// before give, and when the task's context ends while fn runs.
	lost() error
	// give gives it back, once: when the task is done, or will not start.
	give()
}

// stepWait is what bounds a step's wait.
type stepWait struct {
	ctx    context.Context // the caller's ctx, ended also when Shutdown begins: the wait ends with it
	parent context.Context // what the task's context derives from (ctx without Shutdown's end)
	left   time.Duration   // with timed: what the acquire timeout leaves, counted from the call's start
	timed  bool            // WithAcquireTimeout bounds the wait
}

// slotHere takes the call's slot on the caller's goroutine, waiting in the FIFO queue as far as
// the call's bounds allow, and returns its token's mark (with a rate); or returns why it got none.
func (c *call) slotHere() (mark int64, err error) {
	l, ctx := c.l, c.ctx
	if done := ctx.Done(); done != nil {
		select {
		case <-done:
			return 0, ctxErr(ctx) // a done ctx never gets a slot, even a free one
		default:
		}
	}
	if ok, mark := l.slots.TryAcquireMark(1); ok {
		c.slotted = true
		return mark, nil
	}
	if err := l.refusal(ctx); err != nil {
		return 0, err
	}
	region := registry.StartWait(ctx) // a trace region "loom.limiter.wait", while a trace records
	mark, err = l.slots.AcquireMark(ctx, 1, l.cfg.acquireTimed, l.cfg.acquireTimeout)
	region.End()
	if err != nil {
		return 0, l.queueErr(ctx, err)
	}
	c.slotted = true
	return mark, nil
}

// queueErr is the error of a call that got no slot from the queue: the queue's reason, or its
// ctx's end.
func (l *Limiter) queueErr(ctx context.Context, err error) error {
	switch err {
	case sema.ErrTimeout:
		return ErrAcquireTimeout
	case sema.ErrFull:
		return ErrTooManyWaiting
	case ErrClosed:
		return ErrClosed
	}
	return ctxErr(ctx) // ctx ended while it waited
}

// refusal returns why a call that found no free slot (or token) may not wait for one — closed,
// an acquire timeout that allows no wait, a token that would come too late — or nil. (No room
// among the waiting calls the queue says itself, under its lock: WithMaxWaiting holds exactly.)
func (l *Limiter) refusal(ctx context.Context) error {
	switch {
	case l.closed.Load():
		return ErrClosed
	case l.cfg.acquireTimed && l.cfg.acquireTimeout <= 0:
		return ErrAcquireTimeout
	case l.tokenTooLate(ctx):
		return ErrAcquireTimeout
	}
	return nil
}

// tokenTooLate reports whether, with a rate, the token of a call that would queue now comes
// later than its acquire timeout or its ctx's deadline: every call queued ahead of it takes one
// first. A token exactly at the deadline is in time.
func (l *Limiter) tokenTooLate(ctx context.Context) bool {
	if l.rate == nil {
		return false
	}
	limit, bounded := bound(ctx, l.cfg.acquireTimed, l.cfg.acquireTimeout)
	return bounded && l.rate.due(int64(l.slots.Waiting())+1) > limit
}

// bound returns how long a call may wait for a token: left of its acquire timeout, if it has one
// (timed), and what is left of its ctx's deadline. bounded is false when neither bounds it.
func bound(ctx context.Context, timed bool, left time.Duration) (wait time.Duration, bounded bool) {
	wait = time.Duration(math.MaxInt64)
	if timed {
		wait, bounded = left, true
	}
	if dl, ok := ctx.Deadline(); ok {
		wait, bounded = min(wait, time.Until(dl)), true
	}
	return wait, bounded
}

// release gives a slot back; once Shutdown has begun, the slots' Drained tells it when the last
// one is in.
func (l *Limiter) release() { l.slots.Release(1) }

// releaseAndTake gives the caller's slot back and returns the queued task the slot went to, if
// any, for the caller — a task goroutine whose task has returned — to run next: a goroutine start
// saved per task while the queue is long.
func (l *Limiter) releaseAndTake() runner {
	owner := l.slots.ReleaseAndTake(1)
	if owner == nil {
		return nil
	}
	return owner.(runner)
}
