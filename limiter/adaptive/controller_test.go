package adaptive_test

import (
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/limiter/adaptive"
)

// A controller of each built-in kind, configured by min and max.
var kinds = []struct {
	name string
	make func(min, max int) adaptive.Starter
}{
	{"AIMD", func(min, max int) adaptive.Starter { return adaptive.AIMD{Min: min, Max: max} }},
	{"Vegas", func(min, max int) adaptive.Starter { return adaptive.Vegas{Min: min, Max: max} }},
	{"Gradient", func(min, max int) adaptive.Starter { return adaptive.Gradient{Min: min, Max: max} }},
}

// healthy is a full window of flat latency: every built-in may grow on it.
func healthy(limit int) adaptive.Window {
	return adaptive.Window{
		Limit: limit, Duration: 200 * time.Millisecond, Calls: 32, Samples: 32, MaxInFlight: limit,
		MinRTT: 150 * time.Millisecond, P50: 200 * time.Millisecond, P90: 260 * time.Millisecond,
	}
}

// slow is healthy(limit) with every RTT multiplied by f.
func slow(limit int, f float64) adaptive.Window {
	w := healthy(limit)
	w.MinRTT = time.Duration(float64(w.MinRTT) * f)
	w.P50 = time.Duration(float64(w.P50) * f)
	w.P90 = time.Duration(float64(w.P90) * f)
	return w
}

func TestBoundsAndDefaults(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			tests := []struct {
				name             string
				min, max         int
				wantLo, wantHigh int
			}{
				{"zero means the defaults", 0, 0, adaptive.DefaultMin, adaptive.DefaultMax},
				{"explicit", 4, 200, 4, 200},
				{"Min above the default Max raises it", 2000, 0, 2000, 2000},
				{"Min equal to Max", 7, 7, 7, 7},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					c := k.make(tt.min, tt.max)
					// A hand-made window far outside the bounds is brought back into them.
					assert.Equal(t, tt.wantLo, c.Update(adaptive.Window{Limit: -5}))
					assert.Equal(t, tt.wantLo, c.Update(adaptive.Window{}))
					assert.Equal(t, tt.wantHigh, c.Update(adaptive.Window{Limit: math.MaxInt}))
					assert.Equal(t, tt.wantHigh, c.Start(tt.wantHigh).Update(healthy(tt.wantHigh)))
					assert.Equal(t, tt.wantLo, c.Start(1).Update(adaptive.Window{Limit: 1, Drops: 10, DropShare: 1}))
				})
			}
		})
	}
}

func TestInvalidBoundsPanic(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			tests := []struct {
				name     string
				min, max int
				want     string
			}{
				{"negative Min", -1, 10, "adaptive: " + k.name + ": Min must be at least 1 (or 0 for the default), got -1"},
				{"negative Max", 1, -1, "adaptive: " + k.name + ": Max must be at least Min (or 0 for the default), got -1"},
				{"Max below Min", 10, 5, "adaptive: " + k.name + ": Max 5 below Min 10"},
				{"Max above MaxLimit", 1, adaptive.MaxLimit + 1, "adaptive: " + k.name + ": Max 1073741825 above the maximum 1073741824"},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					c := k.make(tt.min, tt.max)
					assert.PanicsWithValue(t, tt.want, func() { c.Start(10) }, "Start")
					assert.PanicsWithValue(t, tt.want, func() { c.Update(healthy(10)) }, "Update")
				})
			}
		})
	}
}

