package limiter_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/fleet"
	"github.com/goloom/loom/limiter"
)

// replicas makes n limiters, each with its own Semaphore on one in-memory backend: n processes
// of a fleet sharing a limit of capacity.
func replicas(t *testing.T, b *fleet.Memory, n int, capacity int64, opts ...limiter.Option) ([]*limiter.Limiter, []*fleet.Semaphore) {
	t.Helper()
	var ls []*limiter.Limiter
	var sems []*fleet.Semaphore
	for range n {
		sem := fleet.New(b, "api", capacity, fleet.WithLease(time.Second), fleet.WithLogger(nil))
		t.Cleanup(func() { _ = sem.Close() })
		sems = append(sems, sem)
		ls = append(ls, limiter.New(int(capacity), append([]limiter.Option{limiter.WithFleet(sem)}, opts...)...))
	}
	return ls, sems
}

// "limiter.WithFleet(sem): a call first takes a local slot (local FIFO, local limit,
// WithMaxWaiting), then a fleet permit, both under the acquire timeout; the permit is released
// when fn returns": five replicas, each with the whole local limit, never run more than the
// fleet's capacity together, through Do, Call and Submit; Stats stay conserved.
func TestWithFleetHoldsOneLimitAcrossReplicas(t *testing.T) {
	const capacity = 3
	b := fleet.NewMemory()
	ls, _ := replicas(t, b, 5, capacity, limiter.WithTaskTimeout(time.Minute))
	plain, _ := replicas(t, b, 1, capacity) // and one without a task timeout, on the caller's goroutine
	ls = append(ls, plain...)
	var running, peak atomic.Int32
	body := func(context.Context) error {
		r := running.Add(1)
		for p := peak.Load(); r > p && !peak.CompareAndSwap(p, r); p = peak.Load() {
		}
		time.Sleep(200 * time.Microsecond)
		running.Add(-1)
		return nil
	}
	var wg sync.WaitGroup
	for i, l := range ls {
		for g := range 4 {
			wg.Go(func() {
				for range 25 {
					var err error
					switch (i + g) % 3 {
					case 0:
						err = l.Do(t.Context(), body)
					case 1:
						_, err = limiter.Call(t.Context(), l, func(ctx context.Context) (int, error) { return 0, body(ctx) })
					default:
						_, err = limiter.Submit(t.Context(), l, func(ctx context.Context) (int, error) { return 0, body(ctx) }).Wait(t.Context())
					}
					assert.NoError(t, err)
				}
			})
		}
	}
	wg.Wait()
	assert.LessOrEqual(t, peak.Load(), int32(capacity), "the fleet's limit, across replicas")
	assert.Equal(t, int32(capacity), peak.Load(), "and it is used")
	assert.Zero(t, b.Held("api"), "every permit is back")
	for _, l := range ls {
		s := atRest(t, l)
		assert.Equal(t, s.Submitted, s.Completed, "%+v", s)
	}
}

// "ErrUnavailable counts Rejected": with the backend down (FailClosed, the default) a call gets
// an error matching both fleet.ErrUnavailable and limiter.ErrRejected, at once, and never runs.
func TestWithFleetBackendDown(t *testing.T) {
	b := fleet.NewMemory()
	ls, _ := replicas(t, b, 1, 2)
	l := ls[0]
	b.SetDown(true)
	ran := false
	err := l.Do(t.Context(), func(context.Context) error { ran = true; return nil })
	require.ErrorIs(t, err, fleet.ErrUnavailable)
	require.ErrorIs(t, err, limiter.ErrRejected)
	assert.False(t, ran)
	f := limiter.Submit(t.Context(), l, func(context.Context) (int, error) { ran = true; return 0, nil })
	_, err = f.Wait(t.Context())
	require.ErrorIs(t, err, fleet.ErrUnavailable)
	require.ErrorIs(t, err, limiter.ErrRejected)
	assert.False(t, ran)
	s := atRest(t, l)
	assert.Equal(t, int64(2), s.Rejected)
	b.SetDown(false)
}

