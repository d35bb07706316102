package redisfleet_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"

	"github.com/goloom/loom/fleet"
	"github.com/goloom/loom/fleet/redisfleet"
	"github.com/goloom/loom/fleet/redisfleet/internal/redistest"
)

const ttl = time.Second // the shortest lease, so that expiries come soon

// process is one member of the fleet as Redis sees it: its own client (connections) and its own
// Semaphore, both closed when the test ends.
func process(t testing.TB, srv *redistest.Server, name string, capacity int64, opts ...fleet.Option) *fleet.Semaphore {
	t.Helper()
	return processOn(t, srv.Client(), name, capacity, opts...)
}

func processOn(t testing.TB, c redis.UniversalClient, name string, capacity int64, opts ...fleet.Option) *fleet.Semaphore {
	t.Helper()
	s := fleet.New(redisfleet.New(c), name, capacity,
		append([]fleet.Option{fleet.WithLease(ttl), fleet.WithLogger(nil)}, opts...)...)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// warm takes the name through the pause a new name costs (one TTL), so that the test measures
// what it means to.
func warm(t testing.TB, s *fleet.Semaphore) {
	t.Helper()
	p, err := s.AcquireTimeout(context.Background(), 1, 3*ttl)
	if err != nil {
		t.Fatalf("warm: %v", err)
	}
	p.Release()
}

// commands returns how many times Redis has run each script command so far (INFO commandstats),
// evalsha and eval together.
func scriptCalls(t testing.TB, c *redis.Client) int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	return statCalls(info, "evalsha") + statCalls(info, "eval")
}

// scriptMicros returns how many microseconds Redis has spent running scripts so far (INFO
// commandstats), evalsha and eval together.
func scriptMicros(t testing.TB, c *redis.Client) float64 {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	return statMicros(info, "evalsha") + statMicros(info, "eval")
}

func acquireAsync(ctx context.Context, s *fleet.Semaphore, n int64) <-chan result {
	ch := make(chan result, 1)
	go func() {
		p, err := s.Acquire(ctx, n)
		ch <- result{p, err}
	}()
	return ch
}

type result struct {
	p   *fleet.Permit
	err error
}

// go-redis logs every failed dial; the fault tests make many on purpose.
func init() { logging.Disable() }
