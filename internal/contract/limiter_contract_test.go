package contract_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/limiter"
	"github.com/goloom/loom/scopedvalue"
)

// atRest checks the DESIGN's conservation law and the zero gauges of a limiter at rest.
func atRest(t *testing.T, l *limiter.Limiter) limiter.Stats {
	t.Helper()
	st := l.Stats()
	assert.Equal(t, st.Submitted, st.Completed+st.Failed+st.Rejected+st.TimedOut+st.Cancelled,
		"at rest Submitted == Completed + Failed + Rejected + TimedOut + Cancelled: %+v", st)
	assert.Zero(t, st.InFlight, "InFlight at rest")
	assert.Zero(t, st.Waiting, "Waiting at rest")
	assert.Zero(t, st.Overrunning, "Overrunning at rest")
	return st
}

// outcome is the counter part of Stats, for exact comparisons.
type outcome struct{ Submitted, Completed, Failed, Rejected, TimedOut, Cancelled, Panicked int64 }

func outcomes(st limiter.Stats) outcome {
	return outcome{st.Submitted, st.Completed, st.Failed, st.Rejected, st.TimedOut, st.Cancelled, st.Panicked}
}

// holdSlot occupies one slot of l with a task that runs until release is closed.
func holdSlot(l *limiter.Limiter) (release func(), done <-chan error) {
	ch := make(chan struct{})
	d := make(chan error, 1)
	started := make(chan struct{})
	go func() {
		d <- l.Do(context.Background(), func(context.Context) error { close(started); <-ch; return nil })
	}()
	<-started
	var once sync.Once
	return func() { once.Do(func() { close(ch) }) }, d
}

// ---------------------------------------------------------------------------
// New and options
// ---------------------------------------------------------------------------

// DESIGN: "New(limit) with limit < 1 panics."
func TestLimiterNewBelowOnePanics(t *testing.T) {
	for _, n := range []int{0, -1} {
		msg, ok := panicMsg(func() { limiter.New(n) })
		require.True(t, ok, "New(%d) must panic", n)
		assert.True(t, strings.HasPrefix(msg, "limiter:"), "panic %q should be prefixed limiter:", msg)
	}
	assert.NotPanics(t, func() { limiter.New(1) })
}

// DESIGN: "WithMaxWaiting(n) (… negative panics)", "WithTaskTimeout(d) (d > 0, else panic …)".
func TestLimiterOptionPanics(t *testing.T) {
	cases := map[string]func(){
		"WithMaxWaiting(-1)":  func() { limiter.New(1, limiter.WithMaxWaiting(-1)) },
		"WithTaskTimeout(0)":  func() { limiter.New(1, limiter.WithTaskTimeout(0)) },
		"WithTaskTimeout(-1)": func() { limiter.New(1, limiter.WithTaskTimeout(-time.Second)) },
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			msg, ok := panicMsg(f)
			require.True(t, ok, "%s must panic", name)
			assert.True(t, strings.HasPrefix(msg, "limiter:"), "panic %q should be prefixed limiter:", msg)
		})
	}
	assert.NotPanics(t, func() {
		limiter.New(1, limiter.WithMaxWaiting(0), limiter.WithAcquireTimeout(0), limiter.WithAcquireTimeout(-1),
			limiter.WithName("x"), limiter.WithLogger(nil))
	})
}

// ---------------------------------------------------------------------------
// Do / Call / Submit basics
// ---------------------------------------------------------------------------

func TestLimiterBasics(t *testing.T) {
	l := limiter.New(3)
	ctx := context.Background()
	require.NoError(t, l.Do(ctx, func(context.Context) error { return nil }))
	v, err := limiter.Call(ctx, l, func(context.Context) (int, error) { return 7, nil })
	require.NoError(t, err)
	assert.Equal(t, 7, v)
	f := limiter.Submit(ctx, l, func(context.Context) (string, error) { return "s", nil })
	s, err := f.Wait(ctx)
	require.NoError(t, err)
	assert.Equal(t, "s", s)
	select {
	case <-f.Done():
	default:
		t.Fatal("Done must be closed after Wait returned the result")
	}
	st := atRest(t, l)
	assert.Equal(t, 3, st.Limit)
	assert.Equal(t, outcome{Submitted: 3, Completed: 3}, outcomes(st))
}

// DESIGN: "When fn returns an error, the call returns that error as is."
func TestLimiterReturnsFnErrorAsIs(t *testing.T) {
	boom := errors.New("boom")
	for name, l := range map[string]*limiter.Limiter{
		"plain":        limiter.New(1),
		"task timeout": limiter.New(1, limiter.WithTaskTimeout(time.Hour)),
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			err := l.Do(ctx, func(context.Context) error { return boom })
			assert.True(t, isSame(boom, err), "Do: got %v", err)
			v, err := limiter.Call(ctx, l, func(context.Context) (int, error) { return 5, boom })
			assert.True(t, isSame(boom, err), "Call: got %v", err)
			_ = v
			_, err = limiter.Submit(ctx, l, func(context.Context) (int, error) { return 0, boom }).Wait(ctx)
			assert.True(t, isSame(boom, err), "Submit: got %v", err)
			st := atRest(t, l)
			assert.Equal(t, outcome{Submitted: 3, Failed: 3}, outcomes(st))
		})
	}
}

