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
// order), not for one that asked after it, and it is never starved. A caller's "asked" is stamped
// before its request leaves its process, so a request that a loaded machine holds up for a few
// milliseconds reaches Redis after one stamped later: a hammer call counts as passing only if it
// asked more than 20 ms after the latecomer, and at most 1 % of the calls granted during its waits
// may (the fleet's goal for FIFO across processes). An unfair semaphore, whose releases go to
// the hammer's own next caller, grants nearly all of them so. The waits are logged.
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
		p, err := late.AcquireTimeout(t.Context(), 1, 10*time.Second)
		require.NoError(t, err, "starved")
		waits = append(waits, span{t0, time.Now()})
		time.Sleep(hold)
		p.Release()
	}
	_, err := hammer.stop(t, 15*time.Second)
	require.NoError(t, err)
	const slack = 20 * time.Millisecond
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
	assert.LessOrEqual(t, passed*100, ahead+passed, "served in arrival order, not after the hammer's stream")
	// The hammer's fourteen waiting requests at most, two at a time: 70 ms, and slack for a
	// loaded machine.
	assert.Less(t, longest[len(longest)-1], 16/2*hold+200*time.Millisecond)
}
