package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/goloom/loom/inspect"
	"github.com/goloom/loom/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestExample runs the program as it is run alone and checks what it printed: each phase did
// what it is there for, and every series of the limiter, the semaphore and the scope is on
// /metrics.
func TestExample(t *testing.T) {
	alone(t)
	var out bytes.Buffer
	require.NoError(t, run(t.Context(), &out, nil), out.String())
	got := out.String()
	row := func(name string) []int {
		m := regexp.MustCompile(`(?m)^\s+` + name + `\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)$`).FindStringSubmatch(got)
		require.NotNil(t, m, "no row for phase %s in:\n%s", name, got)
		var n []int
		for _, s := range m[1:] {
			v, _ := strconv.Atoi(s)
			n = append(n, v)
		}
		return n // clients, 200, 503, 504
	}
	assert.Positive(t, row("steady")[1], "steady: answered")
	assert.Positive(t, row("burst")[2], "burst: rejected")
	assert.Positive(t, row("slow")[3], "slow: timed out")
	assert.Positive(t, row("recovery")[1], "recovery: answered")
	assert.Regexp(t, `/debug/loom: limiter "backend" limit 4, in flight \d, waiting \d`, got)
	assert.Regexp(t, `/metrics: loom_scopes_open\{scope="profile"\} \d+`, got) // how many: as the load allows
	for _, name := range []string{
		"loom_limiter_in_flight", "loom_limiter_waiting", "loom_limiter_limit", "loom_limiter_rate_waiting",
		"loom_limiter_calls_total", "loom_limiter_panics_total", "loom_limiter_limit_changes_total",
		"loom_fleet_capacity", "loom_fleet_permits_held", "loom_fleet_waiting", "loom_fleet_acquired_total",
		"loom_fleet_leases_lost_total", "loom_fleet_unavailable_total", "loom_fleet_degraded_total",
		"loom_fleet_round_trips_total", "loom_scopes_open", "loom_subtasks_running",
	} {
		assert.Regexp(t, `(?m)^  `+name+`\s`, got)
	}
	// After the load: nothing in flight, no scope open (the name stays, at 0).
	assert.Regexp(t, `(?m)^  loom_limiter_in_flight\s+limiter="backend"\s+0$`, got)
	assert.Regexp(t, `(?m)^  loom_scopes_open\s+scope="profile"\s+0$`, got)
}

func TestBadPhase(t *testing.T) {
	var out bytes.Buffer
	assert.ErrorContains(t, run(t.Context(), &out, []string{"-phase", "10ms"}), "-phase 10ms: at least 150ms")
}

// TestServe runs the program with -serve and reads /metrics and /debug/loom as a Prometheus
// server and a person would, then stops it.
func TestServe(t *testing.T) {
	alone(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	out := &testutil.SyncBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, out, []string{"-serve", "-phase", "150ms"}) }()
	var url string
	require.Eventually(t, func() bool {
		m := regexp.MustCompile(`serving on (http://\S+):`).FindStringSubmatch(out.String())
		if m != nil {
			url = m[1]
		}
		return m != nil && regexp.MustCompile(`phases done`).MatchString(out.String())
	}, 30*time.Second, 10*time.Millisecond, out.String())

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	get := func(path string) (string, string) {
		resp, err := client.Get(url + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		return string(body), resp.Header.Get("Content-Type")
	}
	metrics, ctype := get("/metrics")
	assert.Contains(t, ctype, "text/plain")
	assert.Contains(t, metrics, `loom_limiter_limit{limiter="backend"} 4`)
	assert.Contains(t, metrics, `loom_fleet_capacity{semaphore="backend-fleet"} 6`)
	assert.Regexp(t, `loom_limiter_calls_total\{limiter="backend",outcome="completed"\} [1-9]`, metrics)
	dump, _ := get("/debug/loom?format=json")
	assert.Contains(t, dump, `"name": "backend"`)
	profile, _ := get("/profile/7")
	assert.Equal(t, "user 7, orders of 7\n", profile)

	cancel()
	require.NoError(t, <-done)
}

// alone waits until the limiter and the semaphore of an earlier run of the program in this test
// binary have been garbage collected: the registry lists a limiter until then, and a second
// "backend" would add to this run's numbers and show in its dump.
func alone(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool {
		runtime.GC()
		for _, l := range inspect.Snapshot().Limiters {
			if l.Name == "backend" {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond, "an earlier run's limiter is still reachable")
}
