package limiter_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/limiter"
	"github.com/goloom/loom/scopedvalue"
)

// "New(limit) with limit < 1 panics."
func TestNewPanicsOnBadLimit(t *testing.T) {
	assert.PanicsWithValue(t, "limiter: New: limit must be at least 1, got 0", func() { limiter.New(0) })
	assert.PanicsWithValue(t, "limiter: New: limit must be at least 1, got -3", func() { limiter.New(-3) })
	assert.NotPanics(t, func() { limiter.New(1) })
}

// "WithMaxWaiting(n) (…; negative panics)", "WithTaskTimeout(d) (d > 0, else panic; …)".
func TestOptionsPanicOnMisuse(t *testing.T) {
	assert.PanicsWithValue(t, "limiter: WithTaskTimeout: timeout must be positive, got 0s",
		func() { limiter.WithTaskTimeout(0) })
	assert.PanicsWithValue(t, "limiter: WithTaskTimeout: timeout must be positive, got -1s",
		func() { limiter.New(1, limiter.WithTaskTimeout(-time.Second)) })
	assert.PanicsWithValue(t, "limiter: WithMaxWaiting: negative bound -1", func() { limiter.WithMaxWaiting(-1) })
	assert.NotPanics(t, func() {
		limiter.New(1, limiter.WithMaxWaiting(0), limiter.WithAcquireTimeout(0), limiter.WithAcquireTimeout(-1),
			limiter.WithName(""), limiter.WithLogger(nil))
	})
}

func TestNilFunctionPanics(t *testing.T) {
	l := limiter.New(1)
	assert.PanicsWithValue(t, "limiter: Do: nil function", func() { _ = l.Do(t.Context(), nil) })
	assert.PanicsWithValue(t, "limiter: Call: nil function", func() { _, _ = limiter.Call[int](t.Context(), l, nil) })
	assert.PanicsWithValue(t, "limiter: Submit: nil function", func() { limiter.Submit[int](t.Context(), l, nil) })
	assert.Zero(t, l.Stats().Submitted)
}

// "When fn returns an error, the call returns that error as is." Do, Call and Submit, on the caller's
// goroutine and on a goroutine of the limiter's own.
func TestDoReturnsFnErrorAsIs(t *testing.T) {
	for _, tt := range runPaths {
		t.Run(tt.name, func(t *testing.T) {
			l := limiter.New(2, tt.opts...)
			errX := errors.New("x")
			require.NoError(t, l.Do(t.Context(), func(context.Context) error { return nil }))
			exactly(t, errX, l.Do(t.Context(), func(context.Context) error { return errX }))

			v, err := limiter.Call(t.Context(), l, func(context.Context) (int, error) { return 7, nil })
			require.NoError(t, err)
			assert.Equal(t, 7, v)
			v, err = limiter.Call(t.Context(), l, func(context.Context) (int, error) { return 8, errX })
			exactly(t, errX, err)
			assert.Equal(t, 8, v, "Call returns fn's value with its error, as is")
			v, err = limiter.Submit(t.Context(), l, func(context.Context) (int, error) { return 9, errX }).Wait(t.Context())
			exactly(t, errX, err)
			assert.Equal(t, 9, v)

			s := atRest(t, l)
			assert.Equal(t, outcomes{Submitted: 5, Completed: 2, Failed: 3}, outcomesOf(s))
		})
	}
}

// "Without a task timeout, Do/Call run fn on the caller's goroutine and return when fn does"
func TestDoRunsOnCallerGoroutineWithoutTaskTimeout(t *testing.T) {
	l := limiter.New(1)
	me := goid()
	var in string
	require.NoError(t, l.Do(t.Context(), func(context.Context) error { in = goid(); return nil }))
	assert.Equal(t, me, in)
	_, err := limiter.Call(t.Context(), l, func(context.Context) (int, error) { in = goid(); return 0, nil })
	require.NoError(t, err)
	assert.Equal(t, me, in)
}

// "with one, fn runs on its own goroutine"
func TestDoRunsOnOwnGoroutineWithTaskTimeout(t *testing.T) {
	l := limiter.New(1, limiter.WithTaskTimeout(time.Hour))
	me := goid()
	var in string
	require.NoError(t, l.Do(t.Context(), func(context.Context) error { in = goid(); return nil }))
	assert.NotEqual(t, me, in)
	_, err := limiter.Call(t.Context(), l, func(context.Context) (int, error) { in = goid(); return 0, nil })
	require.NoError(t, err)
	assert.NotEqual(t, me, in)
}

// "The task's context carries the caller's values (scoped values) and the caller's cancellation."
// The values, scoped ones included, on every path.
func TestTaskContextCarriesCallerValues(t *testing.T) {
	for _, tt := range runPaths {
		t.Run(tt.name, func(t *testing.T) {
			l := limiter.New(1, tt.opts...)
			user := scopedvalue.New[string]("user")
			ctx := scopedvalue.Where(user, "ada").Context(context.WithValue(t.Context(), ctxKey{}, "r-42"))
			seen := func(ctx context.Context) string {
				return ctx.Value(ctxKey{}).(string) + "/" + user.OrElse(ctx, "unbound")
			}
			var got []string
			require.NoError(t, l.Do(ctx, func(ctx context.Context) error { got = append(got, seen(ctx)); return nil }))
			_, err := limiter.Call(ctx, l, func(ctx context.Context) (int, error) {
				got = append(got, seen(ctx))
				return 0, nil
			})
			require.NoError(t, err)
			v, err := limiter.Submit(ctx, l, func(ctx context.Context) (string, error) { return seen(ctx), nil }).Wait(t.Context())
			require.NoError(t, err)
			got = append(got, v)
			assert.Equal(t, []string{"r-42/ada", "r-42/ada", "r-42/ada"}, got)
		})
	}
}

