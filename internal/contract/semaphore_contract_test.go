package contract_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/semaphore"
)

// acquireAsync starts an Acquire of n on its own goroutine and returns a channel with its result.
func acquireAsync(s *semaphore.Semaphore, ctx context.Context, n int64) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- s.Acquire(ctx, n) }()
	return ch
}

// done reports whether ch has a value now (call after synctest.Wait).
func ready(ch <-chan error) (error, bool) {
	select {
	case err := <-ch:
		return err, true
	default:
		return nil, false
	}
}

func TestSemaphoreNewAllFree(t *testing.T) {
	s := semaphore.New(5)
	assert.Equal(t, int64(5), s.Capacity())
	assert.Equal(t, int64(5), s.Available())
	assert.Equal(t, 0, s.Waiting())
	require.NoError(t, s.Acquire(context.Background(), 3))
	assert.Equal(t, int64(2), s.Available(), "Available is capacity minus held")
	s.Release(3)
	assert.Equal(t, int64(5), s.Available())
}

// DESIGN: "fair (strict FIFO) by default" and "FIFO is strict and weighted: a waiter for n permits holds
// back later waiters until it is served or leaves".
func TestSemaphoreStrictWeightedFIFO(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := semaphore.New(3)
		ctx := context.Background()
		require.NoError(t, s.Acquire(ctx, 3))
		big := acquireAsync(s, ctx, 2)
		synctest.Wait()
		small := acquireAsync(s, ctx, 1)
		synctest.Wait()
		assert.Equal(t, 2, s.Waiting())

		s.Release(1)
		synctest.Wait()
		_, ok := ready(small)
		assert.False(t, ok, "a later small waiter must not pass the big one at the head")
		_, ok = ready(big)
		assert.False(t, ok)
		assert.Equal(t, int64(1), s.Available())
		assert.False(t, s.TryAcquire(1), "TryAcquire fails in fair mode while anyone is queued")

		s.Release(1)
		synctest.Wait()
		err, ok := ready(big)
		require.True(t, ok, "big waiter served when 2 permits are free")
		require.NoError(t, err)
		_, ok = ready(small)
		assert.False(t, ok)

		s.Release(1)
		synctest.Wait()
		err, ok = ready(small)
		require.True(t, ok)
		require.NoError(t, err)
		assert.Equal(t, 0, s.Waiting())
		s.Release(3)
		assert.Equal(t, int64(3), s.Available())
	})
}

func TestSemaphoreFIFOOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := semaphore.New(1)
		ctx := context.Background()
		require.NoError(t, s.Acquire(ctx, 1))
		var mu sync.Mutex
		var order []int
		var wg sync.WaitGroup
		for i := range 5 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if s.Acquire(ctx, 1) == nil {
					mu.Lock()
					order = append(order, i)
					mu.Unlock()
					s.Release(1)
				}
			}()
			synctest.Wait() // queue in a known order
		}
		s.Release(1)
		wg.Wait()
		assert.Equal(t, []int{0, 1, 2, 3, 4}, order)
	})
}

// DESIGN: "Unfair() lets arrivals take free permits ahead of waiters."
func TestSemaphoreUnfair(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := semaphore.New(2, semaphore.Unfair())
		ctx, cancel := context.WithCancel(context.Background())
		require.NoError(t, s.Acquire(ctx, 2))
		w := acquireAsync(s, ctx, 2)
		synctest.Wait()
		s.Release(1)
		synctest.Wait()
		assert.True(t, s.TryAcquire(1), "unfair: an arrival takes a free permit ahead of the waiter")
		require.NoError(t, s.AcquireTimeout(ctx, 0, 0))
		cancel()
		synctest.Wait()
		err, ok := ready(w)
		require.True(t, ok)
		require.ErrorIs(t, err, context.Canceled)
		s.Release(2)
		assert.Equal(t, int64(2), s.Available())
	})
}

// DESIGN: "AcquireTimeout … (semaphore.ErrTimeout when d elapses, ctx's error when ctx ends first)".
func TestSemaphoreAcquireTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := semaphore.New(1)
		require.NoError(t, s.Acquire(context.Background(), 1))
		start := time.Now()
		err := s.AcquireTimeout(context.Background(), 1, time.Second)
		require.ErrorIs(t, err, semaphore.ErrTimeout)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, time.Second, time.Since(start))
		assert.Equal(t, int64(0), s.Available(), "a timed-out acquire holds nothing")
		assert.Equal(t, 0, s.Waiting())
	})
}

