package sim_test

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/internal/sim"
	"github.com/goloom/loom/limiter/adaptive"
)

// fixed is a controller that never moves the limit: it lets a test look at the server model.
type fixed struct{}

func (fixed) Update(w adaptive.Window) int { return w.Limit }

// observe runs n clients at a fixed limit n against server at capacity c and returns the
// median of the windows' median RTTs after the first second, and the run.
func observe(t *testing.T, server sim.Server, c, n int, slowness int) (time.Duration, *sim.Trace) {
	t.Helper()
	sc := sim.Scenario{
		Name: "model", Seed: 5, Duration: 20 * time.Second, Start: n,
		Capacity: []sim.Step{{At: 0, N: c}}, Clients: []sim.Step{{At: 0, N: n}},
		Slowness: []sim.Step{{At: 0, N: slowness}}, Server: server,
	}
	tr := sim.Simulate(t, sc, fixed{}, sim.NewSemaGate)
	var p50s []time.Duration
	for _, r := range tr.After(time.Second) {
		if r.Window.Samples > 0 {
			p50s = append(p50s, r.Window.P50)
		}
	}
	if len(p50s) == 0 {
		return 0, tr
	}
	slices.Sort(p50s)
	return p50s[len(p50s)/2], tr
}

func TestServerModel(t *testing.T) {
	s := sim.DefaultServer()
	near := func(t *testing.T, want float64, got time.Duration) {
		t.Helper()
		assert.InEpsilon(t, want*float64(s.Service), float64(got), 0.06, "median RTT %v", got)
	}
	t.Run("latency is flat below the knee", func(t *testing.T) {
		p50, tr := observe(t, s, 40, 20, 100)
		near(t, 1, p50)
		assert.Zero(t, tr.Drops)
	})
	t.Run("latency rises past it", func(t *testing.T) {
		p50, tr := observe(t, s, 40, 44, 100)
		near(t, 1.1, p50)
		assert.Zero(t, tr.Drops, "up to C×(1+Queue) calls are served")
	})
	t.Run("calls above C×(1+Queue) are refused", func(t *testing.T) {
		p50, tr := observe(t, s, 40, 80, 100)
		near(t, 1.1, p50) // the calls that are served
		// 44 slots hold served calls for 220 ms, the other 36 cycle 50 ms refusals: 200 calls
		// served a second, 720 refused.
		assert.InDelta(t, 720.0/920, float64(tr.Drops)/float64(tr.Calls), 0.04)
		for _, r := range tr.After(time.Second) {
			require.Positive(t, r.Window.Drops)
		}
	})
	t.Run("an outage refuses everything", func(t *testing.T) {
		_, tr := observe(t, s, 0, 10, 100)
		assert.Equal(t, tr.Calls, tr.Drops)
	})
	t.Run("an unbounded server queues instead", func(t *testing.T) {
		q := s
		q.Unbounded, q.Timeout = true, 0
		p50, tr := observe(t, q, 40, 80, 100)
		near(t, 2, p50)
		assert.Zero(t, tr.Drops)
	})
	t.Run("slowness scales the latency", func(t *testing.T) {
		p50, _ := observe(t, s, 40, 20, 200)
		near(t, 2, p50)
	})
	t.Run("calls slower than the timeout fail", func(t *testing.T) {
		q := s
		q.Unbounded, q.Timeout = true, 3*s.Service
		_, tr := observe(t, q, 10, 40, 100) // 4× Service past the knee
		// 4×Service×jitter > 3×Service but for the fastest ~8 % (a 20 % spread) and the lucky 1 %.
		assert.InDelta(t, 0.91, float64(tr.Drops)/float64(tr.Calls), 0.03)
	})
}

// The tour scenario: the one drawn in the SVG.
func tour() sim.Scenario {
	return sim.Scenario{
		Name: "tour", Seed: 42, Duration: 100 * time.Second, Start: 10,
		Capacity: []sim.Step{{At: 0, N: 40}, {At: 30 * time.Second, N: 80}, {At: 60 * time.Second, N: 20}, {At: 80 * time.Second, N: 40}},
		Clients:  []sim.Step{{At: 0, N: 240}},
		Server:   sim.DefaultServer(),
	}
}

