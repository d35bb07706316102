package adaptive

import "math"

// Gradient is the ratio-based controller, after Netflix's Gradient2. It compares the window's
// median RTT (short) with a long-term RTT (long) and acts on the gradient short/long:
//
//   - Above the tolerance, 1.1 (or 2.5 standard errors of the window's median, if that is
//     more), in two windows in a row, or above 1.5 in one: the limit is cut to
//     limit × long/short, the concurrency at which, by Little's law, the same throughput would
//     see no queue — at most halving it in one window. One window a little over only holds.
//   - Otherwise, in a full window, the limit grows by 10 % (at least 1; by 25 % in slow start,
//     until the first drop, cut or hold), doubling while below half of where the last run of
//     cuts began and creeping by 2.5 % around it. But with the
//     gradient above 1.05 (or two standard errors, in a window of few samples) latency has
//     begun to rise, the knee is near, and the limit holds — unless it is well below where the
//     last cut began. No queue allowance is ever added to a limit that is being cut, so modest
//     overload cannot make it creep up.
//   - A window with drops cuts as [AIMD] does with Backoff 0.9; a draining window
//     ([Window.Draining]) is otherwise ignored.
//
// The long RTT is not an average of the windows it judges: one that follows windows a little
// past the knee creeps up under a long overload until the limiter stops shedding. It is
// measured. Every 50 healthy full windows (sooner at first) the limit dips to 85 % of its recent
// peak, never below Min, for about three windows, below the knee, and the median RTT there is a
// probe result; long is the median of the last three results (before the first, the mean of
// the first windows). If the RTT fell as much as the limit did, the limit was past the knee:
// the lower limit stays, and the result replaces the highest one kept.
//
// The long RTT follows the short one only in a long incident that is not our queue: when a cut
// did not bring the gradient down as a queue's would (two settled windows later), a probe
// checks whether less concurrency means less latency; if not, the RTT there is the new long
// RTT and the limit doubles back, instead of sinking to Min.
//
// The result is always in [Min, Max]; Min 0 means [DefaultMin], Max 0 means [DefaultMax] (or
// Min, if larger). Min and Max must not be negative, Max must not be below Min nor above
// [MaxLimit]: Update and Start panic otherwise. A limiter calls Start and keeps the state it
// returns; Update on the value itself works from a fresh state each time, as for the first
// window of a limiter.
type Gradient struct {
	Min, Max int
}

// gradientTolerance is how far the short RTT may exceed the long one before the limit is cut:
// far enough above the noise of a window median (a few percent with a few dozen samples),
// close enough that an overload held at the tolerance adds little latency.
const gradientTolerance = 1.10

// gradientFlat is the gradient below which the RTT is taken as flat and the limit may grow:
// between it and the tolerance, latency has begun to rise, and the limit holds (unless a cut
// has shown the knee to be well above). A window too small to tell 5 % from noise (fewer than
// smallWindow samples: a small limit) raises it to two standard errors of its median (see
// noise), up to the tolerance.
const gradientFlat = 1.05

// smallWindow is the sample count below which a window's median is too noisy for gradientFlat.
const smallWindow = 24

// Update returns the limit after w, from a fresh state: see [Gradient]. It panics if g is
// invalid.
func (g Gradient) Update(w Window) int { return g.Start(w.Limit).Update(w) }

// Bounds returns g's [Min, Max], defaults applied (see [Bounded]). It panics if g is invalid.
func (g Gradient) Bounds() (min, max int) {
	b := newBounds("Gradient", g.Min, g.Max)
	return b.lo, b.hi
}

// Start returns a Gradient controller with state of its own, starting from limit. It panics if
// g is invalid.
func (g Gradient) Start(limit int) Controller {
	return &gradient{rttLimit: newRTTLimit("Gradient", g.Min, g.Max, limit)}
}

type gradient struct {
	rttLimit      // base is the long-term RTT
	knee     bool // a cut or a hold has shown where latency rises: slow start is over
}

func (g *gradient) Update(w Window) int {
	if w.Drops > 0 {
		g.knee = true
	}
	return g.update(w, g.judge)
}

// judge is Gradient's rule for a window whose RTT is short: its ratio to the long-term RTT
// decides.
func (g *gradient) judge(w Window, limit, short float64) float64 {
	ratio := short / g.base.value
	if ratio <= math.Max(gradientTolerance, 1+2.5*noise(w)) {
		g.p.healthy()
		if !w.Full() {
			return limit
		}
		flat := gradientFlat
		if w.Samples < smallWindow {
			flat = math.Min(math.Max(flat, 1+2*noise(w)), gradientTolerance)
		}
		// In slow start the baseline is still the mean of the first windows, which rises
		// with them: judge the rise against the first window too.
		rising := ratio > flat || !g.knee && g.base.first > 0 && short/g.base.first > flat
		if rising && !(limit < 0.9*g.ceil.wmax) {
			// Latency is rising and the knee may be near (no cut below us says otherwise): hold.
			g.knee = true
			return g.base.maybeProbe(limit, false, g.b)
		}
		g.ceil.grew()
		step := math.Max(1, limit/10)
		if !g.knee {
			step = math.Max(1, limit/4) // slow start: nothing is known of the knee yet
		}
		return g.base.maybeProbe(grow(limit, g.ceil.wmax, step), true, g.b)
	}
	switch g.p.over(limit, ratio) {
	case cut:
		g.knee = true
		return g.cut(limit, math.Max(limit/2, limit/ratio))
	case probe:
		return g.base.start(limit, short, g.b)
	}
	return limit
}