// The acquire timeout covers the wait for the fleet's permit: a replica whose permits the others
// hold is rejected with ErrAcquireTimeout, counted Rejected, within the timeout.
func TestWithFleetAcquireTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := fleet.NewMemory()
		ls, _ := replicas(t, b, 2, 1, limiter.WithAcquireTimeout(300*time.Millisecond))
		hold := make(chan struct{})
		h := goDo(t.Context(), ls[0], func(context.Context) error { <-hold; return nil }) // the only fleet permit
		start := time.Now()
		err := ls[1].Do(t.Context(), func(context.Context) error { return nil })
		require.ErrorIs(t, err, limiter.ErrAcquireTimeout)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, 300*time.Millisecond, time.Since(start))
		close(hold)
		require.NoError(t, <-h.err)
		assert.Equal(t, int64(1), atRest(t, ls[1]).Rejected)
		atRest(t, ls[0])
	})
}

// Without an acquire timeout, only ctx bounds the wait for the fleet's permit: a call whose ctx's
// deadline passes while it waits ends with ctx's error, counted Cancelled — never
// ErrAcquireTimeout, whichever of two timers at the same instant fires first.
func TestWithFleetContextDeadlineIsCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := fleet.NewMemory()
		ls, _ := replicas(t, b, 2, 1)
		hold := make(chan struct{})
		h := goDo(t.Context(), ls[0], func(context.Context) error { <-hold; return nil }) // the only fleet permit
		const calls = 200
		for range calls {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Millisecond)
			err := ls[1].Do(ctx, func(context.Context) error { return nil })
			cancel()
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.NotErrorIs(t, err, limiter.ErrAcquireTimeout)
		}
		close(hold)
		require.NoError(t, <-h.err)
		assert.Equal(t, int64(calls), atRest(t, ls[1]).Cancelled)
		atRest(t, ls[0])
	})
}

// "a lost lease cancels the task's context with cause fleet.ErrLeaseLost, and from then on the
// call's result is an error matching fleet.ErrLeaseLost (unless fn panicked), like a task timeout
// (counted Failed)." The backend goes down while a task runs; the lease cannot be renewed and is
// lost within its TTL.
func TestWithFleetLeaseLost(t *testing.T) {
	for _, tt := range runPaths {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := fleet.NewMemory()
				ls, _ := replicas(t, b, 1, 1, tt.opts...)
				l := ls[0]
				causes := make(chan error, 1)
				err := l.Do(t.Context(), func(ctx context.Context) error {
					b.SetDown(true) // renewals fail from now on
					<-ctx.Done()
					causes <- context.Cause(ctx)
					return nil // whatever fn says, the lease is gone
				})
				require.ErrorIs(t, err, fleet.ErrLeaseLost)
				require.ErrorIs(t, <-causes, fleet.ErrLeaseLost, "the task's context said why")
				s := atRest(t, l)
				assert.Equal(t, int64(1), s.Failed)
				b.SetDown(false)
			})
		})
	}
	t.Run("Submit", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := fleet.NewMemory()
			ls, _ := replicas(t, b, 1, 1)
			l := ls[0]
			release := make(chan struct{})
			f := limiter.Submit(t.Context(), l, func(ctx context.Context) (int, error) {
				b.SetDown(true)
				<-release // ignores its context: the Future completes at the loss all the same
				return 1, nil
			})
			_, err := f.Wait(t.Context())
			require.ErrorIs(t, err, fleet.ErrLeaseLost)
			assert.Equal(t, 1, l.Stats().Overrunning, "it runs on, without its lease, holding its local slot")
			close(release)
			require.NoError(t, l.Shutdown(t.Context()))
			assert.Equal(t, int64(1), atRest(t, l).Failed)
			b.SetDown(false)
		})
	})
}

// A task that overruns its timeout keeps its fleet permit until fn returns.
func TestWithFleetOverrunKeepsThePermit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := fleet.NewMemory()
		ls, _ := replicas(t, b, 1, 1, limiter.WithTaskTimeout(time.Second))
		release := make(chan struct{})
		err := ls[0].Do(t.Context(), func(context.Context) error { <-release; return nil })
		require.ErrorIs(t, err, limiter.ErrTaskTimeout)
		assert.Equal(t, int64(1), b.Held("api"), "the overrunning task holds the permit")
		close(release)
		require.NoError(t, ls[0].Shutdown(t.Context()))
		synctest.Wait()
		assert.Zero(t, b.Held("api"))
		atRest(t, ls[0])
	})
}

