package fleet_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/fleet"
	"github.com/goloom/loom/fleet/fleetdriver"
)

// The faults a fleet meets in production, on the in-memory backend under a fake clock: each test
// is a regression of a fault first seen with real processes and a real Redis.

// regression: AcquireTimeout(250ms) returned after 6 s while Redis was frozen (SIGSTOP): the
// caller's deadline was not put on the backend call.
func TestAcquireTimeoutBoundsAFrozenBackend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := fleet.NewMemory()
		s := newSem(t, m, "api", 1)
		m.Freeze(true)
		t0 := time.Now()
		_, err := s.AcquireTimeout(t.Context(), 1, 250*time.Millisecond)
		require.ErrorIs(t, err, fleet.ErrTimeout)
		assert.Equal(t, 250*time.Millisecond, time.Since(t0), "the deadline bounds the backend call")
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		_, err = s.Acquire(ctx, 1)
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded, "ctx's deadline bounds it too")
		m.Freeze(false)
	})
}

// regression: a grant whose reply came after the caller's deadline was returned, late, instead of
// being given back.
func TestGrantAfterTheCallerGaveUpIsReleased(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := fleet.NewMemory()
		s := newSem(t, m, "api", 1)
		m.SetLatency(300 * time.Millisecond) // the grant is made at once, its reply comes late
		t0 := time.Now()
		_, err := s.AcquireTimeout(t.Context(), 1, 100*time.Millisecond)
		require.ErrorIs(t, err, fleet.ErrTimeout)
		assert.Equal(t, 100*time.Millisecond, time.Since(t0))
		m.SetLatency(0)
		time.Sleep(time.Second) // the give-back is on its way
		synctest.Wait()
		assert.Zero(t, m.Held("api"), "the grant nobody took was released")
		assert.Zero(t, s.Stats().Held)
	})
}

// regression: a grant whose reply took longer than the lease was returned with its lease already
// expired (its context cancelled at once, another process possibly let in).
func TestPermitIsNeverReturnedExpired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := fleet.NewMemory()
		slow := &partition{b: m}
		s := newSem(t, slow, "api", 1)
		slow.slow.Store(int64(ttl + 100*time.Millisecond)) // the first grant's reply outlives its lease
		got := acquireAsync(t.Context(), s, 1)
		time.Sleep(ttl + 50*time.Millisecond)
		slow.slow.Store(0)
		r := <-got
		require.NoError(t, r.err)
		synctest.Wait()
		require.NoError(t, r.p.Context().Err(), "the permit returned is alive")
		assert.Equal(t, int64(1), m.Held("api"))
		r.p.Release()
	})
}

// regression: a Release during a 50 ms outage was dropped, and the permit stayed taken on the
// backend for a whole lease TTL.
func TestReleaseDuringAShortOutageIsRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := fleet.NewMemory()
		s := newSem(t, m, "api", 1, fleet.WithLease(time.Minute))
		p, err := s.Acquire(t.Context(), 1)
		require.NoError(t, err)
		m.SetDown(true)
		p.Release()
		time.Sleep(50 * time.Millisecond)
		m.SetDown(false)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		assert.Zero(t, m.Held("api"), "the release was retried once the backend was back")
		require.NoError(t, s.Close())
	})
}

// A wait abandoned during an outage gives its place in the queue back once the backend is back.
func TestAbandonedWaitDuringAnOutageIsRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := fleet.NewMemory()
		holder, waiter := newSem(t, m, "api", 1), newSem(t, m, "api", 1, fleet.WithLease(time.Minute))
		p, err := holder.Acquire(t.Context(), 1)
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(t.Context())
		got := acquireAsync(ctx, waiter, 1)
		synctest.Wait()
		require.Equal(t, 1, m.Queued("api"))
		m.SetDown(true)
		cancel()
		require.ErrorIs(t, (<-got).err, context.Canceled)
		time.Sleep(50 * time.Millisecond)
		m.SetDown(false)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		assert.Zero(t, m.Queued("api"), "the abandoned place was given back")
		p.Release()
	})
}

// regression: Degrade(2) let a process run 2 degraded permits beside the leases it still held,
// 16 in flight for a capacity of 8.
func TestDegradeCountsTheLeasesStillHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := fleet.NewMemory()
		s := newSem(t, m, "api", 8, fleet.WhenUnavailable(fleet.Degrade(2)), fleet.WithLease(3*time.Second))
		p1, err := s.Acquire(t.Context(), 1)
		require.NoError(t, err)
		p2, err := s.Acquire(t.Context(), 1)
		require.NoError(t, err)
		m.SetDown(true)
		_, err = s.AcquireTimeout(t.Context(), 1, 100*time.Millisecond)
		require.ErrorIs(t, err, fleet.ErrTimeout, "two leases held: Degrade(2) admits nothing more")
		got := acquireAsync(t.Context(), s, 1)
		<-p1.Context().Done() // not renewed: lost within its TTL, which frees one of the two
		r := <-got
		require.NoError(t, r.err)
		assert.True(t, r.p.Degraded())
		assert.LessOrEqual(t, s.Stats().Held, int64(2))
		r.p.Release()
		p2.Release()
	})
}

