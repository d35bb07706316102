package window_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/internal/window"
	"github.com/goloom/loom/limiter/adaptive"
)

// climber raises the limit by one every window and checks, on the real interleaving, what a
// limiter relies on: Update is never called concurrently, and each window's Limit is the one
// the previous Update returned.
type climber struct {
	busy       atomic.Bool
	last       atomic.Int64 // what the previous Update returned
	updates    atomic.Int64
	calls      atomic.Int64 // Window.Calls, summed
	overlaps   atomic.Int64
	staleLimit atomic.Int64
}

func (c *climber) Update(w adaptive.Window) int {
	if !c.busy.CompareAndSwap(false, true) {
		c.overlaps.Add(1)
	}
	defer c.busy.Store(false)
	if prev := c.last.Load(); prev != 0 && int64(w.Limit) != prev {
		c.staleLimit.Add(1)
	}
	c.updates.Add(1)
	c.calls.Add(int64(w.Calls))
	c.last.Store(int64(w.Limit + 1))
	return w.Limit + 1
}

// ordered is a Capacity that checks that the capacities arrive in the order the windows set
// them: strictly increasing, as climber sets them.
type ordered struct {
	mu       sync.Mutex
	last     int64
	set      int64
	disorder int64
}

func (o *ordered) SetCapacity(n int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if n <= o.last {
		o.disorder++
	}
	o.last = n
	o.set++
}

// Windows close as fast as they can (every sampled End is due) while 8 goroutines call: the
// updates are serialized, each sees the limit the previous one set, the capacities are applied
// in order and the last one is the Meter's limit, and no call is counted in two windows.
func TestConcurrentWindowsStayOrdered(t *testing.T) {
	c, sink := &climber{}, &ordered{}
	m := window.New(c, 1, sink, window.Config{MinDuration: time.Nanosecond, MaxDuration: time.Nanosecond, MinSamples: 1})
	const goroutines, calls = 8, 10_000
	var wg sync.WaitGroup
	var inFlight atomic.Int64
	for range goroutines {
		wg.Go(func() {
			for i := range calls {
				n := inFlight.Add(1)
				mk := m.Begin()
				o := window.OK
				if i%7 == 0 {
					o = window.Drop
				}
				m.End(mk, o, n)
				inFlight.Add(-1)
			}
		})
	}
	wg.Wait()
	require.Positive(t, c.updates.Load())
	assert.Zero(t, c.overlaps.Load(), "Update ran concurrently")
	assert.Zero(t, c.staleLimit.Load(), "a window saw a limit other than the last one set")
	sink.mu.Lock()
	defer sink.mu.Unlock()
	assert.Zero(t, sink.disorder, "capacities applied out of order")
	assert.Equal(t, int64(m.Limit()), sink.last, "the capacity is the Meter's limit")
	assert.Equal(t, m.Changes(), sink.set)
	assert.LessOrEqual(t, c.calls.Load(), int64(goroutines*calls), "a call counted in two windows")
}
