package fleet

import (
	"context"
	"time"
)

// A Permit is n permits of a [Semaphore], held as one lease until [Permit.Release]. While it is
// held, its Semaphore renews the lease; if the lease is lost, [Permit.Context] is cancelled with
// cause [ErrLeaseLost] and the work it guards must stop, as another process may hold the permits
// by then. The zero value is not usable. A Permit is safe for concurrent use.
type Permit struct {
	s        *Semaphore
	lease    Lease // ID, N, Token fixed; Epoch guarded by s.mu
	degraded bool
	ctx      context.Context
	cancel   context.CancelCauseFunc
	// deadline is when the holder stops believing in its lease unless a renewal comes back:
	// the send time of the last successful renewal (or of the grant) plus the TTL, so never later
	// than the backend's expiry. Guarded by s.mu.
	deadline time.Time
}

func newPermit(s *Semaphore, lease Lease, degraded bool) *Permit {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &Permit{s: s, lease: lease, degraded: degraded, ctx: ctx, cancel: cancel}
}

func (p *Permit) check(op string) {
	if p == nil || p.s == nil {
		panic("fleet: " + op + ": zero Permit; use Semaphore.Acquire")
	}
}

// Release gives the permits back: one round trip to the backend, bounded by a third of the lease
// TTL (if the backend cannot be told, the lease expires on its own within one TTL). It cancels
// the permit's context (cause context.Canceled). Release is idempotent, and after the lease was
// lost, or the Semaphore closed, it does nothing: no permit is ever given back twice.
func (p *Permit) Release() {
	p.check("Release")
	s := p.s
	if p.degraded {
		s.releaseDegraded(p)
		return
	}
	s.mu.Lock()
	if s.leases[p.lease.ID] != p {
		s.mu.Unlock()
		return
	}
	delete(s.leases, p.lease.ID)
	s.held -= p.lease.N
	p.cancel(context.Canceled)
	s.count.released.Add(1)
	lease := p.lease
	s.mu.Unlock()
	s.releaseNow([]Lease{lease})
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
// unreachable ([FailOpen] or [Degrade]): no fleet-wide bound covers it, and it is never lost.
func (p *Permit) Degraded() bool {
	p.check("Degraded")
	return p.degraded
}

func (s *Semaphore) releaseDegraded(p *Permit) {
	s.mu.Lock()
	if _, ok := s.degraded[p]; !ok {
		s.mu.Unlock()
		return
	}
	delete(s.degraded, p)
	s.held -= p.lease.N
	p.cancel(context.Canceled)
	s.count.released.Add(1)
	s.mu.Unlock()
	if s.degr != nil {
		s.degr.Release(p.lease.N)
	}
}