// Nothing in a window is trusted: nonsense is read as no information, and the limit stays in
// bounds.
func TestNonsenseWindows(t *testing.T) {
	nonsense := []adaptive.Window{
		{Limit: 10, Samples: -3, Drops: -1, MaxInFlight: -7, P50: -time.Second, P90: -time.Hour},
		{Limit: 10, Samples: 5, P50: time.Second, P90: time.Millisecond, DropShare: math.NaN()},
		{Limit: 10, Drops: 1, DropShare: math.Inf(1)},
		{Limit: 10, Drops: 1, DropShare: -2},
		{Limit: 10, Samples: 1 << 40, P50: time.Duration(math.MaxInt64), P90: time.Duration(math.MaxInt64), MaxInFlight: math.MaxInt},
	}
	for _, k := range kinds {
		c := k.make(2, 50).Start(10)
		for i, w := range nonsense {
			got := c.Update(w)
			assert.GreaterOrEqual(t, got, 2, "%s, window %d", k.name, i)
			assert.LessOrEqual(t, got, 50, "%s, window %d", k.name, i)
		}
	}
}

// The properties every built-in shares, window by window, from a started controller.
func TestSharedRules(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			t.Run("an app-limited window never grows the limit", func(t *testing.T) {
				c := k.make(1, 1000).Start(100)
				for range 50 {
					w := healthy(100)
					w.MaxInFlight = 30
					require.LessOrEqual(t, c.Update(w), 100)
				}
			})
			t.Run("a full healthy window grows the limit", func(t *testing.T) {
				c := k.make(1, 1000).Start(20)
				assert.Greater(t, c.Update(healthy(20)), 20)
			})
			t.Run("drops cut the limit at once", func(t *testing.T) {
				c := k.make(1, 1000).Start(100)
				w := healthy(100)
				w.Drops = 3
				assert.LessOrEqual(t, c.Update(w), 90)
			})
			t.Run("when half the time went to drops, the limit halves", func(t *testing.T) {
				c := k.make(1, 1000).Start(100)
				w := healthy(100)
				w.Drops, w.DropShare = 40, 0.5
				assert.Equal(t, 50, c.Update(w))
			})
			t.Run("a draining window does not cut for the same overload twice", func(t *testing.T) {
				c := k.make(1, 1000).Start(50)
				w := slow(50, 3)
				w.MaxInFlight = 100 // the calls of the limit before the cut are still ending
				assert.Equal(t, 50, c.Update(w), "latency of a draining window")
				w.Drops, w.DropShare = 10, 0.2 // the 100 in flight were served 80: more than 50
				assert.Equal(t, 50, c.Update(w), "drops of a draining window")
				w.DropShare = 0.7 // only 30 of the 100 were served: less than 50
				assert.Equal(t, 30, c.Update(w))
			})
		})
	}
}

func TestWindowMethods(t *testing.T) {
	assert.True(t, adaptive.Window{Limit: 10, MaxInFlight: 10}.Full())
	assert.False(t, adaptive.Window{Limit: 10, MaxInFlight: 9}.Full())
	assert.True(t, adaptive.Window{Limit: 10, MaxInFlight: 11}.Draining())
	assert.False(t, adaptive.Window{Limit: 10, MaxInFlight: 10}.Draining())
	assert.Equal(t,
		"limit=10 dur=200ms calls=32 samples=32 drops=0 dropShare=0.00 inflight<=10 rtt[min=150ms p50=200ms p90=260ms]",
		healthy(10).String())
}

func fmtFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// The built-ins are Bounded, with their defaults applied and their validation shared with Start.
func TestBuiltinsAreBounded(t *testing.T) {
	for _, tt := range []struct {
		c      adaptive.Bounded
		lo, hi int
	}{
		{adaptive.AIMD{}, adaptive.DefaultMin, adaptive.DefaultMax},
		{adaptive.AIMD{Min: 4, Max: 9}, 4, 9},
		{adaptive.Vegas{Max: 5}, 1, 5},
		{adaptive.Vegas{Min: 2000}, 2000, 2000},
		{adaptive.Gradient{Min: 3, Max: 30}, 3, 30},
	} {
		lo, hi := tt.c.Bounds()
		assert.Equal(t, [2]int{tt.lo, tt.hi}, [2]int{lo, hi}, "%#v", tt.c)
	}
	assert.Panics(t, func() { adaptive.Gradient{Min: 5, Max: 2}.Bounds() })
	assert.Panics(t, func() { adaptive.AIMD{Backoff: 2}.Bounds() })
}