// "The task's context carries … the caller's cancellation", cause included, for Do and Submit; an
// error after it counts Cancelled.
func TestCallerCancellationReachesTask(t *testing.T) {
	for _, tt := range runPaths {
		t.Run(tt.name, func(t *testing.T) {
			l := limiter.New(1, tt.opts...)
			ctx, cancel := context.WithCancelCause(t.Context())
			errStop := errors.New("stop")
			causes := make(chan error, 1)
			err := l.Do(ctx, func(ctx context.Context) error {
				cancel(errStop)
				<-ctx.Done()
				causes <- context.Cause(ctx)
				return ctx.Err()
			})
			require.ErrorIs(t, err, context.Canceled)
			// With a task timeout Do returns as ctx ends, maybe before fn has looked at its own.
			exactly(t, errStop, <-causes)

			ctx, cancel = context.WithCancelCause(t.Context())
			started, returned := make(chan struct{}), make(chan error, 1)
			f := limiter.Submit(ctx, l, func(ctx context.Context) (int, error) {
				close(started)
				<-ctx.Done()
				returned <- context.Cause(ctx)
				return 0, ctx.Err()
			})
			<-started
			cancel(errStop)
			_, err = f.Wait(t.Context())
			require.ErrorIs(t, err, context.Canceled)
			exactly(t, errStop, <-returned)
			require.NoError(t, l.Shutdown(t.Context())) // the Submitted task has returned its slot
			s := atRest(t, l)
			assert.Equal(t, outcomes{Submitted: 2, Cancelled: 2}, outcomesOf(s))
		})
	}
}

// A ctx that is already done never gets a slot, even a free one, on every entry point; the call
// counts Cancelled.
func TestDoneContextNeverRuns(t *testing.T) {
	for _, tt := range runPaths {
		t.Run(tt.name, func(t *testing.T) {
			l := limiter.New(1, tt.opts...)
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			ran := false
			err := l.Do(ctx, func(context.Context) error { ran = true; return nil })
			exactly(t, context.Canceled, err)
			_, err = limiter.Call(ctx, l, func(context.Context) (int, error) { ran = true; return 1, nil })
			exactly(t, context.Canceled, err)
			_, err = limiter.Submit(ctx, l, func(context.Context) (int, error) { ran = true; return 1, nil }).Wait(t.Context())
			exactly(t, context.Canceled, err)
			assert.False(t, ran)
			s := atRest(t, l)
			assert.Equal(t, outcomes{Submitted: 3, Cancelled: 3}, outcomesOf(s))
		})
	}
}

// "WithAcquireTimeout(d) (no slot within d: limiter.ErrRejected; d ≤ 0: never wait)". Call returns
// the zero value when the call does not end with fn's own result.
func TestAcquireTimeoutRejects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(1, limiter.WithAcquireTimeout(time.Second))
		h := hold(t, l)
		start := time.Now()
		c := goDo(t.Context(), l, nil)
		assert.True(t, c.pending())
		assert.Equal(t, 1, l.Stats().Waiting)
		err := <-c.err
		assert.Equal(t, time.Second, time.Since(start), "rejected when the acquire timeout fires, not before")
		require.ErrorIs(t, err, limiter.ErrRejected)
		assert.ErrorIs(t, err, limiter.ErrAcquireTimeout)
		assert.NotErrorIs(t, err, limiter.ErrTooManyWaiting)
		assert.NotErrorIs(t, err, limiter.ErrClosed)
		assert.False(t, c.ran)

		// Call and Submit wait the same way.
		v, err := limiter.Call(t.Context(), l, func(context.Context) (int, error) { return 1, nil })
		assert.ErrorIs(t, err, limiter.ErrAcquireTimeout)
		assert.Zero(t, v)
		f := limiter.Submit(t.Context(), l, func(context.Context) (int, error) { return 1, nil })
		synctest.Wait()
		assert.Equal(t, 1, l.Stats().Waiting)
		_, err = f.Wait(t.Context())
		assert.ErrorIs(t, err, limiter.ErrAcquireTimeout)
		assert.Equal(t, 3*time.Second, time.Since(start))

		h.free(t)
		s := atRest(t, l)
		assert.Equal(t, outcomes{Submitted: 4, Completed: 1, Rejected: 3}, outcomesOf(s))
	})
}

func TestAcquireTimeoutGrantedInTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(1, limiter.WithAcquireTimeout(time.Second))
		h := hold(t, l)
		c := goDo(t.Context(), l, nil)
		f := limiter.Submit(t.Context(), l, func(context.Context) (int, error) { return 5, nil })
		time.Sleep(999 * time.Millisecond)
		h.free(t)
		require.NoError(t, <-c.err)
		v, err := f.Wait(t.Context())
		require.NoError(t, err)
		assert.Equal(t, 5, v)
		time.Sleep(time.Hour) // the acquire timers are stopped: nothing fires late
		s := atRest(t, l)
		assert.Equal(t, outcomes{Submitted: 3, Completed: 3}, outcomesOf(s))
	})
}

// "WithAcquireTimeout(d) (…; d ≤ 0: never wait)"
func TestAcquireTimeoutZeroNeverWaits(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		synctest.Test(t, func(t *testing.T) {
			l := limiter.New(1, limiter.WithAcquireTimeout(d))
			require.NoError(t, l.Do(t.Context(), func(context.Context) error { return nil }), "a free slot is taken")
			h := hold(t, l)
			start := time.Now()
			err := l.Do(t.Context(), func(context.Context) error { return nil })
			assert.ErrorIs(t, err, limiter.ErrAcquireTimeout)
			_, err = limiter.Submit(t.Context(), l, func(context.Context) (int, error) { return 0, nil }).Wait(t.Context())
			assert.ErrorIs(t, err, limiter.ErrAcquireTimeout)
			assert.Zero(t, time.Since(start))
			h.free(t)
			s := atRest(t, l)
			assert.Equal(t, outcomes{Submitted: 4, Completed: 2, Rejected: 2}, outcomesOf(s))
		})
	}
}

