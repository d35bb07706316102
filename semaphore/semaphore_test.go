package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/goloom/loom/semaphore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) } // checks after all tests, so t.Parallel is fine

// modes runs f once for the fair (default) and once for the unfair semaphore.
func modes(t *testing.T, f func(t *testing.T, opts ...semaphore.Option)) {
	t.Run("fair", func(t *testing.T) { f(t) })
	t.Run("unfair", func(t *testing.T) { f(t, semaphore.Unfair()) })
}

// waiter is a goroutine blocked in Acquire; err receives what Acquire returned.
type waiter struct {
	cancel context.CancelFunc
	err    chan error
}

// enqueue starts an Acquire of n and, inside a synctest bubble, waits until it has settled
// (queued or done), so waiters queue in the order enqueue is called.
func enqueue(t *testing.T, s *semaphore.Semaphore, n int64) *waiter {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	w := &waiter{cancel: cancel, err: make(chan error, 1)}
	go func() { w.err <- s.Acquire(ctx, n) }()
	synctest.Wait()
	return w
}

// pending reports whether w is still blocked; it must be called after synctest.Wait.
func (w *waiter) pending() bool { return len(w.err) == 0 }

func TestNewPanicsOnNegativeCapacity(t *testing.T) {
	assert.PanicsWithValue(t, "semaphore: New: negative capacity -1", func() { semaphore.New(-1) })
	assert.Panics(t, func() { semaphore.New(semaphore.MaxPermits + 1) })
	assert.NotPanics(t, func() { semaphore.New(semaphore.MaxPermits) })
	assert.NotPanics(t, func() { semaphore.New(0) })
}

// "Available() int64 (capacity minus held; …), Waiting() int, Capacity() int64"
func TestGaugesAtRest(t *testing.T) {
	s := semaphore.New(5)
	assert.Equal(t, int64(5), s.Capacity())
	assert.Equal(t, int64(5), s.Available())
	assert.Equal(t, 0, s.Waiting())
	require.NoError(t, s.Acquire(t.Context(), 3))
	assert.Equal(t, int64(2), s.Available())
	assert.Equal(t, int64(5), s.Capacity())
	s.Release(3)
	assert.Equal(t, int64(5), s.Available())
}

// "Bad input gets an error, never a hang: n < 0 or n > Capacity() returns semaphore.ErrInvalidWeight
// at once."
func TestInvalidWeight(t *testing.T) {
	tests := []struct {
		name string
		give int64
	}{
		{"negative", -1},
		{"above capacity", 4},
		{"far above capacity", 1 << 62},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			modes(t, func(t *testing.T, opts ...semaphore.Option) {
				s := semaphore.New(3, opts...)
				err := s.Acquire(t.Context(), tt.give)
				require.ErrorIs(t, err, semaphore.ErrInvalidWeight)
				assert.Contains(t, err.Error(), "semaphore: invalid weight")
				require.ErrorIs(t, s.AcquireTimeout(t.Context(), tt.give, time.Hour), semaphore.ErrInvalidWeight)
				require.ErrorIs(t, s.AcquireTimeout(t.Context(), tt.give, 0), semaphore.ErrInvalidWeight)
				assert.False(t, s.TryAcquire(tt.give))
				assert.Equal(t, int64(3), s.Available(), "a rejected request holds nothing")
				assert.Equal(t, 0, s.Waiting())
			})
		})
	}
	t.Run("all permits held", func(t *testing.T) {
		modes(t, func(t *testing.T, opts ...semaphore.Option) {
			synctest.Test(t, func(t *testing.T) { // a request that could never be served must not queue
				s := semaphore.New(3, opts...)
				require.NoError(t, s.Acquire(t.Context(), 3))
				start := time.Now()
				require.ErrorIs(t, s.Acquire(t.Context(), 4), semaphore.ErrInvalidWeight)
				require.ErrorIs(t, s.AcquireTimeout(t.Context(), 4, time.Hour), semaphore.ErrInvalidWeight)
				require.ErrorIs(t, s.AcquireTimeout(t.Context(), -1, time.Hour), semaphore.ErrInvalidWeight)
				assert.Zero(t, time.Since(start), "at once")
				assert.Equal(t, 0, s.Waiting())
				assert.Equal(t, int64(0), s.Available())
				s.Release(3)
			})
		})
	})
}

func TestInvalidWeightWinsOverDoneContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	s := semaphore.New(1)
	require.ErrorIs(t, s.Acquire(ctx, 2), semaphore.ErrInvalidWeight)
	require.ErrorIs(t, s.AcquireTimeout(ctx, -1, time.Second), semaphore.ErrInvalidWeight)
}

// "n == 0 succeeds at once unless ctx is done."
func TestZeroWeight(t *testing.T) {
	modes(t, func(t *testing.T, opts ...semaphore.Option) {
		synctest.Test(t, func(t *testing.T) {
			s := semaphore.New(1, opts...)
			require.NoError(t, s.Acquire(t.Context(), 1))
			w := enqueue(t, s, 1) // even with the semaphore empty and a queue, 0 needs nothing
			require.NoError(t, s.Acquire(t.Context(), 0))
			require.NoError(t, s.AcquireTimeout(t.Context(), 0, 0))
			require.NoError(t, s.AcquireTimeout(t.Context(), 0, time.Hour))
			assert.True(t, s.TryAcquire(0))
			s.Release(0)
			assert.True(t, w.pending())
			s.Release(1)
			require.NoError(t, <-w.err)
			s.Release(1)

			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			require.ErrorIs(t, s.Acquire(ctx, 0), context.Canceled, "a done ctx fails even for 0")
			require.ErrorIs(t, s.AcquireTimeout(ctx, 0, time.Second), context.Canceled)
		})
	})
}

// "A ctx that is already done never acquires, even when permits are free."
func TestDoneContextNeverAcquires(t *testing.T) {
	modes(t, func(t *testing.T, opts ...semaphore.Option) {
		s := semaphore.New(10, opts...)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		require.ErrorIs(t, s.Acquire(ctx, 1), context.Canceled)
		require.ErrorIs(t, s.AcquireTimeout(ctx, 1, time.Second), context.Canceled)
		require.ErrorIs(t, s.AcquireTimeout(ctx, 1, 0), context.Canceled)
		expired, cancel2 := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
		defer cancel2()
		require.ErrorIs(t, s.Acquire(expired, 1), context.DeadlineExceeded)
		assert.Equal(t, int64(10), s.Available())
	})
}

// "Release(n int64) (panics `semaphore: released more than held`)"
func TestReleaseMoreThanHeldPanics(t *testing.T) {
	modes(t, func(t *testing.T, opts ...semaphore.Option) {
		s := semaphore.New(2, opts...)
		assert.PanicsWithValue(t, "semaphore: released more than held", func() { s.Release(1) })
		require.NoError(t, s.Acquire(t.Context(), 2))
		s.Release(1)
		assert.PanicsWithValue(t, "semaphore: released more than held", func() { s.Release(2) })
		assert.Equal(t, int64(1), s.Available(), "a refused Release changes nothing")
		assert.PanicsWithValue(t, "semaphore: released more than held", func() { s.Release(1 << 62) })
		assert.Panics(t, func() { s.Release(-1) })
		s.Release(1)
		assert.Equal(t, int64(2), s.Available())
	})
}

// An over-release is refused also while requests wait, when the permits would go straight to
// the head of the queue: nothing is granted, and the waiters keep waiting.
func TestReleaseMoreThanHeldPanicsWhileQueued(t *testing.T) {
	modes(t, func(t *testing.T, opts ...semaphore.Option) {
		synctest.Test(t, func(t *testing.T) {
			s := semaphore.New(2, opts...)
			require.NoError(t, s.Acquire(t.Context(), 1))
			w := enqueue(t, s, 2) // 1 free, the head wants 2
			assert.PanicsWithValue(t, "semaphore: released more than held", func() { s.Release(2) })
			synctest.Wait()
			assert.True(t, w.pending(), "a refused Release serves nobody")
			assert.Equal(t, int64(1), s.Available())
			assert.Equal(t, 1, s.Waiting())
			s.Release(1)
			require.NoError(t, <-w.err)
			s.Release(2)
			assert.Equal(t, int64(2), s.Available())
		})
	})
}

