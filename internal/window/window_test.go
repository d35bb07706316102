package window_test

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/internal/window"
	"github.com/goloom/loom/limiter/adaptive"
)

// recorder is a controller that records its windows and returns next(w).
type recorder struct {
	mu      sync.Mutex
	windows []adaptive.Window
	next    func(adaptive.Window) int
}

func (r *recorder) Update(w adaptive.Window) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.windows = append(r.windows, w)
	if r.next == nil {
		return w.Limit
	}
	return r.next(w)
}

func (r *recorder) seen() []adaptive.Window {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]adaptive.Window(nil), r.windows...)
}

// capacity records the capacities a Meter sets.
type capacity struct {
	mu  sync.Mutex
	set []int64
}

func (c *capacity) SetCapacity(n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.set = append(c.set, n)
}

func (c *capacity) all() []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int64(nil), c.set...)
}

// call runs one call of d through m, ending as o with inFlight in flight.
func call(m *window.Meter, d time.Duration, o window.Outcome, inFlight int64) (moved int) {
	mk := m.Begin()
	time.Sleep(d)
	return m.End(mk, o, inFlight)
}

func TestAWindowSummarizesItsCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{next: func(w adaptive.Window) int { return w.Limit + 5 }}
		c := &capacity{}
		m := window.New(rec, 10, c, window.Config{MinSamples: 4})
		// Sequential calls of 10, 20, 30, 40 ms: the fourth ends 100 ms in, and closes the
		// window (at least 100 ms old, at least 4 samples).
		for i, d := range []time.Duration{10, 20, 30, 40} {
			moved := call(m, d*time.Millisecond, window.OK, int64(i+3))
			if i < 3 {
				require.Zero(t, moved, "no window closed yet")
			} else {
				assert.Equal(t, 15, moved)
			}
		}
		require.Len(t, rec.seen(), 1)
		assert.Equal(t, adaptive.Window{
			Limit: 10, Duration: 100 * time.Millisecond, Calls: 4, Samples: 4, MaxInFlight: 6,
			MinRTT: 10 * time.Millisecond, P50: 20 * time.Millisecond, P90: 40 * time.Millisecond,
		}, rec.seen()[0])
		assert.Equal(t, []int64{15}, c.all(), "the new limit is applied")
		assert.Equal(t, 15, m.Limit())
		assert.Equal(t, int64(1), m.Changes())
		assert.Equal(t, rec.seen()[0], m.Last())
	})
}

func TestDropsAndIgnoredCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		m := window.New(rec, 10, &capacity{}, window.Config{MinSamples: 4})
		for range 4 { // a first window, of successes only
			call(m, 25*time.Millisecond, window.OK, 1)
		}
		require.Len(t, rec.seen(), 1)
		call(m, 30*time.Millisecond, window.Drop, 1)
		call(m, 10*time.Millisecond, window.Ignore, 1) // a cancelled call: neither
		call(m, 30*time.Millisecond, window.OK, 1)
		call(m, 30*time.Millisecond, window.Drop, 1)
		call(m, 30*time.Millisecond, window.OK, 1) // 130 ms, 4 samples with the drops: closes
		require.Len(t, rec.seen(), 2)
		w := rec.seen()[1]
		assert.Equal(t, 2, w.Samples)
		assert.Equal(t, 2, w.Drops)
		assert.Equal(t, 0.5, w.DropShare, "two calls of 30 ms each way")
		assert.Equal(t, 5, w.Calls)
		assert.Equal(t, int64(0), m.Changes(), "the limit did not move")
		assert.Equal(t, adaptive.Window{}, m.Last())
	})
}

// All calls start together in the first window, and fast refusals end long before the
// successes: the first window waits for successes, or it would read as an outage.
func TestTheFirstWindowWaitsForSuccesses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		m := window.New(rec, 40, &capacity{}, window.Config{MinSamples: 8})
		var wg sync.WaitGroup
		for i := range 40 {
			wg.Go(func() {
				if i < 30 { // refused in 20 ms, again and again
					for range 20 {
						call(m, 20*time.Millisecond, window.Drop, 40)
					}
					return
				}
				call(m, 200*time.Millisecond, window.OK, 40) // served in 200 ms
			})
		}
		wg.Wait()
		require.NotEmpty(t, rec.seen())
		w := rec.seen()[0]
		assert.GreaterOrEqual(t, w.Duration, 200*time.Millisecond, "not before the successes ended")
		assert.Equal(t, 8, w.Samples, "it closes with the MinSamples-th success")
		assert.Less(t, w.DropShare, 0.8, "the refusals' share of the slots, not all of it")
	})
}

