package adaptive_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/limiter/adaptive"
)

func TestGradientUpdateIsAFreshStart(t *testing.T) {
	assert.Equal(t, 25, adaptive.Gradient{}.Update(healthy(20)), "a fresh Gradient, in slow start, grows a healthy full window by 25 %")
	assert.Equal(t, 25, adaptive.Gradient{}.Update(healthy(20)), "no state is kept")
}

func TestGradientFindsTheKneeOfAQueue(t *testing.T) {
	for _, start := range []int{10, 48} {
		c := adaptive.Gradient{}.Start(start)
		limits := run(c, start, 260, queue(40))
		settled := limits[200:]
		for _, l := range settled {
			require.True(t, l >= 34 && l <= 48, "from %d: %v", start, limits)
		}
		assert.InDelta(t, 42, median(settled), 4, "from %d: %v", start, limits)
	}
}

func TestGradientCutsToTheNoQueueConcurrency(t *testing.T) {
	c := adaptive.Gradient{}.Start(40)
	run(c, 40, 10, queue(1000)) // long RTT: 200 ms
	limit := c.Update(healthy(40))
	over := slow(limit, 1.25)
	assert.Equal(t, limit, c.Update(over), "one window over the tolerance only holds")
	assert.Equal(t, int(float64(limit)/1.25), c.Update(over), "a second cuts to limit×long/short")
}

// A downstream twice as slow at the same capacity is not a queue: the limit must not sink to
// Min, and comes back.
func TestGradientFollowsASlowerDownstream(t *testing.T) {
	c := adaptive.Gradient{Min: 1}.Start(40)
	limits := run(c, 40, 60, queue(40))
	limit := limits[len(limits)-1]
	twice := func(limit int) adaptive.Window { return slow(limit, 2*max(1, float64(limit)/40)) }
	limits = run(c, limit, 60, twice)
	lowest := limits[0]
	for _, l := range limits {
		lowest = min(lowest, l)
	}
	assert.GreaterOrEqual(t, lowest, 15, "%v", limits)
	for _, l := range limits[30:] {
		assert.InDelta(t, 42, l, 8, "%v", limits)
	}
}

func TestGradientProbesWithoutPinningLow(t *testing.T) {
	c := adaptive.Gradient{Min: 30}.Start(40)
	limits := run(c, 40, 300, queue(40))
	dipped := false
	for i, l := range limits[1:] {
		require.GreaterOrEqual(t, l, 30, "never below Min")
		dipped = dipped || l < limits[i] && l >= int(0.8*float64(limits[i]))
	}
	assert.True(t, dipped, "probes dip by at most 20 %%: %v", limits)
}