func TestSemaphoreAcquireTimeoutCtxEndsFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := semaphore.New(1)
		require.NoError(t, s.Acquire(context.Background(), 1))

		ctx, cancel := context.WithCancel(context.Background())
		go func() { time.Sleep(time.Second); cancel() }()
		err := s.AcquireTimeout(ctx, 1, time.Hour)
		require.ErrorIs(t, err, context.Canceled)
		assert.NotErrorIs(t, err, semaphore.ErrTimeout)

		dctx, dcancel := context.WithTimeout(context.Background(), time.Second)
		defer dcancel()
		err = s.AcquireTimeout(dctx, 1, time.Hour)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.NotErrorIs(t, err, semaphore.ErrTimeout, "ctx's deadline is ctx's error, not ErrTimeout")
		assert.Equal(t, int64(0), s.Available())
	})
}

func TestSemaphoreAcquireTimeoutSucceedsInTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := semaphore.New(1)
		require.NoError(t, s.Acquire(context.Background(), 1))
		go func() { time.Sleep(time.Second); s.Release(1) }()
		require.NoError(t, s.AcquireTimeout(context.Background(), 1, time.Minute))
		assert.Equal(t, int64(0), s.Available())
		s.Release(1)
	})
}

// DESIGN: "AcquireTimeout with d ≤ 0 does not wait: after the usual checks (invalid weight, done ctx) it
// acquires at once if TryAcquire would, else returns ErrTimeout."
func TestSemaphoreAcquireTimeoutNonPositive(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		t.Run(d.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				s := semaphore.New(2)
				start := time.Now()
				require.NoError(t, s.AcquireTimeout(ctx, 1, d), "free permit: acquires at once")
				assert.Equal(t, int64(1), s.Available())

				require.ErrorIs(t, s.AcquireTimeout(ctx, 2, d), semaphore.ErrTimeout, "not enough free: ErrTimeout")
				require.ErrorIs(t, s.AcquireTimeout(ctx, 3, d), semaphore.ErrInvalidWeight)
				require.ErrorIs(t, s.AcquireTimeout(ctx, -1, d), semaphore.ErrInvalidWeight)

				cctx, cancel := context.WithCancel(ctx)
				cancel()
				err := s.AcquireTimeout(cctx, 1, d)
				require.ErrorIs(t, err, context.Canceled, "done ctx checked before acquiring")
				assert.NotErrorIs(t, err, semaphore.ErrTimeout)
				assert.Equal(t, int64(1), s.Available())

				// Fair with a queue: TryAcquire would fail, so ErrTimeout even though a permit is free.
				w := acquireAsync(s, ctx, 2)
				synctest.Wait()
				require.Equal(t, 1, s.Waiting())
				require.ErrorIs(t, s.AcquireTimeout(ctx, 1, d), semaphore.ErrTimeout)
				assert.Equal(t, time.Duration(0), time.Since(start), "d <= 0 never waits")
				s.Release(1)
				synctest.Wait()
				err, ok := ready(w)
				require.True(t, ok)
				require.NoError(t, err)
				s.Release(2)
				assert.Equal(t, int64(2), s.Available())
			})
		})
	}
}

// DESIGN: "TryAcquire(n int64) bool (never waits; in fair mode fails while anyone is queued)".
func TestSemaphoreTryAcquire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := semaphore.New(3)
		assert.True(t, s.TryAcquire(2))
		assert.False(t, s.TryAcquire(2))
		assert.Equal(t, int64(1), s.Available())
		assert.False(t, s.TryAcquire(-1))
		assert.False(t, s.TryAcquire(4))
		ctx, cancel := context.WithCancel(context.Background())
		w := acquireAsync(s, ctx, 3)
		synctest.Wait()
		assert.False(t, s.TryAcquire(1), "fair: fails while anyone is queued, though a permit is free")
		cancel()
		synctest.Wait()
		err, _ := ready(w)
		require.ErrorIs(t, err, context.Canceled)
		assert.True(t, s.TryAcquire(1), "queue empty again")
		s.Release(3)
		assert.Equal(t, int64(3), s.Available())
	})
}

