package main

import (
	"bytes"
	"os"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/goloom/loom/fleet/redisfleet/internal/redistest"
)

func TestMain(m *testing.M) {
	if cfg, ok := os.LookupEnv(replicaEnv); ok { // a replica process of TestFleetRedisProcesses
		os.Exit(replicaMain(cfg))
	}
	goleak.VerifyTestMain(m)
}

// TestFleet runs the example on the in-memory backend with fewer calls. run fails by itself if
// the fleet let more than 40 calls through at once or the API answered a 429; here we also read
// the printed tables.
func TestFleet(t *testing.T) {
	checkOutput(t, runExample(t, "-calls", "100"), 5, 100)
}

// TestFleetRedis runs the example's replicas, as goroutines, each with its own client of a Redis
// the test starts (skipped without redis-server), and checks that the run left no key behind.
func TestFleetRedis(t *testing.T) {
	srv := redistest.Start(t)
	checkOutput(t, runExample(t, "-calls", "100", "-redis", srv.Addr), 5, 100)
	keys, err := srv.Client().Keys(t.Context(), "*").Result()
	require.NoError(t, err)
	assert.Empty(t, keys, "the run deletes the keys of its name")
}

// TestFleetRedisProcesses runs each replica as a process of its own (this test binary again,
// told by replicaEnv in TestMain), on a Redis the test starts.
func TestFleetRedisProcesses(t *testing.T) {
	srv := redistest.Start(t)
	got := runExample(t, "-replicas", "3", "-calls", "100", "-redis", srv.Addr, "-processes")
	assert.Contains(t, got, "3 replicas (processes)")
	checkOutput(t, got, 3, 100)
}

func TestFleetRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-replicas", "0"}, {"-limit", "0"}, {"-calls", "0"}, {"-latency", "-1s"}, {"-lease", "500ms"},
		{"-processes"}, {"-nope"},
	} {
		var out bytes.Buffer
		assert.Error(t, run(t.Context(), &out, args), "%v", args)
	}
}

func runExample(t *testing.T, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	require.NoError(t, run(t.Context(), &out, args), out.String())
	return out.String()
}

// checkOutput reads the example's tables: without the fleet the API saw more than 40 calls in
// flight and answered 429s; through it, never more than 40 and no 429; each replica's counts add
// up.
func checkOutput(t *testing.T, got string, replicas, calls int) {
	t.Helper()
	total := replicas * calls
	row := func(name string) []int {
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s`).FindStringSubmatch(got)
		require.NotNil(t, m, "no row %q in\n%s", name, got)
		var n []int
		for _, s := range m[1:] {
			v, err := strconv.Atoi(s)
			require.NoError(t, err)
			n = append(n, v)
		}
		return n // calls, 200 OK, 429, other errors, most in flight
	}

	alone := row("limiter.New(40)")
	assert.Equal(t, total, alone[0], "calls the API got without the fleet")
	assert.Equal(t, total, alone[1]+alone[2], "every call answered 200 or 429")
	assert.Positive(t, alone[2], "without the fleet, the API answers 429s")
	assert.Greater(t, alone[4], 40, "without the fleet, the API sees more than 40 in flight")

	shared := row("limiter.New(40, limiter.WithFleet(sem))")
	assert.Equal(t, []int{total, total, 0, 0}, shared[:4], "through the fleet: every call 200, no 429, no error")
	assert.LessOrEqual(t, shared[4], 40, "through the fleet: at most 40 in flight")
	assert.Positive(t, shared[4])

	perReplica := regexp.MustCompile(`(?m)^\d+\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+\d+\s+\d+\.\d$`).FindAllStringSubmatch(got, -1)
	require.Len(t, perReplica, replicas, got)
	c := strconv.Itoa(calls)
	for _, m := range perReplica {
		assert.Equal(t, []string{c, "0", c, c, "0"}, m[1:], "Completed, Rejected, Acquired, Released, LeasesLost")
	}
	assert.NotContains(t, got, "level=WARN", "no warning: no outage, no lease lost")
	assert.NotContains(t, got, "level=ERROR")
}