func TestAcquireBlocksUntilRelease(t *testing.T) {
	modes(t, func(t *testing.T, opts ...semaphore.Option) {
		synctest.Test(t, func(t *testing.T) {
			s := semaphore.New(2, opts...)
			require.NoError(t, s.Acquire(t.Context(), 2))
			w := enqueue(t, s, 1)
			assert.True(t, w.pending())
			assert.Equal(t, 1, s.Waiting())
			s.Release(1)
			require.NoError(t, <-w.err)
			assert.Equal(t, 0, s.Waiting())
			assert.Equal(t, int64(0), s.Available())
			s.Release(2)
			assert.Equal(t, int64(2), s.Available())
		})
	})
}

// "fair (strict FIFO) by default"; queued waiters are served in arrival order in both modes.
func TestWaitersServedInArrivalOrder(t *testing.T) {
	modes(t, func(t *testing.T, opts ...semaphore.Option) {
		synctest.Test(t, func(t *testing.T) {
			s := semaphore.New(1, opts...)
			require.NoError(t, s.Acquire(t.Context(), 1))
			var order []int
			var mu sync.Mutex
			var wg sync.WaitGroup
			for i := range 10 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if assert.NoError(t, s.Acquire(t.Context(), 1)) {
						mu.Lock()
						order = append(order, i)
						mu.Unlock()
						s.Release(1)
					}
				}()
				synctest.Wait() // goroutine i is queued before i+1 starts
			}
			assert.Equal(t, 10, s.Waiting())
			s.Release(1)
			wg.Wait()
			assert.Equal(t, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, order)
		})
	})
}

// "FIFO is strict and weighted: a waiter for n permits holds back later waiters until it is served
// or leaves"
func TestHeadWaiterHoldsBackSmallerOnes(t *testing.T) {
	modes(t, func(t *testing.T, opts ...semaphore.Option) {
		synctest.Test(t, func(t *testing.T) {
			s := semaphore.New(3, opts...)
			require.NoError(t, s.Acquire(t.Context(), 3))
			big := enqueue(t, s, 3)
			small := enqueue(t, s, 1)
			assert.Equal(t, 2, s.Waiting())
			s.Release(2) // 2 free: not enough for big, and small is behind it
			synctest.Wait()
			assert.True(t, big.pending())
			assert.True(t, small.pending(), "strict FIFO: small waits behind the head")
			assert.Equal(t, int64(2), s.Available())
			s.Release(1)
			require.NoError(t, <-big.err)
			synctest.Wait()
			assert.True(t, small.pending())
			s.Release(3)
			require.NoError(t, <-small.err)
			s.Release(1)
		})
	})
}

// "when it leaves (cancel or timeout) the waiters behind it are re-examined at once."
func TestHeadWaiterLeavingWakesThoseBehind(t *testing.T) {
	// Fair mode only: in unfair mode the small requests would not queue behind the head at all.
	tests := []struct {
		name    string
		acquire func(s *semaphore.Semaphore, ctx context.Context) error
		leave   func(w *waiter)
		want    error
	}{
		{
			name:    "cancel",
			acquire: func(s *semaphore.Semaphore, ctx context.Context) error { return s.Acquire(ctx, 3) },
			leave:   func(w *waiter) { w.cancel() },
			want:    context.Canceled,
		},
		{
			name: "timeout",
			acquire: func(s *semaphore.Semaphore, ctx context.Context) error {
				return s.AcquireTimeout(ctx, 3, time.Second)
			},
			leave: func(*waiter) { time.Sleep(time.Second) },
			want:  semaphore.ErrTimeout,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := semaphore.New(3)
				require.NoError(t, s.Acquire(t.Context(), 2)) // 1 free
				ctx, cancel := context.WithCancel(t.Context())
				head := &waiter{cancel: cancel, err: make(chan error, 1)}
				go func() { head.err <- tt.acquire(s, ctx) }()
				synctest.Wait()
				small1 := enqueue(t, s, 1)
				small2 := enqueue(t, s, 1)
				assert.True(t, small1.pending(), "one permit is free, but the head holds it back")
				assert.Equal(t, 3, s.Waiting())
				tt.leave(head)
				// No Release happens: the head leaving must itself re-examine the queue.
				require.ErrorIs(t, <-head.err, tt.want)
				require.NoError(t, <-small1.err, "the waiter behind the head fits now")
				synctest.Wait()
				assert.True(t, small2.pending(), "only one permit was free")
				assert.Equal(t, int64(0), s.Available())
				s.Release(1)
				require.NoError(t, <-small2.err)
				s.Release(2 + 1) // the first holder's 2 and small1's 1; small2's went back above
				assert.Equal(t, int64(3), s.Available())
				assert.Equal(t, 0, s.Waiting())
				small1.cancel()
				small2.cancel()
			})
		})
	}
}

