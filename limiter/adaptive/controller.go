package adaptive

import (
	"fmt"
	"math"
	"time"
)

// A Controller decides a limiter's next limit from one window of its calls. A limiter calls
// Update once per window, when the call that closes the window ends, with the window's summary,
// and applies the limit Update returns (one at least: a smaller value counts as 1). Update is
// never called concurrently by one limiter, so a controller used by one limiter needs no lock;
// it must not block, since the call that closed the window waits for it.
//
// A Controller that keeps state between windows should also be a [Starter], so that each
// limiter gets state of its own; one that is not is used as is, and must then be given to one
// limiter only, or be safe for concurrent use.
type Controller interface {
	Update(w Window) int
}

// A Starter is a [Controller] that keeps state between windows. A limiter calls Start once,
// when it is created, with its starting limit, and then calls Update only on the Controller
// that Start returned, so one Starter value may configure many limiters. Start is where a
// Starter checks its configuration: it panics, on the caller's goroutine, if that is invalid.
type Starter interface {
	Controller
	Start(limit int) Controller
}

// A Bounded controller keeps the limit within [Min, Max]. A limiter clamps its starting limit
// into them before it starts the controller (see [Starter]), so that it never runs more calls at
// once than Max allows, nor fewer than Min, even before the first window closes. Bounds returns
// the bounds with their defaults applied, and panics, as Start does, if they are invalid.
// [AIMD], [Vegas] and [Gradient] are Bounded.
type Bounded interface {
	Bounds() (min, max int)
}

// A Window summarizes the calls that ended since the previous window closed. A limiter closes
// a window when a sampled call ends and finds it at least 100 ms old (and as old as the last
// window's median RTT) with at least 32 samples (drops included; at small limits one per slot,
// at least 8), one of them a call that was not a drop; or a second old with at least one. A call's RTT runs from when its task started (the wait for a slot is not RTT) to when it
// returned. The zero Window carries no information; the built-ins leave the limit as it is on
// one whose Limit is in their bounds.
type Window struct {
	Limit       int           // the limit in force during the window
	Duration    time.Duration // from the window's start to the call that closed it
	Calls       int           // calls that ended in the window, estimated from the sampled ones
	Samples     int           // RTT samples: sampled calls that ended without a drop
	Drops       int           // calls that ended in a drop (every call counts, not only sampled ones)
	DropShare   float64       // of the sampled calls' running time, the share spent in drops: 0 to 1
	MaxInFlight int           // the most calls in flight at once, as the calls ending in the window saw it
	MinRTT      time.Duration // the fastest sample
	P50         time.Duration // the median sample
	P90         time.Duration // the 90th percentile sample
}

// Full reports whether the limit was reached during the window (MaxInFlight >= Limit, and at
// least one call in flight): only then do the calls say anything about a higher limit. A
// window that is not full is app-limited: the callers, not the limit, held concurrency down.
func (w Window) Full() bool { return w.MaxInFlight > 0 && w.MaxInFlight >= w.Limit }

// Draining reports whether the window still carried calls admitted under a higher limit
// (MaxInFlight > Limit): the limit was just cut and the calls above it have not all ended yet.
// Such a window's latencies and drops are mostly the old limit's, which the cut already
// answered: the built-ins ignore its latencies and cut further only when even the calls really
// in flight were more than the downstream served (see [Window].DropShare), so one overload is
// never cut for twice.
func (w Window) Draining() bool { return w.MaxInFlight > w.Limit }

// String formats the window for logs and test output.
func (w Window) String() string {
	return fmt.Sprintf("limit=%d dur=%v calls=%d samples=%d drops=%d dropShare=%.2f inflight<=%d rtt[min=%v p50=%v p90=%v]",
		w.Limit, w.Duration, w.Calls, w.Samples, w.Drops, w.DropShare, w.MaxInFlight, w.MinRTT, w.P50, w.P90)
}

const (
	// DefaultMin is the lowest limit of a controller whose Min is zero.
	DefaultMin = 1
	// DefaultMax is the highest limit of a controller whose Max is zero (or its Min, if larger).
	DefaultMax = 1000
	// MaxLimit is the largest Max a controller accepts.
	MaxLimit = 1 << 30
)

