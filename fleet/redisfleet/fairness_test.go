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
// process arrives later and asks twenty times. Served in arrival order, each of its requests
// waits for the hammer's requests that asked before it (they are in the fleet's queue, in their
// order), never for one that asked after it (with the slack of a ride: a waiter's place is taken
// at its head's next request, or its process's next release, 2 ms at most), and it is never
// starved. The waits are logged.
func TestFairnessAcrossProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process")
	}
	t.Parallel()
	const capacity, hold = 2, 10 * time.Millisecond
	srv := redistest.Start(t)
	up := startUpstream(t, capacity, hold, 0)
	hammer := startReplica(t, replicaConfig{ID: 1, Redis: srv.Addr, Upstream: up.URL, Name: "fair", Capacity: capacity, Lease: ttl, Workers: 16, Direct: true})
	deadline := time.Now().Add(30 * time.Second)
	for up.starts[1].Load() < 50 {
		require.True(t, time.Now().Before(deadline), "the hammer never got going:\n%s", hammer.out.String())
		time.Sleep(10 * time.Millisecond)
	}
	late := process(t, srv, "fair", capacity)
	type span struct{ from, to time.Time }
	var waits []span
	for range 20 {
		t0 := time.Now()
		p, err := late.Acquire(t.Context(), 1)
		require.NoError(t, err)
		waits = append(waits, span{t0, time.Now()})
		time.Sleep(hold)
		p.Release()
	}
	_, err := hammer.stop(t, 15*time.Second)
	require.NoError(t, err)
	const slack = 5 * time.Millisecond
	var ahead, passed int
	var longest []time.Duration
	for _, w := range waits {
		longest = append(longest, w.to.Sub(w.from))
		for _, c := range up.callLog() {
			// Granted during the wait: its call started before the latecomer's grant came back.
			if c.Start.After(w.from) && c.Start.Before(w.to) {
				if c.Asked.After(w.from.Add(slack)) {
					passed++
				} else {
					ahead++
				}
			}
		}
	}
	slices.Sort(longest)
	t.Logf("latecomer vs a 16-worker hammer (capacity %d, calls of %v): wait median %v, max %v; hammer calls granted during its waits: %d that asked before it, %d that asked more than %v after it",
		capacity, hold, longest[len(longest)/2].Round(time.Microsecond), longest[len(longest)-1].Round(time.Microsecond), ahead, passed, slack)
	assert.Zero(t, passed, "served in arrival order, not after the hammer's stream")
	// The hammer's fourteen waiting requests at most, two at a time: 70 ms, and slack for a
	// loaded machine.
	assert.Less(t, longest[len(longest)-1], 16/2*hold+200*time.Millisecond)
}
