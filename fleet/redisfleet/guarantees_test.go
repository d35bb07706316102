package redisfleet_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/fleet"
	"github.com/goloom/loom/fleet/fleetdriver"
	"github.com/goloom/loom/fleet/redisfleet"
	"github.com/goloom/loom/internal/redistest"
)

// The guarantees of package fleet, on a real Redis: each process here has its own client, so
// Redis sees separate connections as it would separate replicas. (Real replica processes are in
// chaos_test.go and fairness_test.go.)

// 1. Bound: four processes of eight workers, random weights.
func TestRedisGuaranteeBound(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const capacity = 5
	var sems []*fleet.Semaphore
	for range 4 {
		sems = append(sems, process(t, srv, "api", capacity))
	}
	warm(t, sems[0])
	var inUse, most, permits atomic.Int64
	stop := time.Now().Add(1500 * time.Millisecond)
	var wg sync.WaitGroup
	for i, s := range sems {
		for w := range 8 {
			rng := rand.New(rand.NewPCG(uint64(i), uint64(w)))
			wg.Go(func() {
				for time.Now().Before(stop) {
					n := 1 + rng.Int64N(3)
					p, err := s.Acquire(t.Context(), n)
					if !assert.NoError(t, err) {
						return
					}
					now := inUse.Add(n)
					for old := most.Load(); now > old && !most.CompareAndSwap(old, now); old = most.Load() {
					}
					permits.Add(1)
					time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond)
					inUse.Add(-n)
					p.Release()
				}
			})
		}
	}
	wg.Wait()
	t.Logf("%d permits, at most %d in use", permits.Load(), most.Load())
	assert.LessOrEqual(t, most.Load(), int64(capacity))
	assert.Equal(t, int64(capacity), most.Load(), "the capacity was used")
}

// 2. Crash: a process cut off from Redis (it died) frees its permits and queue place within a
// TTL; the time it takes is logged.
func TestRedisGuaranteeCrash(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	holderNet, waiterNet := redistest.NewProxy(t, srv.Addr), redistest.NewProxy(t, srv.Addr)
	via := func(p *redistest.Proxy) *redis.Client {
		return srv.Client(func(o *redis.Options) { o.Addr, o.MaxRetries, o.DialTimeout = p.Addr, -1, 100*time.Millisecond })
	}
	holder, deadWaiter := processOn(t, via(holderNet), "api", 1), processOn(t, via(waiterNet), "api", 1)
	other := process(t, srv, "api", 1)
	warm(t, other)
	_, err := holder.Acquire(t.Context(), 1)
	require.NoError(t, err)
	go func() { _, _ = deadWaiter.Acquire(t.Context(), 1) }()
	time.Sleep(100 * time.Millisecond) // queued ahead of other
	got := acquireAsync(t.Context(), other, 1)
	time.Sleep(100 * time.Millisecond)
	t0 := time.Now()
	holderNet.SetDown(true)
	waiterNet.SetDown(true)
	r := <-got
	require.NoError(t, r.err)
	took := time.Since(t0)
	t.Logf("a dead process's permit and queue place came back after %v (lease %v)", took, ttl)
	assert.Less(t, took, ttl+500*time.Millisecond)
	r.p.Release()
}

// 3. Fairness: FIFO by arrival at Redis, weighted, head-of-line.
func TestRedisGuaranteeFairnessFIFO(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	admin := srv.Client()
	holder := process(t, srv, "api", 3)
	warm(t, holder)
	p, err := holder.Acquire(t.Context(), 3)
	require.NoError(t, err)
	weights := []int64{2, 1, 3, 1} // the 1 behind the 3 must not overtake it
	tokens := make([]uint64, len(weights))
	var wg sync.WaitGroup
	for i, n := range weights {
		s := process(t, srv, "api", 3)
		wg.Go(func() {
			q, err := s.Acquire(t.Context(), n)
			if !assert.NoError(t, err) {
				return
			}
			tokens[i] = q.Token() // tokens follow the order of the grants on Redis
			// Hold long enough for the waiters behind to ask again (every TTL/3): one that fits
			// must still not pass the head of the queue.
			time.Sleep(time.Duration(i+1) * ttl / 2)
			q.Release()
		})
		require.Eventually(t, func() bool { // it arrived at Redis before the next one starts
			n, err := admin.ZCard(t.Context(), "fleet:{api}:q").Result()
			return err == nil && n == int64(i+1)
		}, 10*time.Second, time.Millisecond)
	}
	p.Release()
	wg.Wait()
	assert.True(t, slices.IsSorted(tokens), "granted in arrival order: tokens %v", tokens)
}

// 5. Release by lease: a Release after the lease expired leaves the new holder's lease alone.
func TestRedisGuaranteeReleaseByLease(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	net := redistest.NewProxy(t, srv.Addr)
	holder := processOn(t, srv.Client(func(o *redis.Options) { o.Addr, o.MaxRetries = net.Addr, -1 }), "api", 2)
	other := process(t, srv, "api", 2)
	warm(t, other)
	p, err := holder.Acquire(t.Context(), 2)
	require.NoError(t, err)
	net.SetDown(true) // cannot renew: it expires
	q, err := other.AcquireTimeout(t.Context(), 2, 3*ttl)
	require.NoError(t, err)
	net.SetDown(false)
	time.Sleep(ttl / 5) // the holder's probe interval
	p.Release()
	p.Release()
	_, err = holder.AcquireTimeout(t.Context(), 1, 0)
	require.ErrorIs(t, err, fleet.ErrTimeout, "the late Release took nothing from the new holder")
	q.Release()
}

