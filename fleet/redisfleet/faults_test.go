package redisfleet_test

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/fleet"
	"github.com/goloom/loom/fleet/redisfleet/internal/redistest"
)

// Faults of the Redis behind a fleet: each ends in the documented mode (WhenUnavailable), is
// counted and logged once per transition, never hangs and never admits more than the capacity.

// closedAddr returns a loopback address where nothing listens.
func closedAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

type lines struct {
	mu  sync.Mutex
	all []string
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.all = append(l.all, string(p))
	l.mu.Unlock()
	return len(p), nil
}

func (l *lines) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, x := range l.all {
		if strings.Contains(x, s) {
			n++
		}
	}
	return n
}

func TestFaultRedisUnreachable(t *testing.T) {
	t.Parallel()
	addr := closedAddr(t)
	c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 200 * time.Millisecond, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	var log lines
	closed := processOn(t, c, "api", 2, fleet.WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
	open := processOn(t, c, "api", 2, fleet.WhenUnavailable(fleet.FailOpen))
	degrade := processOn(t, c, "api", 2, fleet.WhenUnavailable(fleet.Degrade(1)))

	t0 := time.Now()
	for range 3 {
		_, err := closed.Acquire(t.Context(), 1)
		require.ErrorIs(t, err, fleet.ErrUnavailable)
		var op *net.OpError
		assert.ErrorAs(t, err, &op, "the client's error is kept: %v", err)
	}
	t.Logf("FailClosed: 3 refusals in %v", time.Since(t0))
	assert.Less(t, time.Since(t0), 5*time.Second, "never a hang")
	assert.Equal(t, int64(3), closed.Stats().Unavailable)
	assert.Equal(t, 1, log.count("backend unavailable"), "logged once for the transition")

	var held []*fleet.Permit
	for range 5 {
		p, err := open.Acquire(t.Context(), 2)
		require.NoError(t, err)
		require.True(t, p.Degraded())
		held = append(held, p)
	}
	p, err := degrade.Acquire(t.Context(), 1)
	require.NoError(t, err)
	require.True(t, p.Degraded())
	_, err = degrade.AcquireTimeout(t.Context(), 1, 50*time.Millisecond)
	require.ErrorIs(t, err, fleet.ErrTimeout, "Degrade(1): one per process")
	held = append(held, p)
	for _, p := range held {
		p.Release()
	}
}

// A Redis that answers slowly (a proxy delays every packet): with ctx deadlines reaching the
// network, Acquire fails within its deadline; with only the client's timeouts, within those.
// Meanwhile the processes on a fast path keep the bound.
func TestFaultRedisSlow(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	proxy := redistest.NewProxy(t, srv.Addr)
	slowClient := srv.Client(func(o *redis.Options) {
		o.Addr, o.ReadTimeout, o.WriteTimeout, o.MaxRetries = proxy.Addr, 300*time.Millisecond, 300*time.Millisecond, -1
	})
	slow := processOn(t, slowClient, "api", 3)
	fast := []*fleet.Semaphore{process(t, srv, "api", 3), process(t, srv, "api", 3)}
	warm(t, fast[0])

	var inUse, most atomic.Int64
	track := func(p *fleet.Permit) func() {
		n := inUse.Add(p.N())
		for old := most.Load(); n > old && !most.CompareAndSwap(old, n); old = most.Load() {
		}
		return func() { inUse.Add(-p.N()) }
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, s := range fast {
		for range 3 {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					p, err := s.AcquireTimeout(t.Context(), 1, time.Second)
					if err != nil {
						continue
					}
					done := track(p)
					time.Sleep(2 * time.Millisecond)
					done()
					p.Release()
				}
			})
		}
	}

	proxy.SetDelay(20 * time.Millisecond) // slow, within the timeouts: it works, slowly
	p, err := slow.AcquireTimeout(t.Context(), 1, 3*time.Second)
	require.NoError(t, err)
	done := track(p)
	time.Sleep(ttl) // renewals through the slow path keep it
	require.NoError(t, p.Context().Err())
	done()
	p.Release()

	proxy.SetDelay(time.Second) // slower than every timeout
	ctx, cancel := context.WithTimeout(t.Context(), 150*time.Millisecond)
	t0 := time.Now()
	_, err = slow.Acquire(ctx, 1)
	cancel()
	took := time.Since(t0)
	require.Error(t, err)
	t.Logf("through a 1s-per-packet proxy: Acquire with a 150ms deadline returned after %v: %v", took, err)
	assert.Less(t, took, time.Second, "the deadline bounds it")
	_, err = slow.Acquire(t.Context(), 1) // no deadline: the client's read timeout bounds it
	require.ErrorIs(t, err, fleet.ErrUnavailable)
	close(stop)
	wg.Wait()
	assert.LessOrEqual(t, most.Load(), int64(3), "never more than the capacity")
}

