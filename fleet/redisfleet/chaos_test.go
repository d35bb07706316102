package redisfleet_test

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/fleet/redisfleet/internal/redistest"
)

// TestChaos runs eight replica processes (four workers each) against one Redis and one upstream
// with a capacity of ten (calls of 20 ms, one in ten of 400 ms), and then, mid-run, kills two
// replicas with SIGKILL while they hold permits, restarts Redis with its data lost, restarts it
// from an RDB snapshot taken earlier (its queue and leases from then), and freezes it with
// SIGSTOP for a second and a half. It asserts that the upstream never sees more than ten calls
// at once in any phase, that the killed replicas' permits are usable again within a lease TTL
// (and slack), that after each restart the fleet is back at full capacity within two TTLs, and
// that the survivors end cleanly with no goroutine left (each replica's TestMain runs goleak).
// The figures are logged.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("about 15 s of multi-process chaos")
	}
	const (
		replicas = 8
		workers  = 4
		capacity = 10
		lease    = time.Second
		hold     = 20 * time.Millisecond  // most calls
		long     = 400 * time.Millisecond // every tenth: some calls outlive the restart of Redis
	)
	srv := redistest.Start(t, redistest.Persistent...)
	admin := srv.Client()
	up := startUpstream(t, capacity, hold, long)
	var rs []*replica
	for i := range replicas {
		rs = append(rs, startReplica(t, replicaConfig{
			ID: i, Redis: srv.Addr, Upstream: up.URL, Name: "chaos", Capacity: capacity, Lease: lease, Workers: workers,
			Direct: true,
		}))
	}
	// Every replica is calling (the first use of the name costs one TTL).
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; i < replicas; {
		if up.starts[i].Load() > 0 {
			i++
			continue
		}
		require.True(t, time.Now().Before(deadline), "replica %d never called:\n%s", i, rs[i].out.String())
		time.Sleep(10 * time.Millisecond)
	}

	type phase struct {
		name     string
		began    time.Time
		took     time.Duration
		recovery string
	}
	var phases []phase
	begin := func(ph int, name string, notBefore time.Time) {
		now := time.Now()
		if len(phases) > 0 {
			phases[len(phases)-1].took = now.Sub(phases[len(phases)-1].began)
		}
		up.enter(ph, notBefore)
		phases = append(phases, phase{name: name, began: now})
	}

	begin(0, "steady, 8 replicas", time.Now())
	time.Sleep(2 * time.Second)

	// Phase 1: SIGKILL two replicas while both have calls in flight, so their leases are stuck.
	deadline = time.Now().Add(10 * time.Second)
	for up.perReplica[0].Load() == 0 || up.perReplica[1].Load() == 0 {
		require.True(t, time.Now().Before(deadline), "replicas 0 and 1 never had calls in flight together")
		time.Sleep(100 * time.Microsecond)
	}
	killed := time.Now()
	rs[0].kill()
	rs[1].kill()
	for up.perReplica[0].Load() > 0 || up.perReplica[1].Load() > 0 { // their connections are closed
		time.Sleep(time.Millisecond)
	}
	stuck := capacity - up.inFlight.Load()
	begin(1, "2 replicas SIGKILLed", time.Now())
	at, ok := up.waitFull(1, lease+3*time.Second)
	require.True(t, ok, "the killed replicas' permits never came back")
	killRecovery := at.Sub(killed)
	phases[1].recovery = fmt.Sprintf("full capacity again %v after the kill (leases of the dead: up to %d)", killRecovery.Round(time.Millisecond), stuck)
	// Guarantee 2 says one TTL; the rest is the slack a loaded 2-core machine needs to schedule
	// eight replicas and a Redis (measured 1.0-1.3 s; it once took 2.28 s under -race beside two
	// busy loops).
	assert.Less(t, killRecovery, lease+3*time.Second, "the killed replicas' capacity is usable again within a TTL")
	time.Sleep(time.Second)

	// Phase 2: Redis restarts and loses everything.
	restarted := time.Now()
	srv.Restart()
	// Calls granted before the loss end within the long hold; from then on, reaching the
	// capacity means new grants after the pause. The long calls keep running across the restart:
	// their leases must register again before anything new is admitted, or the upstream sees
	// more than the capacity.
	begin(2, "Redis restarted, data lost", restarted.Add(long+100*time.Millisecond))
	at, ok = up.waitFull(2, 4*lease)
	require.True(t, ok, "the fleet never got back to full capacity after the restart")
	restartRecovery := at.Sub(restarted)
	phases[2].recovery = fmt.Sprintf("full capacity again %v after the restart", restartRecovery.Round(time.Millisecond))
	assert.Less(t, restartRecovery, 2*lease+3*time.Second, "throughput recovers within two TTLs (and slack, as above)")
	time.Sleep(500 * time.Millisecond)

	// Phase 3: a snapshot now, then back to it a second later: the restored state lacks every
	// lease granted since, and holds a queue of entries long dead.
	begin(3, "restored from a 1 s old RDB", time.Now())
	require.NoError(t, admin.Save(t.Context()).Err())
	older := srv.CopyFiles()
	time.Sleep(time.Second)
	restored := time.Now()
	srv.RestartFrom(older)
	up.rearm(3, restored.Add(long+100*time.Millisecond))
	at, ok = up.waitFull(3, 4*lease)
	require.True(t, ok, "the fleet never got back to full capacity after the restore")
	phases[3].recovery = fmt.Sprintf("full capacity again %v after the restore", at.Sub(restored).Round(time.Millisecond))
	time.Sleep(500 * time.Millisecond)

	// Phase 4: Redis frozen for 1.5 s (longer than a lease): leases are lost, calls refused
	// (FailClosed), never more than the capacity, and the fleet comes back by itself.
	begin(4, "Redis frozen 1.5 s (SIGSTOP)", time.Now())
	srv.Signal(syscall.SIGSTOP)
	time.Sleep(1500 * time.Millisecond)
	srv.Signal(syscall.SIGCONT)
	thawed := time.Now()
	up.rearm(4, thawed)
	at, ok = up.waitFull(4, 4*lease)
	require.True(t, ok, "the fleet never got back to full capacity after the freeze")
	phases[4].recovery = fmt.Sprintf("full capacity again %v after the thaw", at.Sub(thawed).Round(time.Millisecond))
	time.Sleep(500 * time.Millisecond)

	begin(5, "after the faults", time.Now())
	time.Sleep(1500 * time.Millisecond)
	begin(6, "", time.Now()) // closes phase 5's clock
	phases = phases[:len(phases)-1]

	var report strings.Builder
	fmt.Fprintf(&report, "\n%-28s %8s %14s %8s %9s  %s\n", "phase", "length", "most in flight", "calls", "calls/s", "recovery")
	for i, ph := range phases {
		calls := up.calls[i].Load()
		fmt.Fprintf(&report, "%-28s %8v %11d/%d %8d %9.0f  %s\n", ph.name, ph.took.Round(time.Millisecond),
			up.most[i].Load(), capacity, calls, float64(calls)/ph.took.Seconds(), ph.recovery)
	}
	for i := 2; i < replicas; i++ {
		st, err := rs[i].stop(t, 15*time.Second)
		require.NoError(t, err, "survivor %d did not end cleanly (a goroutine left behind fails its goleak check)", i)
		fmt.Fprintf(&report, "replica %d: %v\n", i, st)
	}
	calls := up.callLog()
	broken, duplicates := tokenOrder(calls)
	fmt.Fprintf(&report, "%d calls: fencing tokens out of order %d, handed out twice %d\n", len(calls), broken, duplicates)
	// FIFO across processes holds while the fleet's queue does: in the steady phases, not across
	// a loss of data (the queue is lost with it) or a freeze (callers refused, asking again).
	var steady []call
	for _, c := range calls {
		for _, i := range []int{0, 5} {
			if !c.Asked.Before(phases[i].began) && c.End.Before(phases[i].began.Add(phases[i].took)) {
				steady = append(steady, c)
			}
		}
	}
	fmt.Fprintf(&report, "steady phases, %d calls granted before another replica's earlier caller:", len(steady))
	for _, slack := range []time.Duration{0, time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond} {
		share, n := passed(steady, slack)
		fmt.Fprintf(&report, " %d (%.2f %%) by more than %v;", n, 100*share, slack)
	}
	t.Log(report.String())
	for i := range phases {
		assert.LessOrEqual(t, up.most[i].Load(), int64(capacity), "phase %q: the upstream saw more than the capacity", phases[i].name)
	}
	assert.Zero(t, broken, "a call that asked after another had ended held a smaller token")
	assert.Zero(t, duplicates, "a fencing token handed out twice")
}