// A waiter leaving from the middle of the queue is taken out of it; one Release then serves every
// waiter it covers, in order.
func TestNonHeadWaiterLeaving(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := semaphore.New(2)
		require.NoError(t, s.Acquire(t.Context(), 2))
		a := enqueue(t, s, 1)
		b := enqueue(t, s, 2)
		c := enqueue(t, s, 1)
		b.cancel()
		require.ErrorIs(t, <-b.err, context.Canceled)
		assert.Equal(t, 2, s.Waiting())
		s.Release(2)
		require.NoError(t, <-a.err)
		require.NoError(t, <-c.err)
		s.Release(2)
		assert.Equal(t, int64(2), s.Available())
		a.cancel()
		c.cancel()
	})
}

func TestTimedOutWaitersAbsorbNothing(t *testing.T) {
	modes(t, func(t *testing.T, opts ...semaphore.Option) {
		synctest.Test(t, func(t *testing.T) {
			s := semaphore.New(1, opts...)
			require.NoError(t, s.Acquire(t.Context(), 1))
			var wg sync.WaitGroup
			for range 100 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					assert.ErrorIs(t, s.AcquireTimeout(t.Context(), 1, time.Second), semaphore.ErrTimeout)
				}()
			}
			synctest.Wait()
			assert.Equal(t, 100, s.Waiting())
			time.Sleep(time.Second)
			wg.Wait()
			assert.Equal(t, 0, s.Waiting())
			s.Release(1)
			assert.True(t, s.TryAcquire(1), "no permit was absorbed by abandoned waiters")
			s.Release(1)
			assert.Equal(t, int64(1), s.Available())
		})
	})
}

// "TryAcquire(n int64) bool (never waits; in fair mode fails while anyone is queued)"
func TestTryAcquire(t *testing.T) {
	t.Run("fair fails while anyone is queued", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := semaphore.New(3)
			require.NoError(t, s.Acquire(t.Context(), 1)) // 2 free
			w := enqueue(t, s, 3)
			assert.False(t, s.TryAcquire(1), "permits are free but a waiter is queued")
			require.ErrorIs(t, s.AcquireTimeout(t.Context(), 1, 0), semaphore.ErrTimeout)
			w.cancel()
			require.ErrorIs(t, <-w.err, context.Canceled)
			assert.True(t, s.TryAcquire(2))
			s.Release(3)
		})
	})
	// "Unfair() lets arrivals take free permits ahead of waiters."
	t.Run("unfair takes free permits ahead of the queue", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := semaphore.New(3, semaphore.Unfair())
			require.NoError(t, s.Acquire(t.Context(), 1))
			w := enqueue(t, s, 3)
			assert.True(t, s.TryAcquire(1))
			require.NoError(t, s.AcquireTimeout(t.Context(), 1, 0))
			require.NoError(t, s.Acquire(t.Context(), 0))
			assert.False(t, s.TryAcquire(1))
			assert.True(t, w.pending())
			s.Release(3)
			require.NoError(t, <-w.err)
			s.Release(3)
		})
	})
	t.Run("no wait when empty", func(t *testing.T) {
		s := semaphore.New(1)
		assert.True(t, s.TryAcquire(1))
		assert.False(t, s.TryAcquire(1))
		assert.Equal(t, 0, s.Waiting())
		s.Release(1)
	})
}

