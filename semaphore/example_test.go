package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/goloom/loom/semaphore"
)

// Bounded parallelism: at most 3 of the 10 jobs run at once, however many goroutines there are.
func Example() {
	ctx := context.Background()
	sem := semaphore.New(3)
	var mu sync.Mutex
	running, most, done := 0, 0, 0
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := sem.Acquire(ctx, 1); err != nil {
				return
			}
			defer sem.Release(1)
			mu.Lock()
			running++
			most = max(most, running)
			mu.Unlock()
			time.Sleep(time.Millisecond) // the job
			mu.Lock()
			running--
			done++
			mu.Unlock()
		}()
	}
	wg.Wait()
	fmt.Println("jobs done:", done, "never more than 3 at once:", most <= 3, "free again:", sem.Available())
	// Output: jobs done: 10 never more than 3 at once: true free again: 3
}

// Give up on a permit that does not come in time, as a handler protecting a small DB pool would.
func ExampleSemaphore_AcquireTimeout() {
	ctx := context.Background()
	pool := semaphore.New(1)
	_ = pool.Acquire(ctx, 1) // the only connection is busy

	err := pool.AcquireTimeout(ctx, 1, 10*time.Millisecond)
	fmt.Println(err)
	fmt.Println(errors.Is(err, semaphore.ErrTimeout), errors.Is(err, context.DeadlineExceeded))

	pool.Release(1)
	fmt.Println(pool.AcquireTimeout(ctx, 1, 10*time.Millisecond))
	// Output:
	// semaphore: acquire timed out
	// true true
	// <nil>
}

// Weighted requests: a bulk job takes 3 of 4 permits at once; a request for more than the
// capacity can never be served and says so at once instead of hanging.
func ExampleSemaphore_Acquire() {
	ctx := context.Background()
	sem := semaphore.New(4)
	if err := sem.Acquire(ctx, 3); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("bulk holds 3, free:", sem.Available())
	sem.Release(3)

	err := sem.Acquire(ctx, 5) // can never be served
	fmt.Println(errors.Is(err, semaphore.ErrInvalidWeight))
	// Output:
	// bulk holds 3, free: 1
	// true
}

func ExampleSemaphore_TryAcquire() {
	sem := semaphore.New(1)
	fmt.Println(sem.TryAcquire(1), sem.TryAcquire(1))
	sem.Release(1)
	fmt.Println(sem.TryAcquire(1))
	// Output:
	// true false
	// true
}

// Shrinking never blocks: it takes effect as permits come back.
func ExampleSemaphore_SetCapacity() {
	ctx := context.Background()
	sem := semaphore.New(4)
	_ = sem.Acquire(ctx, 4)
	sem.SetCapacity(2)
	fmt.Println("capacity", sem.Capacity(), "available", sem.Available())
	sem.Release(4)
	fmt.Println("capacity", sem.Capacity(), "available", sem.Available())
	// Output:
	// capacity 2 available -2
	// capacity 2 available 2
}

// Unfair lets an arrival take a free permit while a larger request waits.
func ExampleUnfair() {
	ctx := context.Background()
	sem := semaphore.New(2, semaphore.Unfair())
	_ = sem.Acquire(ctx, 1)
	done := make(chan error)
	go func() { done <- sem.Acquire(ctx, 2) }() // waits for both permits
	for sem.Waiting() == 0 {
		runtime.Gosched() // until the acquire above waits
	}
	fmt.Println("barged:", sem.TryAcquire(1))
	sem.Release(2)
	fmt.Println(<-done)
	sem.Release(2)
	// Output:
	// barged: true
	// <nil>
}

func ExampleNew() {
	sem := semaphore.New(10)
	fmt.Println(sem.Capacity(), sem.Available(), sem.Waiting())
	// Output: 10 10 0
}

// Release gives permits back and serves the waiters in order; giving back more than is held is
// a bug, and panics.
func ExampleSemaphore_Release() {
	ctx := context.Background()
	sem := semaphore.New(2)
	_ = sem.Acquire(ctx, 2)
	done := make(chan error)
	go func() { done <- sem.Acquire(ctx, 1) }()
	for sem.Waiting() == 0 {
		runtime.Gosched() // until the acquire above waits
	}
	sem.Release(1) // serves the waiter
	fmt.Println(<-done, sem.Available())
	sem.Release(2)
	fmt.Println(sem.Available())
	defer func() { fmt.Println(recover()) }()
	sem.Release(1)
	// Output:
	// <nil> 0
	// 2
	// semaphore: released more than held
}
