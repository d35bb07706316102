package fleet

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/goloom/loom/fleet/fleetdriver"
	"github.com/goloom/loom/internal/gcra"
)

// MaxRate is the highest rate, in tokens per second, that [NewRate] accepts.
const MaxRate = 1e6

// A Rate is one process's handle on a token bucket shared by every process of a fleet that uses
// the same backend and name: together they start at most burst calls at once and perSecond calls
// per second on average. The bucket is kept on the backend as one number (GCRA: the theoretical
// arrival time of the next token), on the backend's clock, so clients' clocks do not matter;
// each reservation is one round trip.
//
// A Rate takes no place in any queue: callers that need FIFO order among themselves (the
// limiter's queue) reserve from its head. Create one with [NewRate]; the zero value is not
// usable. A Rate is safe for concurrent use and needs no Close.
type Rate struct {
	b         Backend
	name      string
	perSecond float64
	burst     int64
	cfg       config
	health    health
	local     *localBucket // Degrade(n): this process's bucket while the backend is down

	reserved    atomic.Int64
	refused     atomic.Int64
	cancelled   atomic.Int64
	unavailable atomic.Int64
	degraded    atomic.Int64
	roundTrips  atomic.Int64
}

// RateStats is a snapshot of a Rate's counters, taken by [Rate.Stats].
type RateStats struct {
	Reserved    int64 // tokens reserved (on the backend, or locally while it was down)
	Refused     int64 // reservations not made because the token would have come too late
	Cancelled   int64 // reservations given back by Cancel before they came due
	Unavailable int64 // reservations that met an unreachable backend, whatever WhenUnavailable did then
	Degraded    int64 // reservations made without the backend (FailOpen or Degrade), also in Reserved
	RoundTrips  int64 // calls into the backend
}

// NewRate returns a Rate of perSecond tokens per second, in bursts of at most burst, shared
// through backend b by every Rate of the fleet with the same name (Rates and Semaphores have
// separate names: a Rate and a Semaphore may share one). [WhenUnavailable] and [WithLogger] apply
// as for a Semaphore: while the backend is unreachable, FailClosed fails reservations with an
// error matching [ErrUnavailable], FailOpen grants them all at once, and Degrade(n) gives this
// process a bucket of its own of n per second in bursts of n. [WithLease] has no meaning here.
// It panics on a nil backend, a bad name (as [New]), perSecond not in (0, [MaxRate]] or burst
// below 1.
func NewRate(b Backend, name string, perSecond float64, burst int, opts ...Option) *Rate {
	if b == nil {
		panic("fleet: NewRate: nil backend")
	}
	checkName("NewRate", name)
	if !(perSecond > 0 && perSecond <= MaxRate) { // also refuses NaN
		panic(fmt.Sprintf("fleet: NewRate: rate %v not in (0, %v] per second", perSecond, float64(MaxRate)))
	}
	if burst < 1 || int64(burst) > MaxCapacity {
		panic(fmt.Sprintf("fleet: NewRate: burst must be between 1 and %d, got %d", int64(MaxCapacity), burst))
	}
	c := defaults()
	for _, opt := range opts {
		if opt == nil {
			panic("fleet: NewRate: nil Option")
		}
		opt(&c)
	}
	r := &Rate{b: b, name: name, perSecond: perSecond, burst: int64(burst), cfg: c}
	r.health = health{what: "rate", name: name, mode: c.mode, logger: c.logger, probe: 500 * time.Millisecond}
	if c.mode.kind == degrade {
		r.local = newLocalBucket(c.mode.limit)
	}
	return r
}

func (r *Rate) check(op string) {
	if r == nil || r.b == nil {
		panic("fleet: " + op + ": zero Rate; use NewRate")
	}
}

// Name returns the name the Rate was made with.
func (r *Rate) Name() string { r.check("Name"); return r.name }