// DESIGN: "Without a task timeout, Do/Call run fn on the caller's goroutine and return when fn does;
// with one, fn runs on its own goroutine". "A Submitted task always runs on its own goroutine".
func TestLimiterWhichGoroutine(t *testing.T) {
	ctx := context.Background()
	me := goid()
	var got uint64
	plain := limiter.New(1)
	require.NoError(t, plain.Do(ctx, func(context.Context) error { got = goid(); return nil }))
	assert.Equal(t, me, got, "Do without task timeout runs fn on the caller's goroutine")
	_, err := limiter.Call(ctx, plain, func(context.Context) (int, error) { got = goid(); return 0, nil })
	require.NoError(t, err)
	assert.Equal(t, me, got, "Call without task timeout runs fn on the caller's goroutine")
	_, err = limiter.Submit(ctx, plain, func(context.Context) (int, error) { got = goid(); return 0, nil }).Wait(ctx)
	require.NoError(t, err)
	assert.NotEqual(t, me, got, "Submit always runs fn on its own goroutine")

	timed := limiter.New(1, limiter.WithTaskTimeout(time.Hour))
	require.NoError(t, timed.Do(ctx, func(context.Context) error { got = goid(); return nil }))
	assert.NotEqual(t, me, got, "with a task timeout fn runs on its own goroutine")
	_, err = limiter.Call(ctx, timed, func(context.Context) (int, error) { got = goid(); return 0, nil })
	require.NoError(t, err)
	assert.NotEqual(t, me, got)
}

// DESIGN: "Without a task timeout, Do/Call … return when fn does" — even when the caller's ctx ends.
func TestLimiterDoWithoutTimeoutReturnsWhenFnDoes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(1)
		ctx, cancel := context.WithCancel(context.Background())
		release := make(chan struct{})
		res := make(chan error, 1)
		go func() { res <- l.Do(ctx, func(context.Context) error { <-release; return nil }) }()
		synctest.Wait()
		cancel()
		synctest.Wait()
		select {
		case <-res:
			t.Fatal("Do without task timeout returned before fn")
		default:
		}
		close(release)
		require.NoError(t, <-res)
		st := atRest(t, l)
		assert.Equal(t, outcome{Submitted: 1, Completed: 1}, outcomes(st), "returned nil: Completed")
	})
}

// ---------------------------------------------------------------------------
// The limit
// ---------------------------------------------------------------------------

// DESIGN: "The limit is a hard bound on running task bodies".
func TestLimiterHardBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(2)
		ctx := context.Background()
		var cur, peak atomic.Int32
		body := func(context.Context) error {
			n := cur.Add(1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			time.Sleep(time.Second)
			cur.Add(-1)
			return nil
		}
		var wg sync.WaitGroup
		var futs []*limiter.Future[int]
		for range 4 {
			wg.Go(func() { _ = l.Do(ctx, body) })
			futs = append(futs, limiter.Submit(ctx, l, func(ctx context.Context) (int, error) { return 0, body(ctx) }))
		}
		synctest.Wait()
		st := l.Stats()
		assert.Equal(t, 2, st.InFlight)
		assert.Equal(t, 6, st.Waiting)
		wg.Wait()
		for _, f := range futs {
			_, err := f.Wait(ctx)
			require.NoError(t, err)
		}
		assert.Equal(t, int32(2), peak.Load())
		st = atRest(t, l)
		assert.Equal(t, outcome{Submitted: 8, Completed: 8}, outcomes(st))
	})
}

// DESIGN: "waiting Submits and Do/Call callers are served in one FIFO order."
func TestLimiterOneFIFOOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(1)
		ctx := context.Background()
		release, held := holdSlot(l)
		var mu sync.Mutex
		var order []string
		rec := func(s string) {
			mu.Lock()
			order = append(order, s)
			mu.Unlock()
		}
		fa := limiter.Submit(ctx, l, func(context.Context) (int, error) { rec("A"); return 0, nil })
		synctest.Wait()
		var wg sync.WaitGroup
		wg.Go(func() { _ = l.Do(ctx, func(context.Context) error { rec("B"); return nil }) })
		synctest.Wait()
		fc := limiter.Submit(ctx, l, func(context.Context) (int, error) { rec("C"); return 0, nil })
		synctest.Wait()
		wg.Go(func() {
			_, _ = limiter.Call(ctx, l, func(context.Context) (int, error) { rec("D"); return 0, nil })
		})
		synctest.Wait()
		assert.Equal(t, 4, l.Stats().Waiting)
		release()
		require.NoError(t, <-held)
		_, _ = fa.Wait(ctx)
		_, _ = fc.Wait(ctx)
		wg.Wait()
		assert.Equal(t, []string{"A", "B", "C", "D"}, order)
		atRest(t, l)
	})
}

// ---------------------------------------------------------------------------
// WithAcquireTimeout / WithMaxWaiting
// ---------------------------------------------------------------------------

// DESIGN: "WithAcquireTimeout(d) (no slot within d: limiter.ErrRejected; d ≤ 0: never wait)".
func TestLimiterAcquireTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(1, limiter.WithAcquireTimeout(time.Second))
		ctx := context.Background()
		release, held := holdSlot(l)
		ran := false
		start := time.Now()
		err := l.Do(ctx, func(context.Context) error { ran = true; return nil })
		require.ErrorIs(t, err, limiter.ErrRejected)
		assert.Equal(t, time.Second, time.Since(start))
		_, err = limiter.Call(ctx, l, func(context.Context) (int, error) { ran = true; return 0, nil })
		require.ErrorIs(t, err, limiter.ErrRejected)
		_, err = limiter.Submit(ctx, l, func(context.Context) (int, error) { ran = true; return 0, nil }).Wait(ctx)
		require.ErrorIs(t, err, limiter.ErrRejected)
		assert.False(t, ran)
		release()
		require.NoError(t, <-held)
		st := atRest(t, l)
		assert.Equal(t, outcome{Submitted: 4, Completed: 1, Rejected: 3}, outcomes(st))
	})
}

