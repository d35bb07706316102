package limiter_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/limiter"
)

// "Submit[T](ctx, l, fn) *Future[T] with (*Future[T]).Wait(ctx) (T, error), Done() <-chan struct{}";
// "When fn returns an error, the call returns that error as is."
func TestSubmitReturnsResult(t *testing.T) {
	l := limiter.New(2)
	errX := errors.New("x")
	f1 := limiter.Submit(t.Context(), l, func(context.Context) (string, error) { return "a", nil })
	f2 := limiter.Submit(t.Context(), l, func(context.Context) (string, error) { return "b", errX })
	v, err := f1.Wait(t.Context())
	require.NoError(t, err)
	assert.Equal(t, "a", v)
	<-f2.Done()
	v, err = f2.Wait(t.Context())
	exactly(t, errX, err)
	assert.Equal(t, "b", v, "fn's value and error, as is")
	v, err = f1.Wait(t.Context())
	require.NoError(t, err, "Wait may be called again")
	assert.Equal(t, "a", v)
	s := atRest(t, l)
	assert.Equal(t, outcomes{Submitted: 2, Completed: 1, Failed: 1}, outcomesOf(s))
}

// "A Submitted task always runs on its own goroutine"
func TestSubmitRunsOnOwnGoroutine(t *testing.T) {
	l := limiter.New(1)
	me := goid()
	in, err := limiter.Submit(t.Context(), l, func(context.Context) (string, error) { return goid(), nil }).Wait(t.Context())
	require.NoError(t, err)
	assert.NotEqual(t, me, in)
}

// "Submit never blocks; a task waiting for a slot costs no goroutine": Submit returns at once on a
// full limiter, and the queued tasks cost no goroutine.
func TestSubmitNeverBlocksAndWaitingCostsNoGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(1)
		h := hold(t, l)
		before := runtime.NumGoroutine()
		const n = 1000
		futures := make([]*limiter.Future[int], n)
		for i := range futures {
			futures[i] = limiter.Submit(t.Context(), l, func(context.Context) (int, error) { return i, nil })
		}
		assert.LessOrEqual(t, runtime.NumGoroutine(), before, "waiting tasks have no goroutine")
		assert.Equal(t, n, l.Stats().Waiting)
		select {
		case <-futures[0].Done():
			t.Fatal("completed without a slot")
		default:
		}
		h.free(t)
		for i, f := range futures {
			v, err := f.Wait(t.Context())
			require.NoError(t, err)
			assert.Equal(t, i, v)
		}
		atRest(t, l)
	})
}

// "waiting Submits and Do/Call callers are served in one FIFO order."
func TestOneFIFOQueueForAllEntryPoints(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(1)
		h := hold(t, l)
		var mu sync.Mutex
		var order []string
		record := func(name string) {
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
		}
		submit := func(name string) *limiter.Future[int] {
			f := limiter.Submit(t.Context(), l, func(context.Context) (int, error) { record(name); return 0, nil })
			synctest.Wait()
			return f
		}
		a := submit("submit A")
		b := goDo(t.Context(), l, func(context.Context) error { record("do B"); return nil })
		c := submit("submit C")
		callD := make(chan error, 1)
		go func() {
			_, err := limiter.Call(t.Context(), l, func(context.Context) (int, error) { record("call D"); return 0, nil })
			callD <- err
		}()
		synctest.Wait()
		e := submit("submit E")
		assert.Equal(t, 5, l.Stats().Waiting)
		h.free(t)
		for _, f := range []*limiter.Future[int]{a, c, e} {
			_, err := f.Wait(t.Context())
			require.NoError(t, err)
		}
		require.NoError(t, <-b.err)
		require.NoError(t, <-callD)
		assert.Equal(t, []string{"submit A", "do B", "submit C", "call D", "submit E"}, order)
	})
}