// regression: once the backend was back, degraded permits still running were unknown to it, and
// other processes were admitted beside them (13 in flight for 5 s for a capacity of 8).
func TestDegradedPermitsCountOnceTheBackendIsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := fleet.NewMemory()
		a := newSem(t, m, "api", 2, fleet.WhenUnavailable(fleet.Degrade(2)))
		b := newSem(t, m, "api", 2)
		m.SetDown(true)
		var held []*fleet.Permit
		for range 2 {
			p, err := a.Acquire(t.Context(), 1)
			require.NoError(t, err)
			require.True(t, p.Degraded())
			held = append(held, p)
		}
		m.SetDown(false)
		time.Sleep(ttl) // a probe finds the backend back; the degraded permits register
		synctest.Wait()
		_, err := b.AcquireTimeout(t.Context(), 1, 100*time.Millisecond)
		require.ErrorIs(t, err, fleet.ErrTimeout, "the degraded permits still running count against the capacity")
		assert.Equal(t, int64(2), m.Held("api"))
		for _, p := range held {
			require.NoError(t, p.Context().Err())
			p.Release()
		}
		p, err := b.AcquireTimeout(t.Context(), 2, time.Second)
		require.NoError(t, err, "released, they free the capacity")
		p.Release()
	})
}

// regression: after a restore from an older snapshot the backend saw free permits that live
// holders held, and admitted beside them (13-16 in flight for 8); the holders' next renewals
// found their leases unknown in the same epoch and reported them lost while they kept running.
func TestRestoreFromAnOlderSnapshotKeepsTheBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := fleet.NewMemory()
		a, b := newSem(t, m, "api", 2), newSem(t, m, "api", 2)
		p1, err := a.Acquire(t.Context(), 1)
		require.NoError(t, err)
		snap := m.Snapshot()
		p2, err := a.Acquire(t.Context(), 1)
		require.NoError(t, err)
		m.Restore(snap) // the backend goes back to one lease held
		_, err = b.AcquireTimeout(t.Context(), 1, 3*ttl)
		require.ErrorIs(t, err, fleet.ErrTimeout, "both permits are held: nothing more is admitted")
		require.NoError(t, p1.Context().Err())
		require.NoError(t, p2.Context().Err(), "the lease the snapshot lacked registered again")
		assert.Equal(t, int64(2), m.Held("api"))
		assert.Zero(t, a.Stats().LeasesLost)
		assert.Greater(t, p2.Token(), p1.Token())
		p2.Release()
		q, err := b.AcquireTimeout(t.Context(), 1, 3*ttl)
		require.NoError(t, err)
		assert.Greater(t, q.Token(), p2.Token(), "tokens grow across the loss")
		q.Release()
		p1.Release()
	})
}

// regression: replicas with different lease TTLs — after a loss of data, admission paused only for
// the TTL of the request that re-created the state, so a 1 s-lease replica was admitted while a
// 6 s holder's lease was live.
func TestPauseAfterALossCoversTheLongestLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := fleet.NewMemory()
		long := newSem(t, m, "api", 1, fleet.WithLease(6*time.Second))
		short := newSem(t, m, "api", 1)
		p, err := long.Acquire(t.Context(), 1)
		require.NoError(t, err)
		_, err = short.AcquireTimeout(t.Context(), 1, 0) // short sees the name in use
		require.ErrorIs(t, err, fleet.ErrTimeout)
		m.Restart()
		_, err = short.AcquireTimeout(t.Context(), 1, 5*time.Second)
		require.ErrorIs(t, err, fleet.ErrTimeout, "the long lease is held throughout: nothing is admitted beside it")
		require.NoError(t, p.Context().Err())
		assert.Equal(t, int64(1), m.Held("api"))
		p.Release()
	})
}

// regression: a queued waiter of a process that died kept the head of the queue for a whole lease
// TTL, and no other process was served meanwhile.
func TestDeadWaiterStallsTheQueueForAtMostASecond(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := fleet.NewMemory()
		dead := &partition{b: m}
		holder := newSem(t, m, "api", 1, fleet.WithLease(time.Minute))
		d := newSem(t, dead, "api", 1, fleet.WithLease(time.Minute))
		live := newSem(t, m, "api", 1, fleet.WithLease(time.Minute))
		p, err := holder.Acquire(t.Context(), 1)
		require.NoError(t, err)
		_ = acquireAsync(t.Context(), d, 1) // heads the queue
		synctest.Wait()
		got := acquireAsync(t.Context(), live, 1) // behind it
		synctest.Wait()
		require.Equal(t, 2, m.Queued("api"))
		dead.kill() // its process dies: no more calls, no more messages
		t0 := time.Now()
		p.Release()
		r := <-got
		require.NoError(t, r.err)
		assert.LessOrEqual(t, time.Since(t0), time.Second, "served within a second of the release, whatever the TTL")
		r.p.Release()
	})
}