// "AcquireTimeout(ctx, n int64, d time.Duration) error (semaphore.ErrTimeout when d elapses, ctx's
// error when ctx ends first)"
func TestAcquireTimeout(t *testing.T) {
	t.Run("times out", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) { // fake clock: the second below passes instantly
			s := semaphore.New(1)
			require.NoError(t, s.Acquire(t.Context(), 1))
			start := time.Now()
			err := s.AcquireTimeout(t.Context(), 1, time.Second)
			require.ErrorIs(t, err, semaphore.ErrTimeout)
			assert.ErrorIs(t, err, context.DeadlineExceeded)
			assert.Equal(t, time.Second, time.Since(start))
			assert.Equal(t, int64(0), s.Available(), "a timed-out acquire holds nothing")
			assert.Equal(t, 0, s.Waiting())
			s.Release(1)
		})
	})
	t.Run("ctx ends first", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := semaphore.New(1)
			require.NoError(t, s.Acquire(t.Context(), 1))
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			err := s.AcquireTimeout(ctx, 1, time.Hour)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			assert.NotErrorIs(t, err, semaphore.ErrTimeout, "ctx's own error, not ours")

			cctx, ccancel := context.WithCancel(t.Context())
			go func() { time.Sleep(time.Second); ccancel() }()
			err = s.AcquireTimeout(cctx, 1, time.Hour)
			require.ErrorIs(t, err, context.Canceled)
			assert.NotErrorIs(t, err, semaphore.ErrTimeout)
			assert.Equal(t, int64(0), s.Available(), "neither holds anything")
			assert.Equal(t, 0, s.Waiting())
			s.Release(1)
		})
	})
	t.Run("served before the timeout", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := semaphore.New(1)
			require.NoError(t, s.Acquire(t.Context(), 1))
			go func() {
				time.Sleep(500 * time.Millisecond)
				s.Release(1)
			}()
			require.NoError(t, s.AcquireTimeout(t.Context(), 1, time.Second))
			time.Sleep(time.Second) // the stopped timer must not fire into a later wait
			require.ErrorIs(t, s.AcquireTimeout(t.Context(), 1, time.Second), semaphore.ErrTimeout)
			s.Release(1)
		})
	})
	// "AcquireTimeout with d ≤ 0 does not wait: after the usual checks (invalid weight, done ctx) it
	// acquires at once if TryAcquire would, else returns ErrTimeout."
	t.Run("d <= 0 does not wait", func(t *testing.T) {
		for _, d := range []time.Duration{0, -time.Second} {
			t.Run(d.String(), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) { // fake clock: any wait would show in time.Since
					start := time.Now()
					s := semaphore.New(2)
					require.NoError(t, s.AcquireTimeout(t.Context(), 1, d), "a free permit: acquires at once")
					require.ErrorIs(t, s.AcquireTimeout(t.Context(), 2, d), semaphore.ErrTimeout, "not enough free")
					require.ErrorIs(t, s.AcquireTimeout(t.Context(), 3, d), semaphore.ErrInvalidWeight)
					require.ErrorIs(t, s.AcquireTimeout(t.Context(), -1, d), semaphore.ErrInvalidWeight)
					ctx, cancel := context.WithCancel(t.Context())
					cancel()
					err := s.AcquireTimeout(ctx, 1, d)
					require.ErrorIs(t, err, context.Canceled, "a done ctx is checked before acquiring")
					assert.NotErrorIs(t, err, semaphore.ErrTimeout)
					assert.Equal(t, int64(1), s.Available())

					// Fair, with a queue: TryAcquire would fail, so ErrTimeout though a permit is free.
					w := enqueue(t, s, 2)
					require.Equal(t, 1, s.Waiting())
					require.ErrorIs(t, s.AcquireTimeout(t.Context(), 1, d), semaphore.ErrTimeout)
					assert.Zero(t, time.Since(start), "d <= 0 never waits")
					s.Release(1)
					require.NoError(t, <-w.err)
					s.Release(2)
					assert.Equal(t, int64(2), s.Available())
					assert.Equal(t, 0, s.Waiting())
				})
			})
		}
	})
	t.Run("error message", func(t *testing.T) {
		assert.Equal(t, "semaphore: acquire timed out", semaphore.ErrTimeout.Error())
		var timeout interface{ Timeout() bool }
		require.True(t, errors.As(semaphore.ErrTimeout, &timeout))
		assert.True(t, timeout.Timeout())
	})
}

