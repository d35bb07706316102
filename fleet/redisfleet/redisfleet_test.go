package redisfleet_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/fleet"
	"github.com/goloom/loom/fleet/fleetdriver"
	"github.com/goloom/loom/fleet/redisfleet"
	"github.com/goloom/loom/fleet/redisfleet/internal/redistest"
)

func TestNewPanicsOnNilClient(t *testing.T) {
	require.PanicsWithValue(t, "redisfleet: New: nil client", func() { redisfleet.New(nil) })
}

func TestAcquireAndReleaseOnRedis(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	admin := srv.Client()
	s := process(t, srv, "api", 3)
	t0 := time.Now()
	p, err := s.Acquire(t.Context(), 2)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, time.Since(t0), ttl, "a name new to Redis admits after one TTL")
	assert.NotZero(t, p.Token())

	q, err := s.Acquire(t.Context(), 1) // loads the release script (EVALSHA, NOSCRIPT, EVAL)
	require.NoError(t, err)
	q.Release()

	before := scriptCalls(t, admin)
	q, err = s.Acquire(t.Context(), 1)
	require.NoError(t, err)
	assert.Greater(t, q.Token(), p.Token())
	q.Release()
	assert.Equal(t, int64(2), scriptCalls(t, admin)-before, "one script per Acquire and per Release")
	p.Release()
	p.Release()
	assert.Equal(t, int64(3), scriptCalls(t, admin)-before, "a second Release of a permit sends nothing")

	keys, err := admin.Keys(t.Context(), "fleet:*").Result()
	require.NoError(t, err)
	assert.Equal(t, []string{"fleet:{api}:s"}, keys, "with nothing held or queued, only the name's small state is left")
}

func TestBothProtocols(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	for _, proto := range []int{2, 3} {
		c := srv.Client(func(o *redis.Options) { o.Protocol = proto })
		s := processOn(t, c, "api", 2)
		r := fleet.NewRate(redisfleet.New(c), "api", 10, 1)
		warm(t, s)
		p, err := s.Acquire(t.Context(), 2)
		require.NoError(t, err, "RESP%d", proto)
		p.Release()
		require.NoError(t, r.Wait(t.Context()), "RESP%d", proto)
	}
}

func TestScriptsReloadAfterFlush(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	admin := srv.Client()
	s := process(t, srv, "api", 1)
	warm(t, s)
	require.NoError(t, admin.ScriptFlush(t.Context()).Err())
	p, err := s.Acquire(t.Context(), 1)
	require.NoError(t, err, "NOSCRIPT: EVAL takes over")
	p.Release()
}

func TestClusterAllKeysOfANameInOneSlot(t *testing.T) {
	t.Parallel()
	srv := redistest.StartCluster(t)
	cc := srv.ClusterClient()
	for _, name := range []string{"api", "}odd{", "{a}b", "%7D"} {
		keys, channel := redisfleet.Keys(name)
		slot, err := cc.ClusterKeySlot(t.Context(), keys[0]).Result()
		require.NoError(t, err)
		for _, k := range append(keys[1:], channel) {
			got, err := cc.ClusterKeySlot(t.Context(), k).Result()
			require.NoError(t, err)
			require.Equal(t, slot, got, "%q: %q is in another slot than %q", name, k, keys[0])
		}
	}
	// And the whole protocol works on a Cluster: grant, queue, wake-up, renewal, rate.
	a, b := processOn(t, srv.ClusterClient(), "}odd{", 1), processOn(t, srv.ClusterClient(), "}odd{", 1)
	warm(t, a)
	p, err := a.Acquire(t.Context(), 1)
	require.NoError(t, err)
	got := acquireAsync(t.Context(), b, 1)
	time.Sleep(ttl / 2) // a renewal goes through
	t0 := time.Now()
	p.Release()
	r := <-got
	require.NoError(t, r.err)
	t.Logf("cluster wake-up after %v", time.Since(t0))
	r.p.Release()
	rate := fleet.NewRate(redisfleet.New(cc), "}odd{", 100, 1)
	require.NoError(t, rate.Wait(t.Context()))
}

