package fleet

import (
	"math"
	"time"
)

// gcra is a token bucket kept as the generic cell rate algorithm: one number, the theoretical
// arrival time (tat) of the next token beyond a full bucket, in microseconds on some clock. The
// bucket holds burst tokens; one comes every interval. A request at now takes the token that
// comes at max(tat, now) + interval − burst·interval, so a full bucket serves burst requests at
// once and then one per interval. The same arithmetic runs in the Redis script.
type gcra struct {
	tat float64
}

// reserve takes a token unless it would come more than maxWait after now (maxWait < 0: no
// bound). It returns whether it took it, the delay until it comes, and the tat after this
// reservation (its mark, for cancel).
func (g *gcra) reserve(now, interval, burst, maxWait float64) (ok bool, delay, mark float64) {
	tat := math.Max(g.tat, now)
	next := tat + interval
	delay = math.Max(0, next-burst*interval-now)
	if maxWait >= 0 && delay > maxWait {
		return false, delay, 0
	}
	g.tat = next
	return true, delay, next
}

// cancel gives back the token of the reservation with this mark, if its time has not come and
// as far as no later reservation depends on it: a later reservation was told its time assuming
// this one, so only the part of the interval beyond every later mark comes back. It reports
// whether anything came back.
func (g *gcra) cancel(now, interval, burst, mark float64) bool {
	if now >= mark-burst*interval { // its time has come: the token is spent
		return false
	}
	restore := math.Min(interval, interval-(g.tat-mark))
	if restore <= 0 {
		return false
	}
	g.tat -= restore
	return true
}

// microsToDuration converts a delay in microseconds to a Duration, rounding up, and saturating at
// the largest Duration instead of overflowing: at a tiny rate the next token is centuries away,
// never a moment ago.
func microsToDuration(us float64) time.Duration {
	ns := math.Ceil(us * 1000)
	switch {
	case !(ns > 0): // and NaN
		return 0
	case ns >= math.MaxInt64: // float64(MaxInt64) is 2^63, one past the largest Duration
		return math.MaxInt64
	}
	return time.Duration(ns)
}