// "its Future completes when fn returns": Done stays open while fn runs; a Wait whose own ctx ends
// returns that ctx's error and the task goes on.
func TestFutureWaitContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(1)
		release := make(chan struct{})
		f := limiter.Submit(t.Context(), l, func(context.Context) (int, error) { <-release; return 4, nil })
		synctest.Wait()
		select {
		case <-f.Done():
			t.Fatal("Done closed before fn returned")
		default:
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		v, err := f.Wait(ctx)
		exactly(t, context.DeadlineExceeded, err)
		assert.Zero(t, v)
		assert.Equal(t, 1, l.Stats().InFlight, "the task goes on")
		close(release)
		<-f.Done()
		v, err = f.Wait(t.Context())
		require.NoError(t, err)
		assert.Equal(t, 4, v)
		s := atRest(t, l)
		assert.Equal(t, outcomes{Submitted: 1, Completed: 1}, outcomesOf(s))
	})
}

// "Future.Cancel removes a waiting task (its Wait returns context.Canceled)": at once, counted
// Cancelled once however often Cancel is called, and every Wait, from any goroutine, sees it.
func TestFutureCancelWhileWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(1)
		h := hold(t, l)
		ran := false
		f := limiter.Submit(t.Context(), l, func(context.Context) (int, error) { ran = true; return 1, nil })
		g := limiter.Submit(t.Context(), l, func(context.Context) (int, error) { return 2, nil })
		assert.Equal(t, 2, l.Stats().Waiting)
		f.Cancel()
		select {
		case <-f.Done():
		default:
			t.Fatal("a waiting task's Future completes when Cancel returns")
		}
		_, err := f.Wait(t.Context())
		exactly(t, context.Canceled, err)
		assert.Equal(t, 1, l.Stats().Waiting, "taken off the queue")
		f.Cancel() // again: nothing
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				_, err := f.Wait(t.Context())
				exactly(t, context.Canceled, err)
			})
		}
		wg.Wait()

		h.free(t)
		v, err := g.Wait(t.Context())
		require.NoError(t, err, "the queue behind the cancelled task goes on")
		assert.Equal(t, 2, v)
		synctest.Wait()
		assert.False(t, ran)
		s := atRest(t, l)
		assert.Equal(t, outcomes{Submitted: 3, Completed: 2, Cancelled: 1}, outcomesOf(s))
	})
}

// "Future.Cancel … cancels a running task's context"; "its Future completes … promptly when …
// Future.Cancel is called (fn keeps its slot until it returns)".
func TestFutureCancelWhileRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(1, limiter.WithAcquireTimeout(0))
		started, release := make(chan struct{}), make(chan struct{})
		var cause error
		f := limiter.Submit(t.Context(), l, func(ctx context.Context) (int, error) {
			close(started)
			<-ctx.Done()
			cause = context.Cause(ctx)
			<-release // and then some
			return 1, nil
		})
		<-started
		f.Cancel()
		select {
		case <-f.Done():
		default:
			t.Fatal("a running task's Future completes when Cancel returns")
		}
		v, err := f.Wait(t.Context())
		exactly(t, context.Canceled, err)
		assert.Zero(t, v)
		synctest.Wait()
		exactly(t, context.Canceled, cause)
		s := l.Stats()
		assert.Equal(t, 1, s.InFlight)
		assert.Equal(t, 1, s.Overrunning)
		assert.ErrorIs(t, l.Do(t.Context(), func(context.Context) error { return nil }), limiter.ErrRejected)
		close(release)
		synctest.Wait()
		s = atRest(t, l)
		assert.Equal(t, outcomes{Submitted: 2, Cancelled: 1, Rejected: 1}, outcomesOf(s))
	})
}