// At a high call rate, 1 call in k is sampled, k chosen for about 2×MinSamples samples per
// MinDuration; drops are still counted on every call. Deterministic sampling takes every k-th
// call; the default takes each with probability 1/k.
func TestSamplingFollowsTheCallRate(t *testing.T) {
	for _, deterministic := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			rec := &recorder{}
			m := window.New(rec, 1000, &capacity{}, window.Config{MinSamples: 10, Deterministic: deterministic})
			// Calls of 100 µs, one at a time, until the first window closes: 10 000 calls a
			// second, far more than the samples needed. (Within the window the rate halves
			// each time 256 samples come before 100 ms.)
			for i := 0; len(rec.seen()) == 0; i++ {
				require.Less(t, i, 10_000, "the first window never closed")
				call(m, 100*time.Microsecond, window.OK, 1)
			}
			first := rec.seen()[0]
			assert.InDelta(t, 1000, first.Calls, 100, "each sampled call stands for k")
			// About 1000 calls per 100 ms and 20 samples wanted: k = 32, the power of two at or
			// below 50.
			sampled := 0
			for range 3200 {
				mk := m.Begin()
				if mk.Sampled() {
					sampled++
				}
				time.Sleep(100 * time.Microsecond)
				m.End(mk, window.Drop, 1)
			}
			if deterministic {
				assert.Equal(t, 100, sampled, "every 32nd call")
			} else {
				assert.InDelta(t, 100, sampled, 35, "1 in 32 at random")
			}
			// Close the open window with calls that are not drops, then count.
			for n := len(rec.seen()); len(rec.seen()) == n; {
				call(m, 100*time.Microsecond, window.OK, 1)
			}
			drops := 0
			for _, w := range rec.seen()[1:] {
				drops += w.Drops
			}
			assert.Equal(t, 3200, drops, "every drop is counted, sampled or not")
		})
	}
}

// A small limit gets fewer samples a second; its windows need only one sample per slot (at
// least 8), so that they last about an RTT.
func TestSmallLimitsNeedFewerSamples(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		m := window.New(rec, 4, &capacity{}, window.Config{})
		for range 8 {
			call(m, 20*time.Millisecond, window.OK, 1)
		}
		require.Len(t, rec.seen(), 1, "8 samples and 160 ms close the window of a limit of 4")
		assert.Equal(t, 8, rec.seen()[0].Samples)
	})
}

func TestASparseWindowClosesAfterMaxDuration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		m := window.New(rec, 100, &capacity{}, window.Config{MaxDuration: 2 * time.Second})
		call(m, 1900*time.Millisecond, window.OK, 1)
		assert.Empty(t, rec.seen(), "1 sample in 1.9 s: still open")
		call(m, 200*time.Millisecond, window.OK, 1)
		require.Len(t, rec.seen(), 1, "2.1 s: closed with what it has")
		assert.Equal(t, 2, rec.seen()[0].Samples)
	})
}

func TestControllerResultsAreBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, tt := range []struct{ give, want int }{{0, 1}, {-5, 1}, {adaptive.MaxLimit + 1, adaptive.MaxLimit}} {
			rec := &recorder{next: func(adaptive.Window) int { return tt.give }}
			c := &capacity{}
			m := window.New(rec, 10, c, window.Config{MinSamples: 1})
			assert.Equal(t, tt.want, call(m, 100*time.Millisecond, window.OK, 1))
			assert.Equal(t, []int64{int64(tt.want)}, c.all())
		}
	})
}

// starter is a Starter that records the limit it was started with.
type starter struct{ started *int }

func (s starter) Update(w adaptive.Window) int { return w.Limit }
func (s starter) Start(limit int) adaptive.Controller {
	*s.started = limit
	return &recorder{next: func(adaptive.Window) int { return 99 }}
}

func TestAStarterIsStarted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var got int
		m := window.New(starter{&got}, 12, &capacity{}, window.Config{MinSamples: 1})
		assert.Equal(t, 12, got)
		assert.Equal(t, 99, call(m, 100*time.Millisecond, window.OK, 1), "the started controller runs the windows")
	})
	assert.PanicsWithValue(t, "adaptive: Vegas: Max 1 below Min 2", func() {
		window.New(adaptive.Vegas{Min: 2, Max: 1}, 10, &capacity{}, window.Config{})
	}, "a misconfigured built-in panics when the Meter is made")
}

func TestNewPanicsOnMisuse(t *testing.T) {
	assert.PanicsWithValue(t, "window: New: nil controller", func() { window.New(nil, 1, &capacity{}, window.Config{}) })
	assert.PanicsWithValue(t, "window: New: nil capacity", func() { window.New(&recorder{}, 1, nil, window.Config{}) })
	assert.PanicsWithValue(t, "window: New: limit must be at least 1, got 0", func() { window.New(&recorder{}, 0, &capacity{}, window.Config{}) })
}

// A controller that panics does not leave the Meter locked: the panic reaches the call that
// closed the window, and the next window closes as usual.
func TestAPanickingControllerDoesNotWedgeTheMeter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := 0
		rec := &recorder{next: func(w adaptive.Window) int {
			if n++; n == 1 {
				panic("controller bug")
			}
			return 7
		}}
		m := window.New(rec, 10, &capacity{}, window.Config{MinSamples: 1})
		assert.PanicsWithValue(t, "controller bug", func() { call(m, 100*time.Millisecond, window.OK, 1) })
		assert.Equal(t, 7, call(m, 100*time.Millisecond, window.OK, 1))
	})
}

// Calls that say nothing (cancelled, panicked) do not change the sampling rate.
func TestIgnoredCallsLeaveTheRateAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := window.New(&recorder{}, 10, &capacity{}, window.Config{})
		for range 100 {
			call(m, time.Microsecond, window.Ignore, 1)
		}
		for range 10 {
			require.True(t, m.Begin().Sampled(), "still every call")
		}
	})
}