// "limiter.WithFleetRate(r *fleet.Rate): the same bucket shared by every process": three
// limiters on one in-memory backend start, together, perSecond calls per second.
func TestWithFleetRateSharesOneBucket(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const perSecond, burst = 20.0, 5
		b := fleet.NewMemory()
		var st starts
		var wg sync.WaitGroup
		t0 := time.Now()
		end := t0.Add(30 * time.Second)
		var ls []*limiter.Limiter
		for range 3 {
			r := fleet.NewRate(b, "api", perSecond, burst, fleet.WithLogger(nil))
			l := limiter.New(10, limiter.WithFleetRate(r))
			ls = append(ls, l)
			for range 4 {
				wg.Go(func() {
					for time.Now().Before(end) {
						require.NoError(t, l.Do(t.Context(), func(context.Context) error { st.add(); return nil }))
					}
				})
			}
		}
		wg.Wait()
		var at []time.Time
		for _, s := range st.times() {
			if s.Before(end) {
				at = append(at, s)
			}
		}
		rate := float64(len(at)-burst) / 30
		t.Logf("%d starts in 30 s across 3 limiters: %.2f per second", len(at), rate)
		assert.InEpsilon(t, perSecond, rate, 0.05)
		checkEnvelope(t, at, perSecond, burst, time.Millisecond)
		for _, l := range ls {
			atRest(t, l)
		}
	})
}

// A call whose fleet token would come later than its acquire timeout is rejected at once.
func TestWithFleetRateRejectsEarly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := fleet.NewMemory()
		r := fleet.NewRate(b, "api", 1, 1, fleet.WithLogger(nil))
		l := limiter.New(10, limiter.WithFleetRate(r), limiter.WithAcquireTimeout(500*time.Millisecond))
		require.NoError(t, l.Do(t.Context(), func(context.Context) error { return nil })) // the token of t=0
		start := time.Now()
		err := l.Do(t.Context(), func(context.Context) error { return nil }) // would come at 1s
		require.ErrorIs(t, err, limiter.ErrAcquireTimeout)
		assert.Equal(t, time.Duration(0), time.Since(start), "at once")
		assert.Equal(t, int64(1), atRest(t, l).Rejected)
	})
}

func TestWithFleetBadInput(t *testing.T) {
	assert.PanicsWithValue(t, "limiter: WithFleet: nil Semaphore", func() { limiter.WithFleet(nil) })
	assert.PanicsWithValue(t, "limiter: WithFleetRate: nil Rate", func() { limiter.WithFleetRate(nil) })
}

// "A lost lease decides the result from the lease, not from a context race: a call whose lease
// was lost before fn returned ends with an error matching fleet.ErrLeaseLost (Failed), every
// time." Many calls hold their leases when the backend goes down; each fn returns as soon as
// the Semaphore has counted every lease lost — which it does after cancelling each lease's
// context — without waiting for its own context to hear of it. Regression: the result was
// read from the context derived for the task, which hears of the loss through an AfterFunc on
// another goroutine and was cancelled with context.Canceled on the way out first: about half
// of such calls succeeded. A real clock (the lease is lost within its TTL, 1 s), polled.
func TestWithFleetLeaseLostBeforeFnReturnsFailsEveryTime(t *testing.T) {
	const calls = 100
	paths := append(append([]struct {
		name string
		opts []limiter.Option
	}(nil), runPaths...), struct {
		name string
		opts []limiter.Option
	}{"Submit", nil})
	for _, tt := range paths {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := fleet.NewMemory()
			sem := fleet.New(b, "api", calls, fleet.WithLease(time.Second), fleet.WithLogger(nil))
			defer func() { _ = sem.Close() }()
			l := limiter.New(calls, append([]limiter.Option{limiter.WithFleet(sem)}, tt.opts...)...)
			var started sync.WaitGroup
			started.Add(calls)
			fn := func(context.Context) error {
				started.Done()
				deadline := time.Now().Add(20 * time.Second)
				for sem.Stats().LeasesLost < calls {
					if time.Now().After(deadline) {
						return errors.New("the leases were never lost")
					}
					time.Sleep(50 * time.Microsecond)
				}
				return nil // the lease is gone: this nil must not stand
			}
			errs := make(chan error, calls)
			for range calls {
				go func() {
					if tt.name == "Submit" {
						_, err := limiter.Submit(context.Background(), l, func(ctx context.Context) (int, error) { return 0, fn(ctx) }).Wait(context.Background())
						errs <- err
						return
					}
					errs <- l.Do(context.Background(), fn)
				}()
			}
			started.Wait()
			b.SetDown(true) // renewals fail from now on
			succeeded := 0
			for range calls {
				err := <-errs
				if err == nil {
					succeeded++
					continue
				}
				require.ErrorIs(t, err, fleet.ErrLeaseLost)
			}
			assert.Zero(t, succeeded, "calls that succeeded though their lease was lost before fn returned")
			require.NoError(t, l.Shutdown(t.Context()))
			s := atRest(t, l)
			assert.Equal(t, int64(calls), s.Failed)
			b.SetDown(false)
		})
	}
}