// Cancel on a completed Future changes nothing: neither its result nor the books.
func TestFutureCancelAfterCompletionDoesNothing(t *testing.T) {
	l := limiter.New(1)
	f := limiter.Submit(t.Context(), l, func(context.Context) (int, error) { return 1, nil })
	_, err := f.Wait(t.Context())
	require.NoError(t, err)
	f.Cancel()
	v, err := f.Wait(t.Context())
	require.NoError(t, err)
	assert.Equal(t, 1, v)
	s := atRest(t, l)
	assert.Equal(t, outcomes{Submitted: 1, Completed: 1}, outcomesOf(s))
}

// A Submit whose ctx ends while it waits: its Future completes with ctx's error, fn never runs, and
// the call counts Cancelled.
func TestSubmitContextEndsWhileWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(1)
		h := hold(t, l)
		ctx, cancel := context.WithCancel(t.Context())
		ran := false
		f := limiter.Submit(ctx, l, func(context.Context) (int, error) { ran = true; return 1, nil })
		ctx2, cancel2 := context.WithTimeout(t.Context(), time.Second)
		defer cancel2()
		f2 := limiter.Submit(ctx2, l, func(context.Context) (int, error) { ran = true; return 1, nil })
		cancel()
		_, err := f.Wait(t.Context())
		exactly(t, context.Canceled, err)
		start := time.Now()
		_, err = f2.Wait(t.Context())
		exactly(t, context.DeadlineExceeded, err)
		assert.Equal(t, time.Second, time.Since(start))
		assert.Zero(t, l.Stats().Waiting)
		h.free(t)
		synctest.Wait()
		assert.False(t, ran)
		s := atRest(t, l)
		assert.Equal(t, outcomes{Submitted: 3, Completed: 1, Cancelled: 2}, outcomesOf(s))
	})
}

func TestSubmitContextEndsWhileRunning(t *testing.T) {
	for _, tt := range runPaths {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := limiter.New(1, tt.opts...)
				ctx, cancel := context.WithCancel(t.Context())
				started, release := make(chan struct{}), make(chan struct{})
				f := limiter.Submit(ctx, l, func(context.Context) (int, error) {
					close(started)
					<-release // ignores ctx
					return 1, nil
				})
				<-started
				cancel()
				start := time.Now()
				_, err := f.Wait(t.Context())
				exactly(t, context.Canceled, err)
				assert.Zero(t, time.Since(start), "completes promptly")
				assert.Equal(t, 1, l.Stats().Overrunning)
				close(release)
				synctest.Wait()
				s := atRest(t, l)
				assert.Equal(t, outcomes{Submitted: 1, Cancelled: 1}, outcomesOf(s))
			})
		})
	}
}

// The task timeout of a Submitted task, whether fn ignores or heeds its ctx: the Future completes
// with ErrTaskTimeout when it fires, the task's ctx has ErrTaskTimeout as its cause, and an
// overrunning task keeps its slot.
func TestSubmitTaskTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(2, limiter.WithTaskTimeout(time.Second))
		release := make(chan struct{})
		var cause error
		ignores := limiter.Submit(t.Context(), l, func(ctx context.Context) (int, error) {
			<-release
			cause = context.Cause(ctx)
			return 1, nil
		})
		heeds := limiter.Submit(t.Context(), l, func(ctx context.Context) (int, error) {
			<-ctx.Done()
			return 2, ctx.Err()
		})
		start := time.Now()
		v, err := ignores.Wait(t.Context())
		exactly(t, limiter.ErrTaskTimeout, err)
		assert.Zero(t, v)
		assert.Equal(t, time.Second, time.Since(start))
		_, err = heeds.Wait(t.Context())
		exactly(t, limiter.ErrTaskTimeout, err)
		synctest.Wait()
		s := l.Stats()
		assert.Equal(t, 1, s.Overrunning)
		assert.Equal(t, 1, s.InFlight)
		close(release)
		synctest.Wait()
		exactly(t, limiter.ErrTaskTimeout, cause)
		s = atRest(t, l)
		assert.Equal(t, outcomes{Submitted: 2, TimedOut: 2}, outcomesOf(s))
	})
}

