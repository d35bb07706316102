package adaptive_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/limiter/adaptive"
)

func TestAIMDUpdateIsOneStep(t *testing.T) {
	drops := func(limit, n int, share float64) adaptive.Window {
		w := healthy(limit)
		w.Drops, w.DropShare = n, share
		return w
	}
	appLimited := healthy(100)
	appLimited.MaxInFlight = 60
	draining := healthy(100)
	draining.MaxInFlight = 140
	tests := []struct {
		name string
		c    adaptive.AIMD
		give adaptive.Window
		want int
	}{
		{"a full window without drops adds 1", adaptive.AIMD{}, healthy(100), 101},
		{"a window with a drop multiplies by 0.9", adaptive.AIMD{}, drops(100, 1, 0), 90},
		{"by Backoff", adaptive.AIMD{Backoff: 0.5}, drops(100, 1, 0), 50},
		{"however many drops", adaptive.AIMD{}, drops(100, 30, 0), 90},
		{"down to what was served when that is less", adaptive.AIMD{}, drops(100, 30, 0.4), 60},
		{"an app-limited window holds", adaptive.AIMD{}, appLimited, 100},
		{"a draining window holds", adaptive.AIMD{}, draining, 100},
		{"never below Min", adaptive.AIMD{Min: 95}, drops(100, 1, 0), 95},
		{"never above Max", adaptive.AIMD{Max: 100}, healthy(100), 100},
		{"at least 1 below", adaptive.AIMD{}, drops(1, 1, 0), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.c.Update(tt.give))
			assert.Equal(t, tt.want, tt.c.Update(tt.give), "Update keeps no state")
		})
	}
}

func TestAIMDBackoffMustBeAFraction(t *testing.T) {
	for _, b := range []float64{-0.5, 1, 1.5} {
		assert.PanicsWithValue(t, "adaptive: AIMD: Backoff must be in (0, 1), got "+fmtFloat(b), func() { adaptive.AIMD{Backoff: b}.Start(10) })
	}
}

func TestAIMDSlowStart(t *testing.T) {
	c := adaptive.AIMD{}.Start(10)
	limits := []int{}
	limit := 10
	for range 4 {
		limit = c.Update(healthy(limit))
		limits = append(limits, limit)
	}
	assert.Equal(t, []int{15, 22, 33, 49}, limits, "×1.5 per full window until the first drop")
	w := healthy(limit)
	w.Drops = 1
	limit = c.Update(w)
	assert.Equal(t, 44, limit)
	assert.Equal(t, 45, c.Update(healthy(limit)), "after a drop, +1 per full window")
}

func TestAIMDRecoversFromAnOutage(t *testing.T) {
	c := adaptive.AIMD{Min: 2}.Start(40)
	limit := c.Update(healthy(40)) // slow start: 60, a level the limit grew to
	require.Equal(t, 60, limit)
	limit = c.Update(adaptive.Window{Limit: limit, Drops: 1, MaxInFlight: limit}) // slow start is over
	require.Equal(t, 54, limit)
	outage := func(limit int) adaptive.Window {
		return adaptive.Window{Limit: limit, Drops: 20, DropShare: 1, MaxInFlight: limit}
	}
	for range 3 { // the downstream is down: every call fails
		limit = c.Update(outage(limit))
	}
	assert.Equal(t, 2, limit, "an outage takes the limit to Min in one window")
	var limits []int
	for range 6 {
		limit = c.Update(healthy(limit))
		limits = append(limits, limit)
	}
	// Doubling back to 3/4 of 60, where the run of cuts began (the drop, then the outage:
	// the limit never grew in between), then +1.
	assert.Equal(t, []int{4, 8, 16, 32, 45, 46}, limits)
}

// A starting limit that draws drops at once was a guess: recovery does not double back to it.
func TestAIMDDoesNotReturnToAStartThatNeverWorked(t *testing.T) {
	c := adaptive.AIMD{Min: 2}.Start(160)
	limit := c.Update(adaptive.Window{Limit: 160, Drops: 50, DropShare: 0.75, MaxInFlight: 160})
	require.Equal(t, 40, limit)
	assert.Equal(t, []int{41, 42, 43}, run(c, limit, 3, healthy), "+1, no doubling towards 160")
}
