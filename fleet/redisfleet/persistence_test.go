package redisfleet_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/fleet"
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
			held, err := admin.HGet(t.Context(), "fleet:{api}:m", "held").Int64()
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
