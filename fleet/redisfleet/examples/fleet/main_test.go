package main

import (
	"bytes"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/goloom/loom/internal/fleetdemo/fleetdemotest"

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
	fleetdemotest.CheckOutput(t, runExample(t, "-calls", "100"), 5, 100)
}

// TestFleetRedis runs the example's replicas, as goroutines, each with its own client of a Redis
// the test starts (skipped without redis-server), and checks that the run left no key behind. The
// Redis tests use a 3 s lease, not the example's 1 s: a backend call may take a third of the
// lease, and under -race beside other tests a round trip took more than 333 ms.
func TestFleetRedis(t *testing.T) {
	srv := redistest.Start(t)
	fleetdemotest.CheckOutput(t, runExample(t, "-calls", "100", "-lease", "3s", "-redis", srv.Addr), 5, 100)
	keys, err := srv.Client().Keys(t.Context(), "*").Result()
	require.NoError(t, err)
	assert.Empty(t, keys, "the run deletes the keys of its name")
}

// TestFleetRedisProcesses runs each replica as a process of its own (this test binary again,
// told by replicaEnv in TestMain), on a Redis the test starts.
func TestFleetRedisProcesses(t *testing.T) {
	srv := redistest.Start(t)
	got := runExample(t, "-replicas", "3", "-calls", "100", "-lease", "3s", "-redis", srv.Addr, "-processes")
	assert.Contains(t, got, "3 replicas (processes)")
	fleetdemotest.CheckOutput(t, got, 3, 100)
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
