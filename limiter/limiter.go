package limiter

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goloom/loom/internal/registry"
	"github.com/goloom/loom/internal/sema"
	"github.com/goloom/loom/internal/window"
)

// A Limiter runs tasks with at most a fixed number of task bodies running at once. Create one
// with [New]. The zero value and a nil *Limiter are not usable: every method panics with
// "limiter: zero Limiter; use New". A Limiter is safe for concurrent use by multiple goroutines
// and must not be copied after first use.
type Limiter struct {
	// slots holds one permit per slot. It is fair, so Do, Call and Submit share one FIFO queue,
	// and a task goroutine that gives its slot back takes over the queued task the slot goes to
	// (sema's ReleaseAndTake) instead of starting a goroutine for it.
	slots sema.Sema
	rate  *tokens       // WithRate's tokens, the slots' gate; nil without a rate
	meter *window.Meter // WithAdaptive's windows, which move the slots' capacity; nil without
	cfg   config
	epoch time.Time // with stamp: the base of Futures' timestamps
	plain bool      // no logger, no fleet: the fast path of callHere
	stamp bool      // calls note when they begin: for the logger, or the fleet's share of the acquire timeout

	closed atomic.Bool // Shutdown has begun; set before slots is closed
	// closing is done once Shutdown has begun (cause ErrClosed): it ends the waits for the fleet,
	// as closing slots ends the waits for a slot. Made only for a limiter with a fleet.
	closing     context.Context
	closeAll    context.CancelCauseFunc
	waiting     atomic.Int64 // calls waiting for a slot; reserved before queueing, see reserve
	overrunning atomic.Int64 // tasks holding a slot after their call ended
	shutdown    sync.Once    // closes slots, once

	count  counters
	labels registry.LimiterLabels // loom.limiter = the name, for package inspect's Labels
}

// New returns a Limiter that runs at most limit task bodies at once, configured by opts. It
// panics if limit is below 1 (or above 1<<59).
func New(limit int, opts ...Option) *Limiter {
	if limit < 1 {
		panic(fmt.Sprintf("limiter: New: limit must be at least 1, got %d", limit))
	}
	if int64(limit) > sema.MaxPermits {
		panic(fmt.Sprintf("limiter: New: limit %d above the maximum %d", limit, int64(sema.MaxPermits)))
	}
	c := config{maxWaiting: -1, overload: defaultOverload} // every default, in one place
	for _, opt := range opts {
		opt(&c)
	}
	l := &Limiter{cfg: c}
	l.stamp = c.logger != nil || c.fleeted() && c.acquireTimed
	if l.stamp {
		l.epoch = time.Now()
	}
	l.slots.Init(int64(limit), true)
	if c.perSecond > 0 {
		l.rate = newTokens(c.perSecond, c.burst)
		l.slots.SetGate(l.rate)
	}
	if c.adaptive != nil {
		l.meter = window.New(c.adaptive, limit, &l.slots, window.Config{})
	}
	l.plain = c.logger == nil && !c.fleeted()
	if c.fleeted() {
		l.closing, l.closeAll = context.WithCancelCause(context.Background())
	}
	l.labels = registry.NewLimiterLabels(c.name)
	if c.name != "" {
		// A named limiter is listed for package inspect's dumps, through a weak pointer: the
		// registry never keeps it alive. Its waiters note when they queued, for the dump's
		// oldest wait.
		l.slots.StampWaiters()
		registry.AddLimiter(l, c.name, (*Limiter).inspectInfo)
	}
	return l
}

// inspectInfo is what a dump reads of the limiter. A method expression, so that the registry
// holds nothing that keeps l alive.
func (l *Limiter) inspectInfo() registry.LimiterInfo {
	return registry.LimiterInfo{Stats: l.Stats(), OldestWaiting: l.slots.OldestWaiting()}
}

// check panics for a Limiter that New did not make (the zero value, or nil) and for a nil ctx.
func (l *Limiter) check(ctx context.Context, op string) {
	if l == nil || !l.slots.Ready() {
		panic("limiter: zero Limiter; use New")
	}
	if ctx == nil {
		panic("limiter: " + op + ": nil context")
	}
}

// enter takes a slot for a call, or ends the call (counted and recorded) and returns why it got
// none. t0 is when the call began, when there is a logger. mark is the slot's token's, with a
// rate (see unused).
func (l *Limiter) enter(ctx context.Context, t0 time.Time) (mark int64, err error) {
	if done := ctx.Done(); done != nil {
		select {
		case <-done:
			err := ctxErr(ctx)
			l.end(ctx, outCancelled, err, t0, time.Time{})
			return 0, err
		default:
		}
	}
	if ok, mark := l.slots.TryAcquireMark(1); ok {
		return mark, l.admitted(ctx, t0)
	}
	return l.enterSlow(ctx, t0)
}