// Redis answering errors: a key of the wrong type (WRONGTYPE) and a full memory (OOM). Both are
// "unavailable": FailClosed refuses, a held lease that cannot be renewed is lost in time, and
// once Redis answers again everything works.
func TestFaultRedisAnsweringErrors(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	admin := srv.Client()
	s := process(t, srv, "api", 2)
	warm(t, s)

	p, err := s.Acquire(t.Context(), 1)
	require.NoError(t, err)
	require.NoError(t, admin.ConfigSet(t.Context(), "maxmemory-policy", "noeviction").Err())
	require.NoError(t, admin.ConfigSet(t.Context(), "maxmemory", "1").Err())
	_, err = s.Acquire(t.Context(), 1)
	require.ErrorIs(t, err, fleet.ErrUnavailable)
	assert.ErrorContains(t, err, "OOM")
	<-p.Context().Done() // its renewals fail too: lost before it expires on Redis
	assert.ErrorIs(t, context.Cause(p.Context()), fleet.ErrLeaseLost)
	require.NoError(t, admin.ConfigSet(t.Context(), "maxmemory", "0").Err())

	time.Sleep(200 * time.Millisecond) // the next probe
	p, err = s.Acquire(t.Context(), 1)
	require.NoError(t, err, "Redis answers again")
	p.Release()

	require.NoError(t, admin.Del(t.Context(), "fleet:{api}:l").Err())
	require.NoError(t, admin.Set(t.Context(), "fleet:{api}:l", "not a sorted set", 0).Err())
	_, err = s.Acquire(t.Context(), 1)
	require.ErrorIs(t, err, fleet.ErrUnavailable)
	assert.ErrorContains(t, err, "WRONGTYPE")
	require.NoError(t, admin.Del(t.Context(), "fleet:{api}:l").Err())
	time.Sleep(200 * time.Millisecond)
	p, err = s.Acquire(t.Context(), 1)
	require.NoError(t, err)
	p.Release()
	st := s.Stats()
	assert.Equal(t, int64(2), st.Unavailable)
	assert.Equal(t, int64(1), st.LeasesLost)
}

// Redis restarted while a process waits in its queue: the waiter is not stranded; it is served
// once the pause after the loss is over.
func TestFaultRedisRestartedUnderAWaiter(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	holder, waiter := process(t, srv, "api", 1), process(t, srv, "api", 1)
	warm(t, holder)
	p, err := holder.Acquire(t.Context(), 1)
	require.NoError(t, err)
	got := acquireAsync(t.Context(), waiter, 1)
	time.Sleep(100 * time.Millisecond)
	srv.Restart()
	time.Sleep(ttl / 2) // the holder's lease registered again; the waiter is queued again
	t0 := time.Now()
	p.Release()
	r := <-got
	require.NoError(t, r.err)
	t.Logf("the waiter was served %v after the release", time.Since(t0))
	r.p.Release()
}
