package adaptive_test

import (
	"fmt"
	"time"

	"github.com/goloom/loom/limiter/adaptive"
)

// window is a full window of calls answered in 200 ms at the median.
func window(limit int) adaptive.Window {
	return adaptive.Window{
		Limit: limit, Duration: 150 * time.Millisecond, Calls: 40, Samples: 40, MaxInFlight: limit,
		MinRTT: 120 * time.Millisecond, P50: 200 * time.Millisecond, P90: 260 * time.Millisecond,
	}
}

// latencyTarget is a Controller of one's own: it keeps the median RTT under a target, growing by
// one while it is met and halving when it is not. It keeps no state.
type latencyTarget struct{ target time.Duration }

func (c latencyTarget) Update(w adaptive.Window) int {
	switch {
	case w.Samples == 0:
		return w.Limit
	case w.P50 > c.target:
		return max(1, w.Limit/2)
	case w.Full():
		return w.Limit + 1
	}
	return w.Limit
}

// A custom controller: any type with Update(Window) int. A limiter calls it once per window.
func ExampleController() {
	var c adaptive.Controller = latencyTarget{target: 250 * time.Millisecond}
	fmt.Println(c.Update(window(10)))
	slow := window(10)
	slow.P50 = 400 * time.Millisecond
	fmt.Println(c.Update(slow))
	// Output:
	// 11
	// 5
}

// smoothed is a stateful Controller of one's own: it moves the limit halfway towards the
// concurrency that Little's law gives for a target RTT. Its state (the limit with its fraction)
// must not be shared by limiters, so the configuration is a Starter and the state another type,
// as with the built-ins.
type smoothed struct{ target time.Duration }

func (s smoothed) Start(limit int) adaptive.Controller {
	return &smoothedState{target: s.target, limit: float64(limit)}
}

// Update on the configuration is one step from a fresh state.
func (s smoothed) Update(w adaptive.Window) int { return s.Start(w.Limit).Update(w) }

type smoothedState struct {
	target time.Duration
	limit  float64
}

func (s *smoothedState) Update(w adaptive.Window) int {
	if w.Samples > 0 {
		want := float64(w.MaxInFlight) * float64(s.target) / float64(w.P50)
		s.limit += (want - s.limit) / 2
	}
	return max(1, int(s.limit))
}

// A Starter gives each limiter a controller of its own.
func ExampleStarter() {
	var config adaptive.Starter = smoothed{target: 300 * time.Millisecond}
	a, b := config.Start(10), config.Start(100)
	fmt.Println(a.Update(window(10)), a.Update(window(12)))
	fmt.Println(b.Update(window(100)))
	// Output:
	// 12 15
	// 125
}

// A Window is what a controller sees of one window of calls.
func ExampleWindow() {
	w := window(20)
	w.Drops, w.DropShare = 3, 0.1
	fmt.Println(w)
	// Output:
	// limit=20 dur=150ms calls=40 samples=40 drops=3 dropShare=0.10 inflight<=20 rtt[min=120ms p50=200ms p90=260ms]
}

func ExampleWindow_Full() {
	w := window(20)
	fmt.Println(w.Full())
	w.MaxInFlight = 12 // the callers, not the limit, held concurrency down
	fmt.Println(w.Full())
	// Output:
	// true
	// false
}

func ExampleWindow_Draining() {
	w := window(20)
	w.MaxInFlight = 30 // calls admitted before the limit was cut to 20 are still ending
	fmt.Println(w.Draining())
	// Output: true
}

func ExampleWindow_String() {
	fmt.Println(adaptive.Window{Limit: 8, Samples: 1, MaxInFlight: 8, P50: time.Second, P90: time.Second, MinRTT: time.Second})
	// Output: limit=8 dur=0s calls=0 samples=1 drops=0 dropShare=0.00 inflight<=8 rtt[min=1s p50=1s p90=1s]
}

// AIMD as a limiter runs it: slow start until the first drop, then one more per full window.
func ExampleAIMD() {
	c := adaptive.AIMD{Min: 2, Max: 100}.Start(10)
	limit := 10
	for range 3 {
		limit = c.Update(window(limit))
		fmt.Print(limit, " ")
	}
	overloaded := window(limit)
	overloaded.Drops = 2
	limit = c.Update(overloaded)
	fmt.Print(limit, " ")
	fmt.Println(c.Update(window(limit)))
	// Output: 15 22 33 29 30
}

// Update on the value is one AIMD step, with no slow start.
func ExampleAIMD_Update() {
	c := adaptive.AIMD{Backoff: 0.5}
	fmt.Println(c.Update(window(40)))
	w := window(40)
	w.Drops = 1
	fmt.Println(c.Update(w))
	w.DropShare = 0.75 // three quarters of the calls' time went to drops: cut to what was served
	fmt.Println(c.Update(w))
	// Output:
	// 41
	// 20
	// 10
}

// Start checks the configuration and returns the controller a limiter keeps.
func ExampleAIMD_Start() {
	defer func() { fmt.Println(recover()) }()
	adaptive.AIMD{Min: 10, Max: 5}.Start(8)
	// Output: adaptive: AIMD: Max 5 below Min 10
}

// Vegas keeps a queue of a few calls at a downstream whose RTT rises past its capacity (here,
// 40 calls at once).
func ExampleVegas() {
	c := adaptive.Vegas{Min: 4, Max: 200}.Start(20)
	limit := 20
	for range 40 {
		w := window(limit)
		if limit > 40 { // past the knee, the RTT grows with the calls in flight
			w.P50 = w.P50 * time.Duration(limit) / 40
		}
		limit = c.Update(w)
	}
	fmt.Println(limit >= 40 && limit <= 48)
	// Output: true
}

// Update on the value works from a fresh state: the window's RTT is the baseline, so a full
// window grows the limit.
func ExampleVegas_Update() {
	fmt.Println(adaptive.Vegas{}.Update(window(20)))
	// Output: 22
}

// Start gives one limiter a Vegas of its own; one Vegas value may configure many limiters.
func ExampleVegas_Start() {
	config := adaptive.Vegas{Max: 50}
	a, b := config.Start(20), config.Start(80)
	fmt.Println(a.Update(window(20)), b.Update(window(80)))
	// Output: 22 50
}

// Gradient cuts the limit to the no-queue concurrency when the short RTT exceeds the long one
// by more than its tolerance in two windows in a row.
func ExampleGradient() {
	c := adaptive.Gradient{Min: 4, Max: 200}.Start(40)
	for range 10 {
		c.Update(window(40)) // the long RTT is 200 ms
	}
	queued := window(40)
	queued.P50 = 300 * time.Millisecond
	fmt.Println(c.Update(queued), c.Update(queued))
	// Output: 40 26
}

// Update on the value works from a fresh state, in slow start: a healthy full window grows the
// limit by 25 %.
func ExampleGradient_Update() {
	fmt.Println(adaptive.Gradient{}.Update(window(50)))
	// Output: 62
}

// Start gives one limiter a Gradient of its own, within its bounds.
func ExampleGradient_Start() {
	c := adaptive.Gradient{Min: 4, Max: 30}.Start(100)
	fmt.Println(c.Update(window(30)))
	// Output: 30
}

// The built-ins are Bounded: a limiter clamps its starting limit into their range.
func ExampleBounded() {
	for _, c := range []adaptive.Bounded{adaptive.AIMD{Max: 5}, adaptive.Vegas{Min: 4, Max: 40}, adaptive.Gradient{}} {
		lo, hi := c.Bounds()
		fmt.Println(lo, hi)
	}
	// Output:
	// 1 5
	// 4 40
	// 1 1000
}
