// Package gcra is the one token bucket behind loom's rate limits: limiter.WithRate's bucket, and
// fleet's in-process buckets (the Memory backend's, and a Rate's own while its backend is down).
// The Redis backend runs the same arithmetic in its script.
//
// The bucket is kept as the generic cell rate algorithm (GCRA): one number, tat, the theoretical
// arrival time of the next token beyond a full bucket. A token comes every interval T, and the
// bucket holds burst B of them, so tat may run at most τ = (B−1)·T ahead of now before a request
// has to wait. A request at now takes the token that comes at max(tat, now) − τ, and moves tat on
// by T; a bucket whose tat lies in the past is full, so a new bucket (tat 0) starts full.
//
// Three rules are kept here once, for every caller:
//
//   - Saturation. Every interval and sum computed from a rate saturates at the largest Duration
//     (about 292 years), so any rate above zero and any burst of at least one behave as their
//     numbers say, and never overflow: WithRate(1e-10, 1) admits one call and then none for
//     centuries, WithRate(1, 1e10) admits its first call at once. A sum that saturates errs on
//     the side of fewer tokens, never more: a bucket whose tat saturated gives out no token
//     before the end of time.
//   - Giving back. A reservation gives back only what no later reservation depends on: a later
//     reservation was told its time assuming this one, so only the part of the interval beyond
//     every later mark comes back ([Bucket.Return]). A reservation whose time has come may have
//     been acted on, so cancelling it gives nothing back ([Bucket.Cancel]).
//   - Time. The bucket has no clock: every call passes now, in nanoseconds on the caller's clock
//     (monotonic time since some base, or a backend's clock), never below zero and never going
//     backwards for one bucket.
//
// A [Bucket] is safe for concurrent use: each call is one compare-and-swap loop on tat.
package gcra

import (
	"fmt"
	"math"
	"sync/atomic"
	"time"
)

// Forever is the largest Duration, where every interval and sum of this package saturates.
const Forever = time.Duration(math.MaxInt64)

// A Rate is a bucket's parameters: the interval between tokens and the tolerance τ, computed once
// by [NewRate] and saturated. The zero Rate lets everything through: an interval of 0 is an
// unbounded rate. Rates are values: callers that get a bucket's parameters with each request
// (a fleet backend, where processes in a rollout may differ) make one per request.
type Rate struct {
	interval int64 // nanoseconds per token; 0: tokens are free; the largest int64: they never come back
	tau      int64 // (burst−1)·interval: how far tat may run ahead of now
	window   int64 // burst·interval = tau + interval: how far a reservation's mark runs ahead of its token
	burst    int64
}

// NewRate returns the Rate of perSecond tokens a second in bursts of at most burst. The interval
// is rounded up to a whole nanosecond, so the bucket never gives out more than perSecond a
// second: rates above 1e9 a second run at one token a nanosecond, and an infinite rate never
// holds anyone back. It panics unless perSecond > 0 (NaN is not) and burst ≥ 1.
func NewRate(perSecond float64, burst int64) Rate {
	if !(perSecond > 0) {
		panic(fmt.Sprintf("gcra: NewRate: rate must be above zero, got %v", perSecond))
	}
	if burst < 1 {
		panic(fmt.Sprintf("gcra: NewRate: burst must be at least 1, got %d", burst))
	}
	var interval int64
	switch ns := math.Ceil(1e9 / perSecond); {
	case math.IsInf(perSecond, 1):
		interval = 0
	case ns >= math.MaxInt64: // also +Inf, for a rate too small to divide by
		interval = math.MaxInt64
	default:
		interval = max(int64(ns), 1)
	}
	tau := mulSat(burst-1, interval)
	return Rate{interval: interval, tau: tau, window: addSat(tau, interval), burst: burst}
}

// never reports whether the interval saturated: a token taken never comes back within the
// largest Duration. The bucket then holds burst tokens and counts them (see [Bucket]).
func (r Rate) never() bool { return r.interval == math.MaxInt64 }

// Interval returns the time between two tokens: 0 for an unbounded rate, [Forever] when
// saturated.
func (r Rate) Interval() time.Duration { return time.Duration(r.interval) }

// Tolerance returns τ, how far ahead of now the bucket's tat may run before a request waits:
// (burst−1) intervals, saturated at [Forever].
func (r Rate) Tolerance() time.Duration { return time.Duration(r.tau) }

// A Bucket is the state of one token bucket: tat, in nanoseconds on its caller's clock. The zero
// Bucket is full at every now ≥ 0. Its parameters are passed with each call, as a [Rate].
//
// With a Rate whose interval saturated (fewer than one token per 292 years), a token taken
// never comes back within any Duration, and tat — which would run past the largest Duration at
// the first token of a burst — counts the tokens taken instead, so that the burst is still given
// out whole: such a Rate and a finite one must not share a Bucket.
type Bucket struct {
	tat atomic.Int64
}