// "WithMaxWaiting(n) (more than n waiting: ErrRejected at once; …)"
func TestMaxWaitingRejectsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(1, limiter.WithMaxWaiting(2))
		h := hold(t, l)
		a := goDo(t.Context(), l, nil)
		b := limiter.Submit(t.Context(), l, func(context.Context) (int, error) { return 2, nil })
		assert.Equal(t, 2, l.Stats().Waiting)

		start := time.Now()
		err := l.Do(t.Context(), func(context.Context) error { return nil })
		require.ErrorIs(t, err, limiter.ErrRejected)
		assert.ErrorIs(t, err, limiter.ErrTooManyWaiting)
		assert.NotErrorIs(t, err, limiter.ErrAcquireTimeout)
		_, err = limiter.Submit(t.Context(), l, func(context.Context) (int, error) { return 0, nil }).Wait(t.Context())
		assert.ErrorIs(t, err, limiter.ErrTooManyWaiting)
		assert.Zero(t, time.Since(start))

		h.free(t)
		require.NoError(t, <-a.err)
		v, err := b.Wait(t.Context())
		require.NoError(t, err)
		assert.Equal(t, 2, v)
		s := atRest(t, l)
		assert.Equal(t, outcomes{Submitted: 5, Completed: 3, Rejected: 2}, outcomesOf(s))
	})
}

// "WithMaxWaiting(n) (…; 0: never wait; …)"
func TestMaxWaitingZeroNeverWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(1, limiter.WithMaxWaiting(0))
		require.NoError(t, l.Do(t.Context(), func(context.Context) error { return nil }))
		h := hold(t, l)
		start := time.Now()
		assert.ErrorIs(t, l.Do(t.Context(), func(context.Context) error { return nil }), limiter.ErrTooManyWaiting)
		_, err := limiter.Submit(t.Context(), l, func(context.Context) (int, error) { return 0, nil }).Wait(t.Context())
		assert.ErrorIs(t, err, limiter.ErrTooManyWaiting)
		assert.Zero(t, time.Since(start))
		h.free(t)
		s := atRest(t, l)
		assert.Equal(t, outcomes{Submitted: 4, Completed: 2, Rejected: 2}, outcomesOf(s))
	})
}

// Callers racing for the last places in the queue: exactly max of them wait, the rest are
// rejected. A check-then-queue would let more than max in now and then.
func TestMaxWaitingExactUnderConcurrency(t *testing.T) {
	const callers, maxWaiting = 64, 5
	for range 20 {
		synctest.Test(t, func(t *testing.T) {
			l := limiter.New(1, limiter.WithMaxWaiting(maxWaiting))
			h := hold(t, l)
			gate := make(chan struct{})
			errs := make(chan error, callers)
			for i := range callers {
				go func() {
					<-gate
					if i%2 == 0 {
						errs <- l.Do(t.Context(), func(context.Context) error { return nil })
					} else {
						_, err := limiter.Submit(t.Context(), l, func(context.Context) (int, error) { return 0, nil }).Wait(t.Context())
						errs <- err
					}
				}()
			}
			synctest.Wait()
			close(gate)
			synctest.Wait() // each caller is rejected, or waits
			s := l.Stats()
			assert.Equal(t, maxWaiting, s.Waiting)
			assert.Equal(t, int64(callers-maxWaiting), s.Rejected)
			h.free(t)
			for range callers {
				err := <-errs
				if err != nil {
					assert.ErrorIs(t, err, limiter.ErrTooManyWaiting)
				}
			}
			s = atRest(t, l)
			assert.Equal(t, int64(maxWaiting+1), s.Completed)
		})
	}
}

// A task that calls Do on its own full limiter is rejected by the acquire timeout, not hung.
func TestReentrantDoIsRejectedNotHung(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(1, limiter.WithAcquireTimeout(time.Second))
		err := l.Do(t.Context(), func(ctx context.Context) error {
			return l.Do(ctx, func(context.Context) error { return nil })
		})
		assert.ErrorIs(t, err, limiter.ErrAcquireTimeout)
		s := atRest(t, l)
		assert.Equal(t, outcomes{Submitted: 2, Rejected: 1, Failed: 1}, outcomesOf(s))
	})
}

// "Cancelled (the call ended with an error while the caller's ctx — or its Future — was already
// cancelled: while waiting, or while fn ran)": while waiting, with an acquire timeout that has not
// fired, the call is Cancelled, not Rejected.
func TestCallerContextEndsWhileWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(1, limiter.WithAcquireTimeout(time.Hour))
		h := hold(t, l)

		ctx, cancel := context.WithCancel(t.Context())
		c := goDo(ctx, l, nil)
		cancel()
		err := <-c.err
		exactly(t, context.Canceled, err)
		assert.NotErrorIs(t, err, limiter.ErrRejected)

		errCause := errors.New("client went away")
		ctx2, cancel2 := context.WithCancelCause(t.Context())
		c2 := goDo(ctx2, l, nil)
		cancel2(errCause)
		err = <-c2.err
		assert.ErrorIs(t, err, context.Canceled)
		assert.ErrorIs(t, err, errCause, "the cause is reported too")

		ctx3, cancel3 := context.WithTimeout(t.Context(), time.Second)
		defer cancel3()
		start := time.Now()
		_, err = limiter.Call(ctx3, l, func(context.Context) (int, error) { return 0, nil })
		exactly(t, context.DeadlineExceeded, err)
		assert.Equal(t, time.Second, time.Since(start))
		assert.False(t, c.ran || c2.ran)
		assert.Zero(t, l.Stats().Waiting)

		h.free(t)
		s := atRest(t, l)
		assert.Equal(t, outcomes{Submitted: 4, Completed: 1, Cancelled: 3}, outcomesOf(s))
	})
}