// "Cancellation is exact: an Acquire that returns an error holds nothing; one that returns nil holds
// n."
func TestCancelWhileWaitingHoldsNothing(t *testing.T) {
	modes(t, func(t *testing.T, opts ...semaphore.Option) {
		synctest.Test(t, func(t *testing.T) {
			s := semaphore.New(2, opts...)
			require.NoError(t, s.Acquire(t.Context(), 2))
			w := enqueue(t, s, 2)
			w.cancel()
			require.ErrorIs(t, <-w.err, context.Canceled)
			assert.Equal(t, 0, s.Waiting())
			s.Release(2)
			assert.Equal(t, int64(2), s.Available())
		})
	})
}

// "ctx's error when ctx ends first": a ctx cancelled with a cause still gives an error that
// matches context.Canceled, from Acquire and AcquireTimeout alike.
func TestCancelWithCauseIsCtxError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := semaphore.New(1)
		require.NoError(t, s.Acquire(t.Context(), 1))
		for _, acquire := range []func(context.Context) error{
			func(ctx context.Context) error { return s.Acquire(ctx, 1) },
			func(ctx context.Context) error { return s.AcquireTimeout(ctx, 1, time.Hour) },
		} {
			ctx, cancel := context.WithCancelCause(t.Context())
			go func() { time.Sleep(time.Second); cancel(errors.New("client went away")) }()
			require.ErrorIs(t, acquire(ctx), context.Canceled)
		}
		assert.Equal(t, int64(0), s.Available(), "neither holds anything")
		assert.Equal(t, 0, s.Waiting())
		s.Release(1)
	})
}

// "No permit is ever lost or duplicated."
// TestCancelRacingGrant releases the permit a waiter waits for at the same moment as the
// waiter's ctx ends, many times over: whichever wins, an error means nothing is held and nil
// means n is held.
func TestCancelRacingGrant(t *testing.T) {
	modes(t, func(t *testing.T, opts ...semaphore.Option) {
		s := semaphore.New(3, opts...)
		for range 2000 {
			require.NoError(t, s.Acquire(t.Context(), 3))
			ctx, cancel := context.WithCancel(t.Context())
			res := make(chan error, 1)
			go func() { res <- s.Acquire(ctx, 2) }()
			for s.Waiting() == 0 && len(res) == 0 {
				time.Sleep(time.Microsecond)
			}
			start := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(2)
			go func() { defer wg.Done(); <-start; s.Release(3) }()
			go func() { defer wg.Done(); <-start; cancel() }()
			close(start)
			wg.Wait()
			if err := <-res; err == nil {
				assert.Equal(t, int64(1), s.Available())
				s.Release(2)
			} else {
				require.ErrorIs(t, err, context.Canceled)
			}
			require.Equal(t, int64(3), s.Available())
			require.Equal(t, 0, s.Waiting())
		}
	})
}

func TestTimeoutRacingGrant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := semaphore.New(1)
		for range 200 {
			require.NoError(t, s.Acquire(t.Context(), 1))
			res := make(chan error, 1)
			go func() { res <- s.AcquireTimeout(t.Context(), 1, time.Second) }()
			go func() { time.Sleep(time.Second); s.Release(1) }() // same fake instant as the timeout
			if err := <-res; err == nil {
				s.Release(1)
			} else {
				require.ErrorIs(t, err, semaphore.ErrTimeout)
			}
			synctest.Wait()
			require.Equal(t, int64(1), s.Available())
		}
	})
}

func TestLargeRequestNotStarvedWhenFair(t *testing.T) {
	s := semaphore.New(4)
	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if s.Acquire(ctx, 1) == nil {
					s.Release(1)
				}
			}
		}()
	}
	for s.Available() == 4 { // the small ones are at it
		time.Sleep(time.Millisecond)
	}
	// Fair: once queued, the large request blocks newcomers, so it is served as soon as the
	// permits already out come back. The bound is generous; the test fails only on starvation.
	done, cancel := context.WithTimeout(ctx, 30*time.Second)
	err := s.Acquire(done, 4)
	cancel()
	stop()
	wg.Wait()
	require.NoError(t, err, "a large request starved behind small ones")
	s.Release(4)
	assert.Equal(t, int64(4), s.Available())
}