func TestLimiterAcquireTimeoutNonPositiveNeverWaits(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		t.Run(d.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := limiter.New(1, limiter.WithAcquireTimeout(d))
				ctx := context.Background()
				require.NoError(t, l.Do(ctx, func(context.Context) error { return nil }), "free slot: runs")
				release, held := holdSlot(l)
				start := time.Now()
				err := l.Do(ctx, func(context.Context) error { return nil })
				require.ErrorIs(t, err, limiter.ErrRejected)
				_, err = limiter.Submit(ctx, l, func(context.Context) (int, error) { return 0, nil }).Wait(ctx)
				require.ErrorIs(t, err, limiter.ErrRejected)
				assert.Equal(t, time.Duration(0), time.Since(start), "d <= 0 never waits")
				release()
				require.NoError(t, <-held)
				st := atRest(t, l)
				assert.Equal(t, outcome{Submitted: 4, Completed: 2, Rejected: 2}, outcomes(st))
			})
		})
	}
}

// DESIGN: "WithMaxWaiting(n) (more than n waiting: ErrRejected at once; 0: never wait …)".
func TestLimiterMaxWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(1, limiter.WithMaxWaiting(1))
		ctx := context.Background()
		release, held := holdSlot(l)
		waiter := limiter.Submit(ctx, l, func(context.Context) (int, error) { return 1, nil })
		synctest.Wait()
		assert.Equal(t, 1, l.Stats().Waiting)
		start := time.Now()
		err := l.Do(ctx, func(context.Context) error { return nil })
		require.ErrorIs(t, err, limiter.ErrRejected)
		_, err = limiter.Submit(ctx, l, func(context.Context) (int, error) { return 0, nil }).Wait(ctx)
		require.ErrorIs(t, err, limiter.ErrRejected)
		assert.Equal(t, time.Duration(0), time.Since(start), "rejected at once")
		release()
		require.NoError(t, <-held)
		v, err := waiter.Wait(ctx)
		require.NoError(t, err)
		assert.Equal(t, 1, v)
		st := atRest(t, l)
		assert.Equal(t, outcome{Submitted: 4, Completed: 2, Rejected: 2}, outcomes(st))
	})
}

func TestLimiterMaxWaitingZero(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(1, limiter.WithMaxWaiting(0))
		ctx := context.Background()
		require.NoError(t, l.Do(ctx, func(context.Context) error { return nil }), "free slot: runs")
		release, held := holdSlot(l)
		start := time.Now()
		require.ErrorIs(t, l.Do(ctx, func(context.Context) error { return nil }), limiter.ErrRejected)
		assert.Equal(t, time.Duration(0), time.Since(start))
		release()
		require.NoError(t, <-held)
		st := atRest(t, l)
		assert.Equal(t, outcome{Submitted: 3, Completed: 2, Rejected: 1}, outcomes(st))
	})
}

// ---------------------------------------------------------------------------
// WithTaskTimeout
// ---------------------------------------------------------------------------

// DESIGN: "after d of running the task's context is cancelled with cause ErrTaskTimeout … and the caller
// gets limiter.ErrTaskTimeout promptly, even if fn ignores its context"; "a task that overruns its
// timeout keeps its slot until fn really returns, and is counted as overrunning (and in InFlight)".
func TestLimiterTaskTimeout(t *testing.T) {
	for _, kind := range []string{"Do", "Call", "Submit"} {
		t.Run(kind, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := limiter.New(1, limiter.WithTaskTimeout(time.Second))
				ctx := context.Background()
				release := make(chan struct{})
				var cause atomic.Value
				fn := func(ctx context.Context) (int, error) {
					<-ctx.Done()
					cause.Store(context.Cause(ctx))
					<-release // ignores cancellation: overruns
					return 1, nil
				}
				start := time.Now()
				var err error
				switch kind {
				case "Do":
					err = l.Do(ctx, func(ctx context.Context) error { _, e := fn(ctx); return e })
				case "Call":
					_, err = limiter.Call(ctx, l, fn)
				case "Submit":
					_, err = limiter.Submit(ctx, l, fn).Wait(ctx)
				}
				require.ErrorIs(t, err, limiter.ErrTaskTimeout)
				assert.Equal(t, time.Second, time.Since(start), "the caller gets ErrTaskTimeout promptly")
				synctest.Wait()
				c, _ := cause.Load().(error)
				assert.True(t, isSame(limiter.ErrTaskTimeout, c), "task ctx cause must be ErrTaskTimeout, got %v", c)

				st := l.Stats()
				assert.Equal(t, 1, st.InFlight, "overrunning task keeps its slot")
				assert.Equal(t, 1, st.Overrunning)
				assert.Equal(t, int64(1), st.TimedOut)

				// No body runs without a slot: the next call waits for the overrunning fn.
				next := make(chan error, 1)
				var nextRan atomic.Bool
				go func() {
					next <- l.Do(ctx, func(context.Context) error { nextRan.Store(true); return nil })
				}()
				time.Sleep(time.Minute)
				synctest.Wait()
				assert.False(t, nextRan.Load(), "a body ran while the overrunning task held the only slot")
				close(release)
				require.NoError(t, <-next)
				assert.True(t, nextRan.Load())
				st = atRest(t, l)
				assert.Equal(t, outcome{Submitted: 2, Completed: 1, TimedOut: 1}, outcomes(st))
			})
		})
	}
}