// A task queued behind a full limiter with a task timeout gets its timer only when it starts.
func TestSubmitTaskTimeoutStartsWithTheTask(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(1, limiter.WithTaskTimeout(time.Second))
		release := make(chan struct{})
		blocker := limiter.Submit(t.Context(), l, func(context.Context) (int, error) { <-release; return 0, nil })
		var ran time.Duration
		f := limiter.Submit(t.Context(), l, func(ctx context.Context) (int, error) {
			start := time.Now()
			<-ctx.Done()
			ran = time.Since(start)
			return 0, ctx.Err()
		})
		_, err := blocker.Wait(t.Context())
		exactly(t, limiter.ErrTaskTimeout, err)
		time.Sleep(time.Hour) // the blocker overruns; f waits
		close(release)
		_, err = f.Wait(t.Context())
		exactly(t, limiter.ErrTaskTimeout, err)
		synctest.Wait()
		assert.Equal(t, time.Second, ran)
		s := atRest(t, l)
		assert.Equal(t, outcomes{Submitted: 2, TimedOut: 2}, outcomesOf(s))
	})
}

func TestSubmitAfterShutdown(t *testing.T) {
	l := limiter.New(1)
	require.NoError(t, l.Shutdown(t.Context()))
	f := limiter.Submit(t.Context(), l, func(context.Context) (int, error) { return 1, nil })
	select {
	case <-f.Done():
	default:
		t.Fatal("rejected at once")
	}
	_, err := f.Wait(t.Context())
	exactly(t, limiter.ErrClosed, err)
	s := atRest(t, l)
	assert.Equal(t, outcomes{Submitted: 1, Rejected: 1}, outcomesOf(s))
}

// "Panicked counts every panic, whichever outcome it fell under": a task that panics after its call
// has already ended — by its timeout, Future.Cancel or its ctx, while fn ignored it or heeded it —
// leaves that outcome as it was, is counted Panicked, and its Wait never sees the panic.
func TestPanicAfterTheCallEndedCountsPanicked(t *testing.T) {
	for _, tt := range []struct {
		name  string
		heeds bool                                        // fn panics as soon as its ctx ends, instead of when released
		end   func(f *limiter.Future[int], cancel func()) // ends the call while fn runs
		want  outcomes
	}{
		{"task timeout", false, func(*limiter.Future[int], func()) { time.Sleep(2 * time.Second) },
			outcomes{Submitted: 1, TimedOut: 1, Panicked: 1}},
		{"Future.Cancel", false, func(f *limiter.Future[int], _ func()) { f.Cancel() },
			outcomes{Submitted: 1, Cancelled: 1, Panicked: 1}},
		{"ctx", false, func(_ *limiter.Future[int], cancel func()) { cancel() },
			outcomes{Submitted: 1, Cancelled: 1, Panicked: 1}},
		{"ctx, heeded", true, func(_ *limiter.Future[int], cancel func()) { cancel() },
			outcomes{Submitted: 1, Cancelled: 1, Panicked: 1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := limiter.New(1, limiter.WithTaskTimeout(time.Second))
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				release := make(chan struct{})
				f := limiter.Submit(ctx, l, func(ctx context.Context) (int, error) {
					if tt.heeds {
						<-ctx.Done()
					} else {
						<-release
					}
					panic("late")
				})
				synctest.Wait()
				tt.end(f, cancel)
				_, err := f.Wait(t.Context())
				require.Error(t, err)
				if !tt.heeds {
					var pe *limiter.PanicError
					assert.False(t, errors.As(err, &pe), "the call had ended before the panic: %v", err)
					assert.Equal(t, 1, l.Stats().Overrunning)
				}
				close(release)
				synctest.Wait()
				s := atRest(t, l)
				assert.Equal(t, tt.want, outcomesOf(s))
			})
		})
	}
}