// bounds are a controller's checked [Min, Max].
type bounds struct{ lo, hi int }

// newBounds applies the defaults to min and max and checks them, panicking with who (such as
// "Vegas") in the message when they are invalid.
func newBounds(who string, min, max int) bounds {
	if min < 0 {
		panic(fmt.Sprintf("adaptive: %s: Min must be at least 1 (or 0 for the default), got %d", who, min))
	}
	if max < 0 {
		panic(fmt.Sprintf("adaptive: %s: Max must be at least Min (or 0 for the default), got %d", who, max))
	}
	b := bounds{lo: min, hi: max}
	if b.lo == 0 {
		b.lo = DefaultMin
	}
	if b.hi == 0 {
		b.hi = DefaultMax
		if b.lo > b.hi {
			b.hi = b.lo
		}
	}
	if b.hi < b.lo {
		panic(fmt.Sprintf("adaptive: %s: Max %d below Min %d", who, b.hi, b.lo))
	}
	if b.hi > MaxLimit {
		panic(fmt.Sprintf("adaptive: %s: Max %d above the maximum %d", who, b.hi, MaxLimit))
	}
	return b
}

// clamp rounds x down to an integer in [lo, hi]; NaN counts as lo.
func (b bounds) clamp(x float64) int {
	if !(x >= float64(b.lo)) { // also NaN
		return b.lo
	}
	if x >= float64(b.hi) {
		return b.hi
	}
	return int(x)
}

// clampF is x within [lo, hi], keeping its fraction; NaN counts as lo.
func (b bounds) clampF(x float64) float64 {
	if !(x >= float64(b.lo)) {
		return float64(b.lo)
	}
	return math.Min(x, float64(b.hi))
}

// The signals every built-in reads from a window, with nonsense (a hand-made or fuzzed window)
// read as "no information" rather than trusted.

// limitOf is the window's limit in [lo, hi].
func (b bounds) limitOf(w Window) float64 { return float64(b.clamp(float64(w.Limit))) }

// busy is how many calls were really in flight: the limit, or fewer when the window was
// app-limited. An unknown MaxInFlight counts as the limit.
func busy(w Window, limit float64) float64 {
	if w.MaxInFlight > 0 && float64(w.MaxInFlight) < limit {
		return float64(w.MaxInFlight)
	}
	return limit
}

// dropShare is the window's DropShare in [0, 1].
func dropShare(w Window) float64 {
	if !(w.DropShare > 0) {
		return 0
	}
	return math.Min(w.DropShare, 1)
}

// dropCut is the limit after a window with drops: limit*backoff, or less when the downstream
// served fewer calls at once than that. By Little's law the calls that were not dropped kept
// busy*(1-share) slots busy, which is what the downstream actually sustained; when half our
// calls were refused, half the limit is where to go, not 90 % of it.
//
// A draining window (see [Window.Draining]) carried more calls than the limit, admitted before
// the last cut: what the downstream served is then MaxInFlight*(1-share), and the limit goes
// down to that only if it is lower still; the cut that made the window drain answered the rest.
func dropCut(w Window, limit, backoff float64) float64 {
	if w.Draining() {
		return math.Min(limit, float64(w.MaxInFlight)*(1-dropShare(w)))
	}
	cut := limit * backoff
	if served := busy(w, limit) * (1 - dropShare(w)); served < cut {
		cut = served
	}
	return cut
}

// noise is the relative standard error of the window's median RTT: for a lognormal spread of
// sigma, 1.25·sigma/√n, with sigma read from the window's own P50 and P90 (ln(P90/P50)/1.28).
// A window of 32 samples with a 20 % spread is noisy by about 4 %; one of 10, by 8 %.
func noise(w Window) float64 {
	if w.Samples <= 0 || w.P50 <= 0 || w.P90 <= w.P50 {
		return 0
	}
	sigma := math.Log(float64(w.P90)/float64(w.P50)) / 1.28
	return 1.25 * sigma / math.Sqrt(float64(w.Samples))
}