// A task that heeds its ctx and returns ctx.Err() on timeout still ends in ErrTaskTimeout, counted TimedOut.
func TestLimiterTaskTimeoutHeeded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(1, limiter.WithTaskTimeout(time.Second))
		ctx := context.Background()
		err := l.Do(ctx, func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() })
		require.ErrorIs(t, err, limiter.ErrTaskTimeout)
		synctest.Wait()
		st := atRest(t, l)
		assert.Equal(t, outcome{Submitted: 1, TimedOut: 1}, outcomes(st))
	})
}

func TestLimiterTaskTimeoutNotHitCompletes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(1, limiter.WithTaskTimeout(time.Minute))
		ctx := context.Background()
		require.NoError(t, l.Do(ctx, func(ctx context.Context) error { time.Sleep(time.Second); return nil }))
		synctest.Wait()
		st := atRest(t, l)
		assert.Equal(t, outcome{Submitted: 1, Completed: 1}, outcomes(st))
	})
}

// DESIGN: "with one, fn runs on its own goroutine and the caller also returns promptly when its own ctx
// ends (fn keeps its slot until it returns)."
func TestLimiterTaskTimeoutCallerCtxEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(1, limiter.WithTaskTimeout(time.Hour))
		ctx, cancel := context.WithCancel(context.Background())
		release := make(chan struct{})
		go func() { time.Sleep(time.Second); cancel() }()
		start := time.Now()
		err := l.Do(ctx, func(context.Context) error { <-release; return nil })
		require.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, time.Second, time.Since(start))
		synctest.Wait()
		st := l.Stats()
		assert.Equal(t, 1, st.InFlight)
		assert.Equal(t, 1, st.Overrunning)
		assert.Equal(t, int64(1), st.Cancelled)
		close(release)
		synctest.Wait()
		st = atRest(t, l)
		assert.Equal(t, outcome{Submitted: 1, Cancelled: 1}, outcomes(st))
	})
}

// ---------------------------------------------------------------------------
// The task's context
// ---------------------------------------------------------------------------

// DESIGN: "The task's context carries the caller's values (scoped values) and the caller's cancellation."
func TestLimiterTaskCtxCarriesCallerValues(t *testing.T) {
	reqID := scopedvalue.New[string]("request-id")
	type plain struct{}
	for name, l := range map[string]*limiter.Limiter{
		"plain":        limiter.New(2),
		"task timeout": limiter.New(2, limiter.WithTaskTimeout(time.Hour)),
	} {
		t.Run(name, func(t *testing.T) {
			ctx := scopedvalue.Where(reqID, "r-42").Context(context.WithValue(context.Background(), plain{}, "p"))
			check := func(ctx context.Context) (string, error) {
				return reqID.OrElse(ctx, "unbound") + "/" + ctx.Value(plain{}).(string), nil
			}
			require.NoError(t, l.Do(ctx, func(ctx context.Context) error {
				v, _ := check(ctx)
				assert.Equal(t, "r-42/p", v)
				return nil
			}))
			v, err := limiter.Call(ctx, l, check)
			require.NoError(t, err)
			assert.Equal(t, "r-42/p", v)
			v, err = limiter.Submit(ctx, l, check).Wait(context.Background())
			require.NoError(t, err)
			assert.Equal(t, "r-42/p", v)
		})
	}
}

func TestLimiterTaskCtxCarriesCallerCancellation(t *testing.T) {
	for _, kind := range []string{"Do", "Do+timeout", "Submit"} {
		t.Run(kind, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				opts := []limiter.Option{}
				if kind == "Do+timeout" {
					opts = append(opts, limiter.WithTaskTimeout(time.Hour))
				}
				l := limiter.New(1, opts...)
				ctx, cancel := context.WithCancel(context.Background())
				saw := make(chan struct{})
				fn := func(tctx context.Context) (int, error) {
					<-tctx.Done()
					close(saw)
					return 0, tctx.Err()
				}
				go func() { time.Sleep(time.Second); cancel() }()
				var err error
				if kind == "Submit" {
					_, err = limiter.Submit(ctx, l, fn).Wait(context.Background())
				} else {
					err = l.Do(ctx, func(c context.Context) error { _, e := fn(c); return e })
				}
				require.ErrorIs(t, err, context.Canceled)
				<-saw
				synctest.Wait()
				st := atRest(t, l)
				assert.Equal(t, outcome{Submitted: 1, Cancelled: 1}, outcomes(st))
			})
		})
	}
}

// ---------------------------------------------------------------------------
// Submit and Future
// ---------------------------------------------------------------------------

