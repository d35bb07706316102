package redisfleet_test

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/fleet/redisfleet/internal/redistest"
)

// TestFairnessAcrossProcesses: one replica process hammers the limit with sixteen workers; this
// process arrives later and asks twenty times. Served in arrival order, each of its requests waits
// for at most the one request the hammer has queued ahead of it (plus one granted in the instant
// it arrived). The waits are logged.
func TestFairnessAcrossProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process")
	}
	t.Parallel()
	const capacity, hold = 2, 10 * time.Millisecond
	srv := redistest.Start(t)
	up := startUpstream(t, capacity, hold, 0)
	hammer := startReplica(t, replicaConfig{ID: 1, Redis: srv.Addr, Upstream: up.URL, Name: "fair", Capacity: capacity, Lease: ttl, Workers: 16})
	deadline := time.Now().Add(30 * time.Second)
	for up.starts[1].Load() < 50 {
		require.True(t, time.Now().Before(deadline), "the hammer never got going:\n%s", hammer.out.String())
		time.Sleep(10 * time.Millisecond)
	}
	late := process(t, srv, "fair", capacity)
	var waits []time.Duration
	var worst int64
	for range 20 {
		before, t0 := up.starts[1].Load(), time.Now()
		p, err := late.Acquire(t.Context(), 1)
		require.NoError(t, err)
		waits = append(waits, time.Since(t0))
		worst = max(worst, up.starts[1].Load()-before)
		time.Sleep(hold)
		p.Release()
	}
	_, err := hammer.stop(t, 15*time.Second)
	require.NoError(t, err)
	slices.Sort(waits)
	t.Logf("latecomer vs a 16-worker hammer (capacity %d, calls of %v): wait median %v, max %v; hammer calls started during one wait: at most %d",
		capacity, hold, waits[len(waits)/2].Round(time.Microsecond), waits[len(waits)-1].Round(time.Microsecond), worst)
	assert.LessOrEqual(t, worst, int64(2+capacity), "served in arrival order, not after the hammer's stream")
	assert.Less(t, waits[len(waits)-1], 5*hold+100*time.Millisecond)
}
