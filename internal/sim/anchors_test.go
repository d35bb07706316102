package sim_test

import (
	"math"

	"github.com/goloom/loom/limiter/adaptive"
)

// The anchors: the rules of the well-known adaptive limiters, written per window from their
// published formulas and defaults, so that the same scenarios show the failures their users
// report next to the built-ins. Each keeps the bounds of the built-ins under test, [4, 500].

func clampAnchor(x float64) float64 { return math.Max(4, math.Min(500, x)) }

// gradient2 is Netflix's Gradient2Limit: gradient = clamp(long/short, 0.5, 1), new limit =
// limit×gradient + queueSize (4), smoothed by 0.2; long is an exponential average over 600
// windows after a 10-window warm-up, cut by 10 % when more than twice short; no growth while
// in flight is under half the limit. It ignores drops.
type gradient2 struct {
	limit, long float64
	n           int
}

func (g *gradient2) Update(w adaptive.Window) int {
	if g.limit == 0 {
		g.limit = float64(w.Limit)
	}
	if w.Samples == 0 {
		return int(g.limit)
	}
	short := float64(w.P50)
	g.n++
	if g.n <= 10 {
		g.long += (short - g.long) / float64(g.n)
	} else {
		g.long += (short - g.long) * 2 / 601
	}
	if g.long/short > 2 {
		g.long *= 0.9
	}
	if float64(w.MaxInFlight) < g.limit/2 {
		return int(g.limit)
	}
	gradient := math.Max(0.5, math.Min(1, g.long/short))
	next := g.limit*gradient + 4
	g.limit = clampAnchor(g.limit*0.8 + next*0.2)
	return int(g.limit)
}

// vegasMin is Netflix's VegasLimit with its no-load RTT the single fastest RTT seen, as it is
// when fed per sample: queue = ceil(limit×(1 − noload/rtt)); alpha, beta, threshold = 3, 6, 1
// × log10(limit); growth by beta below threshold, by log10 below alpha, decrease by log10 above
// beta or on a drop; no growth while in flight is under half the limit.
type vegasMin struct {
	limit, noload float64
}

func (v *vegasMin) Update(w adaptive.Window) int {
	if v.limit == 0 {
		v.limit = float64(w.Limit)
	}
	if w.Samples == 0 {
		return int(v.limit)
	}
	if m := float64(w.MinRTT); v.noload == 0 || m < v.noload {
		v.noload = m
	}
	log := math.Max(1, math.Log10(v.limit))
	queue := math.Ceil(v.limit * (1 - v.noload/float64(w.P50)))
	switch {
	case w.Drops > 0:
		v.limit -= log
	case float64(w.MaxInFlight)*2 < v.limit:
	case queue <= log:
		v.limit += 6 * log
	case queue < 3*log:
		v.limit += log
	case queue > 6*log:
		v.limit -= log
	}
	v.limit = clampAnchor(v.limit)
	return int(v.limit)
}

// reno is the AIMD of Vector's ARC and of Netflix's AIMDLimit: a window with drops multiplies
// the limit by 0.9, any other full window adds 1. No slow start, no drop share.
type reno struct{}

func (reno) Update(w adaptive.Window) int {
	limit := float64(w.Limit)
	switch {
	case w.Drops > 0:
		limit = math.Floor(limit * 0.9)
	case w.Full():
		limit++
	}
	return int(clampAnchor(limit))
}

// envoy is Envoy's adaptive concurrency gradient controller: every interval (here every 100
// windows) it pins the limit to min_concurrency (3) until it has measured the minRTT over
// request_count (50) samples; otherwise limit = limit×gradient + sqrt(limit), with gradient =
// clamp(minRTT×(1+buffer 25 %)/p50, 0.5, 2).
type envoy struct {
	limit, minRTT float64
	windows       int
	probing       bool
	saved         float64
	probeSamples  int
	probeRTT      float64
}

func (e *envoy) Update(w adaptive.Window) int {
	if e.limit == 0 {
		e.limit, e.probing, e.saved = float64(w.Limit), true, float64(w.Limit)
	}
	e.windows++
	if e.probing {
		if w.Samples > 0 {
			e.probeSamples += w.Samples
			e.probeRTT = math.Max(e.probeRTT, float64(w.P50)) // the probe's p50, roughly
		}
		if e.probeSamples < 50 {
			return 3
		}
		e.minRTT, e.probing, e.limit = e.probeRTT, false, e.saved
		return int(e.limit)
	}
	if e.windows%100 == 0 {
		e.probing, e.saved, e.probeSamples, e.probeRTT = true, e.limit, 0, 0
		return 3
	}
	if w.Samples == 0 || e.minRTT == 0 {
		return int(e.limit)
	}
	gradient := math.Max(0.5, math.Min(2, e.minRTT*1.25/float64(w.P50)))
	e.limit = clampAnchor(e.limit*gradient + math.Sqrt(e.limit))
	return int(e.limit)
}
