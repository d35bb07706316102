package redisfleet_test

import (
	"context"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/fleet"
	"github.com/goloom/loom/fleet/redisfleet"
	"github.com/goloom/loom/fleet/redisfleet/internal/redistest"
)

// Redis as production runs it: it persists (RDB snapshots, an append-only file), and a restart
// can bring back an older state. Each persistence mode keeps the bound.

// regression: a restart from an RDB snapshot taken before the last grant let 13-16 permits run for
// a capacity of 8 (the restored state lacked leases still held, and looked continuous), and the
// holders' next renewals reported their leases lost while they kept running. The same for an AOF
// that lost its tail.
func TestRedisRestoreOfAnOlderStateKeepsTheBound(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		args []string
	}{
		{"rdb", redistest.Persistent},
		{"aof", redistest.AOF},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := redistest.Start(t, tt.args...)
			admin := srv.Client()
			a, b := process(t, srv, "api", 2), process(t, srv, "api", 2)
			warm(t, a)
			p1, err := a.Acquire(t.Context(), 1)
			require.NoError(t, err)
			if tt.name == "rdb" {
				require.NoError(t, admin.Save(t.Context()).Err())
			}
			older := srv.CopyFiles() // holds p1's lease, not p2's
			p2, err := a.Acquire(t.Context(), 1)
			require.NoError(t, err)
			srv.RestartFrom(older)

			_, err = b.AcquireTimeout(t.Context(), 1, 3*ttl)
			require.ErrorIs(t, err, fleet.ErrTimeout, "both permits are held: nothing more is admitted")
			require.NoError(t, p1.Context().Err())
			require.NoError(t, p2.Context().Err(), "the lease the older state lacked registered again")
			assert.Zero(t, a.Stats().LeasesLost)
			held, _, err := redisfleet.Held(t.Context(), admin, "api")
			require.NoError(t, err)
			assert.Equal(t, int64(2), held)
			p2.Release()
			q, err := b.AcquireTimeout(t.Context(), 1, 3*ttl)
			require.NoError(t, err)
			assert.Greater(t, q.Token(), p2.Token(), "tokens grow across the loss")
			q.Release()
			p1.Release()
		})
	}
}

// A restore under steady traffic. A script trusts the state without asking Redis which server run
// it is in when the state was trusted by a script less than a millisecond before, and moves that
// mark on: so the state a snapshot (or the AOF) keeps was trusted a moment before it was saved,
// and the restart must be told apart by its time alone. Two workers of a hammer keep the name
// busy right up to the kill and from the moment Redis is back; the restored state lacks a permit
// still held (p2), and the hammer is never let in beside it: at most the capacity in flight. (The
// restored state may also hold hammer leases already released, which expire within a TTL; if they
// leave no room, p2 is lost when it registers again, and its holder stops: a lost permit counts
// as in flight until its context is done.)
func TestRedisRestoreUnderTrafficKeepsTheBound(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		args []string
	}{
		{"rdb", redistest.Persistent},
		{"aof", redistest.AOF},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			const capacity = 3
			srv := redistest.Start(t, tt.args...)
			admin := srv.Client()
			a, hammer := process(t, srv, "api", capacity), process(t, srv, "api", capacity)
			warm(t, a)
			var inUse, most atomic.Int64
			track := func(n int64) {
				now := inUse.Add(n)
				for old := most.Load(); now > old && !most.CompareAndSwap(old, now); old = most.Load() {
				}
			}
			held := func(p *fleet.Permit) { // in flight until released or lost
				track(1)
				context.AfterFunc(p.Context(), func() { track(-1) })
			}
			p1, err := a.Acquire(t.Context(), 1)
			require.NoError(t, err)
			held(p1)
			ctx, stop := context.WithCancel(t.Context())
			var wg sync.WaitGroup
			var grants atomic.Int64
			for range 2 {
				wg.Go(func() {
					for ctx.Err() == nil {
						p, err := hammer.AcquireTimeout(ctx, 1, 100*time.Millisecond)
						if err != nil {
							time.Sleep(time.Millisecond) // refused while Redis restarts
							continue
						}
						track(1)
						grants.Add(1)
						time.Sleep(200 * time.Microsecond)
						track(-1)
						p.Release()
					}
				})
			}
			deadline := time.Now().Add(10 * time.Second)
			for grants.Load() < 100 { // the hammer is going: the name's state is trusted by the millisecond
				require.True(t, time.Now().Before(deadline), "the hammer never got going")
				time.Sleep(time.Millisecond)
			}
			if tt.name == "rdb" {
				require.NoError(t, admin.Save(t.Context()).Err())
			}
			older := srv.CopyFiles() // holds p1's lease and a state trusted a moment ago, not p2's
			p2, err := a.Acquire(t.Context(), 1)
			require.NoError(t, err)
			held(p2)
			srv.RestartFrom(older)
			before := grants.Load()
			paused := false // the restore is seen as a loss: admission pauses
			for end := time.Now().Add(3 * ttl); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
				paused = paused || !hammer.Stats().PausedUntil.IsZero() || !a.Stats().PausedUntil.IsZero()
			}
			stop()
			wg.Wait()
			t.Logf("%s: the hammer made %d grants after the restore; at most %d of %d in flight", tt.name, grants.Load()-before, most.Load(), capacity)
			assert.True(t, paused, "the restored state was taken for the one before the restart")
			assert.LessOrEqual(t, most.Load(), int64(capacity), "admitted beside a permit the restored state lacked")
			require.NoError(t, p1.Context().Err(), "a lease the restored state holds is renewed")
			assert.Positive(t, grants.Load()-before, "the hammer is let in again once the pause is over")
			p2.Release()
			p1.Release()
		})
	}
}

