package sim

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"sync"
	"time"
)

// ErrOverload is the downstream refusing a call: the simulated 429 or 503.
var ErrOverload = errors.New("sim: downstream overloaded")

// A Server is the model of the downstream. Its capacity is the scenario's; the fields shape its
// latency and its drops. Use [DefaultServer] and change what a scenario needs.
type Server struct {
	Service     time.Duration // latency of a call at or below capacity, before jitter
	Jitter      float64       // sigma of the lognormal spread of latencies
	Lucky       float64       // share of calls that take a quarter of Service: cache hits
	Slow        float64       // share of calls that take three times Service: the tail
	Queue       float64       // the server accepts up to C×(1+Queue) calls; more are refused
	Unbounded   bool          // accept every call: latency grows without bound, no drops
	DropLatency time.Duration // how long a refusal takes to come back, before jitter
	Timeout     time.Duration // a call slower than this fails with context.DeadlineExceeded
}

// DefaultServer returns the model the scenarios start from: 200 ms calls with a 20 % spread,
// 1 % lucky and 1 % slow, a queue of 10 % above capacity, refusals in 50 ms, a 2 s timeout.
func DefaultServer() Server {
	return Server{
		Service:     200 * time.Millisecond,
		Jitter:      0.2,
		Lucky:       0.01,
		Slow:        0.01,
		Queue:       0.1,
		DropLatency: 50 * time.Millisecond,
		Timeout:     2 * time.Second,
	}
}

// jitter draws a latency factor.
func (s *Server) jitter(rng *rand.Rand) float64 {
	f := math.Exp(s.Jitter * rng.NormFloat64())
	switch u := rng.Float64(); {
	case u < s.Lucky:
		f *= 0.25
	case u < s.Lucky+s.Slow:
		f *= 3
	}
	return f
}

// downstream is a Server at work in one run.
type downstream struct {
	model    Server
	capacity func(time.Duration) int
	slowness func(time.Duration) float64 // latency factor over time

	mu       sync.Mutex
	inflight int // calls accepted and not yet answered
}

// call serves one call of client c.
func (d *downstream) call(ctx context.Context, c *client) error {
	now := c.now()
	capacity := d.capacity(now)
	d.mu.Lock()
	n := d.inflight + 1
	refuse := capacity <= 0 || !d.model.Unbounded && float64(n) > float64(capacity)*(1+d.model.Queue)
	if !refuse {
		d.inflight = n
	}
	d.mu.Unlock()
	if refuse {
		c.sleep(time.Duration(float64(d.model.DropLatency) * d.model.jitter(c.rng)))
		return ErrOverload
	}
	defer func() {
		d.mu.Lock()
		d.inflight--
		d.mu.Unlock()
	}()
	latency := float64(d.model.Service) * d.slowness(now) * d.model.jitter(c.rng) * math.Max(1, float64(n)/float64(capacity))
	if d.model.Timeout > 0 && latency > float64(d.model.Timeout) {
		c.sleep(d.model.Timeout)
		return context.DeadlineExceeded
	}
	c.sleep(time.Duration(latency))
	return nil
}