// regression: a replica killed with a waiter queued stopped every grant in the fleet for one lease
// TTL (1.96-1.98 s at a 2 s lease, 15 s at the default): its queue entry lived a TTL and only the
// head of the queue could be served. Five replica processes of three workers share a capacity of
// six with a lease of 5 s; one is killed with SIGKILL between its calls, with its waiters queued
// (it may hold a permit or three, which come back only after the TTL: the other three or more
// keep going). Twice over, the longest time without a call start at the upstream, from the kill
// to 3 s later, must stay within a second, whatever the TTL.
func TestKillWithWaitersQueuedStallsAtMostASecond(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process")
	}
	t.Parallel()
	const (
		replicas = 5
		workers  = 3
		capacity = 6
		lease    = 5 * time.Second
		hold     = 20 * time.Millisecond
	)
	srv := redistest.Start(t)
	up := startUpstream(t, capacity, hold, 0)
	var rs []*replica
	for i := range replicas {
		rs = append(rs, startReplica(t, replicaConfig{
			ID: i, Redis: srv.Addr, Upstream: up.URL, Name: "kill-queued", Capacity: capacity, Lease: lease, Workers: workers,
		}))
	}
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; i < replicas; {
		if up.starts[i].Load() > 10 {
			i++
			continue
		}
		require.True(t, time.Now().Before(deadline), "replica %d never called:\n%s", i, rs[i].out.String())
		time.Sleep(10 * time.Millisecond)
	}
	var gaps []time.Duration
	for round := range 2 {
		victim := rs[round]
		deadline = time.Now().Add(10 * time.Second)
		for up.perReplica[victim.id].Load() > 0 { // between its calls: its waiters queued
			require.True(t, time.Now().Before(deadline), "the victim always had calls in flight")
			time.Sleep(50 * time.Microsecond)
		}
		killed := time.Now()
		victim.kill()
		time.Sleep(3 * time.Second)
		gaps = append(gaps, longestGap(up.startsBetween(killed, killed.Add(3*time.Second)), killed, killed.Add(3*time.Second)))
	}
	t.Logf("longest time without a grant after a kill with waiters queued (lease %v): %v", lease, gaps)
	for _, g := range gaps {
		assert.LessOrEqual(t, g, time.Second, "a dead replica's queued waiter stalled the fleet")
	}
	assert.LessOrEqual(t, up.most[0].Load(), int64(capacity))
}