func TestSetCapacity(t *testing.T) {
	// "grow wakes waiters in order"
	t.Run("grow wakes waiters in order", func(t *testing.T) {
		modes(t, func(t *testing.T, opts ...semaphore.Option) {
			synctest.Test(t, func(t *testing.T) {
				s := semaphore.New(2, opts...)
				require.NoError(t, s.Acquire(t.Context(), 2))
				a := enqueue(t, s, 2)
				b := enqueue(t, s, 1)
				c := enqueue(t, s, 2)
				s.SetCapacity(3) // 1 free: not enough for a at the head, and b must not pass it
				synctest.Wait()
				assert.True(t, a.pending())
				assert.True(t, b.pending(), "b must not pass a")
				s.SetCapacity(5) // 3 free: a (2) then b (1); c must wait
				require.NoError(t, <-a.err)
				require.NoError(t, <-b.err)
				synctest.Wait()
				assert.True(t, c.pending())
				assert.Equal(t, int64(5), s.Capacity())
				assert.Equal(t, int64(0), s.Available())
				s.Release(2)
				require.NoError(t, <-c.err)
				s.Release(2 + 1 + 2)
				assert.Equal(t, int64(5), s.Available())
			})
		})
	})
	// "Available() int64 (capacity minus held; negative after a shrink until enough permits come
	// back)"; "shrink never blocks the caller and takes effect as permits come back".
	t.Run("shrink takes effect as permits come back", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := semaphore.New(4)
			require.NoError(t, s.Acquire(t.Context(), 3))
			s.SetCapacity(1) // never blocks, though 3 are held
			assert.Equal(t, int64(1), s.Capacity())
			assert.Equal(t, int64(-2), s.Available())
			w := enqueue(t, s, 1)
			s.Release(2)
			synctest.Wait()
			assert.True(t, w.pending(), "still one over the new capacity")
			assert.Equal(t, int64(0), s.Available())
			s.Release(1)
			require.NoError(t, <-w.err)
			assert.PanicsWithValue(t, "semaphore: released more than held", func() { s.Release(2) })
			s.Release(1)
			assert.Equal(t, int64(1), s.Available())
		})
	})
	// "a waiter whose n exceeds the new capacity gets ErrInvalidWeight at once"; one whose n equals
	// it stays queued.
	t.Run("shrink fails waiters above the new capacity at once", func(t *testing.T) {
		modes(t, func(t *testing.T, opts ...semaphore.Option) {
			synctest.Test(t, func(t *testing.T) {
				s := semaphore.New(4, opts...)
				require.NoError(t, s.Acquire(t.Context(), 4))
				small := enqueue(t, s, 1)
				big := enqueue(t, s, 3) // behind small, not at the head
				small2 := enqueue(t, s, 2)
				s.SetCapacity(2)
				require.ErrorIs(t, <-big.err, semaphore.ErrInvalidWeight)
				synctest.Wait()
				assert.True(t, small.pending())
				assert.True(t, small2.pending())
				assert.Equal(t, 2, s.Waiting())
				s.Release(4) // back to 2 free: small (1), then small2 (2) does not fit
				require.NoError(t, <-small.err)
				synctest.Wait()
				assert.True(t, small2.pending())
				s.Release(1)
				require.NoError(t, <-small2.err)
				s.Release(2)
				assert.Equal(t, int64(2), s.Available())
			})
		})
	})
	// A head waiter that a shrink fails leaves at once, and the waiters behind it are re-examined
	// without any Release. (Fair mode: in unfair mode the small one would not queue at all.)
	t.Run("shrink failing the head serves those behind", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := semaphore.New(4)
			require.NoError(t, s.Acquire(t.Context(), 1))
			big := enqueue(t, s, 4)
			small := enqueue(t, s, 1)
			require.Equal(t, 2, s.Waiting())
			s.SetCapacity(3)
			require.ErrorIs(t, <-big.err, semaphore.ErrInvalidWeight, "answered at once")
			require.NoError(t, <-small.err, "re-examined once the head left")
			assert.Equal(t, int64(1), s.Available())
			assert.Equal(t, 0, s.Waiting())
			s.Release(2)
			assert.Equal(t, int64(3), s.Available())
		})
	})
	t.Run("to zero and back", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := semaphore.New(1)
			s.SetCapacity(0)
			require.ErrorIs(t, s.Acquire(t.Context(), 1), semaphore.ErrInvalidWeight)
			require.NoError(t, s.Acquire(t.Context(), 0))
			assert.False(t, s.TryAcquire(1))
			assert.True(t, s.TryAcquire(0))
			s.SetCapacity(2)
			require.NoError(t, s.Acquire(t.Context(), 2))
			s.Release(2)
		})
	})
	// "SetCapacity(n int64) (n < 0 panics; …)"
	t.Run("misuse", func(t *testing.T) {
		s := semaphore.New(1)
		assert.PanicsWithValue(t, "semaphore: SetCapacity: negative capacity -1", func() { s.SetCapacity(-1) })
		assert.Panics(t, func() { s.SetCapacity(semaphore.MaxPermits + 1) })
		assert.Equal(t, int64(1), s.Capacity())
	})
}