// PerSecond returns the rate, in tokens per second.
func (r *Rate) PerSecond() float64 { r.check("PerSecond"); return r.perSecond }

// Burst returns the bucket's size.
func (r *Rate) Burst() int { r.check("Burst"); return int(r.burst) }

// Reserve takes the next token of the fleet's bucket unless it would come more than maxWait from
// now (a negative maxWait takes it whenever it comes), in one round trip. It never waits for the
// token: the returned [Reservation] says when it comes ([Reservation.Delay], [Reservation.At]),
// and the caller waits until then, or gives the token back with [Reservation.Cancel] if it leaves
// first. If the token would come too late, nothing is taken: the Reservation is not OK, and its
// Delay says when the token would have come, so a caller whose deadline is nearer can give up at
// once.
//
// Reserve returns ctx's error if ctx is done, and, if the backend cannot be reached, what
// [WhenUnavailable] says (by default an error matching [ErrUnavailable]). If a reply is lost after
// the backend took a token, that token is spent: the fleet then starts fewer calls, never more.
func (r *Rate) Reserve(ctx context.Context, maxWait time.Duration) (*Reservation, error) {
	r.check("Reserve")
	if ctx == nil {
		panic("fleet: Reserve: nil context")
	}
	if ctx.Err() != nil {
		return nil, ctxErr(ctx)
	}
	if r.health.skip() {
		return r.fallback(maxWait, nil)
	}
	r.roundTrips.Add(1)
	rep, err := r.b.Reserve(ctx, fleetdriver.RateRequest{Name: r.name, PerSecond: r.perSecond, Burst: r.burst, MaxWait: maxWait})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctxErr(ctx)
		}
		r.health.failed(err)
		return r.fallback(maxWait, err)
	}
	r.health.ok()
	// The backend measured the delay from when it ran, which is before now: counting it from
	// now starts the call no earlier than the backend allows.
	res := &Reservation{r: r, ok: rep.OK, delay: rep.Delay, at: time.Now().Add(rep.Delay), mark: rep.Mark}
	r.count(res)
	return res, nil
}

func (r *Rate) count(res *Reservation) {
	if res.ok {
		r.reserved.Add(1)
		if res.degraded {
			r.degraded.Add(1)
		}
	} else {
		r.refused.Add(1)
	}
}

// Wait blocks until this process may start one call: it reserves a token that comes before ctx's
// deadline (any token, without one) and waits for it. If the token would come after the deadline,
// Wait returns an error matching [ErrTimeout] (and context.DeadlineExceeded) at once, having taken
// nothing. If ctx ends while it waits, the token goes back to the bucket and Wait returns ctx's
// error.
func (r *Rate) Wait(ctx context.Context) error {
	r.check("Wait")
	if ctx == nil {
		panic("fleet: Wait: nil context")
	}
	maxWait := time.Duration(-1)
	if dl, ok := ctx.Deadline(); ok {
		maxWait = max(time.Until(dl), 0)
	}
	res, err := r.Reserve(ctx, maxWait)
	if err != nil {
		return err
	}
	if !res.OK() {
		return fmt.Errorf("%w: the next token comes in %v, after the deadline", ErrTimeout, res.Delay())
	}
	d := time.Until(res.At())
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		res.Cancel()
		return ctxErr(ctx)
	}
}

// Allow takes a token if one is there now, in one round trip, and reports whether it did.
func (r *Rate) Allow(ctx context.Context) (bool, error) {
	r.check("Allow")
	res, err := r.Reserve(ctx, 0)
	if err != nil {
		return false, err
	}
	return res.OK(), nil
}

// Stats returns the Rate's counters; see [RateStats].
func (r *Rate) Stats() RateStats {
	r.check("Stats")
	return RateStats{
		Reserved:    r.reserved.Load(),
		Refused:     r.refused.Load(),
		Cancelled:   r.cancelled.Load(),
		Unavailable: r.unavailable.Load(),
		Degraded:    r.degraded.Load(),
		RoundTrips:  r.roundTrips.Load(),
	}
}