// rttOf is the window's median RTT, or 0 when the window carries none.
func rttOf(w Window) float64 {
	if w.Samples <= 0 || w.P50 <= 0 {
		return 0
	}
	return float64(w.P50)
}

// A ceiling remembers where the last run of cuts began: a cascade of cuts (an outage, a
// capacity that fell in steps) must not forget the level it fell from, or recovery would only
// double back to half of the last, smallest, cut. Only a level the limit grew to counts: a
// starting limit that drew cuts at once was a guess, not a level that worked, and recovery must
// not double back towards it.
type ceiling struct {
	wmax    float64 // the limit at which the last run of cuts began; 0 before any
	cutting bool    // the limit has not grown since the last cut
	grown   bool    // the limit has grown at least once
}

// cut records a cut from limit.
func (c *ceiling) cut(limit float64) {
	if !c.cutting && c.grown {
		c.wmax = limit
	}
	c.cutting = true
}

// grew records growth: the next cut begins a new run.
func (c *ceiling) grew() { c.cutting, c.grown = false, true }

// grow is the growth of Vegas and Gradient in a healthy full window. wmax is the limit at which
// the last cut began (0 before any). Far below it the limit doubles, up to wmax/2, as TCP's
// slow start does, so a limit cut down by an outage comes back in a few windows; then it grows
// by step (about 10 %); from 90 % to 125 % of wmax, around where the last overload began, it
// creeps by 2.5 % (at least 1), so the limit lingers near the known ceiling instead of hitting
// it every few windows; past that the ceiling has moved, and step applies again.
func grow(limit, wmax, step float64) float64 {
	switch {
	case limit < wmax/2:
		return math.Min(2*limit, wmax/2)
	case limit >= 0.9*wmax && limit <= 1.25*wmax:
		return limit + math.Max(1, limit/40)
	default:
		return limit + step
	}
}

// severeRatio is the RTT ratio (RTT over baseline) that is acted on at once. A smaller excess
// over the tolerance must show in two windows in a row: a window median of a few dozen samples
// is noisy by several percent, and one noisy window must not cut the limit.
const severeRatio = 1.5

// What a window whose RTT is over the tolerance does.
type verdict uint8

const (
	hold  verdict = iota // wait for more evidence
	cut                  // cut the limit
	probe                // measure the baseline again: the last cut did not help
)

// pressure follows an episode of RTT over the tolerance: it tells a queue we caused from a
// downstream that became slower by itself. Past the knee a queue's RTT ratio is proportional
// to the concurrency, so cutting the limit from L to L' should bring the ratio r down to about
// max(1, r×L'/L); a slower downstream stays as slow. So after a cut it waits for the second
// window that is not draining (the first may still carry calls admitted before the cut), and
// if the ratio is then well above what the cut predicts, it asks for a probe instead of
// another cut: the probe measures the RTT below the limit, and if that is the new normal the
// baseline moves to it and the limit doubles back, instead of sinking to Min.
type pressure struct {
	overs   int     // consecutive windows over the tolerance
	cutFrom float64 // the limit before the episode's latest cut; 0 before the first
	ratio   float64 // the RTT ratio that made that cut
	settled int     // windows over the tolerance since that cut
}

// unexplained is how far above the predicted ratio an observed one must be to be the
// downstream's rather than our queue: beyond the noise of a window median.
const unexplained = 1.15

// over records a window over the tolerance at limit, with the RTT ratio ratio.
func (p *pressure) over(limit, ratio float64) verdict {
	p.overs++
	if p.cutFrom > 0 {
		if p.settled++; p.settled < 2 {
			return hold
		}
		if predicted := math.Max(1, p.ratio*limit/p.cutFrom); ratio > predicted*unexplained {
			return probe
		}
	} else if ratio <= severeRatio && p.overs < 2 {
		return hold
	}
	p.cutFrom, p.ratio, p.settled = limit, ratio, 0
	return cut
}

// healthy ends an episode: the RTT is back within the tolerance, a drop took over, or a probe
// measured the baseline again.
func (p *pressure) healthy() { *p = pressure{} }
