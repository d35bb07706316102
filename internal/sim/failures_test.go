package sim_test

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/internal/sim"
	"github.com/goloom/loom/limiter/adaptive"
)

// The failures users report in the well-known adaptive limiters, each as a scenario that the
// anchor (see anchors_test.go) fails and the built-ins pass. Asserting that the anchor fails
// proves that the scenario really provokes the failure.

// queueing is a downstream that never refuses a call: past C, calls just queue. Only latency
// tells a limiter about overload.
func queueing() sim.Server {
	s := sim.DefaultServer()
	s.Unbounded, s.Timeout = true, 0
	return s
}

// latencyOnlyP95 bounds the 95th percentile of the limit, in units of C, where only latency
// tells of overload.
const latencyOnlyP95 = 1.4

// failure is one reported failure: the scenario, the anchor that shows it, the built-ins that
// must not, and a measure of the run, where ok tells a good outcome.
type failure struct {
	name     string
	scenario sim.Scenario
	anchor   func() adaptive.Controller
	builtins []string // names from builtins
	measure  func(tr *sim.Trace) (figure string, ok bool)
}

var failures = []failure{
	{
		// Netflix concurrency-limits PR #134 (the +queueSize term) and failsafe-go #127 (the
		// baseline drifting up in a long incident): under a steady overload that only latency
		// shows, the limit must not creep up.
		name: "upward drift under latency-only overload (Netflix #134, failsafe-go #127)",
		scenario: sim.Scenario{
			Name: "queueing 3C, 10 min", Seed: 11, Duration: 10 * time.Minute, Start: capacity,
			Capacity: []sim.Step{{At: 0, N: capacity}}, Clients: []sim.Step{{At: 0, N: 3 * capacity}},
			Server: queueing(),
		},
		anchor:   func() adaptive.Controller { return &gradient2{} },
		builtins: []string{"Vegas", "Gradient"},
		measure: func(tr *sim.Trace) (string, bool) {
			// Latency alone cannot hold a limit as tightly as drops do (a window median is noisy
			// by several percent, so a queue of 10-20 % is within the noise); what must not
			// happen is drift. So: the mean does not creep up, the last minute's is within ±20 %
			// of C, and 95 % of windows stay below 1.4×C.
			run := longestAbove(tr.Records[20:], func(r sim.Record) bool { return float64(r.Next) > 1.2*capacity })
			first, last := meanLimit(tr, time.Minute, 2*time.Minute), meanLimit(tr, 9*time.Minute, 10*time.Minute)
			p95 := percentileLimit(tr.After(time.Minute), 0.95)
			return fmt.Sprintf("mean limit %.1f in minute 2, %.1f in minute 10; p95 %d; longest run above 1.2×C %d windows", first, last, p95, run),
				within(int(last), capacity) && last-first < 0.1*capacity && float64(p95) <= latencyOnlyP95*capacity
		},
	},
	{
		// Netflix concurrency-limits #37 and #165: a no-load RTT taken as the single fastest
		// call makes one lucky request collapse Vegas's limit.
		name: "lucky fast calls collapse the limit (Netflix #37, #165)",
		scenario: func() sim.Scenario {
			sc := steady("5 % lucky calls", capacity, 3*capacity, 2*time.Minute)
			sc.Seed, sc.Server.Lucky = 12, 0.05
			return sc
		}(),
		anchor:   func() adaptive.Controller { return &vegasMin{} },
		builtins: []string{"AIMD", "Vegas", "Gradient"},
		measure: func(tr *sim.Trace) (string, bool) {
			lo, hi := bandAfter(tr.After(10 * time.Second))
			mean := meanLimit(tr, time.Minute, 2*time.Minute)
			return fmt.Sprintf("limit %d-%d after 10 s, mean %.1f in minute 2", lo, hi, mean),
				float64(lo) >= 0.75*capacity && within(int(mean), capacity)
		},
	},
	{
		// Netflix concurrency-limits #35 and Vector #3255: slow ramp-up, and slow recovery once
		// a downstream that was down comes back.
		name: "slow recovery after an outage (Netflix #35, Vector #3255)",
		scenario: sim.Scenario{
			Name: "outage 20-30 s", Seed: 13, Duration: 60 * time.Second, Start: capacity,
			Capacity: []sim.Step{{At: 0, N: capacity}, {At: 20 * time.Second, N: 0}, {At: 30 * time.Second, N: capacity}},
			Clients:  []sim.Step{{At: 0, N: 3 * capacity}},
			Server:   sim.DefaultServer(),
		},
		anchor:   func() adaptive.Controller { return reno{} },
		builtins: []string{"AIMD", "Vegas", "Gradient"},
		measure: func(tr *sim.Trace) (string, bool) {
			for _, r := range tr.After(30 * time.Second) {
				if float64(r.Next) >= 0.8*capacity {
					took := r.At - 30*time.Second
					return fmt.Sprintf("≥ 0.8×C %v after the downstream came back", took.Round(10*time.Millisecond)), took <= 4*time.Second
				}
			}
			return "never back to 0.8×C", false
		},
	},
	{
		// envoy #46532 (and #8337, #9007): measuring the no-load RTT by pinning concurrency to
		// min_concurrency rejects most calls for the length of the measurement.
		name: "probing pins concurrency low (envoy #46532)",
		scenario: func() sim.Scenario {
			sc := steady("steady 3C, 2 min", capacity, 3*capacity, 2*time.Minute)
			sc.Seed = 14
			return sc
		}(),
		anchor:   func() adaptive.Controller { return &envoy{} },
		builtins: []string{"AIMD", "Vegas", "Gradient"},
		measure: func(tr *sim.Trace) (string, bool) {
			lo, _ := bandAfter(tr.After(10 * time.Second))
			return fmt.Sprintf("lowest limit after 10 s: %d", lo), float64(lo) >= 0.75*capacity
		},
	},
	{
		// The other side of the drift: a downstream that became slower for good (same
		// capacity, twice the latency) must not be read as a queue forever, pinning the limit
		// low until a long baseline catches up.
		name: "a slower downstream pins the limit low",
		scenario: sim.Scenario{
			Name: "latency ×2 at 20 s", Seed: 15, Duration: 90 * time.Second, Start: capacity,
			Capacity: []sim.Step{{At: 0, N: capacity}}, Clients: []sim.Step{{At: 0, N: 3 * capacity}},
			Slowness: []sim.Step{{At: 0, N: 100}, {At: 20 * time.Second, N: 200}},
			Server:   queueing(),
		},
		anchor:   func() adaptive.Controller { return &gradient2{} },
		builtins: []string{"Vegas", "Gradient"},
		measure: func(tr *sim.Trace) (string, bool) {
			after := tr.After(20 * time.Second)
			lo, _ := bandAfter(after)
			back := -1 // the first window, after the first cut, back at 0.8×C
			cut := false
			for i, r := range after {
				cut = cut || r.Next < r.Window.Limit
				if cut && float64(r.Next) >= 0.8*capacity {
					back = i
					break
				}
			}
			p95 := percentileLimit(after, 0.95)
			return fmt.Sprintf("lowest limit %d; back to ≥ 0.8×C %d windows after the slowdown; p95 %d", lo, back+1, p95),
				float64(lo) >= 0.5*capacity && back >= 0 && back < 30 && float64(p95) <= latencyOnlyP95*capacity
		},
	},
}