// DESIGN: "Release(n int64) (panics `semaphore: released more than held`)".
func TestSemaphoreReleaseMoreThanHeldPanics(t *testing.T) {
	s := semaphore.New(2)
	msg, ok := panicMsg(func() { s.Release(1) })
	require.True(t, ok)
	assert.Equal(t, "semaphore: released more than held", msg)

	require.NoError(t, s.Acquire(context.Background(), 1))
	msg, ok = panicMsg(func() { s.Release(2) })
	require.True(t, ok)
	assert.Equal(t, "semaphore: released more than held", msg)
}

// DESIGN: "Available() (capacity minus held; negative after a shrink until enough permits come back)";
// "shrink never blocks the caller and takes effect as permits come back".
func TestSemaphoreShrinkNegativeAvailable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s := semaphore.New(5)
		require.NoError(t, s.Acquire(ctx, 5))
		s.SetCapacity(2) // must not block
		assert.Equal(t, int64(2), s.Capacity())
		assert.Equal(t, int64(-3), s.Available())
		w := acquireAsync(s, ctx, 1)
		synctest.Wait()
		s.Release(3)
		synctest.Wait()
		assert.Equal(t, int64(0), s.Available())
		_, ok := ready(w)
		assert.False(t, ok, "no permit is free yet under the new capacity")
		s.Release(1)
		synctest.Wait()
		err, ok := ready(w)
		require.True(t, ok)
		require.NoError(t, err)
		assert.Equal(t, int64(0), s.Available())
		s.Release(2)
		assert.Equal(t, int64(2), s.Available())
	})
}

// DESIGN: "SetCapacity(n int64) (n < 0 panics …)".
func TestSemaphoreSetCapacityNegativePanics(t *testing.T) {
	s := semaphore.New(2)
	msg, ok := panicMsg(func() { s.SetCapacity(-1) })
	require.True(t, ok)
	assert.Contains(t, msg, "semaphore:")
	assert.Equal(t, int64(2), s.Capacity())
	assert.NotPanics(t, func() { s.SetCapacity(0) })
	assert.Equal(t, int64(0), s.Available())
}

// DESIGN: "grow wakes waiters in order".
func TestSemaphoreGrowWakesInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s := semaphore.New(2)
		require.NoError(t, s.Acquire(ctx, 2))
		a := acquireAsync(s, ctx, 2)
		synctest.Wait()
		b := acquireAsync(s, ctx, 1)
		synctest.Wait()
		s.SetCapacity(3) // 1 free: not enough for a at the head
		synctest.Wait()
		_, ok := ready(b)
		assert.False(t, ok, "b must not pass a")
		s.SetCapacity(5) // 3 free: a then b
		synctest.Wait()
		err, ok := ready(a)
		require.True(t, ok)
		require.NoError(t, err)
		err, ok = ready(b)
		require.True(t, ok)
		require.NoError(t, err)
		assert.Equal(t, int64(0), s.Available())
	})
}

// DESIGN: "a waiter whose n exceeds the new capacity gets ErrInvalidWeight at once".
func TestSemaphoreShrinkBelowWaiterInvalidWeight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s := semaphore.New(4)
		require.NoError(t, s.Acquire(ctx, 1))
		big := acquireAsync(s, ctx, 4)
		synctest.Wait()
		small := acquireAsync(s, ctx, 1)
		synctest.Wait()
		require.Equal(t, 2, s.Waiting())
		s.SetCapacity(3)
		synctest.Wait()
		err, ok := ready(big)
		require.True(t, ok, "waiter above the new capacity must be answered at once")
		require.ErrorIs(t, err, semaphore.ErrInvalidWeight)
		err, ok = ready(small)
		require.True(t, ok, "the waiter behind must be re-examined once the big one left")
		require.NoError(t, err)
		assert.Equal(t, int64(1), s.Available())
		assert.Equal(t, 0, s.Waiting())
	})
}