// DESIGN: "Submit never blocks; a task waiting for a slot costs no goroutine".
func TestLimiterSubmitNeverBlocksNoGoroutinePerWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(1)
		ctx := context.Background()
		release, held := holdSlot(l)
		synctest.Wait()
		before := runtime.NumGoroutine()
		start := time.Now()
		var futs []*limiter.Future[int]
		for i := range 50 {
			futs = append(futs, limiter.Submit(ctx, l, func(context.Context) (int, error) { return i, nil }))
		}
		assert.Equal(t, time.Duration(0), time.Since(start))
		synctest.Wait()
		after := runtime.NumGoroutine()
		assert.Less(t, after-before, 5, "waiting Submits must not each cost a goroutine (%d -> %d)", before, after)
		assert.Equal(t, 50, l.Stats().Waiting)
		for _, f := range futs {
			select {
			case <-f.Done():
				t.Fatal("a waiting task's Future is done")
			default:
			}
		}
		release()
		require.NoError(t, <-held)
		for i, f := range futs {
			v, err := f.Wait(ctx)
			require.NoError(t, err)
			assert.Equal(t, i, v)
		}
		atRest(t, l)
	})
}

// DESIGN: "(*Future[T]).Wait(ctx) (T, error), Done() <-chan struct{}" — Future completes when fn returns.
func TestLimiterFutureWaitAndDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(1)
		release := make(chan struct{})
		f := limiter.Submit(context.Background(), l, func(context.Context) (int, error) { <-release; return 9, nil })
		synctest.Wait()
		select {
		case <-f.Done():
			t.Fatal("Done closed before fn returned")
		default:
		}
		wctx, wcancel := context.WithTimeout(context.Background(), time.Second)
		defer wcancel()
		_, err := f.Wait(wctx)
		require.ErrorIs(t, err, context.DeadlineExceeded, "Wait returns its ctx's error; the task goes on")
		assert.Equal(t, 1, l.Stats().InFlight)
		close(release)
		<-f.Done()
		v, err := f.Wait(context.Background())
		require.NoError(t, err)
		assert.Equal(t, 9, v)
		v, err = f.Wait(context.Background())
		require.NoError(t, err)
		assert.Equal(t, 9, v, "Wait may be called again")
		st := atRest(t, l)
		assert.Equal(t, outcome{Submitted: 1, Completed: 1}, outcomes(st))
	})
}

// DESIGN: "Future.Cancel removes a waiting task (its Wait returns context.Canceled)".
func TestLimiterFutureCancelWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(1)
		ctx := context.Background()
		release, held := holdSlot(l)
		var ran atomic.Bool
		f := limiter.Submit(ctx, l, func(context.Context) (int, error) { ran.Store(true); return 1, nil })
		synctest.Wait()
		require.Equal(t, 1, l.Stats().Waiting)
		f.Cancel()
		synctest.Wait()
		select {
		case <-f.Done():
		default:
			t.Fatal("Cancel of a waiting task must complete its Future")
		}
		_, err := f.Wait(ctx)
		require.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, 0, l.Stats().Waiting, "removed from the queue")
		release()
		require.NoError(t, <-held)
		synctest.Wait()
		assert.False(t, ran.Load(), "a cancelled waiting task never runs")
		st := atRest(t, l)
		assert.Equal(t, outcome{Submitted: 2, Completed: 1, Cancelled: 1}, outcomes(st))
	})
}

// DESIGN: "… or cancels a running task's context"; "its Future completes … promptly when … Future.Cancel
// is called (fn keeps its slot until it returns)".
func TestLimiterFutureCancelRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(1)
		ctx := context.Background()
		sawCancel := make(chan struct{})
		release := make(chan struct{})
		f := limiter.Submit(ctx, l, func(tctx context.Context) (int, error) {
			<-tctx.Done()
			close(sawCancel)
			<-release // overruns
			return 1, nil
		})
		synctest.Wait()
		f.Cancel()
		<-sawCancel
		synctest.Wait()
		select {
		case <-f.Done():
		default:
			t.Fatal("Future must complete promptly on Cancel of a running task")
		}
		_, err := f.Wait(ctx)
		require.Error(t, err)
		assert.ErrorIs(t, err, context.Canceled)
		st := l.Stats()
		assert.Equal(t, 1, st.InFlight, "fn keeps its slot until it returns")
		assert.Equal(t, 1, st.Overrunning)
		close(release)
		synctest.Wait()
		st = atRest(t, l)
		assert.Equal(t, outcome{Submitted: 1, Cancelled: 1}, outcomes(st))
	})
}

// Submit whose ctx ends while waiting: Future completes with ctx's error, counted Cancelled.
func TestLimiterSubmitCtxEndsWhileWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(1)
		release, held := holdSlot(l)
		ctx, cancel := context.WithCancel(context.Background())
		var ran atomic.Bool
		f := limiter.Submit(ctx, l, func(context.Context) (int, error) { ran.Store(true); return 1, nil })
		synctest.Wait()
		cancel()
		synctest.Wait()
		_, err := f.Wait(context.Background())
		require.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, 0, l.Stats().Waiting)
		release()
		require.NoError(t, <-held)
		synctest.Wait()
		assert.False(t, ran.Load())
		st := atRest(t, l)
		assert.Equal(t, outcome{Submitted: 2, Completed: 1, Cancelled: 1}, outcomes(st))
	})
}

// ---------------------------------------------------------------------------
// Panics and Goexit
// ---------------------------------------------------------------------------

func limiterPanicHelper(v any) error { panic(v) }