// "Shutdown ends waits at every admission step: a call waiting for a fleet permit or token (or a
// rate token) when Shutdown begins ends as a call queued for a local slot does; no fn starts
// after Shutdown began." Regression: the wait for the fleet ran under the caller's ctx only, so
// Shutdown waited for it (and gave up, "1 tasks still running"), and fn started once the permit
// came, after Shutdown had begun.
func TestShutdownEndsEveryAdmissionWait(t *testing.T) {
	type waitFor struct {
		name  string
		setup func(t *testing.T, b *fleet.Memory) (l *limiter.Limiter, unblock func())
	}
	permit := func(opts ...limiter.Option) func(t *testing.T, b *fleet.Memory) (*limiter.Limiter, func()) {
		return func(t *testing.T, b *fleet.Memory) (*limiter.Limiter, func()) {
			ls, _ := replicas(t, b, 2, 1, opts...)
			hold := make(chan struct{})
			h := goDo(t.Context(), ls[0], func(context.Context) error { <-hold; return nil }) // the fleet's only permit
			return ls[1], func() { close(hold); require.NoError(t, <-h.err) }
		}
	}
	token := func(t *testing.T, b *fleet.Memory) (*limiter.Limiter, func()) {
		r := fleet.NewRate(b, "api", 1, 1, fleet.WithLogger(nil))
		l := limiter.New(10, limiter.WithFleetRate(r))
		require.NoError(t, l.Do(t.Context(), func(context.Context) error { return nil })) // the token of now
		return l, func() { time.Sleep(2 * time.Second) }                                  // the next one comes
	}
	for _, w := range []waitFor{
		{"fleet permit", permit()},
		{"fleet permit, task timeout", permit(limiter.WithTaskTimeout(time.Hour))},
		{"fleet permit, acquire timeout", permit(limiter.WithAcquireTimeout(time.Hour))},
		{"fleet token", token},
	} {
		for _, entry := range []string{"Do", "Submit"} {
			t.Run(w.name+"/"+entry, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					b := fleet.NewMemory()
					l, unblock := w.setup(t, b)
					var ran atomic.Bool
					fn := func(context.Context) error { ran.Store(true); return nil }
					errc := make(chan error, 1)
					if entry == "Do" {
						go func() { errc <- l.Do(t.Context(), fn) }()
					} else {
						f := limiter.Submit(t.Context(), l, func(ctx context.Context) (int, error) { return 0, fn(ctx) })
						go func() { _, err := f.Wait(t.Context()); errc <- err }()
					}
					synctest.Wait() // waiting at the fleet, holding its local slot
					require.Equal(t, 1, l.Stats().InFlight)
					ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
					defer cancel()
					start := time.Now()
					require.NoError(t, l.Shutdown(ctx), "Shutdown does not wait for a call that waits at the fleet")
					assert.Zero(t, time.Since(start))
					err := <-errc
					require.ErrorIs(t, err, limiter.ErrClosed)
					unblock()
					synctest.Wait()
					assert.False(t, ran.Load(), "no fn starts after Shutdown began")
					s := atRest(t, l)
					assert.Equal(t, int64(1), s.Rejected)
				})
			})
		}
	}
}
