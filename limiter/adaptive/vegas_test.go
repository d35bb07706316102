package adaptive_test

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/limiter/adaptive"
)

// run feeds c windows made by next from the limit it returns, n times, and returns the limits.
func run(c adaptive.Controller, limit, n int, next func(limit int) adaptive.Window) []int {
	var limits []int
	for range n {
		limit = c.Update(next(limit))
		limits = append(limits, limit)
	}
	return limits
}

// queue is the window of a downstream whose capacity is c: past it, the RTT grows with the
// calls in flight, as a queue's does.
func queue(c int) func(limit int) adaptive.Window {
	return func(limit int) adaptive.Window { return slow(limit, max(1, float64(limit)/float64(c))) }
}

func TestVegasUpdateIsAFreshStart(t *testing.T) {
	assert.Greater(t, adaptive.Vegas{}.Update(healthy(20)), 20, "a fresh Vegas takes its first window as no-load, and grows")
	assert.Equal(t, adaptive.Vegas{}.Update(healthy(20)), adaptive.Vegas{}.Update(healthy(20)), "no state is kept")
}

func TestVegasFindsTheKneeOfAQueue(t *testing.T) {
	for _, start := range []int{10, 48} {
		c := adaptive.Vegas{}.Start(start)
		limits := run(c, start, 200, queue(40))
		settled := limits[140:]
		for _, l := range settled {
			// 85 % of the top of the range: a probe's dip.
			require.True(t, l >= 36 && l <= 48, "from %d: %v", start, limits)
		}
		assert.InDelta(t, 44, median(settled), 3, "from %d: %v", start, limits)
	}
}

func TestVegasIgnoresALuckyFastCall(t *testing.T) {
	c := adaptive.Vegas{}.Start(40)
	run(c, 40, 10, queue(40))
	lucky := func(limit int) adaptive.Window {
		w := queue(40)(limit)
		w.MinRTT = time.Millisecond // one call answered from a cache
		return w
	}
	limits := run(c, 40, 30, lucky)
	for _, l := range limits {
		assert.GreaterOrEqual(t, l, 34, "%v", limits)
	}
}

func TestVegasCutsOnAQueueThatLasts(t *testing.T) {
	c := adaptive.Vegas{}.Start(40)
	run(c, 40, 10, queue(100)) // no queue at 40: baseline 200 ms
	limit := c.Update(healthy(40))
	over := slow(limit, 1.3)
	assert.Equal(t, limit, c.Update(over), "one window over beta only holds")
	assert.Less(t, c.Update(over), limit, "a second one cuts")
}

func TestVegasCutsASevereQueueAtOnce(t *testing.T) {
	c := adaptive.Vegas{}.Start(40)
	run(c, 40, 10, queue(100))
	limit := c.Update(healthy(40))
	got := c.Update(slow(limit, 2))
	assert.Less(t, got, limit)
	assert.GreaterOrEqual(t, got, limit/2, "at most halved")
}

func median(xs []int) int {
	s := append([]int(nil), xs...)
	slices.Sort(s)
	return s[len(s)/2]
}
