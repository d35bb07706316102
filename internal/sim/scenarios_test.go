package sim_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/internal/sim"
	"github.com/goloom/loom/limiter"
	"github.com/goloom/loom/limiter/adaptive"
)

// The built-ins under test, with a Min above 1 so that "never below Min" means something.
var builtins = []struct {
	name string
	c    adaptive.Controller
	min  int
}{
	{"AIMD", adaptive.AIMD{Min: 4, Max: 500}, 4},
	{"Vegas", adaptive.Vegas{Min: 4, Max: 500}, 4},
	{"Gradient", adaptive.Gradient{Min: 4, Max: 500}, 4},
}

// capacity is the hidden capacity of the main scenarios.
const capacity = 40

// A scenario of the proof: a run and what must be true of it.
type scenario struct {
	sim.Scenario
	check func(t *testing.T, tr *sim.Trace) string // asserts; returns the measured figure
}

func steady(name string, start, clients int, d time.Duration) sim.Scenario {
	return sim.Scenario{
		Name: name, Seed: 1, Duration: d, Start: start,
		Capacity: []sim.Step{{At: 0, N: capacity}},
		Clients:  []sim.Step{{At: 0, N: clients}},
		Server:   sim.DefaultServer(),
	}
}

// The scenarios every built-in must pass: the claims of DESIGN.md's "limiter/adaptive".
var scenarios = []scenario{
	{
		Scenario: steady("converges from C/4", capacity/4, 3*capacity, 30*time.Second),
		check:    convergesWithin(20),
	},
	{
		Scenario: steady("converges from 4C", 4*capacity, 3*capacity, 30*time.Second),
		check:    convergesWithin(20),
	},
	{
		Scenario: sim.Scenario{
			Name: "capacity doubles", Seed: 2, Duration: 60 * time.Second, Start: capacity,
			Capacity: []sim.Step{{At: 0, N: capacity}, {At: 20 * time.Second, N: 2 * capacity}},
			Clients:  []sim.Step{{At: 0, N: 6 * capacity}},
			Server:   sim.DefaultServer(),
		},
		check: reachesWithin(20*time.Second, 0.8*2*capacity, 30*time.Second),
	},
	{
		Scenario: sim.Scenario{
			Name: "capacity halves", Seed: 3, Duration: 40 * time.Second, Start: capacity,
			Capacity: []sim.Step{{At: 0, N: capacity}, {At: 20 * time.Second, N: capacity / 2}},
			Clients:  []sim.Step{{At: 0, N: 3 * capacity}},
			Server:   sim.DefaultServer(),
		},
		check: fallsWithin(20*time.Second, 1.2*capacity/2, 5),
	},
	{
		Scenario: steady("steady overload 3C, 10 min", capacity, 3*capacity, 10*time.Minute),
		check:    noDrift(20),
	},
	{
		Scenario: steady("app-limited C/2", capacity/4, capacity/2, time.Minute),
		check:    appLimited,
	},
}

// gates are what the scenarios run against: the FIFO core with the window Meter, sampling by a
// counter so that each run repeats exactly, and the limiter itself, limiter.WithAdaptive, which
// samples at random, so that its runs repeat only in distribution — the claims are ranges.
var gates = []struct {
	name string
	new  sim.NewGate
}{
	{"core", sim.NewSemaGate},
	{"limiter", newLimiterGate},
}

// newLimiterGate is the limiter as a gate: it never waits (acquire timeout 0), and the server's
// refusals and timeouts are its drops.
func newLimiterGate(start int, c adaptive.Controller) sim.Gate {
	return limiterGate{limiter.New(start, limiter.WithAdaptive(c), limiter.WithAcquireTimeout(0),
		limiter.WithOverload(sim.Overload))}
}

type limiterGate struct{ *limiter.Limiter }

func (g limiterGate) Limit() int { return g.Stats().Limit }

func TestScenarios(t *testing.T) {
	for _, g := range gates {
		for _, b := range builtins {
			t.Run(g.name+"/"+b.name, func(t *testing.T) {
				t.Parallel()
				for _, sc := range scenarios {
					t.Run(sc.Name, func(t *testing.T) {
						tr := sim.Simulate(t, sc.Scenario, b.c, g.new)
						t.Log("\n" + tr.Table(20))
						neverOutside(t, tr, b.min, 500)
						t.Logf("RESULT %s | %s | %s | %s", g.name, b.name, sc.Name, sc.check(t, tr))
					})
				}
			})
		}
	}
}

// neverOutside asserts that no window set the limit outside [lo, hi]: in particular, no window
// pinned it below Min to probe.
func neverOutside(t *testing.T, tr *sim.Trace, lo, hi int) {
	t.Helper()
	for i, r := range tr.Records {
		if r.Next < lo || r.Next > hi {
			t.Fatalf("window %d at %v: limit %d outside [%d, %d]", i, r.At, r.Next, lo, hi)
		}
	}
}

// within reports whether limit is within ±20 % of c.
func within(limit, c int) bool {
	return float64(limit) >= 0.8*float64(c) && float64(limit) <= 1.2*float64(c)
}