// regression: AcquireTimeout(250ms) returned after 6 s while Redis was frozen (SIGSTOP), with a
// permit already lost: the caller's deadline was not on the backend call. Under every
// WhenUnavailable choice, a frozen Redis costs a timed Acquire its time and no more; an untimed
// one gets what the choice says once the client's own timeout tells it Redis is unreachable.
func TestRedisFrozenBoundsEveryAcquire(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		mode fleet.Unavailable
	}{
		{"FailClosed", fleet.FailClosed},
		{"FailOpen", fleet.FailOpen},
		{"Degrade", fleet.Degrade(2)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := redistest.Start(t)
			// go-redis's defaults: 3 s read timeout, 3 retries.
			c := srv.Client(func(o *redis.Options) { o.ReadTimeout, o.WriteTimeout, o.MaxRetries = 3*time.Second, 3*time.Second, 3 })
			s := processOn(t, c, "api", 2, fleet.WhenUnavailable(tt.mode))
			warm(t, s)
			p, err := s.Acquire(t.Context(), 1)
			require.NoError(t, err)
			srv.Signal(syscall.SIGSTOP)
			defer srv.Signal(syscall.SIGCONT)

			t0 := time.Now()
			_, err = s.AcquireTimeout(t.Context(), 1, 250*time.Millisecond)
			took := time.Since(t0)
			require.ErrorIs(t, err, fleet.ErrTimeout)
			t.Logf("%s: AcquireTimeout(250ms) on a frozen Redis returned after %v", tt.name, took)
			assert.Less(t, took, 2500*time.Millisecond, "the deadline bounds the call (10× slack)")

			ctx, cancel := context.WithTimeout(t.Context(), 250*time.Millisecond)
			_, err = s.Acquire(ctx, 1)
			cancel()
			require.ErrorIs(t, err, context.DeadlineExceeded, "ctx's deadline bounds it too")

			<-p.Context().Done() // not renewed in time: lost, whatever the choice
			require.ErrorIs(t, context.Cause(p.Context()), fleet.ErrLeaseLost)
			ctx, cancel = context.WithTimeout(t.Context(), 30*time.Second)
			q, err := s.Acquire(ctx, 1) // no deadline of its own: the client's timeout tells
			cancel()
			switch tt.mode {
			case fleet.FailClosed:
				require.ErrorIs(t, err, fleet.ErrUnavailable)
			default:
				require.NoError(t, err)
				assert.True(t, q.Degraded())
				q.Release()
			}
		})
	}
}

// regression: replicas with different lease TTLs — after Redis lost its data, admission paused
// only for the TTL of the request that re-created the state, so a 1 s-lease replica was admitted
// while a 6 s holder's lease was live (2 held for a capacity of 1, for about a second).
func TestRedisPauseAfterALossCoversTheLongestLease(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	long := process(t, srv, "api", 1, fleet.WithLease(6*time.Second))
	short := process(t, srv, "api", 1)
	warm(t, short)
	p, err := long.Acquire(t.Context(), 1)
	require.NoError(t, err)
	_, err = short.AcquireTimeout(t.Context(), 1, 0) // short sees the name in use
	require.ErrorIs(t, err, fleet.ErrTimeout)
	srv.Restart() // no persistence: every key is gone
	_, err = short.AcquireTimeout(t.Context(), 1, 4*time.Second)
	require.ErrorIs(t, err, fleet.ErrTimeout, "the long lease is held throughout: nothing is admitted beside it")
	require.NoError(t, p.Context().Err())
	p.Release()
	q, err := short.AcquireTimeout(t.Context(), 1, 10*time.Second)
	require.NoError(t, err, "released, its permit is free again once the pause is over")
	q.Release()
}