// 7. Restart with data loss: held leases register again, new ones wait one TTL, tokens grow.
func TestRedisGuaranteeRestartWithDataLoss(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	admin := srv.Client()
	a, b := process(t, srv, "api", 3), process(t, srv, "api", 3)
	warm(t, a)
	p1, err := a.Acquire(t.Context(), 1)
	require.NoError(t, err)
	p2, err := a.Acquire(t.Context(), 1)
	require.NoError(t, err)
	srv.Restart()
	t0 := time.Now()
	got := acquireAsync(t.Context(), b, 1)
	time.Sleep(ttl / 2)
	held, err := admin.HGet(t.Context(), "fleet:{api}:m", "held").Int64()
	require.NoError(t, err)
	assert.Equal(t, int64(2), held, "the held leases registered again")
	r := <-got
	require.NoError(t, r.err)
	waited := time.Since(t0)
	t.Logf("after the restart: leases re-registered, a new acquire admitted after %v (lease %v)", waited, ttl)
	assert.GreaterOrEqual(t, waited, ttl-50*time.Millisecond, "nothing new for one TTL after the loss was seen")
	assert.Less(t, waited, 2*ttl)
	assert.Greater(t, r.p.Token(), max(p1.Token(), p2.Token()))
	require.NoError(t, p1.Context().Err())
	require.NoError(t, p2.Context().Err())
	_, err = b.AcquireTimeout(t.Context(), 1, 0)
	require.ErrorIs(t, err, fleet.ErrTimeout, "still within the capacity")
	r.p.Release()
	p1.Release()
	p2.Release()
}

// 8. Wake-up: a waiter is served within 50 ms of a release in another process; without any
// message, still within TTL/3.
func TestRedisGuaranteeWakeUp(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	holder, waiter := process(t, srv, "api", 1), process(t, srv, "api", 1)
	warm(t, holder)
	var waits []time.Duration
	for range 20 {
		p, err := holder.Acquire(t.Context(), 1)
		require.NoError(t, err)
		got := acquireAsync(t.Context(), waiter, 1)
		time.Sleep(30 * time.Millisecond)
		t0 := time.Now()
		p.Release()
		r := <-got
		require.NoError(t, r.err)
		waits = append(waits, time.Since(t0))
		r.p.Release()
	}
	slices.Sort(waits)
	t.Logf("wake-up after a release elsewhere: median %v, max %v", waits[len(waits)/2], waits[len(waits)-1])
	assert.Less(t, waits[len(waits)/2], 50*time.Millisecond)

	// No messages at all (a subscription that hears nothing): the waiter asks again at the next
	// expiry or TTL/3.
	deaf := fleet.New(deafBackend{redisfleet.New(srv.Client())}, "api", 1, fleet.WithLease(ttl), fleet.WithLogger(nil))
	defer deaf.Close()
	p, err := holder.Acquire(t.Context(), 1)
	require.NoError(t, err)
	got := acquireAsync(t.Context(), deaf, 1)
	time.Sleep(50 * time.Millisecond)
	t0 := time.Now()
	p.Release()
	r := <-got
	require.NoError(t, r.err)
	t.Logf("served without its message after %v", time.Since(t0))
	assert.Less(t, time.Since(t0), ttl/3+200*time.Millisecond)
	r.p.Release()
}

// 9. Round trips: one script per uncontended Acquire and Release; one renewal per Semaphore
// every TTL/3 for all its leases.
func TestRedisGuaranteeRoundTrips(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	admin := srv.Client()
	s := process(t, srv, "api", 100)
	warm(t, s)
	warm(t, s)
	before := scriptCalls(t, admin)
	p, err := s.Acquire(t.Context(), 1)
	require.NoError(t, err)
	p.Release()
	assert.Equal(t, int64(2), scriptCalls(t, admin)-before)

	var held []*fleet.Permit
	for range 40 {
		p, err := s.Acquire(t.Context(), 1)
		require.NoError(t, err)
		held = append(held, p)
	}
	before = scriptCalls(t, admin)
	time.Sleep(ttl)
	renewals := scriptCalls(t, admin) - before
	t.Logf("%d renewal scripts in one TTL for 40 leases", renewals)
	assert.InDelta(t, 3, renewals, 1)
	for _, p := range held {
		p.Release()
	}
}

// deafBackend is a backend whose subscriptions never deliver a message.
type deafBackend struct{ fleet.Backend }

func (d deafBackend) Subscribe(ctx context.Context, name, inst string, _ func(fleetdriver.Lease)) (func(), error) {
	return d.Backend.Subscribe(ctx, name, inst, func(fleetdriver.Lease) {})
}
