package limiter

import (
	"fmt"
	"math"
	"sync/atomic"
	"time"
)

// WithRate lets at most perSecond calls start per second, in bursts of at most burst, besides the
// limit on calls running at once: a call starts only when it has a slot and a token of a token
// bucket that refills at perSecond, up to burst tokens.
//
// Slots and tokens are given out in the one FIFO order of the limiter's queue: a call waiting for
// a token holds back the calls behind it, Submits included, and a Submitted task waiting for a
// token costs no goroutine. A call whose token would come later than its acquire timeout
// ([WithAcquireTimeout]) or its ctx's deadline allows is rejected at once with
// [ErrAcquireTimeout] (counted Rejected), not after waiting for nothing. A token is taken only
// when the call starts, so a call that leaves while it waits (its ctx, [Future.Cancel],
// Shutdown) takes none, and one that gets its slot and token just as it leaves gives the token
// back. [Stats].RateWaiting shows the calls the rate is holding back.
//
// An outbound API that limits calls per minute takes WithRate(perMinute/60, burst). It panics
// unless perSecond is in (0, 1e9] and burst ≥ 1.
func WithRate(perSecond float64, burst int) Option {
	if !(perSecond > 0 && perSecond <= 1e9) { // also refuses NaN
		panic(fmt.Sprintf("limiter: WithRate: perSecond must be in (0, 1e9], got %v", perSecond))
	}
	if burst < 1 {
		panic(fmt.Sprintf("limiter: WithRate: burst must be at least 1, got %d", burst))
	}
	return func(c *config) { c.perSecond, c.burst = perSecond, burst }
}

// A bucket is a token bucket in the form of the generic cell rate algorithm: it keeps one number,
// tat, the time at which the bucket would be full again, and a call may pass at now if that
// leaves tat no more than burst intervals ahead of now. Times are nanoseconds of the monotonic
// clock since epoch (time.Since: one clock read per pass, no wall clock). It is the limiter's
// [sema.Gate]: the core asks it for the head of the queue, and for each fast-path acquire.
type bucket struct {
	tat       atomic.Int64
	interval  int64 // nanoseconds per token
	tolerance int64 // burst intervals
	epoch     time.Time
}

func newBucket(perSecond float64, burst int) *bucket {
	interval := int64(math.Round(1e9 / perSecond))
	b := &bucket{interval: interval, tolerance: int64(burst) * interval, epoch: time.Now()}
	return b // tat == 0 == epoch: the bucket starts full
}

func (b *bucket) now() int64 { return int64(time.Since(b.epoch)) }

// Pass takes a token if one is there now and returns 0, or returns how long until one will be,
// taking nothing.
func (b *bucket) Pass() time.Duration {
	now := b.now()
	for {
		tat := b.tat.Load()
		next := max(tat, now) + b.interval
		if wait := next - b.tolerance - now; wait > 0 {
			return time.Duration(wait)
		}
		if b.tat.CompareAndSwap(tat, next) {
			return 0
		}
	}
}

// Refund gives a token back, as x/time/rate's Reservation.Cancel does.
func (b *bucket) Refund() { b.tat.Add(-b.interval) }

// due returns how long, as things stand, until k more tokens have come: when the k-th call to
// ask from now could start.
func (b *bucket) due(k int64) time.Duration {
	now := b.now()
	return time.Duration(max(0, max(b.tat.Load(), now)+k*b.interval-b.tolerance-now))
}