// DESIGN: "A panicking task becomes an error wrapping *limiter.PanicError (fields Value any, Stack
// []byte; Unwrap reaches an error value) for that call only … the slot is released."
func TestLimiterPanic(t *testing.T) {
	sentinel := &customErr{"sentinel"}
	for name, l := range map[string]*limiter.Limiter{
		"plain":        limiter.New(1),
		"task timeout": limiter.New(1, limiter.WithTaskTimeout(time.Hour)),
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			var err error
			require.NotPanics(t, func() {
				err = l.Do(ctx, func(context.Context) error { return limiterPanicHelper("boom") })
			}, "the panic is recovered and returned as an error")
			var pe *limiter.PanicError
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, "boom", pe.Value)
			assert.NotEmpty(t, pe.Stack)
			assert.Contains(t, string(pe.Stack), "limiterPanicHelper")
			assert.NotEmpty(t, pe.Error())

			_, err = limiter.Call(ctx, l, func(context.Context) (int, error) { return 0, limiterPanicHelper(sentinel) })
			require.ErrorAs(t, err, &pe)
			assert.ErrorIs(t, err, sentinel, "Unwrap reaches an error value")
			var ce *customErr
			require.ErrorAs(t, err, &ce)

			_, err = limiter.Submit(ctx, l, func(context.Context) (int, error) { return 0, limiterPanicHelper(3) }).Wait(ctx)
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, 3, pe.Value)

			require.NoError(t, l.Do(ctx, func(context.Context) error { return nil }), "slot released; limiter still works")
			st := atRest(t, l)
			assert.Equal(t, outcome{Submitted: 4, Completed: 1, Failed: 3, Panicked: 3}, outcomes(st))
		})
	}
}

// DESIGN: "runtime.Goexit in a task becomes limiter.ErrGoexit … Either way the slot is released."
func TestLimiterGoexitBecomesError(t *testing.T) {
	for _, kind := range []string{"Submit", "Do+timeout", "Call+timeout"} {
		t.Run(kind, func(t *testing.T) {
			var l *limiter.Limiter
			if kind == "Submit" {
				l = limiter.New(1)
			} else {
				l = limiter.New(1, limiter.WithTaskTimeout(time.Hour))
			}
			ctx := context.Background()
			var err error
			switch kind {
			case "Submit":
				_, err = limiter.Submit(ctx, l, func(context.Context) (int, error) { runtime.Goexit(); return 0, nil }).Wait(ctx)
			case "Do+timeout":
				err = l.Do(ctx, func(context.Context) error { runtime.Goexit(); return nil })
			case "Call+timeout":
				_, err = limiter.Call(ctx, l, func(context.Context) (int, error) { runtime.Goexit(); return 0, nil })
			}
			require.ErrorIs(t, err, limiter.ErrGoexit)
			require.NoError(t, l.Do(ctx, func(context.Context) error { return nil }), "slot released")
			st := atRest(t, l)
			assert.Equal(t, outcome{Submitted: 2, Completed: 1, Failed: 1}, outcomes(st))
		})
	}
}

// DESIGN: "where fn runs on the caller's goroutine — Do/Call without a task timeout — Goexit ends the
// caller as it would without the limiter; the slot is still released and the call counted Failed."
func TestLimiterGoexitOnCallerGoroutine(t *testing.T) {
	for _, kind := range []string{"Do", "Call"} {
		t.Run(kind, func(t *testing.T) {
			l := limiter.New(1)
			ctx := context.Background()
			exited := make(chan struct{})
			var returned atomic.Bool
			go func() {
				defer close(exited)
				if kind == "Do" {
					_ = l.Do(ctx, func(context.Context) error { runtime.Goexit(); return nil })
				} else {
					_, _ = limiter.Call(ctx, l, func(context.Context) (int, error) { runtime.Goexit(); return 0, nil })
				}
				returned.Store(true)
			}()
			<-exited
			assert.False(t, returned.Load(), "Goexit must end the caller's goroutine")
			st := atRest(t, l)
			assert.Equal(t, outcome{Submitted: 1, Failed: 1}, outcomes(st))
			require.NoError(t, l.Do(ctx, func(context.Context) error { return nil }), "slot released")
		})
	}
}

// ---------------------------------------------------------------------------
// Stats: one outcome per call
// ---------------------------------------------------------------------------

// DESIGN: "Cancelled (the call ended with an error while the caller's ctx — or its Future — was already
// cancelled: while waiting, or while fn ran)".
func TestLimiterStatsCancelledWhileWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(1)
		release, held := holdSlot(l)
		ctx, cancel := context.WithCancel(context.Background())
		go func() { time.Sleep(time.Second); cancel() }()
		var ran bool
		err := l.Do(ctx, func(context.Context) error { ran = true; return nil })
		require.ErrorIs(t, err, context.Canceled)
		assert.False(t, ran)
		assert.Equal(t, 0, l.Stats().Waiting)
		release()
		require.NoError(t, <-held)
		st := atRest(t, l)
		assert.Equal(t, outcome{Submitted: 2, Completed: 1, Cancelled: 1}, outcomes(st))
	})
}

func TestLimiterStatsCancelledWhileRunning(t *testing.T) {
	cases := []struct {
		name string
		fn   func(ctx context.Context) error
		want outcome
	}{
		{"returns ctx error", func(ctx context.Context) error { return ctx.Err() }, outcome{Submitted: 1, Cancelled: 1}},
		{"returns own error", func(ctx context.Context) error { return errors.New("own") }, outcome{Submitted: 1, Cancelled: 1}},
		{"returns nil", func(ctx context.Context) error { return nil }, outcome{Submitted: 1, Completed: 1}},
		{"panics", func(ctx context.Context) error { panic("late") }, outcome{Submitted: 1, Cancelled: 1, Panicked: 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := limiter.New(1)
			ctx, cancel := context.WithCancel(context.Background())
			err := l.Do(ctx, func(tctx context.Context) error {
				cancel()
				<-tctx.Done()
				return tc.fn(tctx)
			})
			if tc.want.Completed == 1 {
				require.NoError(t, err)
			} else {
				require.Error(t, err)
			}
			st := atRest(t, l)
			assert.Equal(t, tc.want, outcomes(st))
		})
	}
}

