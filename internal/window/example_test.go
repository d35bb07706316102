package window_test

import (
	"fmt"
	"time"

	"github.com/goloom/loom/internal/sema"
	"github.com/goloom/loom/internal/window"
	"github.com/goloom/loom/limiter/adaptive"
)

// A limiter's integration: Begin when a call's task starts, End when it has returned, with the
// slots held; the Meter moves the FIFO core's capacity itself.
func ExampleMeter() {
	slots := sema.New(10, true)
	double := adaptive.Controller(doubler{})
	// Windows of one sample, at once, so that the example shows a move.
	m := window.New(double, 10, slots, window.Config{MinDuration: time.Nanosecond, MinSamples: 1})

	if !slots.TryAcquire(1) {
		panic("no slot")
	}
	mk := m.Begin()
	time.Sleep(time.Millisecond) // the task
	held := slots.Capacity() - slots.Available()
	slots.Release(1)
	if to := m.End(mk, window.OK, held); to != 0 {
		fmt.Printf("limit %d → %d (window of %d call, %d in flight)\n", m.Last().Limit, to, m.Last().Samples, m.Last().MaxInFlight)
	}
	fmt.Println(slots.Capacity(), m.Limit(), m.Changes())
	// Output:
	// limit 10 → 20 (window of 1 call, 1 in flight)
	// 20 20 1
}

type doubler struct{}

func (doubler) Update(w adaptive.Window) int { return 2 * w.Limit }