// Expired leases and dead queue entries of processes that died are purged by the scripts: after
// a round of crashes, the name's sets are empty again.
func TestNothingGrowsWithoutBound(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	admin := srv.Client()
	live := process(t, srv, "api", 4)
	warm(t, live)
	card := func(key string) int64 {
		n, err := admin.ZCard(t.Context(), key).Result()
		require.NoError(t, err)
		return n
	}
	for round := range 3 {
		var wg sync.WaitGroup
		for i := range 6 {
			proxy := redistest.NewProxy(t, srv.Addr)
			s := processOn(t, srv.Client(func(o *redis.Options) {
				o.Addr, o.MaxRetries, o.DialTimeout = proxy.Addr, -1, 100*time.Millisecond
			}), "api", 4)
			if i < 4 {
				_, err := s.Acquire(t.Context(), 1) // holds a permit, then dies
				require.NoError(t, err)
			} else {
				wg.Go(func() { _, _ = s.Acquire(t.Context(), 1) }) // waits, then dies
				require.Eventually(t, func() bool { return card("fleet:{api}:q") == int64(i-3) },
					10*time.Second, time.Millisecond, "round %d: waiter %d queued", round, i)
			}
			proxy.SetDown(true) // the process is gone: no renewal, no release, no message
		}
		assert.Equal(t, int64(4), card("fleet:{api}:l"), "round %d", round)
		p, err := live.AcquireTimeout(t.Context(), 4, 3*ttl)
		require.NoError(t, err, "the dead processes' permits come back")
		p.Release()
		assert.Zero(t, card("fleet:{api}:l"), "expired leases purged")
		assert.Zero(t, card("fleet:{api}:q"), "dead queue entries purged")
		n, err := admin.HLen(t.Context(), "fleet:{api}:qx").Result()
		require.NoError(t, err)
		assert.Zero(t, n)
		wg.Wait()
	}
}

// The backend's own replies repeated: a retried acquire (after a lost reply) gets its grant
// again, not a second one.
func TestRepeatedAcquireIsGrantedOnce(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	b := redisfleet.New(srv.Client())
	req := fleetdriver.AcquireRequest{Name: "api", Lease: fleetdriver.Lease{ID: "x.1", N: 2, Capacity: 3}, TTL: ttl, Wait: true}
	var first fleetdriver.AcquireReply
	require.Eventually(t, func() bool {
		var err error
		first, err = b.Acquire(t.Context(), req)
		require.NoError(t, err)
		return first.Granted
	}, 3*ttl, 10*time.Millisecond)
	again, err := b.Acquire(t.Context(), req)
	require.NoError(t, err)
	assert.True(t, again.Granted)
	assert.Greater(t, again.Token, first.Token, "the same lease with a fresh token: the first never reached anyone")
	other, err := b.Acquire(t.Context(), fleetdriver.AcquireRequest{Name: "api", Lease: fleetdriver.Lease{ID: "y.1", N: 2, Capacity: 3}, TTL: ttl})
	require.NoError(t, err)
	assert.False(t, other.Granted, "2 of 3 held once, not twice")
	_, err = b.Release(t.Context(), fleetdriver.ReleaseRequest{Name: "api", Leases: []fleetdriver.Lease{req.Lease}})
	require.NoError(t, err)
	_, err = b.Release(t.Context(), fleetdriver.ReleaseRequest{Name: "api", Leases: []fleetdriver.Lease{req.Lease}})
	require.NoError(t, err)
	other, err = b.Acquire(t.Context(), fleetdriver.AcquireRequest{Name: "api", Lease: fleetdriver.Lease{ID: "y.2", N: 3, Capacity: 3}, TTL: ttl})
	require.NoError(t, err)
	assert.True(t, other.Granted, "released once, exactly")
}

func TestBackendRejectsBadArguments(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	b := redisfleet.New(srv.Client())
	_, err := b.Acquire(t.Context(), fleetdriver.AcquireRequest{})
	require.ErrorContains(t, err, "empty name")
	_, err = b.Renew(t.Context(), fleetdriver.RenewRequest{Name: "x"})
	require.ErrorContains(t, err, "no leases")
	_, err = b.Reserve(t.Context(), fleetdriver.RateRequest{Name: "x"})
	require.ErrorContains(t, err, "bad rate")
	err = b.CancelReservation(t.Context(), fleetdriver.RateCancel{Name: "x", PerSecond: 1, Burst: 1, Mark: "nope"})
	require.ErrorContains(t, err, "bad reservation")
	_, err = b.Release(t.Context(), fleetdriver.ReleaseRequest{Name: "x"})
	require.NoError(t, err)
	require.PanicsWithValue(t, "redisfleet: Subscribe: nil deliver function", func() { _, _ = b.Subscribe(context.Background(), "x", "i", nil) })
}