// "Without a task timeout, Do/Call run fn on the caller's goroutine and return when fn does", also
// when the caller's ctx ends while fn runs; an error after that counts Cancelled, success still
// counts Completed.
func TestCallerContextEndsWhileRunningHere(t *testing.T) {
	l := limiter.New(1)
	ctx, cancel := context.WithCancel(t.Context())
	require.NoError(t, l.Do(ctx, func(context.Context) error { cancel(); return nil }))
	errX := errors.New("x")
	ctx, cancel = context.WithCancel(t.Context())
	exactly(t, errX, l.Do(ctx, func(context.Context) error { cancel(); return errX }))
	s := atRest(t, l)
	assert.Equal(t, outcomes{Submitted: 2, Completed: 1, Cancelled: 1}, outcomesOf(s))
}

// "with one, fn runs on its own goroutine and the caller also returns promptly when its own ctx ends
// (fn keeps its slot until it returns)."
func TestCallerContextEndsWhileRunningWithTaskTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(1, limiter.WithTaskTimeout(time.Hour), limiter.WithAcquireTimeout(0))
		ctx, cancel := context.WithCancel(t.Context())
		started, release := make(chan struct{}), make(chan struct{})
		var taskCtxDone bool
		c := goDo(ctx, l, func(ctx context.Context) error {
			close(started)
			<-release // ignores its ctx
			taskCtxDone = ctx.Err() != nil
			return nil
		})
		<-started
		cancel()
		start := time.Now()
		exactly(t, context.Canceled, <-c.err)
		assert.Zero(t, time.Since(start), "the caller returns promptly")
		s := l.Stats()
		assert.Equal(t, 1, s.InFlight)
		assert.Equal(t, 1, s.Overrunning)
		assert.Equal(t, int64(1), s.Cancelled)
		assert.ErrorIs(t, l.Do(t.Context(), func(context.Context) error { return nil }), limiter.ErrRejected,
			"the overrunning task still holds the only slot")

		close(release)
		synctest.Wait()
		assert.True(t, taskCtxDone)
		s = atRest(t, l)
		assert.Equal(t, outcomes{Submitted: 2, Cancelled: 1, Rejected: 1}, outcomesOf(s))
	})
}

// "after d of running the task's context is cancelled with cause ErrTaskTimeout — Go's interrupt — and
// the caller gets limiter.ErrTaskTimeout promptly, even if fn ignores its context"; "a task that
// overruns its timeout keeps its slot until fn really returns, and is counted as overrunning (and
// in InFlight). No task body ever runs without a slot." (Submit: TestSubmitTaskTimeout.)
func TestTaskTimeoutWhenTaskIgnoresContext(t *testing.T) {
	for _, tt := range []struct {
		name string
		run  func(l *limiter.Limiter, fn func(context.Context) (int, error)) (int, error)
	}{
		{"Do", func(l *limiter.Limiter, fn func(context.Context) (int, error)) (int, error) {
			return 0, l.Do(context.Background(), func(ctx context.Context) error { _, err := fn(ctx); return err })
		}},
		{"Call", func(l *limiter.Limiter, fn func(context.Context) (int, error)) (int, error) {
			return limiter.Call(context.Background(), l, fn)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := limiter.New(1, limiter.WithTaskTimeout(time.Second))
				release := make(chan struct{})
				var cause error
				start := time.Now()
				v, err := tt.run(l, func(ctx context.Context) (int, error) {
					<-release // ignores ctx
					cause = context.Cause(ctx)
					return 5, nil
				})
				assert.Equal(t, time.Second, time.Since(start), "the caller gets the timeout when it fires")
				exactly(t, limiter.ErrTaskTimeout, err)
				assert.ErrorIs(t, err, context.DeadlineExceeded)
				assert.Zero(t, v, "not fn's result")

				s := l.Stats()
				assert.Equal(t, 1, s.InFlight, "the overrunning task keeps its slot")
				assert.Equal(t, 1, s.Overrunning)
				assert.Equal(t, int64(1), s.TimedOut)

				// No body runs without a slot: the next call waits for the overrunning fn.
				next := goDo(t.Context(), l, nil)
				time.Sleep(time.Hour)
				synctest.Wait()
				assert.True(t, next.pending())
				assert.False(t, next.ran, "a body ran while the overrunning task held the only slot")

				close(release)
				require.NoError(t, <-next.err)
				assert.True(t, next.ran)
				exactly(t, limiter.ErrTaskTimeout, cause)
				s = atRest(t, l)
				assert.Equal(t, outcomes{Submitted: 2, Completed: 1, TimedOut: 1}, outcomesOf(s))
			})
		})
	}
}

// A task that heeds its ctx and returns ctx.Err() at the timeout still ends in ErrTaskTimeout,
// counted TimedOut.
func TestTaskTimeoutWhenTaskHeedsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(1, limiter.WithTaskTimeout(time.Second))
		start := time.Now()
		var cause error
		v, err := limiter.Call(t.Context(), l, func(ctx context.Context) (int, error) {
			<-ctx.Done()
			cause = context.Cause(ctx)
			return 9, ctx.Err()
		})
		exactly(t, limiter.ErrTaskTimeout, err)
		assert.Zero(t, v)
		assert.Equal(t, time.Second, time.Since(start))
		synctest.Wait() // the task returns soon after
		exactly(t, limiter.ErrTaskTimeout, cause)
		s := atRest(t, l)
		assert.Equal(t, outcomes{Submitted: 1, TimedOut: 1}, outcomesOf(s))
	})
}