func TestLimiterStatsConservationMixed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(2, limiter.WithMaxWaiting(3), limiter.WithTaskTimeout(10*time.Second),
			limiter.WithAcquireTimeout(time.Hour))
		var wg sync.WaitGroup
		for i := range 30 {
			ctx, cancel := context.WithCancel(context.Background())
			wg.Go(func() {
				defer cancel()
				if i%7 == 3 {
					go func() { time.Sleep(time.Duration(i) * time.Second); cancel() }()
				}
				_ = l.Do(ctx, func(ctx context.Context) error {
					switch i % 5 {
					case 0:
						return errors.New("fail")
					case 1:
						panic("p")
					case 2:
						time.Sleep(20 * time.Second) // times out, ignoring ctx
					case 3:
						time.Sleep(time.Second)
					}
					return nil
				})
			})
			wg.Go(func() {
				_, _ = limiter.Submit(context.Background(), l, func(context.Context) (int, error) {
					time.Sleep(time.Second)
					return i, nil
				}).Wait(context.Background())
			})
			if i%4 == 0 {
				time.Sleep(time.Second)
			}
		}
		wg.Wait()
		time.Sleep(time.Minute) // let overrunning bodies finish
		synctest.Wait()
		st := atRest(t, l)
		assert.Equal(t, int64(60), st.Submitted)
		assert.LessOrEqual(t, st.Panicked, int64(6))
	})
}

// ---------------------------------------------------------------------------
// Shutdown
// ---------------------------------------------------------------------------

// DESIGN: "Shutdown(ctx) error — new calls and calls still waiting for a slot get ErrClosed at once
// (counted Rejected); waits for running (and overrunning) tasks, or returns ctx's error; may be called
// again."
func TestLimiterShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(1)
		ctx := context.Background()
		release, held := holdSlot(l)
		waitingDo := make(chan error, 1)
		var ran atomic.Bool
		go func() { waitingDo <- l.Do(ctx, func(context.Context) error { ran.Store(true); return nil }) }()
		waitingSub := limiter.Submit(ctx, l, func(context.Context) (int, error) { ran.Store(true); return 0, nil })
		synctest.Wait()
		require.Equal(t, 2, l.Stats().Waiting)

		shut := make(chan error, 1)
		go func() { shut <- l.Shutdown(ctx) }()
		synctest.Wait()
		err, ok := ready(waitingDo)
		require.True(t, ok, "a waiting call gets ErrClosed at once")
		require.ErrorIs(t, err, limiter.ErrClosed)
		_, err = waitingSub.Wait(ctx)
		require.ErrorIs(t, err, limiter.ErrClosed)
		require.ErrorIs(t, l.Do(ctx, func(context.Context) error { ran.Store(true); return nil }), limiter.ErrClosed)
		_, err = limiter.Call(ctx, l, func(context.Context) (int, error) { ran.Store(true); return 0, nil })
		require.ErrorIs(t, err, limiter.ErrClosed)
		_, err = limiter.Submit(ctx, l, func(context.Context) (int, error) { ran.Store(true); return 0, nil }).Wait(ctx)
		require.ErrorIs(t, err, limiter.ErrClosed)
		assert.False(t, ran.Load())

		_, ok = ready(shut)
		assert.False(t, ok, "Shutdown waits for running tasks")
		release()
		require.NoError(t, <-held)
		require.NoError(t, <-shut)
		require.NoError(t, l.Shutdown(ctx), "may be called again")
		st := atRest(t, l)
		assert.Equal(t, outcome{Submitted: 6, Completed: 1, Rejected: 5}, outcomes(st))
	})
}

func TestLimiterShutdownCtxEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(1, limiter.WithTaskTimeout(time.Second))
		release := make(chan struct{})
		// An overrunning task: its call times out but fn keeps the slot.
		err := l.Do(context.Background(), func(context.Context) error { <-release; return nil })
		require.ErrorIs(t, err, limiter.ErrTaskTimeout)
		require.Equal(t, 1, l.Stats().Overrunning)

		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err = l.Shutdown(sctx)
		require.ErrorIs(t, err, context.DeadlineExceeded, "Shutdown returns ctx's error while a task overruns")

		again := make(chan error, 1)
		go func() { again <- l.Shutdown(context.Background()) }()
		synctest.Wait()
		_, ok := ready(again)
		assert.False(t, ok, "Shutdown waits for overrunning tasks")
		close(release)
		require.NoError(t, <-again)
		st := atRest(t, l)
		assert.Equal(t, outcome{Submitted: 1, TimedOut: 1}, outcomes(st))
	})
}

func TestLimiterShutdownIdle(t *testing.T) {
	l := limiter.New(2)
	require.NoError(t, l.Shutdown(context.Background()))
	err := l.Do(context.Background(), func(context.Context) error { return nil })
	require.ErrorIs(t, err, limiter.ErrClosed)
	st := atRest(t, l)
	assert.Equal(t, outcome{Submitted: 1, Rejected: 1}, outcomes(st))
}

