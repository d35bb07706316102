package adaptive

import "math"

// Vegas is the queue-based controller, after TCP Vegas. From the window's median RTT and a
// no-load baseline it estimates how many of its calls wait at the downstream,
//
//	queue = limit × (1 − baseline/rtt)
//
// and keeps that queue between alpha = max(2, 1.5·log10(limit)) and beta = max(4, 3·log10(limit)):
// a few calls, so that the downstream never idles and latency stays near its floor.
//
//   - queue > beta (with the RTT also more than 2.5 standard errors of the window's median
//     above the baseline) in two windows in a row, or once with the RTT above 1.5× the
//     baseline: the limit is cut to the estimated no-queue concurrency plus alpha
//     (limit − queue + alpha), at most halving it in one window.
//   - queue < alpha in a full window: the limit grows, by log10(limit) while there is a small
//     queue; with no queue at all by max(alpha, 10 %), doubling while below half of where the
//     last run of cuts began and creeping by 2.5 % around it.
//   - A window with drops cuts as [AIMD] does with Backoff 0.9; a draining window
//     ([Window.Draining]) is otherwise ignored.
//
// The baseline is measured, not taken as the fastest call seen — one lucky call, or a lucky
// window, cannot collapse the limit — nor averaged from the windows it judges, which would let
// a long overload drag it up. Every 50 healthy full windows (sooner at first) the limit dips to
// 85 % of its recent peak, never below Min, for about three windows, below the knee, and the
// median RTT there is a probe result. The baseline is the median of the last three results
// (before the first, the mean of the first windows): among all the RTTs the limiter sees, a low
// percentile. If the RTT fell as much as the limit did, the limit was past the knee: the lower
// limit stays, and the result replaces the highest one kept.
//
// The baseline follows the RTT only when the downstream itself became slower: when a cut did
// not bring the RTT down as a queue's would (two settled windows later), a probe checks whether
// less concurrency means less latency; if not, the RTT there is the new baseline and the limit
// doubles back, instead of sinking to Min.
//
// The result is always in [Min, Max]; Min 0 means [DefaultMin], Max 0 means [DefaultMax] (or
// Min, if larger). Min and Max must not be negative, Max must not be below Min nor above
// [MaxLimit]: Update and Start panic otherwise. A limiter calls Start and keeps the state it
// returns; Update on the value itself works from a fresh state each time, as for the first
// window of a limiter.
type Vegas struct {
	Min, Max int
}

// Update returns the limit after w, from a fresh state: see [Vegas]. It panics if v is invalid.
func (v Vegas) Update(w Window) int { return v.Start(w.Limit).Update(w) }

// Bounds returns v's [Min, Max], defaults applied (see [Bounded]). It panics if v is invalid.
func (v Vegas) Bounds() (min, max int) {
	b := newBounds("Vegas", v.Min, v.Max)
	return b.lo, b.hi
}

// Start returns a Vegas controller with state of its own, starting from limit. It panics if v
// is invalid.
func (v Vegas) Start(limit int) Controller {
	return &vegas{newRTTLimit("Vegas", v.Min, v.Max, limit)}
}

type vegas struct{ rttLimit }

func (v *vegas) Update(w Window) int { return v.update(w, v.judge) }

// judge is Vegas's rule for a window whose RTT is rtt: the queue it implies decides.
func (v *vegas) judge(w Window, limit, rtt float64) float64 {
	base := v.base.value
	queue := 0.0
	if rtt > base {
		queue = limit * (1 - base/rtt)
	}
	log := math.Log10(limit)
	alpha, beta := math.Max(2, 1.5*log), math.Max(4, 3*log)
	if queue > beta && rtt/base > 1+2.5*noise(w) { // a queue beyond the noise of the median
		switch v.p.over(limit, rtt/base) {
		case cut:
			return v.cut(limit, math.Max(limit/2, limit-queue+alpha))
		case probe:
			return v.base.start(limit, rtt, v.b)
		}
		return limit
	}
	v.p.healthy()
	if !w.Full() {
		return limit
	}
	grew := true
	switch {
	case queue < 1:
		limit = grow(limit, v.ceil.wmax, math.Max(alpha, limit/10))
	case queue < alpha:
		limit += math.Max(1, log)
	default:
		grew = false
	}
	if grew {
		v.ceil.grew()
	}
	return v.base.maybeProbe(limit, grew, v.b)
}