// A task that finishes in time is unaffected, and its timer does not outlive it.
func TestTaskTimeoutNotReached(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(1, limiter.WithTaskTimeout(time.Second))
		v, err := limiter.Call(t.Context(), l, func(ctx context.Context) (int, error) {
			time.Sleep(999 * time.Millisecond)
			return 3, ctx.Err()
		})
		require.NoError(t, err)
		assert.Equal(t, 3, v)
		time.Sleep(time.Hour)
		s := atRest(t, l)
		assert.Equal(t, outcomes{Submitted: 1, Completed: 1}, outcomesOf(s))
	})
}

// "A panicking task becomes an error wrapping *limiter.PanicError (fields Value any, Stack []byte;
// Unwrap reaches an error value) for that call only; … Either way the slot is released."
func TestPanicBecomesPanicError(t *testing.T) {
	errBoom := errors.New("boom")
	for _, tt := range []struct {
		name string
		run  func(l *limiter.Limiter, fn func(context.Context) error) error
		opts []limiter.Option
	}{
		{"Do", func(l *limiter.Limiter, fn func(context.Context) error) error { return l.Do(context.Background(), fn) }, nil},
		{"Call", func(l *limiter.Limiter, fn func(context.Context) error) error {
			_, err := limiter.Call(context.Background(), l, func(ctx context.Context) (int, error) { return 1, fn(ctx) })
			return err
		}, nil},
		{"Do with task timeout", func(l *limiter.Limiter, fn func(context.Context) error) error {
			return l.Do(context.Background(), fn)
		}, []limiter.Option{limiter.WithTaskTimeout(time.Hour)}},
		{"Call with task timeout", func(l *limiter.Limiter, fn func(context.Context) error) error {
			_, err := limiter.Call(context.Background(), l, func(ctx context.Context) (int, error) { return 1, fn(ctx) })
			return err
		}, []limiter.Option{limiter.WithTaskTimeout(time.Hour)}},
		{"Submit", func(l *limiter.Limiter, fn func(context.Context) error) error {
			_, err := limiter.Submit(context.Background(), l, func(ctx context.Context) (int, error) { return 1, fn(ctx) }).
				Wait(context.Background())
			return err
		}, nil},
		{"Submit with task timeout", func(l *limiter.Limiter, fn func(context.Context) error) error {
			_, err := limiter.Submit(context.Background(), l, func(ctx context.Context) (int, error) { return 1, fn(ctx) }).
				Wait(context.Background())
			return err
		}, []limiter.Option{limiter.WithTaskTimeout(time.Hour)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := limiter.New(1, tt.opts...)
			err := tt.run(l, func(context.Context) error { panicHere("kaboom"); return nil })
			var pe *limiter.PanicError
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, "kaboom", pe.Value)
			assert.Contains(t, string(pe.Stack), "panicHere", "the stack is the task's, at the panic")
			assert.Equal(t, "limiter: task panicked: kaboom", err.Error())
			assert.Nil(t, pe.Unwrap())

			err = tt.run(l, func(context.Context) error { panic(errBoom) })
			assert.ErrorIs(t, err, errBoom, "Unwrap reaches an error value")

			// The slot came back and the limiter goes on.
			require.NoError(t, tt.run(l, func(context.Context) error { return nil }))
			s := atRest(t, l)
			assert.Equal(t, outcomes{Submitted: 3, Completed: 1, Failed: 2, Panicked: 2}, outcomesOf(s))
		})
	}
}

//go:noinline
func panicHere(v any) { panic(v) }

// A panic after the caller's ctx was cancelled is counted Cancelled, and Panicked as well.
func TestPanicAfterCancelCountsCancelled(t *testing.T) {
	l := limiter.New(1)
	ctx, cancel := context.WithCancel(t.Context())
	err := l.Do(ctx, func(context.Context) error { cancel(); panic("late") })
	var pe *limiter.PanicError
	require.ErrorAs(t, err, &pe)
	s := atRest(t, l)
	assert.Equal(t, outcomes{Submitted: 1, Cancelled: 1, Panicked: 1}, outcomesOf(s))
}

// "where fn runs on the caller's goroutine — Do/Call without a task timeout — Goexit ends the caller
// as it would without the limiter; the slot is still released and the call counted Failed."
func TestGoexitOnCallerGoroutine(t *testing.T) {
	for _, name := range []string{"Do", "Call"} {
		t.Run(name, func(t *testing.T) {
			l := limiter.New(1)
			exited := make(chan struct{})
			returned := false
			go func() {
				defer close(exited)
				if name == "Do" {
					_ = l.Do(t.Context(), func(context.Context) error { runtime.Goexit(); return nil })
				} else {
					_, _ = limiter.Call(t.Context(), l, func(context.Context) (int, error) { runtime.Goexit(); return 0, nil })
				}
				returned = true
			}()
			<-exited
			assert.False(t, returned, "Goexit went on ending the caller")
			require.NoError(t, l.Do(t.Context(), func(context.Context) error { return nil }), "the slot came back")
			s := atRest(t, l)
			assert.Equal(t, outcomes{Submitted: 2, Completed: 1, Failed: 1}, outcomesOf(s))
		})
	}
}

