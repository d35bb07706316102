package semaphore_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/semaphore"
)

// "Cancellation is exact: an Acquire that returns an error holds nothing; one that returns nil holds
// n. No permit is ever lost or duplicated."
//
// TestStress runs goroutines doing random Acquire / AcquireTimeout / TryAcquire / cancel /
// Release / SetCapacity, checks that the permits held never exceed what the capacity allowed
// when they were granted, and that at rest everything is back: Available == Capacity and nobody
// waits.
func TestStress(t *testing.T) {
	d := 2 * time.Second
	if testing.Short() {
		d = 300 * time.Millisecond
	}
	modes(t, func(t *testing.T, opts ...semaphore.Option) {
		t.Parallel()
		const maxCap = 8
		s := semaphore.New(maxCap, opts...)
		var held atomic.Int64 // permits held by the workers, as they count them
		var acquired, failed, resized atomic.Int64
		stop := time.Now().Add(d)
		var wg sync.WaitGroup
		for g := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(g), 42))
				for time.Now().Before(stop) {
					n := rng.Int64N(4)
					var err error
					op := rng.IntN(10)
					switch {
					case op < 3:
						err = s.Acquire(context.Background(), n)
					case op < 5:
						err = s.AcquireTimeout(context.Background(), n, time.Duration(rng.IntN(200))*time.Microsecond)
					case op < 7:
						if !s.TryAcquire(n) {
							err = errors.New("busy")
						}
					case op < 9:
						ctx, cancel := context.WithCancel(context.Background())
						if rng.IntN(2) == 0 {
							cancel() // already done: must never acquire
						} else {
							time.AfterFunc(time.Duration(rng.IntN(100))*time.Microsecond, cancel)
						}
						err = s.Acquire(ctx, n) // nil after ctx ended is fine: granted first
						cancel()
					default:
						// Capacity moves between 4 and maxCap, so n <= 3 stays valid.
						s.SetCapacity(4 + rng.Int64N(maxCap-4+1))
						resized.Add(1)
						continue
					}
					if err != nil {
						if !errors.Is(err, semaphore.ErrInvalidWeight) && !errors.Is(err, context.Canceled) &&
							!errors.Is(err, semaphore.ErrTimeout) && err.Error() != "busy" {
							t.Errorf("unexpected error %v", err)
						}
						failed.Add(1)
						continue
					}
					if h := held.Add(n); h > maxCap {
						t.Errorf("%d permits held, capacity never above %d", h, maxCap)
					}
					acquired.Add(1)
					if rng.IntN(4) == 0 {
						time.Sleep(time.Duration(rng.IntN(50)) * time.Microsecond)
					}
					held.Add(-n)
					s.Release(n)
				}
			}()
		}
		wg.Wait()
		require.Zero(t, held.Load())
		assert.Equal(t, s.Capacity(), s.Available(), "no permit lost or duplicated")
		assert.Equal(t, 0, s.Waiting())
		s.SetCapacity(maxCap)
		assert.True(t, s.TryAcquire(maxCap), "all permits can be taken at once")
		s.Release(maxCap)
		t.Logf("acquired %d, failed %d, resized %d", acquired.Load(), failed.Load(), resized.Load())
		assert.Positive(t, acquired.Load())
	})
}
