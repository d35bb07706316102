package adaptive

import (
	"fmt"
	"math"
)

// AIMD is the loss-based controller: additive increase, multiplicative decrease, as TCP's
// congestion avoidance. It reads only drops and fullness, never latency, so it suits a
// downstream that says when it is overloaded (429s, 503s, timeouts) and is the simplest to
// reason about.
//
//   - A window with drops multiplies the limit by Backoff — or cuts it further, to the
//     concurrency the downstream really served (see [Window].DropShare), when more than
//     1-Backoff of the calls' time went to drops: a downstream whose capacity halved is
//     followed in one window, not in seven.
//   - A full window ([Window.Full]) without drops adds 1.
//   - Any other window leaves the limit as it is: an app-limited one, so that the limit never
//     grows past what the callers use, and a draining one ([Window.Draining]), which still
//     carries calls of the limit before the last cut (its drops cut further only if even the
//     calls in flight were more than the downstream served).
//
// That is [AIMD.Update], one step on a window. A limiter's AIMD (from [AIMD.Start]) also
// starts as TCP does, in slow start: until its first drop a full window multiplies the limit
// by 1.5 instead of adding 1, so a limit that starts at a quarter of the capacity gets there in
// a few windows rather than in C/2; and after a run of cuts that took the limit below 3/4 of
// where it began (an outage), full windows double it back to those 3/4 before adding 1 again.
//
// The result is always in [Min, Max]. The zero value is ready to use: Min 0 means [DefaultMin],
// Max 0 means [DefaultMax] (or Min, if larger), Backoff 0 means 0.9. Min and Max must not be
// negative, Max must not be below Min nor above [MaxLimit], Backoff must lie in (0, 1): Update
// and Start panic otherwise.
type AIMD struct {
	Min, Max int
	Backoff  float64 // the factor a window with drops multiplies the limit by
}

// DefaultBackoff is the Backoff of an AIMD whose Backoff is zero.
const DefaultBackoff = 0.9

// Update returns the limit after w: one additive-increase, multiplicative-decrease step, with no
// slow start (see [AIMD]). It keeps no state. It panics if a is invalid.
func (a AIMD) Update(w Window) int {
	c := a.checked()
	return c.b.clamp(c.step(w, c.b.limitOf(w)))
}

// Bounds returns a's [Min, Max], defaults applied (see [Bounded]). It panics if a is invalid.
func (a AIMD) Bounds() (min, max int) {
	c := a.checked()
	return c.b.lo, c.b.hi
}

// Start returns an AIMD controller for one limiter, starting from limit in slow start. It
// panics if a is invalid.
func (a AIMD) Start(limit int) Controller { return a.checked() }

type aimd struct {
	b       bounds
	backoff float64
	cut     bool    // a drop has been seen: slow start is over
	ceil    ceiling // where the last run of cuts began
}

func (a AIMD) checked() *aimd {
	backoff := a.Backoff
	if backoff == 0 {
		backoff = DefaultBackoff
	}
	if !(backoff > 0 && backoff < 1) {
		panic(fmt.Sprintf("adaptive: AIMD: Backoff must be in (0, 1), got %v", a.Backoff))
	}
	return &aimd{b: newBounds("AIMD", a.Min, a.Max), backoff: backoff}
}

// step is one AIMD step from limit on w.
func (a *aimd) step(w Window, limit float64) float64 {
	switch {
	case w.Drops > 0:
		return dropCut(w, limit, a.backoff)
	case w.Draining():
		return limit
	case w.Full():
		return limit + 1
	}
	return limit
}

func (a *aimd) Update(w Window) int {
	limit := a.b.limitOf(w)
	next := a.b.clampF(a.step(w, limit))
	switch {
	case next < limit: // a cut (one that Min stops is none: it must not forget the ceiling)
		a.ceil.cut(limit) // a run of cuts (an outage) remembers where it began
		a.cut = true
	case next > limit:
		a.ceil.grew()
	}
	switch {
	case next <= limit:
	case !a.cut: // slow start
		next = math.Max(next, math.Floor(limit*1.5))
	case limit < 0.75*a.ceil.wmax: // recovering from an outage
		next = math.Max(next, math.Min(2*limit, math.Floor(0.75*a.ceil.wmax)))
	}
	return a.b.clamp(next)
}