// DESIGN: "when it leaves (cancel or timeout) the waiters behind it are re-examined at once."
func TestSemaphoreLeavingHeadReexaminesQueue(t *testing.T) {
	t.Run("cancel", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx := context.Background()
			s := semaphore.New(2)
			require.NoError(t, s.Acquire(ctx, 1))
			hctx, cancel := context.WithCancel(ctx)
			head := acquireAsync(s, hctx, 2)
			synctest.Wait()
			behind := acquireAsync(s, ctx, 1)
			synctest.Wait()
			_, ok := ready(behind)
			require.False(t, ok)
			cancel()
			synctest.Wait()
			err, ok := ready(head)
			require.True(t, ok)
			require.ErrorIs(t, err, context.Canceled)
			err, ok = ready(behind)
			require.True(t, ok, "waiter behind must be served without any Release")
			require.NoError(t, err)
			assert.Equal(t, int64(0), s.Available())
		})
	})
	t.Run("timeout", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx := context.Background()
			s := semaphore.New(2)
			require.NoError(t, s.Acquire(ctx, 1))
			head := make(chan error, 1)
			go func() { head <- s.AcquireTimeout(ctx, 2, time.Second) }()
			synctest.Wait()
			behind := acquireAsync(s, ctx, 1)
			synctest.Wait()
			time.Sleep(2 * time.Second)
			synctest.Wait()
			err, ok := ready(head)
			require.True(t, ok)
			require.ErrorIs(t, err, semaphore.ErrTimeout)
			err, ok = ready(behind)
			require.True(t, ok, "waiter behind must be served at once when the head times out")
			require.NoError(t, err)
		})
	})
}

// DESIGN: "Bad input gets an error, never a hang: n < 0 or n > Capacity() returns
// semaphore.ErrInvalidWeight at once."
func TestSemaphoreInvalidWeight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := semaphore.New(3)
		ctx := context.Background()
		require.ErrorIs(t, s.Acquire(ctx, -1), semaphore.ErrInvalidWeight)
		require.ErrorIs(t, s.Acquire(ctx, 4), semaphore.ErrInvalidWeight)
		require.ErrorIs(t, s.AcquireTimeout(ctx, 4, time.Hour), semaphore.ErrInvalidWeight)
		require.ErrorIs(t, s.AcquireTimeout(ctx, -1, time.Hour), semaphore.ErrInvalidWeight)
		// Even when all permits are held (it could never be served).
		require.NoError(t, s.Acquire(ctx, 3))
		start := time.Now()
		require.ErrorIs(t, s.Acquire(ctx, 4), semaphore.ErrInvalidWeight)
		assert.Equal(t, time.Duration(0), time.Since(start))
		assert.Equal(t, int64(0), s.Available())
		assert.Equal(t, 0, s.Waiting())
	})
}

// DESIGN: "n == 0 succeeds at once unless ctx is done."
func TestSemaphoreZeroWeight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := semaphore.New(1)
		ctx := context.Background()
		require.NoError(t, s.Acquire(ctx, 1))
		hold := acquireAsync(s, ctx, 1) // a queued waiter
		synctest.Wait()
		require.NoError(t, s.Acquire(ctx, 0), "n == 0 succeeds at once, even with no permit free and a queue")
		require.NoError(t, s.AcquireTimeout(ctx, 0, time.Hour))
		require.NoError(t, s.AcquireTimeout(ctx, 0, 0))
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		require.ErrorIs(t, s.Acquire(cctx, 0), context.Canceled)
		require.ErrorIs(t, s.AcquireTimeout(cctx, 0, time.Hour), context.Canceled)
		s.Release(1)
		synctest.Wait()
		err, ok := ready(hold)
		require.True(t, ok)
		require.NoError(t, err)
		s.Release(1)
	})
}

// DESIGN: "A ctx that is already done never acquires, even when permits are free."
func TestSemaphoreDoneCtxNeverAcquires(t *testing.T) {
	s := semaphore.New(5)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, s.Acquire(ctx, 1), context.Canceled)
	require.ErrorIs(t, s.AcquireTimeout(ctx, 1, time.Hour), context.Canceled)
	assert.Equal(t, int64(5), s.Available())

	dctx, dcancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer dcancel()
	require.ErrorIs(t, s.Acquire(dctx, 1), context.DeadlineExceeded)
	assert.Equal(t, int64(5), s.Available())

	us := semaphore.New(5, semaphore.Unfair())
	require.Error(t, us.Acquire(ctx, 1))
	assert.Equal(t, int64(5), us.Available())
}