// "runtime.Goexit in a task becomes limiter.ErrGoexit … Either way the slot is released." Where fn
// runs on a goroutine of the limiter's own: Do and Call with a task timeout, and Submit.
func TestGoexitOnOwnGoroutine(t *testing.T) {
	withTimeout := limiter.WithTaskTimeout(time.Hour)
	for _, tt := range []struct {
		name string
		opts []limiter.Option
		run  func(l *limiter.Limiter) error
	}{
		{"Do with task timeout", []limiter.Option{withTimeout}, func(l *limiter.Limiter) error {
			return l.Do(context.Background(), func(context.Context) error { runtime.Goexit(); return nil })
		}},
		{"Call with task timeout", []limiter.Option{withTimeout}, func(l *limiter.Limiter) error {
			_, err := limiter.Call(context.Background(), l, func(context.Context) (int, error) { runtime.Goexit(); return 0, nil })
			return err
		}},
		{"Submit", nil, func(l *limiter.Limiter) error {
			_, err := limiter.Submit(context.Background(), l, func(context.Context) (int, error) { runtime.Goexit(); return 0, nil }).
				Wait(context.Background())
			return err
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := limiter.New(1, tt.opts...)
			exactly(t, limiter.ErrGoexit, tt.run(l))
			require.NoError(t, l.Do(t.Context(), func(context.Context) error { return nil }), "the slot came back")
			s := atRest(t, l)
			assert.Equal(t, outcomes{Submitted: 2, Completed: 1, Failed: 1}, outcomesOf(s))
		})
	}
}

// "Shutdown(ctx) error — new calls and calls still waiting for a slot get ErrClosed at once (counted
// Rejected); waits for running (and overrunning) tasks, or returns ctx's error; may be called again."
func TestShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(1)
		h := hold(t, l)
		waitingDo := goDo(t.Context(), l, nil)
		waitingSubmit := limiter.Submit(t.Context(), l, func(context.Context) (int, error) { return 1, nil })
		assert.Equal(t, 2, l.Stats().Waiting)

		shut := make(chan error, 1)
		go func() { shut <- l.Shutdown(t.Context()) }()
		synctest.Wait()
		// The waiting calls fail at once; Shutdown waits for the running task.
		exactly(t, limiter.ErrClosed, <-waitingDo.err)
		_, err := waitingSubmit.Wait(t.Context())
		exactly(t, limiter.ErrClosed, err)
		assert.ErrorIs(t, err, limiter.ErrRejected)
		assert.Len(t, shut, 0, "Shutdown waits for the running task")

		// New calls fail at once.
		exactly(t, limiter.ErrClosed, l.Do(t.Context(), func(context.Context) error { return nil }))
		_, err = limiter.Call(t.Context(), l, func(context.Context) (int, error) { return 0, nil })
		exactly(t, limiter.ErrClosed, err)
		_, err = limiter.Submit(t.Context(), l, func(context.Context) (int, error) { return 0, nil }).Wait(t.Context())
		exactly(t, limiter.ErrClosed, err)

		h.free(t)
		require.NoError(t, <-shut)
		require.NoError(t, l.Shutdown(t.Context()), "Shutdown may be called again")
		assert.False(t, waitingDo.ran)
		s := atRest(t, l)
		assert.Equal(t, outcomes{Submitted: 6, Completed: 1, Rejected: 5}, outcomesOf(s))
	})
}

func TestShutdownGivesUpWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(3)
		h1, h2 := hold(t, l), hold(t, l)
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		start := time.Now()
		err := l.Shutdown(ctx)
		assert.Equal(t, time.Second, time.Since(start))
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Contains(t, err.Error(), "2 tasks still running")
		h1.free(t)
		h2.free(t)
		require.NoError(t, l.Shutdown(t.Context()))
		atRest(t, l)
	})
}

// Shutdown waits for tasks that overran their timeout, and so do concurrent Shutdowns.
func TestShutdownWaitsForOverrunningTasks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(2, limiter.WithTaskTimeout(time.Second))
		release := make(chan struct{})
		c := goDo(t.Context(), l, func(context.Context) error { <-release; return nil })
		f := limiter.Submit(t.Context(), l, func(context.Context) (int, error) { <-release; return 0, nil })
		exactly(t, limiter.ErrTaskTimeout, <-c.err)
		_, err := f.Wait(t.Context())
		exactly(t, limiter.ErrTaskTimeout, err)
		assert.Equal(t, 2, l.Stats().Overrunning)

		short, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		assert.ErrorIs(t, l.Shutdown(short), context.DeadlineExceeded, "ctx's error while tasks overrun")

		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() { assert.NoError(t, l.Shutdown(t.Context())) })
		}
		synctest.Wait()
		assert.Equal(t, 2, l.Stats().InFlight)
		close(release)
		wg.Wait()
		s := atRest(t, l)
		assert.Equal(t, outcomes{Submitted: 2, TimedOut: 2}, outcomesOf(s))
	})
}

func TestShutdownIdleReturnsAtOnce(t *testing.T) {
	l := limiter.New(4)
	require.NoError(t, l.Do(t.Context(), func(context.Context) error { return nil }))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	require.NoError(t, l.Shutdown(ctx), "nothing runs: even a done ctx is fine")
	assert.ErrorIs(t, l.Do(t.Context(), func(context.Context) error { return nil }), limiter.ErrClosed)
}