// convergesWithin asserts that the limit is within ±20 % of the capacity from window n on,
// with the tolerance the overload claim grants: an excursion out of the band lasts at most 2
// windows. It returns the first window from which that holds.
func convergesWithin(n int) func(*testing.T, *sim.Trace) string {
	return func(t *testing.T, tr *sim.Trace) string {
		require.Greater(t, len(tr.Records), n)
		out := func(r sim.Record) bool { return !within(r.Next, r.Capacity) }
		first := -1 // the first window from which every excursion is at most 2 windows long
		for i := range tr.Records {
			if !out(tr.Records[i]) && longestAbove(tr.Records[i:], out) <= 2 {
				first = i
				break
			}
		}
		require.GreaterOrEqual(t, first, 0, "the limit never settled within ±20 %% of C")
		assert.LessOrEqual(t, first+1, n, "settled within ±20 %% of C at window %d", first+1)
		lo, hi := bandAfter(tr.Records[first:])
		strays := 0
		for _, r := range tr.Records[first:] {
			if out(r) {
				strays++
			}
		}
		return fmt.Sprintf("within ±20 %% of C from window %d on (limit %d-%d; %d of %d windows out, none by more than 2 in a row)",
			first+1, lo, hi, strays, len(tr.Records)-first)
	}
}

// reachesWithin asserts that after the capacity steps at step, the limit reaches at least
// target within d.
func reachesWithin(step time.Duration, target float64, d time.Duration) func(*testing.T, *sim.Trace) string {
	return func(t *testing.T, tr *sim.Trace) string {
		for _, r := range tr.After(step) {
			if float64(r.Next) >= target {
				took := r.At - step
				assert.LessOrEqual(t, took, d)
				return fmt.Sprintf("≥ %.0f after %v", target, took.Round(10*time.Millisecond))
			}
		}
		t.Fatalf("the limit never reached %.0f after the capacity stepped", target)
		return ""
	}
}

// fallsWithin asserts that after the capacity steps down at step, one of the first n windows
// brings the limit to at most target, and that it never again stays above target for more
// than 2 windows.
func fallsWithin(step time.Duration, target float64, n int) func(*testing.T, *sim.Trace) string {
	return func(t *testing.T, tr *sim.Trace) string {
		after := tr.After(step)
		require.Greater(t, len(after), n)
		at := -1
		for i, r := range after[:n] {
			if float64(r.Next) <= target {
				at = i
				break
			}
		}
		require.GreaterOrEqual(t, at, 0, "limits after the step: %v", nexts(after[:n]))
		run := longestAbove(after[at:], func(r sim.Record) bool { return float64(r.Next) > target })
		assert.LessOrEqual(t, run, 2, "stayed above %.0f for %d windows", target, run)
		return fmt.Sprintf("≤ %.0f after %d windows (%v), then never > 2 windows above", target, at+1, nexts(after[:at+1]))
	}
}

// noDrift asserts that after the first n windows the limit never stays above 1.2×C for more
// than 2 windows, and that the last minute's limits are no higher than the first minute's
// after convergence: no upward drift.
func noDrift(n int) func(*testing.T, *sim.Trace) string {
	return func(t *testing.T, tr *sim.Trace) string {
		require.Greater(t, len(tr.Records), n)
		recs := tr.Records[n:]
		run := longestAbove(recs, func(r sim.Record) bool { return float64(r.Next) > 1.2*float64(r.Capacity) })
		assert.LessOrEqual(t, run, 2, "stayed above 1.2×C for %d windows", run)
		first, last := meanLimit(tr, time.Minute, 2*time.Minute), meanLimit(tr, tr.Scenario.Duration-time.Minute, tr.Scenario.Duration)
		assert.InDelta(t, first, last, 0.1*capacity, "the mean limit moved from %.1f to %.1f", first, last)
		assert.True(t, within(int(last), capacity), "mean limit of the last minute %.1f", last)
		lo, hi := bandAfter(recs)
		return fmt.Sprintf("limit %d-%d over %d windows; longest run above 1.2×C: %d; mean %.1f in minute 2, %.1f in minute 10",
			lo, hi, len(recs), run, first, last)
	}
}

// appLimited asserts that no window raised the limit above twice its highest in-flight count,
// and that the limit never exceeded twice the highest in-flight count of the whole run.
func appLimited(t *testing.T, tr *sim.Trace) string {
	peak, top := 0, 0
	for i, r := range tr.Records {
		peak = max(peak, r.Window.MaxInFlight)
		top = max(top, r.Next)
		if r.Next > r.Window.Limit {
			assert.LessOrEqual(t, r.Next, 2*r.Window.MaxInFlight, "window %d raised the limit to %d with %d in flight", i, r.Next, r.Window.MaxInFlight)
		}
	}
	assert.LessOrEqual(t, top, 2*peak)
	return fmt.Sprintf("highest limit %d, highest in flight %d (ratio %.2f)", top, peak, float64(top)/float64(peak))
}

func longestAbove(recs []sim.Record, above func(sim.Record) bool) int {
	run, longest := 0, 0
	for _, r := range recs {
		if above(r) {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	return longest
}

func meanLimit(tr *sim.Trace, from, to time.Duration) float64 {
	sum, n := 0, 0
	for _, r := range tr.Records {
		if r.At >= from && r.At < to {
			sum, n = sum+r.Next, n+1
		}
	}
	return float64(sum) / float64(max(n, 1))
}

func bandAfter(recs []sim.Record) (lo, hi int) {
	lo = 1 << 62
	for _, r := range recs {
		lo, hi = min(lo, r.Next), max(hi, r.Next)
	}
	return lo, hi
}

func nexts(recs []sim.Record) []int {
	var out []int
	for _, r := range recs {
		out = append(out, r.Next)
	}
	return out
}
