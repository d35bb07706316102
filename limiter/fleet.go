package limiter

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/goloom/loom/fleet"
)

// The fleet's two admission steps. They are reached only through the steps New builds from these
// options, so a program that uses neither links none of package fleet's code.

// WithFleet makes every call also hold one permit of sem, a limit shared by every process of a
// fleet (see package fleet), while its task runs. A call first takes a local slot (the local FIFO
// queue, the local limit, [WithMaxWaiting]), then a fleet permit, both within the acquire timeout
// ([WithAcquireTimeout], counted from the call's start); the permit is released when the task
// returns (a task that overruns its timeout keeps it until then). Only the acquire timeout ends
// the wait for the permit as a rejection: the end of the call's ctx (its deadline too) ends it as
// Cancelled, and [Limiter.Shutdown] ends it with [ErrClosed].
//
// The task's context is also cancelled, with cause [fleet.ErrLeaseLost], if the permit's lease is
// lost (the backend could not be reached to renew it): another process may hold the permit by
// then. A call whose lease was lost before fn returned ends with an error matching
// fleet.ErrLeaseLost (unless fn panicked), counted Failed, whatever fn returned: the permit
// itself is asked, not the task's context. When the backend is unreachable, the call gets what
// sem's [fleet.WhenUnavailable] says: by default an error matching both [fleet.ErrUnavailable]
// and [ErrRejected], counted Rejected. Stats stay conserved.
//
// It panics if sem is nil.
func WithFleet(sem *fleet.Semaphore) Option {
	if sem == nil {
		panic("limiter: WithFleet: nil Semaphore")
	}
	return func(c *config) { c.permit = fleetPermit{sem} }
}

// WithFleetRate makes every call also take a token of r, a token bucket shared by every process
// of a fleet, when it starts: after its local slot (and its fleet permit, with [WithFleet]), in
// one round trip to the backend. A call whose token would come later than its acquire timeout or
// its ctx's deadline allows is rejected at once with [ErrAcquireTimeout]; one that leaves while it
// waits for its token (its ctx, [Future.Cancel], [Limiter.Shutdown]) gives it back. When the
// backend is unreachable, r's [fleet.WhenUnavailable] decides, as for WithFleet. It panics if r
// is nil.
func WithFleetRate(r *fleet.Rate) Option {
	if r == nil {
		panic("limiter: WithFleetRate: nil Rate")
	}
	return func(c *config) { c.token = fleetToken{r} }
}

// fleetPermit is WithFleet's step: a permit of sem, held as a lease while the task runs.
type fleetPermit struct{ sem *fleet.Semaphore }

func (s fleetPermit) take(w stepWait) (hold, context.Context, error) {
	// Only the acquire timeout bounds this wait: ctx's deadline ends it through ctx, as
	// Cancelled — a second timer for the deadline would race ctx's own.
	var p *fleet.Permit
	var err error
	if w.timed {
		p, err = s.sem.AcquireTimeout(w.ctx, 1, w.left)
	} else {
		p, err = s.sem.Acquire(w.ctx, 1)
	}
	if err != nil {
		return nil, nil, fleetRefusal(w.ctx, err)
	}
	le := &lease{p: p}
	tctx, stop := p.WithContext(w.parent)
	le.stop = stop
	return le, tctx, nil
}

func (s fleetPermit) describe(add func(name, value string)) {
	add("fleet", s.sem.Name())
	add("fleetCapacity", strconv.FormatInt(s.sem.Capacity(), 10))
}

// A lease is a call's fleet permit, while its task runs.
type lease struct {
	p    *fleet.Permit
	stop context.CancelFunc // stops the task's context's watch of the permit's
}

// lost returns the permit's own cause once its lease is lost (it matches fleet.ErrLeaseLost);
// nil while the lease holds. The permit is asked, not the task's context, which hears of the loss
// later, on another goroutine.
func (le *lease) lost() error {
	if cause := context.Cause(le.p.Context()); errors.Is(cause, fleet.ErrLeaseLost) {
		return cause
	}
	return nil
}

// give gives the permit back (Release cancels its context with context.Canceled: lost is asked
// before).
func (le *lease) give() {
	le.stop()
	le.p.Release()
}

// fleetToken is WithFleetRate's step: a token of r, reserved in one round trip and waited for.
type fleetToken struct{ r *fleet.Rate }

// take reserves a token of r and waits until it comes, within what the acquire timeout and the
// ctx's deadline leave; a token that would come later is not taken (the call is rejected at once,
// as WithRate's), and one whose wait is cut short is given back. Once it has come it is spent:
// nothing to hold.
func (s fleetToken) take(w stepWait) (hold, context.Context, error) {
	maxWait, bounded := bound(w.ctx, w.timed, w.left)
	if bounded {
		maxWait = max(0, maxWait) // a deadline already past: only a token there now
	} else {
		maxWait = -1 // whenever it comes
	}
	res, err := s.r.Reserve(w.ctx, maxWait)
	if err != nil {
		return nil, nil, fleetRefusal(w.ctx, err)
	}
	if !res.OK() {
		return nil, nil, ErrAcquireTimeout
	}
	if d := res.Delay(); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-w.ctx.Done():
			res.Cancel()
			return nil, nil, ctxErr(w.ctx)
		}
	}
	return nil, w.parent, nil
}

func (s fleetToken) describe(add func(name, value string)) {
	add("fleetRate", s.r.Name()+" "+strconv.FormatFloat(s.r.PerSecond(), 'g', 4, 64)+"/s, burst "+strconv.Itoa(s.r.Burst()))
}

// fleetRefusal is the error of a call the fleet did not admit: its wait's end (ctx, Shutdown)
// as is; the wait running out, ErrAcquireTimeout; anything else — the backend unreachable, the
// Semaphore closed — an error that matches ErrRejected and the fleet's own error.
func fleetRefusal(ctx context.Context, err error) error {
	switch {
	case ctx.Err() != nil:
		return ctxErr(ctx)
	case errors.Is(err, fleet.ErrTimeout):
		return ErrAcquireTimeout
	}
	return fmt.Errorf("%w: %w", ErrRejected, err)
}