// Reserve takes the next token unless it would come more than maxWait after now (a negative
// maxWait takes it whenever it comes). It returns whether it took it, how long after now the
// token comes (when it would have, if not ok), and the reservation's mark: tat after it, which
// [Bucket.Cancel] and [Bucket.Return] need to tell which part of the bucket is this
// reservation's. A refused reservation takes nothing.
func (b *Bucket) Reserve(r Rate, now, maxWait time.Duration) (ok bool, delay time.Duration, mark int64) {
	if r.never() {
		return b.reserveCounted(r, maxWait)
	}
	t := int64(now)
	for {
		tat := b.tat.Load()
		base := max(tat, t)
		delay = wait(tat, base-t, r)
		if maxWait >= 0 && delay > maxWait {
			return false, delay, 0
		}
		next := addSat(base, r.interval)
		if b.tat.CompareAndSwap(tat, next) {
			return true, delay, next
		}
	}
}

// reserveCounted is Reserve for a Rate whose tokens never come back: tat counts the tokens
// taken, and a mark is the count after its reservation.
func (b *Bucket) reserveCounted(r Rate, maxWait time.Duration) (ok bool, delay time.Duration, mark int64) {
	for {
		taken := b.tat.Load()
		if taken >= r.burst {
			delay = Forever
		}
		if maxWait >= 0 && delay > maxWait {
			return false, delay, 0
		}
		if b.tat.CompareAndSwap(taken, addSat(taken, 1)) {
			return true, delay, addSat(taken, 1)
		}
	}
}

// Take takes a token if one is there at now and returns 0 and its mark, or returns how long
// until one will be, taking nothing: Reserve with a maxWait of 0, written out for the limiter's
// gate, which asks on every call.
func (b *Bucket) Take(r Rate, now time.Duration) (time.Duration, int64) {
	if r.never() {
		ok, delay, mark := b.reserveCounted(r, 0)
		if !ok {
			return delay, 0
		}
		return 0, mark
	}
	t := int64(now)
	for {
		tat := b.tat.Load()
		base := max(tat, t)
		if d := wait(tat, base-t, r); d > 0 {
			return d, 0
		}
		next := addSat(base, r.interval)
		if b.tat.CompareAndSwap(tat, next) {
			return 0, next
		}
	}
}

// Return gives back the token of the reservation with this mark, one its holder never used, as
// far as no later reservation depends on it: a later reservation was told its time assuming this
// one, so only the part of the interval beyond every later mark comes back. With nothing reserved
// since, the bucket is as if the reservation had never been made. A mark that saturated gives
// nothing back (what it stands for is not known). Return must be called at most once per
// reservation. It reports whether anything came back.
func (b *Bucket) Return(r Rate, mark int64) bool {
	if mark == math.MaxInt64 || r.interval == 0 {
		return false
	}
	for {
		tat := b.tat.Load()
		if r.never() { // tat counts the tokens taken: only the latest comes back
			if tat != mark {
				return false
			}
			if b.tat.CompareAndSwap(tat, tat-1) {
				return true
			}
			continue
		}
		restore := r.interval
		if tat > mark {
			restore -= tat - mark // both ≥ 0: no overflow
		}
		if restore <= 0 {
			return false
		}
		if b.tat.CompareAndSwap(tat, tat-restore) {
			return true
		}
	}
}

// Cancel gives back the token of the reservation with this mark, as of now: nothing if the
// token's time has come by now — its holder may have acted on it — else what [Bucket.Return]
// gives back. This is x/time/rate's Reservation.Cancel, and fleet's. It must be called at most
// once per reservation. It reports whether anything came back.
func (b *Bucket) Cancel(r Rate, now time.Duration, mark int64) bool {
	switch {
	case r.never() && mark <= r.burst: // one of the burst, due at once
		return false
	case !r.never() && int64(now) >= mark-r.window: // mark ≥ 0 and window ≥ 0: no overflow
		return false
	}
	return b.Return(r, mark)
}

// Due returns how long after now, as things stand, the k-th token from now comes (k ≥ 1; 0 if
// it is there now): when the k-th of k requests made at now would start. Nothing is taken.
func (b *Bucket) Due(r Rate, now time.Duration, k int64) time.Duration {
	if k < 1 {
		return 0
	}
	if r.never() {
		if addSat(b.tat.Load(), k) <= r.burst {
			return 0
		}
		return Forever
	}
	t := int64(now)
	tat := b.tat.Load()
	return wait(tat, addSat(max(tat, t)-t, mulSat(k-1, r.interval)), r)
}

// wait is how long until a token whose place lies ahead tokens' time beyond now comes, with the
// bucket's tat as it is. A saturated tat has lost count of the tokens taken: nothing comes before
// the end of time then, which errs on the side of fewer tokens.
func wait(tat, ahead int64, r Rate) time.Duration {
	if tat == math.MaxInt64 {
		return Forever
	}
	return time.Duration(max(ahead-r.tau, 0)) // ahead ≥ 0: no overflow
}

// addSat is a+b for a, b ≥ 0, saturated at the largest int64.
func addSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// mulSat is a·b for a, b ≥ 0, saturated at the largest int64.
func mulSat(a, b int64) int64 {
	if a == 0 || b == 0 {
		return 0
	}
	if a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}
