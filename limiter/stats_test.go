package limiter_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/fleet"
	"github.com/goloom/loom/limiter"
	"github.com/goloom/loom/limiter/adaptive"
)

// gauge tracks how many task bodies run at once, measured inside the bodies.
type gauge struct {
	running, peak atomic.Int64
}

func (g *gauge) enter() {
	n := g.running.Add(1)
	for {
		p := g.peak.Load()
		if n <= p || g.peak.CompareAndSwap(p, n) {
			return
		}
	}
}

func (g *gauge) exit() { g.running.Add(-1) }

// "The limit is a hard bound on running task bodies": 64 goroutines hammer a limit of 8 through
// every entry point.
func TestHardBound(t *testing.T) {
	const goroutines, limit = 64, 8
	calls := 10_000
	if raceEnabled || testing.Short() {
		calls = 1_000
	}
	for _, tt := range []struct {
		name  string
		opts  []limiter.Option
		calls int
		run   func(l *limiter.Limiter, body func(context.Context) error) error
	}{
		{"Do", nil, calls, func(l *limiter.Limiter, body func(context.Context) error) error {
			return l.Do(context.Background(), body)
		}},
		{"Call", nil, calls / 4, func(l *limiter.Limiter, body func(context.Context) error) error {
			_, err := limiter.Call(context.Background(), l, func(ctx context.Context) (int, error) { return 0, body(ctx) })
			return err
		}},
		{"Submit", nil, calls / 4, func(l *limiter.Limiter, body func(context.Context) error) error {
			_, err := limiter.Submit(context.Background(), l, func(ctx context.Context) (int, error) { return 0, body(ctx) }).
				Wait(context.Background())
			return err
		}},
		{"Do with task timeout", []limiter.Option{limiter.WithTaskTimeout(time.Hour)}, calls / 4,
			func(l *limiter.Limiter, body func(context.Context) error) error {
				return l.Do(context.Background(), body)
			}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := limiter.New(limit, tt.opts...)
			var g gauge
			body := func(context.Context) error {
				g.enter()
				runtime.Gosched()
				g.exit()
				return nil
			}
			var wg sync.WaitGroup
			for range goroutines {
				wg.Go(func() {
					for range tt.calls {
						if err := tt.run(l, body); err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			assert.LessOrEqual(t, g.peak.Load(), int64(limit))
			require.NoError(t, l.Shutdown(t.Context()))
			s := atRest(t, l)
			assert.Equal(t, int64(goroutines*tt.calls), s.Completed)
		})
	}
}

// The bound holds while task timeouts fire and the tasks ignore their context: the callers move
// on, the tasks keep their slots.
func TestHardBoundWithTimeoutsFiring(t *testing.T) {
	const goroutines, limit = 64, 8
	calls := 150
	if raceEnabled {
		calls = 40
	}
	l := limiter.New(limit, limiter.WithTaskTimeout(20*time.Microsecond))
	var g gauge
	var sawOverrun atomic.Bool
	body := func(ctx context.Context) error {
		g.enter()
		defer g.exit()
		// Busy past the timeout, ignoring ctx.
		for end := time.Now().Add(time.Duration(rand.IntN(150)) * time.Microsecond); time.Now().Before(end); {
			runtime.Gosched()
		}
		if l.Stats().Overrunning > 0 {
			sawOverrun.Store(true)
		}
		return nil
	}
	var timedOut atomic.Int64
	var wg sync.WaitGroup
	for i := range goroutines {
		wg.Go(func() {
			for j := range calls {
				var err error
				if (i+j)%2 == 0 {
					err = l.Do(context.Background(), body)
				} else {
					_, err = limiter.Submit(context.Background(), l, func(ctx context.Context) (int, error) { return 0, body(ctx) }).
						Wait(context.Background())
				}
				if err != nil {
					assert.ErrorIs(t, err, limiter.ErrTaskTimeout)
					timedOut.Add(1)
				}
			}
		})
	}
	wg.Wait()
	require.NoError(t, l.Shutdown(t.Context()))
	assert.LessOrEqual(t, g.peak.Load(), int64(limit))
	assert.Positive(t, timedOut.Load(), "timeouts fired")
	assert.True(t, sawOverrun.Load(), "tasks overran")
	s := atRest(t, l)
	assert.Equal(t, timedOut.Load(), s.TimedOut)
	assert.Equal(t, int64(goroutines*calls), s.Completed+s.TimedOut)
}

// tally counts the outcomes as the callers saw them.
type tally struct {
	ok, rejected, timedOut, other, panics atomic.Int64
}

func (ty *tally) add(t *testing.T, err error) {
	switch {
	case err == nil:
		ty.ok.Add(1)
	case errors.Is(err, limiter.ErrRejected):
		ty.rejected.Add(1)
	case err == limiter.ErrTaskTimeout:
		ty.timedOut.Add(1)
	default:
		ty.other.Add(1)
	}
}

// "Every call ends in exactly one of Completed (the call returned nil), Rejected (…), TimedOut (…),
// Cancelled (…) and Failed (…). Panicked counts every panic, whichever outcome it fell under, so at
// rest Submitted == Completed + Failed + Rejected + TimedOut + Cancelled."
//
// A randomized mix of everything — entry points, options, panics, Goexits, timeouts,
// cancellations, Future.Cancel, Wait with short contexts, a Shutdown in the middle — keeps the
// hard bound, and at rest every call is counted once, in the outcome its caller saw.
func TestStressConservation(t *testing.T) {
	configs := 12
	ops := 300
	if raceEnabled || testing.Short() {
		configs, ops = 6, 100
	}
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	errX := errors.New("x")
	for c := range configs {
		limit := 1 + rng.IntN(6)
		var opts []limiter.Option
		switch rng.IntN(3) {
		case 0:
			opts = append(opts, limiter.WithAcquireTimeout(time.Duration(rng.IntN(3))*50*time.Microsecond))
		case 1:
			opts = append(opts, limiter.WithMaxWaiting(rng.IntN(6)))
		}
		if rng.IntN(2) == 0 {
			opts = append(opts, limiter.WithTaskTimeout(time.Duration(1+rng.IntN(200))*time.Microsecond))
		}
		// The admission steps and the adaptive limit, each in a third of the configurations: a
		// rate whose bucket runs dry (tokens every 20-200 µs), a fleet permit of a Memory backend
		// (the local limit's, or fewer), an AIMD limit moving within [1, limit].
		if rng.IntN(3) == 0 {
			opts = append(opts, limiter.WithRate(float64(5_000+rng.IntN(45_000)), 1+rng.IntN(4)))
		}
		bound := limit
		if rng.IntN(3) == 0 {
			bound = 1 + rng.IntN(limit)
			sem := fleet.New(fleet.NewMemory(), "stress", int64(bound), fleet.WithLease(time.Minute), fleet.WithLogger(nil))
			t.Cleanup(func() { _ = sem.Close() })
			opts = append(opts, limiter.WithFleet(sem))
		}
		if rng.IntN(3) == 0 {
			opts = append(opts, limiter.WithAdaptive(adaptive.AIMD{Min: 1, Max: limit}))
		}
		shutdownAt := -1
		if c%3 == 2 {
			shutdownAt = ops / 2
		}
		l := limiter.New(limit, opts...)
		var g gauge
		var ty tally
		body := func(ctx context.Context, r uint64) error {
			g.enter()
			defer g.exit()
			switch r % 8 {
			case 0:
				return errX
			case 1:
				ty.panics.Add(1)
				panic("boom")
			case 2:
				runtime.Goexit()
			case 3: // ignores ctx for a while
				time.Sleep(time.Duration(r%100) * time.Microsecond)
			case 4: // heeds ctx
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(time.Duration(r%300) * time.Microsecond):
				}
			}
			return nil
		}
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(seed, uint64(c*100+w)))
				for i := range ops {
					if w == 0 && i == shutdownAt {
						ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
						_ = l.Shutdown(ctx)
						cancel()
					}
					r := rng.Uint64()
					ctx, cancel := context.WithCancel(context.Background())
					switch rng.IntN(8) {
					case 0:
						cancel() // done before the call
					case 1:
						time.AfterFunc(time.Duration(rng.IntN(200))*time.Microsecond, cancel)
					}
					b := func(ctx context.Context) error { return body(ctx, r) }
					switch rng.IntN(3) {
					case 0:
						done := make(chan error, 1)
						go func() { // Goexit would end this goroutine, not the worker
							defer close(done)
							done <- l.Do(ctx, b)
						}()
						if err, ok := <-done; ok {
							ty.add(t, err)
						} else {
							ty.other.Add(1) // Goexit on the caller's goroutine: counted Failed
						}
					case 1:
						done := make(chan error, 1)
						go func() {
							defer close(done)
							_, err := limiter.Call(ctx, l, func(ctx context.Context) (int, error) { return 1, b(ctx) })
							done <- err
						}()
						if err, ok := <-done; ok {
							ty.add(t, err)
						} else {
							ty.other.Add(1)
						}
					case 2:
						f := limiter.Submit(ctx, l, func(ctx context.Context) (int, error) { return 1, b(ctx) })
						switch rng.IntN(4) {
						case 0:
							f.Cancel()
						case 1:
							wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Microsecond)
							_, _ = f.Wait(wctx)
							wcancel()
						case 2:
							go f.Cancel()
						}
						_, err := f.Wait(context.Background())
						ty.add(t, err)
					}
					cancel()
				}
			})
		}
		wg.Wait()
		require.NoError(t, l.Shutdown(t.Context()))
		assert.LessOrEqual(t, g.peak.Load(), int64(bound), "config %d: the local limit, and the fleet's", c)
		s := atRest(t, l)
		assert.Equal(t, int64(8*ops), s.Submitted, "config %d", c)
		assert.Equal(t, ty.ok.Load(), s.Completed, "config %d", c)
		assert.Equal(t, ty.rejected.Load(), s.Rejected, "config %d", c)
		assert.Equal(t, ty.timedOut.Load(), s.TimedOut, "config %d", c)
		assert.Equal(t, ty.other.Load(), s.Failed+s.Cancelled, "config %d", c)
		assert.Equal(t, ty.panics.Load(), s.Panicked, "config %d", c)
	}
}

func TestStatsGauges(t *testing.T) {
	l := limiter.New(3)
	assert.Equal(t, limiter.Stats{Limit: 3}, l.Stats())
	h := hold(t, l)
	s := l.Stats()
	assert.Equal(t, 1, s.InFlight)
	assert.Equal(t, int64(1), s.Submitted, "a running call is counted as begun")
	inside := l.Stats()
	require.NoError(t, l.Do(t.Context(), func(context.Context) error { inside = l.Stats(); return nil }))
	assert.Equal(t, 2, inside.InFlight)
	assert.Equal(t, int64(2), inside.Submitted)
	h.free(t)
	assert.Equal(t, limiter.Stats{Limit: 3, Submitted: 2, Completed: 2}, atRest(t, l))
}
