package limiter

import (
	"fmt"
	"time"

	"github.com/goloom/loom/internal/gcra"
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
// An outbound API that limits calls per minute takes WithRate(perMinute/60, burst). Any rate
// above zero and any burst behave as their numbers say: the bucket's sums saturate at the largest
// Duration (a rate of 1e-10 admits its burst and then nothing for centuries; a burst of 1e10
// admits at once), and its interval is kept to the nanosecond, rounded up (a rate above 1e9 runs
// at one call a nanosecond, +Inf never holds a call back). It panics unless perSecond > 0 (NaN is
// not) and burst ≥ 1.
func WithRate(perSecond float64, burst int) Option {
	if !(perSecond > 0) { // also refuses NaN
		panic(fmt.Sprintf("limiter: WithRate: perSecond must be above zero, got %v", perSecond))
	}
	if burst < 1 {
		panic(fmt.Sprintf("limiter: WithRate: burst must be at least 1, got %d", burst))
	}
	return func(c *config) { c.perSecond, c.burst = perSecond, burst }
}

// tokens is WithRate's bucket (package gcra's, on the monotonic clock since epoch: one clock read
// per pass) and the limiter's [sema.Gate]: the core asks it for the head of the queue, and for
// each fast-path acquire.
type tokens struct {
	b     gcra.Bucket
	r     gcra.Rate
	epoch time.Time
}

func newTokens(perSecond float64, burst int) *tokens {
	return &tokens{r: gcra.NewRate(perSecond, int64(burst)), epoch: time.Now()} // tat 0: the bucket starts full
}

func (t *tokens) now() time.Duration { return time.Since(t.epoch) }

// Pass takes a token if one is there now and returns 0 and its mark, or returns how long until
// one will be, taking nothing.
func (t *tokens) Pass() (time.Duration, int64) { return t.b.Take(t.r, t.now()) }

// Return gives back the token with this mark, which its call never used, as far as no later
// token depends on it (package gcra's rule, the fleet's too).
func (t *tokens) Return(mark int64) { t.b.Return(t.r, mark) }

// due returns how long, as things stand, until k more tokens have come: when the k-th call to
// ask from now could start.
func (t *tokens) due(k int64) time.Duration { return t.b.Due(t.r, t.now(), k) }
