package adaptive

import "math"

// rttLimit is the state and the first steps that the RTT-based controllers, Vegas and Gradient,
// share: the limit with its fraction (so that small steps add up), its bounds, the ceiling of
// the last run of cuts, the baseline RTT and the pressure of overloaded windows. They differ
// only in how they judge a window's RTT against the baseline (their judge function).
type rttLimit struct {
	b     bounds
	limit float64
	ceil  ceiling  // where the last run of cuts began (see grow)
	base  baseline // the no-load (Vegas) or long-term (Gradient) RTT
	p     pressure
}

func newRTTLimit(who string, min, max, limit int) rttLimit {
	b := newBounds(who, min, max)
	return rttLimit{b: b, limit: float64(b.clamp(float64(limit)))}
}

// update returns the limit after w: judge decides it unless drops or a probe of the baseline
// did. judge gets the window's RTT, already in the baseline.
func (c *rttLimit) update(w Window, judge func(w Window, limit, rtt float64) float64) int {
	// The limit in force is the truth (it may have been clamped, or moved by someone else);
	// the fraction is kept only while it agrees.
	if limit := c.b.limitOf(w); math.Floor(c.limit) != limit {
		c.limit = limit
	}
	c.limit = c.b.clampF(c.next(w, c.limit, judge))
	return c.b.clamp(c.limit)
}

func (c *rttLimit) next(w Window, limit float64, judge func(w Window, limit, rtt float64) float64) float64 {
	c.base.track(limit)
	if w.Drops > 0 {
		c.p.healthy()
		c.base.abort()
		return c.cut(limit, dropCut(w, limit, DefaultBackoff))
	}
	if c.base.probing {
		next, rose := c.base.probe(w, limit)
		if rose && c.p.cutFrom > 0 {
			// The downstream is slower: the cuts were for nothing, double back.
			c.ceil.wmax = 2 * max(c.ceil.wmax, c.p.cutFrom)
		}
		if !c.base.probing {
			c.p.healthy()
		}
		return next
	}
	rtt := rttOf(w)
	if w.Draining() || rtt == 0 {
		return limit
	}
	c.base.observe(rtt)
	return judge(w, limit, rtt)
}

// cut moves the limit down to to, if the bounds let it go below limit; only a real cut is noted
// in the ceiling (one that Min stops must not forget the ceiling).
func (c *rttLimit) cut(limit, to float64) float64 {
	if next := c.b.clampF(to); next < limit {
		c.ceil.cut(limit)
		return next
	}
	return limit
}