// regression: at 1e-12 tokens per second the wait for the next token overflowed a Duration and
// came out negative, so Wait returned at once.
func TestTinyRateSaturates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := fleet.NewRate(fleet.NewMemory(), "api", 1e-12, 1)
		require.NoError(t, r.Wait(t.Context()), "the burst")
		res, err := r.Reserve(t.Context(), -1)
		require.NoError(t, err)
		assert.Greater(t, res.Delay(), 1000*time.Hour, "the next token is ages away: %v", res.Delay())
		res.Cancel()
		ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
		defer cancel()
		require.ErrorIs(t, r.Wait(ctx), fleet.ErrTimeout, "not within the hour")
	})
}

// A restore of a snapshot taken before the name was first used brings back no state for it at
// all: that is a loss too, and nothing is admitted beside the lease still held. (Found by
// ExampleMemory_Restore: a Memory that never restarted took the missing state for a new name.)
func TestRestoreOfASnapshotWithoutTheNamePauses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := fleet.NewMemory()
		a, b := newSem(t, m, "api", 1), newSem(t, m, "api", 1)
		snap := m.Snapshot()
		p, err := a.Acquire(t.Context(), 1)
		require.NoError(t, err)
		m.Restore(snap)
		_, err = b.AcquireTimeout(t.Context(), 1, 3*ttl)
		require.ErrorIs(t, err, fleet.ErrTimeout)
		require.NoError(t, p.Context().Err())
		p.Release()
	})
}

// regression (TestChaos, a restore from a 1 s old RDB: 11 in flight for 10): when the first call
// to see a state that went back in time was a Release, which carries no TTL, and the longest TTL
// the old state remembered had lapsed, the pause came out as zero and new permits were admitted
// beside leases still held.
func TestLossSeenByAReleaseStillPauses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := fleet.NewMemory()
		a, b := newSem(t, m, "api", 2), newSem(t, m, "api", 2)
		p1, err := a.Acquire(t.Context(), 1)
		require.NoError(t, err)
		snap := m.Snapshot()
		p2, err := a.Acquire(t.Context(), 1)
		require.NoError(t, err)
		time.Sleep(1200 * time.Millisecond) // the snapshot's leases, and its longest TTL, lapse
		m.Restore(snap)
		_, err = m.Release(t.Context(), fleetdriver.ReleaseRequest{Name: "api", Leases: []fleetdriver.Lease{{ID: "gone.1", N: 1, Capacity: 2}}})
		require.NoError(t, err) // the first call after the restore: a release
		_, err = b.AcquireTimeout(t.Context(), 1, 0)
		require.ErrorIs(t, err, fleet.ErrTimeout, "two permits are held: nothing more is admitted")
		p1.Release()
		p2.Release()
	})
}

// A waiter whose process hears no pushes (its subscription failed) and then died is not granted
// by others (it would never learn of it, and the permit would be lost for a TTL): its queue
// entry dies within the 800 ms heartbeat, whatever the lease TTL, and the queue moves on.
func TestUnheardWaiterLapsesWithinAHeartbeat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := fleet.NewMemory()
		dead := &partition{b: m}
		dead.nosub.Store(true)
		holder := newSem(t, m, "api", 1, fleet.WithLease(time.Minute))
		d := newSem(t, dead, "api", 1, fleet.WithLease(time.Minute))
		live := newSem(t, m, "api", 1, fleet.WithLease(time.Minute))
		p, err := holder.Acquire(t.Context(), 1)
		require.NoError(t, err)
		_ = acquireAsync(t.Context(), d, 1) // heads the queue, without pushes
		synctest.Wait()
		got := acquireAsync(t.Context(), live, 1)
		synctest.Wait()
		dead.cut.Store(true) // its process dies
		t0 := time.Now()
		p.Release()
		r := <-got
		require.NoError(t, r.err)
		assert.LessOrEqual(t, time.Since(t0), time.Second, "served within a second of the release, whatever the TTL")
		assert.Zero(t, d.Stats().Held, "nothing was granted to the dead waiter")
		r.p.Release()
	})
}

// A small request never passes a larger one queued before it (head-of-line, as in package
// semaphore), though it would fit.
func TestSmallRequestDoesNotPassALargeQueuedOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := fleet.NewMemory()
		holder, big, small := newSem(t, m, "api", 3), newSem(t, m, "api", 3), newSem(t, m, "api", 3)
		p, err := holder.Acquire(t.Context(), 1)
		require.NoError(t, err)
		got := acquireAsync(t.Context(), big, 3) // does not fit: queued
		synctest.Wait()
		_, err = small.AcquireTimeout(t.Context(), 1, time.Second)
		require.ErrorIs(t, err, fleet.ErrTimeout, "1 fits beside the 1 held, but the 3 queued first")
		p.Release()
		r := <-got
		require.NoError(t, r.err)
		r.p.Release()
	})
}
