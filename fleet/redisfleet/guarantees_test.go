package redisfleet_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/fleet"
	"github.com/goloom/loom/fleet/fleetdriver"
	"github.com/goloom/loom/fleet/redisfleet"
	"github.com/goloom/loom/fleet/redisfleet/internal/redistest"
)

// What the conformance kit (conformance_test.go) does not check of the Redis backend: a waiter
// whose messages never come is served all the same, and each call is one script on the server.
// (Real replica processes are in chaos_test.go and fairness_test.go.)

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