// DESIGN: "Panicked counts every panic, whichever outcome it fell under" — a panic in an overrunning task.
func TestLimiterPanicInOverrunningTask(t *testing.T) {
	for _, kind := range []string{"timeout", "Future.Cancel", "ctx"} {
		t.Run(kind, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := limiter.New(1, limiter.WithTaskTimeout(time.Second))
				release := make(chan struct{})
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				f := limiter.Submit(ctx, l, func(context.Context) (int, error) {
					<-release
					panic("late")
				})
				synctest.Wait()
				want := outcome{Submitted: 1, Panicked: 1}
				switch kind {
				case "timeout":
					time.Sleep(2 * time.Second)
					want.TimedOut = 1
				case "Future.Cancel":
					f.Cancel()
					want.Cancelled = 1
				case "ctx":
					cancel()
					want.Cancelled = 1
				}
				_, err := f.Wait(context.Background())
				require.Error(t, err)
				var pe *limiter.PanicError
				assert.False(t, errors.As(err, &pe), "the call had already ended before the panic")
				assert.Equal(t, 1, l.Stats().Overrunning)
				close(release)
				synctest.Wait()
				st := atRest(t, l)
				assert.Equal(t, want, outcomes(st))
			})
		})
	}
}

// A panic after the caller's ctx was cancelled (Submit, fn heeding ctx): Cancelled + Panicked.
func TestLimiterSubmitPanicAfterCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(1)
		ctx, cancel := context.WithCancel(context.Background())
		f := limiter.Submit(ctx, l, func(tctx context.Context) (int, error) {
			<-tctx.Done()
			panic("p")
		})
		synctest.Wait()
		cancel()
		_, err := f.Wait(context.Background())
		require.Error(t, err)
		synctest.Wait()
		st := atRest(t, l)
		assert.Equal(t, outcome{Submitted: 1, Cancelled: 1, Panicked: 1}, outcomes(st))
	})
}

// An acquire-timeout limiter whose caller's ctx ends while waiting: Cancelled, not Rejected.
func TestLimiterCtxEndsBeforeAcquireTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(1, limiter.WithAcquireTimeout(time.Hour))
		release, held := holdSlot(l)
		ctx, cancel := context.WithCancel(context.Background())
		go func() { time.Sleep(time.Second); cancel() }()
		err := l.Do(ctx, func(context.Context) error { return nil })
		require.ErrorIs(t, err, context.Canceled)
		assert.NotErrorIs(t, err, limiter.ErrRejected)
		release()
		require.NoError(t, <-held)
		st := atRest(t, l)
		assert.Equal(t, outcome{Submitted: 2, Completed: 1, Cancelled: 1}, outcomes(st))
	})
}

// Cancel on a completed Future changes nothing; Cancel twice counts once; Wait from many goroutines.
func TestLimiterFutureCancelIdempotent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(1)
		ctx := context.Background()
		f := limiter.Submit(ctx, l, func(context.Context) (int, error) { return 1, nil })
		v, err := f.Wait(ctx)
		require.NoError(t, err)
		f.Cancel()
		v2, err := f.Wait(ctx)
		require.NoError(t, err, "Cancel after completion changes nothing")
		assert.Equal(t, v, v2)

		release, held := holdSlot(l)
		g := limiter.Submit(ctx, l, func(context.Context) (int, error) { return 2, nil })
		synctest.Wait()
		g.Cancel()
		g.Cancel()
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				_, err := g.Wait(ctx)
				assert.ErrorIs(t, err, context.Canceled)
			})
		}
		wg.Wait()
		release()
		require.NoError(t, <-held)
		st := atRest(t, l)
		assert.Equal(t, outcome{Submitted: 3, Completed: 2, Cancelled: 1}, outcomes(st))
	})
}

// Call returns the zero value when the call does not end with fn's own result.
func TestLimiterCallZeroValueOnRejectAndTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(1, limiter.WithMaxWaiting(0), limiter.WithTaskTimeout(time.Second))
		ctx := context.Background()
		release := make(chan struct{})
		v, err := limiter.Call(ctx, l, func(context.Context) (int, error) { <-release; return 5, nil })
		require.ErrorIs(t, err, limiter.ErrTaskTimeout)
		assert.Equal(t, 0, v)
		v, err = limiter.Call(ctx, l, func(context.Context) (int, error) { return 6, nil })
		require.ErrorIs(t, err, limiter.ErrRejected)
		assert.Equal(t, 0, v)
		close(release)
		synctest.Wait()
		st := atRest(t, l)
		assert.Equal(t, outcome{Submitted: 2, TimedOut: 1, Rejected: 1}, outcomes(st))
	})
}

// A call whose ctx is already done: if it fails it is Cancelled, and the books still balance.
func TestLimiterAlreadyCancelledCtx(t *testing.T) {
	l := limiter.New(1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := l.Do(ctx, func(ctx context.Context) error { return ctx.Err() })
	require.ErrorIs(t, err, context.Canceled)
	_, err = limiter.Submit(ctx, l, func(ctx context.Context) (int, error) { return 0, ctx.Err() }).Wait(context.Background())
	require.ErrorIs(t, err, context.Canceled)
	st := atRest(t, l)
	assert.Equal(t, outcome{Submitted: 2, Cancelled: 2}, outcomes(st))
}