// Cancel, the acquire timeout, ctx's end and Shutdown racing with a grant: every task ends
// exactly once, and nothing is lost.
func TestSubmitRacesEndEveryTaskOnce(t *testing.T) {
	rounds := 200
	if raceEnabled {
		rounds = 50
	}
	for range rounds {
		l := limiter.New(2, limiter.WithAcquireTimeout(50*time.Microsecond))
		var wg sync.WaitGroup
		futures := make([]*limiter.Future[int], 40)
		ctx, cancel := context.WithCancel(t.Context())
		for i := range futures {
			futures[i] = limiter.Submit(ctx, l, func(context.Context) (int, error) {
				runtime.Gosched()
				return i, nil
			})
			if i%3 == 0 {
				wg.Go(futures[i].Cancel)
			}
		}
		wg.Go(cancel)
		wg.Go(func() { _ = l.Shutdown(t.Context()) })
		for _, f := range futures {
			<-f.Done()
		}
		wg.Wait()
		require.NoError(t, l.Shutdown(t.Context()))
		s := atRest(t, l)
		assert.Equal(t, int64(len(futures)), s.Submitted)
	}
}

// Queued tasks handed to the goroutines of finishing ones still run side by side, up to the
// limit: a hand-off that ran them one after another would never fill this barrier.
func TestQueuedTasksRunSideBySide(t *testing.T) {
	const limit = 4
	for range 20 {
		l := limiter.New(limit)
		var running atomic.Int64
		full := make(chan struct{})
		var once sync.Once
		release := make(chan struct{})
		body := func(ctx context.Context) (int, error) {
			if running.Add(1) == limit {
				once.Do(func() { close(full) })
			}
			select {
			case <-full:
			case <-time.After(time.Minute):
				return 0, errors.New("the queued tasks did not run side by side")
			}
			running.Add(-1)
			return 0, nil
		}
		var futures []*limiter.Future[int]
		for range limit {
			futures = append(futures, limiter.Submit(t.Context(), l, func(context.Context) (int, error) {
				<-release
				return 0, nil
			}))
		}
		for range 3 * limit {
			futures = append(futures, limiter.Submit(t.Context(), l, body))
		}
		close(release)
		for _, f := range futures {
			_, err := f.Wait(t.Context())
			require.NoError(t, err)
		}
		atRest(t, l)
	}
}

// A queued task costs no goroutine and little memory: a long queue of Submits is the limiter's
// answer to a burst, so every word of a queued Future is paid once per waiting task. 10,000
// queued Submits of a plain limiter take at most 256 bytes each (the Future's 240, and what the
// heap's accounting adds; BenchmarkLimiterWaitingMemory in the bench module measures a million).
// Regression: 261 B (a 240 B Future and a 16 B callback closure), then 252 (256 B).
func TestQueuedSubmitMemory(t *testing.T) {
	const n = 10_000
	l := limiter.New(1)
	release := make(chan struct{})
	first := limiter.Submit(t.Context(), l, func(context.Context) (int, error) { <-release; return 0, nil })
	task := func(context.Context) (int, error) { return 0, nil }
	inUse := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	futures := make([]*limiter.Future[int], n)
	before := inUse()
	for i := range futures {
		futures[i] = limiter.Submit(context.Background(), l, task)
	}
	per := float64(inUse()-before) / n
	require.Equal(t, n, l.Stats().Waiting)
	t.Logf("%.0f B per queued Submit", per)
	assert.LessOrEqual(t, per, 256.0, "B per queued Submit")
	close(release)
	_, err := first.Wait(t.Context())
	require.NoError(t, err)
	for _, f := range futures {
		_, err := f.Wait(t.Context())
		require.NoError(t, err)
	}
}