func TestRateOnRedis(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	// The burst and the refusals on a slow bucket (a token a second), so that no token comes back
	// between two calls however slow they are; the rate over time on a fast one.
	const slowBurst = 4
	var slow []*fleet.Rate
	for range 3 {
		slow = append(slow, fleet.NewRate(redisfleet.New(srv.Client()), "slow", 1, slowBurst))
	}
	// The burst is there at once, across processes.
	for i := range slowBurst {
		ok, err := slow[i%3].Allow(t.Context())
		require.NoError(t, err)
		require.True(t, ok)
	}
	ok, err := slow[0].Allow(t.Context())
	require.NoError(t, err)
	require.False(t, ok)
	// Refused early, without taking anything; cancelled, given back.
	res, err := slow[1].Reserve(t.Context(), time.Millisecond)
	require.NoError(t, err)
	require.False(t, res.OK())
	assert.True(t, res.Delay() > 0 && res.Delay() <= time.Second, "the next token within one interval: %v", res.Delay())
	start := time.Now()
	res, err = slow[1].Reserve(t.Context(), -1)
	require.NoError(t, err)
	require.True(t, res.OK())
	res.Cancel()
	again, err := slow[2].Reserve(t.Context(), -1)
	require.NoError(t, err)
	// Given back, the next reservation gets the same token, its delay shorter by the time that
	// passed in between; kept, it would get the one after, an interval (1 s) later. Half an
	// interval tells the two apart however slow the round trips are, up to 500 ms of them.
	elapsed := time.Since(start)
	assert.Less(t, again.Delay(), res.Delay()+500*time.Millisecond, "the cancelled token was given back")
	assert.GreaterOrEqual(t, again.Delay(), res.Delay()-elapsed-time.Millisecond, "the same token, not an earlier one")

	// Three processes of four workers for 2 s: within 5% of the rate, never above the burst.
	const perSecond, burst = 40.0, 4
	var rates []*fleet.Rate
	for range 3 {
		rates = append(rates, fleet.NewRate(redisfleet.New(srv.Client()), "api", perSecond, burst))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	var mu sync.Mutex
	var starts []time.Time
	var wg sync.WaitGroup
	for _, r := range rates {
		for range 4 {
			wg.Go(func() {
				for r.Wait(ctx) == nil {
					mu.Lock()
					starts = append(starts, time.Now())
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	got := float64(len(starts)-burst) / 2
	t.Logf("3 processes × 4 workers on Redis: %.1f starts/s beyond the burst (rate %v), %d starts", got, perSecond, len(starts))
	assert.InDelta(t, perSecond, got, perSecond*0.05)
	for _, r := range rates {
		st := r.Stats()
		// One round trip per reservation (and per cancel); each of the four workers' last call
		// may have been cut short by the deadline, counted as a trip and nothing else.
		calls := st.Reserved + st.Refused + st.Cancelled
		assert.True(t, st.RoundTrips >= calls && st.RoundTrips <= calls+4, "one round trip per reservation: %+v", st)
	}
}

func TestExpiriesAreOnRedisTime(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	admin := srv.Client()
	s := process(t, srv, "api", 1)
	warm(t, s)
	p, err := s.Acquire(t.Context(), 1)
	require.NoError(t, err)
	defer p.Release()
	now, err := admin.Time(t.Context()).Result()
	require.NoError(t, err)
	members, err := admin.ZRangeWithScores(t.Context(), "fleet:{api}:l", 0, -1).Result()
	require.NoError(t, err)
	require.Len(t, members, 1)
	exp := time.UnixMicro(int64(members[0].Score))
	assert.WithinDuration(t, now.Add(ttl), exp, 50*time.Millisecond, "the expiry is Redis TIME plus the TTL")
	assert.True(t, strings.HasSuffix(members[0].Member.(string), ":1:1"), "member %v carries capacity and weight", members[0].Member)
}