// admitted checks a call that has just got its slot against a Shutdown that began meanwhile. Its
// token is not given back: no call starts from now on.
func (l *Limiter) admitted(ctx context.Context, t0 time.Time) error {
	if !l.closed.Load() {
		return nil
	}
	l.release()
	l.end(ctx, outRejected, ErrClosed, t0, time.Time{})
	return ErrClosed
}

// unused gives back a slot, and its token (by its mark), that a call got but will not use.
func (l *Limiter) unused(mark int64) {
	if l.rate != nil {
		l.rate.Return(mark)
	}
	l.release()
}

// enterSlow is enter for a caller that has to wait.
func (l *Limiter) enterSlow(ctx context.Context, t0 time.Time) (mark int64, err error) {
	err = l.refusal(ctx)
	if err == nil {
		region := registry.StartWait(ctx) // a trace region "loom.limiter.wait", while a trace records
		mark, err = l.slots.AcquireMark(ctx, 1, l.cfg.acquireTimed, l.cfg.acquireTimeout)
		l.waiting.Add(-1)
		region.End()
		switch err {
		case nil:
			return mark, l.admitted(ctx, t0)
		case sema.ErrTimeout:
			err = ErrAcquireTimeout
		case ErrClosed:
		default: // ctx ended while we waited
			err = ctxErr(ctx)
			l.end(ctx, outCancelled, err, t0, time.Time{})
			return 0, err
		}
	}
	l.end(ctx, outRejected, err, t0, time.Time{})
	return 0, err
}

// refusal returns why a call that found no free slot (or token) may not wait for one — closed,
// an acquire timeout that allows no wait, a token that would come too late, no room among the
// waiting calls — or nil, with its place among the waiting calls reserved.
func (l *Limiter) refusal(ctx context.Context) error {
	switch {
	case l.closed.Load():
		return ErrClosed
	case l.cfg.acquireTimed && l.cfg.acquireTimeout <= 0:
		return ErrAcquireTimeout
	case l.tokenTooLate(ctx):
		return ErrAcquireTimeout
	case !l.reserve():
		return ErrTooManyWaiting
	}
	return nil
}

// tokenTooLate reports whether, with a rate, the token of a call that would queue now comes
// later than its acquire timeout or its ctx's deadline: every call queued ahead of it takes one
// first.
func (l *Limiter) tokenTooLate(ctx context.Context) bool {
	if l.rate == nil {
		return false
	}
	limit, bounded := l.bound(ctx, l.cfg.acquireTimeout)
	return bounded && l.rate.due(l.waiting.Load()+1) > limit
}

// bound returns how long a call may wait for a token: left of its acquire timeout, if it has
// one, and what is left of its ctx's deadline. bounded is false when neither bounds it.
func (l *Limiter) bound(ctx context.Context, left time.Duration) (wait time.Duration, bounded bool) {
	wait = time.Duration(math.MaxInt64)
	if l.cfg.acquireTimed {
		wait, bounded = left, true
	}
	if dl, ok := ctx.Deadline(); ok {
		wait, bounded = min(wait, time.Until(dl)), true
	}
	return wait, bounded
}

// reserve takes a place among the waiting calls, if WithMaxWaiting leaves one. The place is
// taken before the caller queues, so the bound holds however many callers race for it.
func (l *Limiter) reserve() bool {
	limit := int64(l.cfg.maxWaiting)
	if limit < 0 {
		l.waiting.Add(1)
		return true
	}
	for {
		n := l.waiting.Load()
		if n >= limit {
			return false
		}
		if l.waiting.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// release gives a slot back; once Shutdown has begun, the slots' Drained tells it when the last
// one is in.
func (l *Limiter) release() { l.slots.Release(1) }

// Shutdown closes the limiter and waits for its tasks. From the moment it is called, every new
// call and every call still waiting for a slot fails with [ErrClosed] (counted Rejected). It then
// waits until no task holds a slot, overrunning ones included, and returns nil; or, if ctx ends
// first, it returns ctx's error, wrapped with the number of tasks still running. Shutdown may be
// called again, concurrently too, to wait some more. It must not be called from a task of the
// limiter, which would wait for itself.
func (l *Limiter) Shutdown(ctx context.Context) error {
	l.check(ctx, "Shutdown")
	l.shutdown.Do(func() {
		// closed first: a call that gets a slot after this sees it (see admitted).
		l.closed.Store(true)
		l.slots.Close(ErrClosed)
		if l.closeAll != nil {
			l.closeAll(ErrClosed)
		}
	})
	drained := l.slots.Drained()
	select {
	case <-drained:
		return nil
	default:
	}
	select {
	case <-drained:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("limiter: shutdown: %d tasks still running: %w", l.inFlight(), ctxErr(ctx))
	}
}