// "Unfair() lets arrivals take free permits ahead of waiters", but the waiters already queued are
// served in their order.
func TestUnfairServesQueueInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := semaphore.New(2, semaphore.Unfair())
		require.NoError(t, s.Acquire(t.Context(), 2))
		big := enqueue(t, s, 2)
		small := enqueue(t, s, 1)
		s.Release(1) // 1 free: small fits but big is ahead of it in the queue
		synctest.Wait()
		assert.True(t, small.pending())
		assert.True(t, big.pending())
		assert.True(t, s.TryAcquire(1), "an arrival may barge in unfair mode")
		s.Release(2)
		require.NoError(t, <-big.err)
		s.Release(2)
		require.NoError(t, <-small.err)
		s.Release(1)
		assert.Equal(t, int64(2), s.Available())
	})
}

func TestManySemaphoresAndWaitersConcurrently(t *testing.T) {
	// Waiter nodes are recycled per semaphore; many waits in a row must each start clean.
	synctest.Test(t, func(t *testing.T) {
		s := semaphore.New(1)
		for i := range 50 {
			require.NoError(t, s.Acquire(t.Context(), 1))
			w := enqueue(t, s, 1)
			if i%2 == 0 {
				w.cancel()
				require.ErrorIs(t, <-w.err, context.Canceled)
				s.Release(1)
			} else {
				s.Release(1)
				require.NoError(t, <-w.err, fmt.Sprint("round ", i))
				s.Release(1)
			}
			w.cancel()
		}
		assert.Equal(t, int64(1), s.Available())
	})
}

// "The zero values ... and a nil *Semaphore are not usable: every method panics with
// PKG: zero TYPE; use New, never a nil dereference deep inside, never a silent fallback (no
// unfair zero Semaphore)."
func TestZeroAndNilSemaphorePanic(t *testing.T) {
	const msg = "semaphore: zero Semaphore; use New"
	var zero semaphore.Semaphore
	var nilSem *semaphore.Semaphore
	for name, s := range map[string]*semaphore.Semaphore{"zero": &zero, "nil": nilSem} {
		t.Run(name, func(t *testing.T) {
			assert.PanicsWithValue(t, msg, func() { _ = s.Acquire(t.Context(), 1) })
			assert.PanicsWithValue(t, msg, func() { _ = s.AcquireTimeout(t.Context(), 1, time.Second) })
			assert.PanicsWithValue(t, msg, func() { s.TryAcquire(1) })
			assert.PanicsWithValue(t, msg, func() { s.Release(1) })
			assert.PanicsWithValue(t, msg, func() { s.Available() })
			assert.PanicsWithValue(t, msg, func() { s.Waiting() })
			assert.PanicsWithValue(t, msg, func() { s.Capacity() })
			assert.PanicsWithValue(t, msg, func() { s.SetCapacity(1) })
		})
	}
}

// "A nil ctx passed to any function of any package panics with PKG: OP: nil context."
func TestNilContextPanics(t *testing.T) {
	s := semaphore.New(1)
	var nilCtx context.Context // a variable, so that vet and staticcheck let the misuse through
	assert.PanicsWithValue(t, "semaphore: Acquire: nil context", func() { _ = s.Acquire(nilCtx, 1) })
	assert.PanicsWithValue(t, "semaphore: AcquireTimeout: nil context", func() { _ = s.AcquireTimeout(nilCtx, 1, time.Second) })
	assert.Equal(t, int64(1), s.Available(), "a refused call takes nothing")
}
