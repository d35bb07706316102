package fleet

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/goloom/loom/fleet/fleetdriver"
)

// A Permit is n permits of a [Semaphore], held as one lease until [Permit.Release]. While it is
// held, its Semaphore renews the lease; if the lease is lost, [Permit.Context] is cancelled with
// cause [ErrLeaseLost] and the work it guards must stop, as another process may hold the permits
// by then. The zero value is not usable. A Permit is safe for concurrent use.
type Permit struct {
	s        *Semaphore
	lease    fleetdriver.Lease // ID, N, Token fixed; Epoch guarded by s.mu
	degraded bool              // granted without a lease (it may have registered as one since)
	fromDegr bool              // holds N of the Semaphore's Degrade permits until it ends
	// forWaiter: granted to a waiter behind the head and held for it (see line.go), not yet
	// handed to it. Guarded by s.mu.
	forWaiter bool
	gaveDegr  atomic.Bool
	ctx       context.Context
	cancel    context.CancelCauseFunc
	// deadline is when the holder stops believing in its lease unless a renewal comes back: a
	// time before the grant (or the send time of the last successful renewal) plus the TTL, so
	// never later than the backend's expiry. Guarded by s.mu.
	deadline time.Time
}

func newPermit(s *Semaphore, lease fleetdriver.Lease, degraded bool) *Permit {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &Permit{s: s, lease: lease, degraded: degraded, ctx: ctx, cancel: cancel}
}

func (p *Permit) check(op string) {
	if p == nil || p.s == nil {
		panic("fleet: " + op + ": zero Permit; use Semaphore.Acquire")
	}
}

// end cancels the context of a permit that never became live, and gives back what it holds.
func (p *Permit) end(cause error) {
	p.cancel(cause)
	p.giveDegr()
}

// giveDegr gives back the Degrade permits the permit holds, once.
func (p *Permit) giveDegr() {
	if p.fromDegr && !p.gaveDegr.Swap(true) {
		p.s.degr.Release(p.lease.N)
	}
}

// Release gives the permits back: one round trip to the backend, bounded by a third of the lease
// TTL, which also grants them to the fleet's next waiter. If the backend cannot be told, Release
// returns all the same and the Semaphore retries in the background, with backoff, until the
// backend takes it, the lease has expired there anyway, or Close. It cancels the permit's
// context (cause context.Canceled). Release is idempotent, and after the lease was lost, or the
// Semaphore closed, it does nothing: no permit is ever given back twice.
func (p *Permit) Release() {
	p.check("Release")
	s := p.s
	s.mu.Lock()
	leased := s.leases[p.lease.ID] == p
	switch _, degraded := s.degraded[p]; {
	case leased:
		delete(s.leases, p.lease.ID)
		s.held -= p.lease.N
		s.leased -= p.lease.N
		s.leaseEndedLocked()
	case degraded:
		delete(s.degraded, p)
		s.held -= p.lease.N
	default:
		s.mu.Unlock()
		return
	}
	p.cancel(context.Canceled)
	s.count.released.Add(1)
	lease := p.lease
	s.mu.Unlock()
	p.giveDegr()
	if leased {
		if err := s.releaseNow([]fleetdriver.Lease{lease}); err != nil {
			s.retry([]fleetdriver.Lease{lease}, time.Now().Add(s.cfg.ttl))
		}
	}
}

// Context returns a context that is done once the permit is released (cause context.Canceled),
// lost (cause [ErrLeaseLost]) or released by [Semaphore.Close] (a cause matching ErrLeaseLost and
// [ErrClosed]). It carries no values and no deadline.
func (p *Permit) Context() context.Context {
	p.check("Context")
	return p.ctx
}

// WithContext returns a context derived from parent that is also cancelled, with the permit's
// cause, when the permit's context is done (above all when its lease is lost), and a function
// that stops it (call it when the work is over, before or after Release). It is what guarded work
// runs under: it carries parent's values and cancellation, and stops when the lease goes.
func (p *Permit) WithContext(parent context.Context) (context.Context, context.CancelFunc) {
	p.check("WithContext")
	if parent == nil {
		panic("fleet: WithContext: nil context")
	}
	ctx, cancel := context.WithCancelCause(parent)
	stop := context.AfterFunc(p.ctx, func() { cancel(context.Cause(p.ctx)) })
	return ctx, func() {
		stop()
		cancel(context.Canceled)
	}
}

// Token returns the permit's fencing token: strictly increasing, per name, across the fleet, in
// the order the backend granted the leases, also across a restart of the backend that lost its
// data. A resource the permit guards can refuse a request carrying a smaller token than one it has
// seen, which fences off a holder that lost its lease without knowing. A degraded permit has
// token 0.
func (p *Permit) Token() uint64 {
	p.check("Token")
	return p.lease.Token
}

// N returns the number of permits (the weight) this Permit holds.
func (p *Permit) N() int64 {
	p.check("N")
	return p.lease.N
}

// Degraded reports whether the permit was granted without a lease, while the backend was
// unreachable ([FailOpen] or [Degrade]): no fleet-wide bound covered it then. Once the backend
// answers again it registers there as a lease, whatever the capacity, so that new admissions
// wait for it; from then on it is renewed, and can be lost, like any lease.
func (p *Permit) Degraded() bool {
	p.check("Degraded")
	return p.degraded
}