func TestRunsAreExactlyRepeatable(t *testing.T) {
	a := sim.Simulate(t, tour(), adaptive.Gradient{Min: 4, Max: 500}, sim.NewSemaGate)
	b := sim.Simulate(t, tour(), adaptive.Gradient{Min: 4, Max: 500}, sim.NewSemaGate)
	require.NotEmpty(t, a.Records)
	assert.Equal(t, a.Records, b.Records, "the same seed gives the same windows")
	assert.Equal(t, [3]int64{a.Calls, a.Drops, a.Rejected}, [3]int64{b.Calls, b.Drops, b.Rejected})
	other := tour()
	other.Seed++
	c := sim.Simulate(t, other, adaptive.Gradient{Min: 4, Max: 500}, sim.NewSemaGate)
	assert.NotEqual(t, a.Records, c.Records, "another seed gives another run")
}

// blocking is a controller whose Update waits for release.
type blocking struct{ entered, release chan struct{} }

func (b blocking) Update(w adaptive.Window) int {
	b.entered <- struct{}{}
	<-b.release
	return w.Limit
}

func TestRecorderCatchesConcurrentUpdates(t *testing.T) {
	inner := blocking{entered: make(chan struct{}), release: make(chan struct{})}
	r := sim.NewRecorder(inner)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Update(adaptive.Window{Limit: 3})
	}()
	<-inner.entered
	assert.PanicsWithValue(t, "sim: Recorder: concurrent Update", func() { r.Update(adaptive.Window{Limit: 3}) })
	close(inner.release)
	<-done
	require.Len(t, r.Records(), 1)
	assert.Equal(t, 3, r.Records()[0].Next)
}

func TestRecorderStartsTheController(t *testing.T) {
	r := sim.NewRecorder(adaptive.Gradient{Min: 4, Max: 30})
	c := r.Start(100)
	require.Same(t, r, c)
	assert.Equal(t, 30, c.Update(healthyWindow(30)), "the started Gradient, bounded")
}

func healthyWindow(limit int) adaptive.Window {
	return adaptive.Window{Limit: limit, Samples: 32, MaxInFlight: limit, P50: 200 * time.Millisecond, P90: 250 * time.Millisecond}
}

func TestSemaGate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := sim.NewSemaGate(2, fixed{})
		assert.Equal(t, 2, g.Limit())
		release := make(chan struct{})
		started := make(chan struct{}, 2)
		done := make(chan error, 2)
		for range 2 {
			go func() {
				done <- g.Do(t.Context(), func(context.Context) error { started <- struct{}{}; <-release; return nil })
			}()
		}
		<-started
		<-started
		ran := false
		err := g.Do(t.Context(), func(context.Context) error { ran = true; return nil })
		assert.ErrorIs(t, err, sim.ErrRejected, "no free slot: rejected at once")
		assert.False(t, ran)
		close(release)
		require.NoError(t, <-done)
		require.NoError(t, <-done)
		assert.NoError(t, g.Do(t.Context(), func(context.Context) error { return nil }), "slots are given back")
		var nilCtx context.Context // the misuse under test
		assert.PanicsWithValue(t, "sim: Do: nil context", func() {
			_ = g.Do(nilCtx, func(context.Context) error { return nil })
		})
	})
}

func TestAt(t *testing.T) {
	steps := []sim.Step{{At: 0, N: 40}, {At: 10 * time.Second, N: 80}}
	tests := []struct {
		give time.Duration
		want int
	}{{-time.Second, 0}, {0, 40}, {9 * time.Second, 40}, {10 * time.Second, 80}, {time.Hour, 80}}
	for _, tt := range tests {
		assert.Equal(t, tt.want, sim.At(steps, tt.give), "at %v", tt.give)
	}
}

func TestBadScenariosPanic(t *testing.T) {
	good := tour()
	for name, mutate := range map[string]func(*sim.Scenario){
		"no duration":         func(sc *sim.Scenario) { sc.Duration = 0 },
		"start below 1":       func(sc *sim.Scenario) { sc.Start = 0 },
		"no capacity":         func(sc *sim.Scenario) { sc.Capacity = nil },
		"descending steps":    func(sc *sim.Scenario) { sc.Clients = []sim.Step{{At: time.Second, N: 1}, {At: 0, N: 2}} },
		"too many clients":    func(sc *sim.Scenario) { sc.Clients = []sim.Step{{At: 0, N: 5000}} },
		"no service time set": func(sc *sim.Scenario) { sc.Server = sim.Server{} },
	} {
		sc := good
		mutate(&sc)
		assert.Panics(t, func() { sim.Run(sc, fixed{}, sim.NewSemaGate) }, name)
	}
}