func (r *Rate) fallback(maxWait time.Duration, cause error) (*Reservation, error) {
	r.unavailable.Add(1)
	if cause == nil {
		cause = r.health.lastErr()
	}
	var res *Reservation
	switch r.cfg.mode.kind {
	case failOpen:
		res = &Reservation{r: r, ok: true, degraded: true, at: time.Now()}
	case degrade:
		res = r.local.reserve(maxWait)
		res.r = r
	default:
		return nil, unavailable(cause)
	}
	r.count(res)
	return res, nil
}

// A Reservation is a token of a [Rate], reserved by [Rate.Reserve]: the caller may start its call
// at [Reservation.At], or give the token back with [Reservation.Cancel]. The zero value is not
// usable. A Reservation is safe for concurrent use.
type Reservation struct {
	r        *Rate
	ok       bool
	delay    time.Duration
	at       time.Time
	mark     string
	degraded bool
	local    bool // from the Degrade bucket of this process
	done     atomic.Bool
}

func (v *Reservation) check(op string) {
	if v == nil || v.r == nil {
		panic("fleet: " + op + ": zero Reservation; use Rate.Reserve")
	}
}

// OK reports whether the token is reserved. It is false when the token would have come later
// than Reserve's maxWait; nothing was taken then.
func (v *Reservation) OK() bool { v.check("OK"); return v.ok }

// Delay returns how long after Reserve returned the token comes (or would have come, if not OK).
func (v *Reservation) Delay() time.Duration { v.check("Delay"); return v.delay }

// At returns when, on this process's clock, the call may start.
func (v *Reservation) At() time.Time { v.check("At"); return v.at }

// Degraded reports whether the token was reserved without the backend, while it was unreachable.
func (v *Reservation) Degraded() bool { v.check("Degraded"); return v.degraded }

// Cancel gives the token back to the bucket, if it is reserved and has not come due yet: as far
// as no later reservation was made on its strength, the bucket is as if it had never been asked
// (x/time/rate's Reservation.Cancel). It costs one round trip (bounded by a second; if the backend
// cannot be told, the token is spent), none when the token is already due. Cancel is idempotent.
func (v *Reservation) Cancel() {
	v.check("Cancel")
	if !v.ok || v.done.Swap(true) || !time.Now().Before(v.at) {
		return
	}
	r := v.r
	switch {
	case v.local:
		r.local.cancel(v.mark)
	case v.degraded: // FailOpen: nothing was taken
		return
	default:
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		r.roundTrips.Add(1)
		err := r.b.CancelReservation(ctx, fleetdriver.RateCancel{Name: r.name, PerSecond: r.perSecond, Burst: r.burst, Mark: v.mark})
		if err != nil {
			r.health.failed(err)
			return
		}
		r.health.ok()
	}
	r.cancelled.Add(1)
}

// localBucket is a process's own bucket, for Degrade(n) while the backend is down: n tokens a
// second in bursts of n, on internal/gcra's bucket.
type localBucket struct {
	base time.Time // its clock: time since base (monotonic)
	rate gcra.Rate
	b    gcra.Bucket
}

func newLocalBucket(n int64) *localBucket {
	return &localBucket{base: time.Now(), rate: gcra.NewRate(float64(n), n)}
}

func (l *localBucket) reserve(maxWait time.Duration) *Reservation {
	ok, d, mark := l.b.Reserve(l.rate, time.Since(l.base), maxWait)
	return &Reservation{ok: ok, delay: d, at: time.Now().Add(d), degraded: true, local: true,
		mark: strconv.FormatInt(mark, 10)}
}

func (l *localBucket) cancel(mark string) {
	if m, err := strconv.ParseInt(mark, 10, 64); err == nil {
		l.b.Cancel(l.rate, time.Since(l.base), m)
	}
}