// DESIGN: "Cancellation is exact: an Acquire that returns an error holds nothing; one that returns nil
// holds n. No permit is ever lost or duplicated."
func TestSemaphoreCancellationExactStress(t *testing.T) {
	for _, opts := range [][]semaphore.Option{nil, {semaphore.Unfair()}} {
		s := semaphore.New(5, opts...)
		var held atomic.Int64
		var wg sync.WaitGroup
		for g := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(g), 7))
				for range 200 {
					n := r.Int64N(4)
					ctx, cancel := context.WithCancel(context.Background())
					if r.IntN(3) == 0 {
						go cancel()
					}
					var err error
					if r.IntN(2) == 0 {
						err = s.Acquire(ctx, n)
					} else {
						err = s.AcquireTimeout(ctx, n, time.Duration(r.IntN(50))*time.Microsecond)
					}
					if err == nil {
						if h := held.Add(n); h > 5 {
							t.Errorf("held %d permits, capacity 5", h)
						}
						held.Add(-n)
						s.Release(n)
					}
					cancel()
				}
			}()
		}
		wg.Wait()
		assert.Equal(t, int64(5), s.Available(), "no permit lost or duplicated")
		assert.Equal(t, 0, s.Waiting())
	}
}

// "ctx's error": with a cancel cause, the error still matches context.Canceled (ctx.Err()).
func TestSemaphoreCtxErrorWithCause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := semaphore.New(1)
		require.NoError(t, s.Acquire(context.Background(), 1))
		ctx, cancel := context.WithCancelCause(context.Background())
		go func() { time.Sleep(time.Second); cancel(errors.New("why")) }()
		err := s.Acquire(ctx, 1)
		require.ErrorIs(t, err, context.Canceled)
		ctx2, cancel2 := context.WithCancelCause(context.Background())
		go func() { time.Sleep(time.Second); cancel2(errors.New("why")) }()
		err = s.AcquireTimeout(ctx2, 1, time.Hour)
		require.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, int64(0), s.Available())
	})
}

// After SetCapacity(0) every positive request is invalid at once.
func TestSemaphoreCapacityZero(t *testing.T) {
	s := semaphore.New(3)
	s.SetCapacity(0)
	require.ErrorIs(t, s.Acquire(context.Background(), 1), semaphore.ErrInvalidWeight)
	require.NoError(t, s.Acquire(context.Background(), 0))
	assert.False(t, s.TryAcquire(1))
	assert.True(t, s.TryAcquire(0))
}

// Unfair: AcquireTimeout with d <= 0 acquires if TryAcquire would, even with a queue.
func TestSemaphoreUnfairAcquireTimeoutZero(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := semaphore.New(2, semaphore.Unfair())
		ctx, cancel := context.WithCancel(context.Background())
		require.NoError(t, s.Acquire(ctx, 1))
		w := acquireAsync(s, ctx, 2)
		synctest.Wait()
		require.Equal(t, 1, s.Waiting())
		require.NoError(t, s.AcquireTimeout(ctx, 1, 0), "unfair: takes the free permit despite the queue")
		cancel()
		synctest.Wait()
		err, _ := ready(w)
		require.ErrorIs(t, err, context.Canceled)
		s.Release(2)
		assert.Equal(t, int64(2), s.Available())
	})
}

// One Release serves every waiter it now covers, in order.
func TestSemaphoreReleaseServesSeveral(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s := semaphore.New(3)
		require.NoError(t, s.Acquire(ctx, 3))
		var ws []<-chan error
		for range 3 {
			ws = append(ws, acquireAsync(s, ctx, 1))
			synctest.Wait()
		}
		s.Release(3)
		synctest.Wait()
		for _, w := range ws {
			err, ok := ready(w)
			require.True(t, ok)
			require.NoError(t, err)
		}
		assert.Equal(t, int64(0), s.Available())
	})
}

// A waiter whose n equals the new capacity stays queued (it can still be served).
func TestSemaphoreShrinkToWaiterSizeKeepsIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s := semaphore.New(4)
		require.NoError(t, s.Acquire(ctx, 4))
		w := acquireAsync(s, ctx, 2)
		synctest.Wait()
		s.SetCapacity(2)
		synctest.Wait()
		_, ok := ready(w)
		require.False(t, ok, "n == new capacity is valid: keep waiting")
		s.Release(4)
		synctest.Wait()
		err, ok := ready(w)
		require.True(t, ok)
		require.NoError(t, err)
	})
}