func TestFailures(t *testing.T) {
	for _, f := range failures {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			tr := sim.Simulate(t, f.scenario, f.anchor(), sim.NewSemaGate)
			figure, ok := f.measure(tr)
			t.Logf("RESULT anchor %T | %s | %s", f.anchor(), f.scenario.Name, figure)
			assert.False(t, ok, "the anchor should show the failure, or the scenario proves nothing\n%s", tr.Table(20))
			for _, name := range f.builtins {
				b := builtin(t, name)
				tr := sim.Simulate(t, f.scenario, b.c, sim.NewSemaGate)
				neverOutside(t, tr, b.min, 500)
				figure, ok := f.measure(tr)
				t.Logf("RESULT %s | %s | %s", name, f.scenario.Name, figure)
				assert.True(t, ok, "%s\n%s", name, tr.Table(20))
			}
		})
	}
}

func builtin(t *testing.T, name string) (b struct {
	name string
	c    adaptive.Controller
	min  int
}) {
	for _, b := range builtins {
		if b.name == name {
			return b
		}
	}
	require.Failf(t, "no built-in", "%s", name)
	return b
}

// percentileLimit is the p-th quantile (nearest rank) of the limits recs set.
func percentileLimit(recs []sim.Record, p float64) int {
	if len(recs) == 0 {
		return 0
	}
	limits := nexts(recs)
	slices.Sort(limits)
	return limits[max(int(math.Ceil(p*float64(len(limits))))-1, 0)]
}