// A task whose ctx can never end, with no task timeout, runs under a context of the limiter's
// own (no context.WithCancel per task): it carries the caller's values, is done once Future.Cancel
// has been called (Err and Cause context.Canceled), and the contexts derived from it are done
// with it, each without a goroutine of its own watching it.
func TestTaskContextOfATaskOnlyCancelCanEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(1)
		ctx := context.WithValue(context.Background(), ctxKey{}, "v") // no Done
		derived := make(chan context.Context, 1)
		var stoppedEarly, stoppedLate atomic.Bool
		var ranEarly, ranLate atomic.Bool
		f := limiter.Submit(ctx, l, func(ctx context.Context) (string, error) {
			v, _ := ctx.Value(ctxKey{}).(string)
			require.NoError(t, ctx.Err())
			before := runtime.NumGoroutine()
			child, cancel := context.WithCancel(ctx)
			defer cancel()
			timed, cancelTimed := context.WithTimeout(ctx, time.Hour)
			defer cancelTimed()
			stop := context.AfterFunc(ctx, func() { ranEarly.Store(true) })
			stoppedEarly.Store(stop())
			context.AfterFunc(ctx, func() { ranLate.Store(true) })
			assert.Equal(t, before, runtime.NumGoroutine(), "derived contexts start no goroutine")
			derived <- child
			<-ctx.Done()
			<-child.Done()
			<-timed.Done()
			assert.ErrorIs(t, ctx.Err(), context.Canceled)
			assert.ErrorIs(t, context.Cause(ctx), context.Canceled)
			assert.ErrorIs(t, context.Cause(child), context.Canceled)
			stoppedLate.Store(stop())
			return v, nil
		})
		child := <-derived
		f.Cancel()
		_, err := f.Wait(t.Context())
		exactly(t, context.Canceled, err)
		<-child.Done()
		synctest.Wait()
		assert.True(t, stoppedEarly.Load(), "stop before the cancel stops the function")
		assert.False(t, ranEarly.Load())
		assert.True(t, ranLate.Load(), "the function not stopped runs")
		assert.False(t, stoppedLate.Load())
		s := atRest(t, l)
		assert.Equal(t, outcomes{Submitted: 1, Cancelled: 1}, outcomesOf(s))
	})
}

// Future.Cancel racing a task that derives contexts from its own (the task as its context): the
// real interleavings, thousands of times. Every derived context is done soon after its task is
// cancelled; no derived context starts a goroutine (goleak, at the end), and the books add up.
// Mutation-checked: a cancelOwn that forgets its AfterFunc callbacks leaves the derived contexts
// alive, and the run fails within a second.
func TestTaskContextCancelStress(t *testing.T) {
	rounds := 3000
	if raceEnabled {
		rounds = 500
	}
	l := limiter.New(4)
	ctx := context.WithValue(context.Background(), ctxKey{}, 1) // no Done: the task is its context
	var failed atomic.Value                                     // the first failure, as a string
	var wg sync.WaitGroup
	for i := range rounds {
		started := make(chan struct{})
		f := limiter.Submit(ctx, l, func(ctx context.Context) (int, error) {
			child, cancel := context.WithCancel(ctx)
			defer cancel()
			stop := context.AfterFunc(ctx, func() {})
			close(started)
			if i%3 == 0 {
				stop()
			}
			<-ctx.Done()
			if failed.Load() != nil {
				return 0, nil // one failure is enough: do not wait for more
			}
			select {
			case <-child.Done():
			case <-time.After(time.Second): // done within microseconds when right
				failed.CompareAndSwap(nil, "a derived context was not cancelled with its task")
				return 0, nil
			}
			if ctx.Err() == nil || !errors.Is(context.Cause(child), context.Canceled) {
				failed.CompareAndSwap(nil, "done, but its Err or Cause does not say so")
			}
			return 1, nil
		})
		wg.Go(func() {
			if i%2 == 0 {
				<-started
			}
			f.Cancel()
			_, err := f.Wait(context.Background())
			exactly(t, context.Canceled, err)
		})
	}
	wg.Wait()
	require.NoError(t, l.Shutdown(t.Context()))
	require.Nil(t, failed.Load())
	s := atRest(t, l)
	assert.Equal(t, int64(rounds), s.Cancelled)
}