func TestErrorsMatch(t *testing.T) {
	for _, err := range []error{limiter.ErrAcquireTimeout, limiter.ErrTooManyWaiting, limiter.ErrClosed} {
		assert.ErrorIs(t, err, limiter.ErrRejected, err.Error())
		assert.True(t, strings.HasPrefix(err.Error(), "limiter: "))
	}
	assert.NotErrorIs(t, limiter.ErrAcquireTimeout, limiter.ErrTooManyWaiting)
	assert.ErrorIs(t, limiter.ErrTaskTimeout, context.DeadlineExceeded)
	assert.NotErrorIs(t, limiter.ErrTaskTimeout, limiter.ErrRejected)
	assert.NotErrorIs(t, limiter.ErrGoexit, limiter.ErrRejected)
}

// A waiter whose ctx ends just as it is granted its slot gives the slot back inside the
// semaphore; a Shutdown already waiting must still see it come back (found by FuzzLimiter, #5).
func TestShutdownSeesSlotOfWaiterCancelledAsGranted(t *testing.T) {
	for range 100 {
		synctest.Test(t, func(t *testing.T) {
			l := limiter.New(1)
			h := hold(t, l)
			ctx, cancel := context.WithCancel(t.Context())
			c := goDo(ctx, l, nil)
			shut := make(chan error, 1)
			close(h.release) // grants the slot to c...
			cancel()         // ...as its ctx ends
			go func() { shut <- l.Shutdown(t.Context()) }()
			require.NoError(t, <-h.err)
			// Granted, cancelled while waiting, or still waiting when Shutdown closed the
			// queue: each is a legal order of the three events.
			if err := <-c.err; err != nil && !errors.Is(err, limiter.ErrClosed) {
				exactly(t, context.Canceled, err)
			}
			require.NoError(t, <-shut)
			atRest(t, l)
		})
	}
}

// Uncontended, Do and Call without a task timeout allocate nothing.
func TestFastPathAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	l := limiter.New(4)
	ctx := context.Background()
	assert.Zero(t, testing.AllocsPerRun(1000, func() { _ = l.Do(ctx, nop) }))
	fn := func(ctx context.Context) (int, error) { return 1, nil }
	assert.Zero(t, testing.AllocsPerRun(1000, func() { _, _ = limiter.Call(ctx, l, fn) }))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	assert.Zero(t, testing.AllocsPerRun(1000, func() { _ = l.Do(ctx, nop) }), "with a cancellable ctx too")
}

// With a task timeout, a call costs one goroutine for the task (and the task context's timer).
func TestTaskTimeoutCostsOneGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(2, limiter.WithTaskTimeout(time.Hour))
		before := runtime.NumGoroutine()
		var during int
		require.NoError(t, l.Do(t.Context(), func(context.Context) error { during = runtime.NumGoroutine(); return nil }))
		assert.LessOrEqual(t, during-before, 1)
		synctest.Wait()
		assert.LessOrEqual(t, runtime.NumGoroutine(), before, "and nothing is left behind")
	})
}

// "The zero values ... limiter.Limiter ... and a nil *Limiter are not usable: every method panics
// with PKG: zero TYPE; use New, never ... a silent fallback (no "too many waiting" from a zero
// Limiter)."
func TestZeroAndNilLimiterPanic(t *testing.T) {
	const msg = "limiter: zero Limiter; use New"
	var zero limiter.Limiter
	var nilLimiter *limiter.Limiter
	noop := func(context.Context) error { return nil }
	for name, l := range map[string]*limiter.Limiter{"zero": &zero, "nil": nilLimiter} {
		t.Run(name, func(t *testing.T) {
			assert.PanicsWithValue(t, msg, func() { _ = l.Do(t.Context(), noop) })
			assert.PanicsWithValue(t, msg, func() {
				_, _ = limiter.Call(t.Context(), l, func(context.Context) (int, error) { return 0, nil })
			})
			assert.PanicsWithValue(t, msg, func() {
				limiter.Submit(t.Context(), l, func(context.Context) (int, error) { return 0, nil })
			})
			assert.PanicsWithValue(t, msg, func() { l.Stats() })
			assert.PanicsWithValue(t, msg, func() { _ = l.Shutdown(t.Context()) })
		})
	}
}

// "A nil ctx passed to any function of any package panics with PKG: OP: nil context."
func TestNilContextPanics(t *testing.T) {
	l := limiter.New(1)
	var nilCtx context.Context
	noop := func(context.Context) error { return nil }
	assert.PanicsWithValue(t, "limiter: Do: nil context", func() { _ = l.Do(nilCtx, noop) })
	assert.PanicsWithValue(t, "limiter: Call: nil context", func() {
		_, _ = limiter.Call(nilCtx, l, func(context.Context) (int, error) { return 0, nil })
	})
	assert.PanicsWithValue(t, "limiter: Submit: nil context", func() {
		limiter.Submit(nilCtx, l, func(context.Context) (int, error) { return 0, nil })
	})
	f := limiter.Submit(t.Context(), l, func(context.Context) (int, error) { return 1, nil })
	assert.PanicsWithValue(t, "limiter: Wait: nil context", func() { _, _ = f.Wait(nilCtx) })
	assert.PanicsWithValue(t, "limiter: Shutdown: nil context", func() { _ = l.Shutdown(nilCtx) })
	v, err := f.Wait(t.Context())
	require.NoError(t, err)
	assert.Equal(t, 1, v)
	assert.Equal(t, int64(0), l.Stats().Rejected, "a refused call is not counted")
}

// "Every timeout error matches context.DeadlineExceeded and has Timeout() bool returning true
// (limiter.ErrAcquireTimeout included)."
func TestTimeoutErrorsAreTimeouts(t *testing.T) {
	for _, err := range []error{limiter.ErrAcquireTimeout, limiter.ErrTaskTimeout} {
		assert.ErrorIs(t, err, context.DeadlineExceeded, err.Error())
		var te interface{ Timeout() bool }
		require.ErrorAs(t, err, &te)
		assert.True(t, te.Timeout())
	}
	assert.ErrorIs(t, limiter.ErrAcquireTimeout, limiter.ErrRejected)
	assert.NotErrorIs(t, limiter.ErrTooManyWaiting, context.DeadlineExceeded)
	assert.NotErrorIs(t, limiter.ErrClosed, context.DeadlineExceeded)
}

