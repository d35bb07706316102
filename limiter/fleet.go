package limiter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/goloom/loom/fleet"
)

// WithFleet makes every call also hold one permit of sem, a limit shared by every process of a
// fleet (see package fleet), while its task runs. A call first takes a local slot (the local FIFO
// queue, the local limit, [WithMaxWaiting]), then a fleet permit, both within the acquire timeout
// ([WithAcquireTimeout], counted from the call's start); the permit is released when the task
// returns (a task that overruns its timeout keeps it until then).
//
// The task's context is also cancelled, with cause [fleet.ErrLeaseLost], if the permit's lease is
// lost (the backend could not be reached to renew it): another process may hold the permit by
// then. From that moment the call's result is an error matching fleet.ErrLeaseLost (unless fn
// panicked), counted Failed, as with a task timeout. When the backend is unreachable, the call
// gets what sem's [fleet.WhenUnavailable] says: by default an error matching both
// [fleet.ErrUnavailable] and [ErrRejected], counted Rejected. Stats stay conserved.
//
// It panics if sem is nil.
func WithFleet(sem *fleet.Semaphore) Option {
	if sem == nil {
		panic("limiter: WithFleet: nil Semaphore")
	}
	return func(c *config) { c.fleet = sem }
}

// WithFleetRate makes every call also take a token of r, a token bucket shared by every process
// of a fleet, when it starts: after its local slot (and its fleet permit, with [WithFleet]), in
// one round trip to the backend. A call whose token would come later than its acquire timeout or
// its ctx's deadline allows is rejected at once with [ErrAcquireTimeout]; one that leaves while it
// waits for its token gives it back. When the backend is unreachable, r's
// [fleet.WhenUnavailable] decides, as for WithFleet. It panics if r is nil.
func WithFleetRate(r *fleet.Rate) Option {
	if r == nil {
		panic("limiter: WithFleetRate: nil Rate")
	}
	return func(c *config) { c.fleetRate = r }
}

// fleetEnter takes what the fleet must grant a call that holds its local slot: a permit of
// WithFleet, then a token of WithFleetRate. t0 is when the call began (the acquire timeout
// counts from there). On success it returns the context the task runs under — ctx, cancelled
// with the permit's cause if the lease is lost — and leave, which gives the permit back once the
// task has returned. On failure it returns the call's outcome and error; the caller gives the
// local slot back and ends the call.
func (l *Limiter) fleetEnter(ctx context.Context, t0 time.Time) (tctx context.Context, le *lease, o outcome, err error) {
	// The waits end when ctx does and when Shutdown begins, as a wait for a local slot does.
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer context.AfterFunc(l.closing, func() { cancel(ErrClosed) })()
	tctx = ctx
	if sem := l.cfg.fleet; sem != nil {
		// Only the acquire timeout bounds this wait: ctx's deadline ends it through ctx, as
		// Cancelled — a second timer for the deadline would race ctx's own.
		var p *fleet.Permit
		if l.cfg.acquireTimed {
			p, err = sem.AcquireTimeout(wctx, 1, l.acquireLeft(t0))
		} else {
			p, err = sem.Acquire(wctx, 1)
		}
		if err != nil {
			o, err := l.fleetRefusal(ctx, err)
			return nil, nil, o, err
		}
		le = &lease{p: p}
		tctx, le.stop = p.WithContext(ctx)
	}
	if r := l.cfg.fleetRate; r != nil {
		if err := l.fleetToken(wctx, r, t0); err != nil {
			le.leave()
			o, err := l.fleetRefusal(ctx, err)
			return nil, nil, o, err
		}
	}
	if l.closed.Load() { // Shutdown began as the fleet admitted the call: no fn starts now
		le.leave()
		return nil, nil, outRejected, ErrClosed
	}
	return tctx, le, outCompleted, nil
}

// A lease is a call's fleet permit, while its task runs; nil without WithFleet.
type lease struct {
	p    *fleet.Permit
	stop context.CancelFunc // stops the task's context's watch of the permit's
}

// lost returns the error a call ends with once its lease is lost: the permit's own cause, which
// matches fleet.ErrLeaseLost; nil while the lease holds (or without one). It asks the permit,
// not the task's context, which hears of the loss later, on another goroutine.
func (le *lease) lost() error {
	if le == nil {
		return nil
	}
	if cause := context.Cause(le.p.Context()); errors.Is(cause, fleet.ErrLeaseLost) {
		return cause
	}
	return nil
}

// leave gives the permit back once the task has returned, and returns what lost said just
// before: Release cancels the permit's context with context.Canceled, so the verdict is read
// first.
func (le *lease) leave() (lost error) {
	if le == nil {
		return nil
	}
	lost = le.lost()
	le.stop()
	le.p.Release()
	return lost
}

// fleetToken reserves a token of r and waits until it comes, within what the acquire timeout
// and ctx's deadline leave; a token that would come later is not taken (fleet.ErrTimeout: the
// call is rejected at once, as WithRate's), and one whose wait is cut short by ctx is given back.
func (l *Limiter) fleetToken(ctx context.Context, r *fleet.Rate, t0 time.Time) error {
	var left time.Duration
	if l.cfg.acquireTimed {
		left = l.acquireLeft(t0)
	}
	maxWait, bounded := l.bound(ctx, left)
	if !bounded {
		maxWait = -1 // whenever it comes
	}
	res, err := r.Reserve(ctx, maxWait)
	if err != nil {
		return err
	}
	if !res.OK() {
		return fleet.ErrTimeout
	}
	if d := res.Delay(); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			res.Cancel()
			return ctxErr(ctx)
		}
	}
	return nil
}

// acquireLeft returns what is left of the acquire timeout of a call that began at t0.
func (l *Limiter) acquireLeft(t0 time.Time) time.Duration {
	return max(0, l.cfg.acquireTimeout-time.Since(t0))
}

// fleetRefusal is the outcome and error of a call the fleet did not admit: Shutdown's start is
// ErrClosed and its ctx's end Cancelled, as for a wait for a local slot; anything else — the wait
// ran out, the backend is unreachable, the Semaphore is closed — is Rejected, with an error that
// matches ErrRejected and the fleet's own error.
func (l *Limiter) fleetRefusal(ctx context.Context, err error) (outcome, error) {
	switch {
	case l.closed.Load():
		return outRejected, ErrClosed
	case ctx.Err() != nil:
		return outCancelled, ctxErr(ctx)
	case errors.Is(err, fleet.ErrTimeout):
		return outRejected, ErrAcquireTimeout
	}
	return outRejected, fmt.Errorf("%w: %w", ErrRejected, err)
}