// sliceError is an error whose dynamic type cannot be compared: == on two interfaces holding it
// panics.
type sliceError []string

func (e sliceError) Error() string { return strings.Join(e, "; ") }

// fn's error is returned as is, whatever its type: the limiter never compares it with ==.
func TestUncomparableErrorIsReturnedAsIs(t *testing.T) {
	for _, tt := range runPaths {
		t.Run(tt.name, func(t *testing.T) {
			l := limiter.New(1, tt.opts...)
			give := sliceError{"a", "b"}
			err := l.Do(t.Context(), func(context.Context) error { return give })
			assert.Equal(t, error(give), err)
			v, err := limiter.Call(t.Context(), l, func(context.Context) (int, error) { return 3, give })
			assert.Equal(t, error(give), err)
			assert.Equal(t, 3, v)
			v, err = limiter.Submit(t.Context(), l, func(context.Context) (int, error) { return 4, give }).Wait(t.Context())
			assert.Equal(t, error(give), err)
			assert.Equal(t, 4, v)
			assert.Equal(t, int64(3), atRest(t, l).Failed)
		})
	}
}

// "no fn starts after Shutdown began": a step that admits its call although Shutdown has begun
// (it ignores its wait's end, as a fleet's grant in flight would) does not let fn start: the
// call gives back what it took, slot and hold, and ends with ErrClosed, counted Rejected.
// Mutation-checked: without the last look at Shutdown after the steps, fn runs.
func TestNoTaskStartsOnceShutdownBegan(t *testing.T) {
	for _, entry := range []string{"Do", "Do with a task timeout", "Submit"} {
		t.Run(entry, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				entered, admit := make(chan struct{}), make(chan struct{})
				given := 0
				step := limiter.TestStep{Take: func(ctx context.Context) (*limiter.TestHold, error) {
					close(entered)
					<-admit // whatever ctx says
					return &limiter.TestHold{Given: func() { given++ }}, nil
				}}
				opts := []limiter.Option{limiter.WithTestSteps(step)}
				if entry == "Do with a task timeout" {
					opts = append(opts, limiter.WithTaskTimeout(time.Hour))
				}
				l := limiter.New(1, opts...)
				ran := false
				errc := make(chan error, 1)
				if entry == "Submit" {
					f := limiter.Submit(t.Context(), l, func(context.Context) (int, error) { ran = true; return 0, nil })
					go func() { _, err := f.Wait(t.Context()); errc <- err }()
				} else {
					go func() { errc <- l.Do(t.Context(), func(context.Context) error { ran = true; return nil }) }()
				}
				<-entered
				shut := make(chan error, 1)
				go func() { shut <- l.Shutdown(t.Context()) }()
				synctest.Wait() // Shutdown has begun, and waits for the slot the call holds
				close(admit)
				exactly(t, limiter.ErrClosed, <-errc)
				require.NoError(t, <-shut)
				assert.False(t, ran, "fn started after Shutdown began")
				assert.Equal(t, 1, given, "the step's hold was given back")
				assert.Equal(t, int64(1), atRest(t, l).Rejected)
			})
		})
	}
}

// The steps after the slot are taken in order and given back in reverse, when the task is done
// or when a later step refuses; a hold lost before fn returned makes the call's result its error,
// whatever fn returned (Failed).
func TestStepsAreTakenInOrderAndGivenBackInReverse(t *testing.T) {
	for _, tt := range runPaths {
		t.Run(tt.name, func(t *testing.T) {
			var log []string
			errNo, errLost := errors.New("no"), errors.New("lost")
			var lost error
			step := func(name string, refuse *bool) limiter.TestStep {
				return limiter.TestStep{Take: func(context.Context) (*limiter.TestHold, error) {
					if *refuse {
						log = append(log, "refuse "+name)
						return nil, fmt.Errorf("%w: %w", limiter.ErrRejected, errNo)
					}
					log = append(log, "take "+name)
					return &limiter.TestHold{
						Lost:  func() error { return lost },
						Given: func() { log = append(log, "give "+name) },
					}, nil
				}}
			}
			refuseA, refuseB := false, false
			l := limiter.New(1, append([]limiter.Option{limiter.WithTestSteps(step("a", &refuseA), step("b", &refuseB))}, tt.opts...)...)
			require.NoError(t, l.Do(t.Context(), func(context.Context) error { log = append(log, "fn"); return nil }))
			assert.Equal(t, []string{"take a", "take b", "fn", "give b", "give a"}, log)

			log, refuseB = nil, true
			err := l.Do(t.Context(), func(context.Context) error { log = append(log, "fn"); return nil })
			require.ErrorIs(t, err, errNo)
			require.ErrorIs(t, err, limiter.ErrRejected)
			assert.Equal(t, []string{"take a", "refuse b", "give a"}, log)

			log, refuseB, lost = nil, false, errLost
			v, err := limiter.Call(t.Context(), l, func(context.Context) (int, error) { return 7, nil })
			exactly(t, errLost, err)
			assert.Zero(t, v, "fn's value is not to be trusted once a hold is lost")
			assert.Equal(t, []string{"take a", "take b", "give b", "give a"}, log)

			s := atRest(t, l)
			assert.Equal(t, outcomes{Submitted: 3, Completed: 1, Rejected: 1, Failed: 1}, outcomesOf(s))
		})
	}
}
