package limiter_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goloom/loom/limiter"
)

// fakeAPI stands in for a remote call that takes d, or less if ctx ends first.
func fakeAPI(ctx context.Context, reply string, d time.Duration) (string, error) {
	select {
	case <-time.After(d):
		return reply, nil
	case <-ctx.Done():
		return "", context.Cause(ctx)
	}
}

// Protecting an outbound API: at most 2 requests in flight, a caller waits at most 20ms for a
// slot instead of piling up, and a request running longer than 50ms is cancelled.
func Example() {
	ctx := context.Background()
	api := limiter.New(2,
		limiter.WithAcquireTimeout(20*time.Millisecond),
		limiter.WithTaskTimeout(50*time.Millisecond))

	reply, err := limiter.Call(ctx, api, func(ctx context.Context) (string, error) {
		return fakeAPI(ctx, "hello", 0)
	})
	fmt.Println(reply, err)

	// A request that hangs is cut off; its context tells it why.
	_, err = limiter.Call(ctx, api, func(ctx context.Context) (string, error) {
		return fakeAPI(ctx, "late", time.Hour)
	})
	fmt.Println(err, errors.Is(err, limiter.ErrTaskTimeout))

	// Both slots busy, with requests that do not even heed their context: the next caller is
	// turned away after 20ms. The stuck requests time out for their callers but keep their
	// slots until they return, so the API never sees more than 2 at once.
	stuck := make(chan struct{})
	hang := func(ctx context.Context) (string, error) { <-stuck; return "late", nil }
	a, b := limiter.Submit(ctx, api, hang), limiter.Submit(ctx, api, hang)
	_, err = limiter.Call(ctx, api, func(ctx context.Context) (string, error) { return fakeAPI(ctx, "hi", 0) })
	fmt.Println(err, errors.Is(err, limiter.ErrRejected))
	_, errA := a.Wait(ctx)
	_, errB := b.Wait(ctx)
	fmt.Println(errA, errB)
	close(stuck)

	s := api.Stats()
	fmt.Printf("completed %d, timed out %d, rejected %d\n", s.Completed, s.TimedOut, s.Rejected)
	// Output:
	// hello <nil>
	// limiter: task timed out true
	// limiter: rejected: no slot within the acquire timeout true
	// limiter: task timed out limiter: task timed out
	// completed 1, timed out 3, rejected 1
}

// Do bounds how many task bodies run at once, however many goroutines call it.
func ExampleLimiter_Do() {
	ctx := context.Background()
	l := limiter.New(3)
	var running, most atomic.Int32
	full := make(chan struct{}) // closed once 3 run at once, so that the bound is put to the test
	var once sync.Once
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			_ = l.Do(ctx, func(ctx context.Context) error {
				n := running.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				if n == 3 {
					once.Do(func() { close(full) })
				}
				<-full
				running.Add(-1)
				return nil
			})
		})
	}
	wg.Wait()
	fmt.Println("at most", most.Load(), "at once")
	// Output: at most 3 at once
}

// Call returns the task's value with its error.
func ExampleCall() {
	ctx := context.Background()
	db := limiter.New(4)
	n, err := limiter.Call(ctx, db, func(ctx context.Context) (int, error) {
		return 42, nil // a query
	})
	fmt.Println(n, err)
	// Output: 42 <nil>
}

// Submit returns at once with a Future; the tasks wait for slots without goroutines of their own.
func ExampleSubmit() {
	ctx := context.Background()
	l := limiter.New(2)
	var futures []*limiter.Future[int]
	for n := range 6 {
		futures = append(futures, limiter.Submit(ctx, l, func(ctx context.Context) (int, error) {
			return n * n, nil
		}))
	}
	for _, f := range futures {
		v, err := f.Wait(ctx)
		fmt.Print(v, " ", err, "; ")
	}
	fmt.Println()
	// Output: 0 <nil>; 1 <nil>; 4 <nil>; 9 <nil>; 16 <nil>; 25 <nil>;
}

// Wait gives up when its own ctx ends; the task goes on, and a later Wait gets its result.
func ExampleFuture_Wait() {
	ctx := context.Background()
	l := limiter.New(1)
	release := make(chan struct{})
	f := limiter.Submit(ctx, l, func(ctx context.Context) (string, error) {
		<-release // the work
		return "done", nil
	})
	impatient, cancel := context.WithTimeout(ctx, time.Millisecond)
	defer cancel()
	_, err := f.Wait(impatient)
	fmt.Println(err)
	close(release)
	fmt.Println(f.Wait(ctx))
	// Output:
	// context deadline exceeded
	// done <nil>
}

// Done lets a Future take part in a select.
func ExampleFuture_Done() {
	ctx := context.Background()
	l := limiter.New(1)
	f := limiter.Submit(ctx, l, func(ctx context.Context) (int, error) { return 7, nil })
	select {
	case <-f.Done():
		fmt.Println(f.Wait(ctx))
	case <-time.After(time.Minute):
		fmt.Println("too slow")
	}
	// Output: 7 <nil>
}

// Cancel takes a waiting task off the queue; it never runs.
func ExampleFuture_Cancel() {
	ctx := context.Background()
	l := limiter.New(1)
	release := make(chan struct{})
	busy := limiter.Submit(ctx, l, func(ctx context.Context) (int, error) { <-release; return 1, nil })
	queued := limiter.Submit(ctx, l, func(ctx context.Context) (int, error) { return 2, nil })
	fmt.Println("waiting:", l.Stats().Waiting)
	queued.Cancel()
	_, err := queued.Wait(ctx)
	fmt.Println(err, "- waiting:", l.Stats().Waiting)
	close(release)
	fmt.Println(busy.Wait(ctx))
	// Output:
	// waiting: 1
	// context canceled - waiting: 0
	// 1 <nil>
}

// Shutdown turns away new and waiting calls and waits for the running ones.
func ExampleLimiter_Shutdown() {
	ctx := context.Background()
	l := limiter.New(1)
	started, release := make(chan struct{}), make(chan struct{})
	running := limiter.Submit(ctx, l, func(ctx context.Context) (string, error) {
		close(started)
		<-release
		return "finished", nil
	})
	<-started
	queued := limiter.Submit(ctx, l, func(ctx context.Context) (string, error) { return "never", nil })
	time.AfterFunc(10*time.Millisecond, func() { close(release) }) // the running task finishes later

	fmt.Println("shutdown:", l.Shutdown(ctx))
	fmt.Println(running.Wait(ctx))
	_, err := queued.Wait(ctx)
	fmt.Println(err, errors.Is(err, limiter.ErrRejected))
	fmt.Println(l.Do(ctx, func(ctx context.Context) error { return nil }))
	// Output:
	// shutdown: <nil>
	// finished <nil>
	// limiter: closed true
	// limiter: closed
}

// Stats counts every call in one outcome.
func ExampleLimiter_Stats() {
	ctx := context.Background()
	l := limiter.New(2, limiter.WithAcquireTimeout(0))
	_ = l.Do(ctx, func(ctx context.Context) error { return nil })
	_ = l.Do(ctx, func(ctx context.Context) error { return errors.New("no") })
	_ = l.Do(ctx, func(ctx context.Context) error { panic("oops") })
	_ = l.Do(ctx, func(ctx context.Context) error {
		return l.Do(ctx, func(ctx context.Context) error {
			return l.Do(ctx, func(ctx context.Context) error { return nil }) // a third slot: rejected
		})
	})
	fmt.Printf("%+v\n", l.Stats())
	// Output: {Limit:2 InFlight:0 Waiting:0 Overrunning:0 RateWaiting:0 Submitted:6 Completed:1 Failed:4 Rejected:1 TimedOut:0 Cancelled:0 Panicked:1 LimitChanges:0}
}

// A task that ignores its context overruns its timeout: the caller has its error at once, the
// task keeps its slot until it returns.
func ExampleWithTaskTimeout() {
	ctx := context.Background()
	l := limiter.New(1, limiter.WithTaskTimeout(10*time.Millisecond))
	release := make(chan struct{})
	returned := make(chan struct{})
	err := l.Do(ctx, func(ctx context.Context) error {
		defer close(returned)
		<-release // ignores ctx
		return nil
	})
	fmt.Println(err)
	fmt.Println("overrunning:", l.Stats().Overrunning, "in flight:", l.Stats().InFlight)
	close(release)
	<-returned
	_ = l.Shutdown(ctx) // waits until the slot is back
	fmt.Println("overrunning:", l.Stats().Overrunning, "in flight:", l.Stats().InFlight)
	// Output:
	// limiter: task timed out
	// overrunning: 1 in flight: 1
	// overrunning: 0 in flight: 0
}

// With a bounded queue, a burst beyond it is rejected at once.
func ExampleWithMaxWaiting() {
	ctx := context.Background()
	l := limiter.New(1, limiter.WithMaxWaiting(1))
	release := make(chan struct{})
	busy := limiter.Submit(ctx, l, func(ctx context.Context) (int, error) { <-release; return 0, nil })
	queued := limiter.Submit(ctx, l, func(ctx context.Context) (int, error) { return 1, nil })
	err := l.Do(ctx, func(ctx context.Context) error { return nil })
	fmt.Println(err, errors.Is(err, limiter.ErrTooManyWaiting))
	close(release)
	_, _ = busy.Wait(ctx)
	fmt.Println(queued.Wait(ctx))
	// Output:
	// limiter: rejected: too many waiting true
	// 1 <nil>
}

// A log record for each rejection, timeout and panic; none for calls that go well.
func ExampleWithLogger() {
	quiet := func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey || a.Key == "wait" {
			return slog.Attr{} // vary from run to run
		}
		return a
	}
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{ReplaceAttr: quiet}))
	ctx := context.Background()
	l := limiter.New(1, limiter.WithName("db"), limiter.WithLogger(logger), limiter.WithAcquireTimeout(0))
	_ = l.Do(ctx, func(ctx context.Context) error {
		return l.Do(ctx, func(ctx context.Context) error { return nil })
	})
	// Output: level=WARN msg="limiter: call rejected" limiter=db error="limiter: rejected: no slot within the acquire timeout"
}

// A panic in a task is that call's error, with the stack; the limiter goes on.
func ExamplePanicError() {
	ctx := context.Background()
	l := limiter.New(1)
	err := l.Do(ctx, func(ctx context.Context) error { panic("bad input") })
	var pe *limiter.PanicError
	fmt.Println(errors.As(err, &pe), pe.Value, len(pe.Stack) > 0)
	fmt.Println(l.Do(ctx, func(ctx context.Context) error { return nil }))
	// Output:
	// true bad input true
	// <nil>
}

// New with options, as a service would set up its limiters.
func ExampleNew() {
	db := limiter.New(10, limiter.WithName("db"), limiter.WithMaxWaiting(100), limiter.WithAcquireTimeout(time.Second))
	llm := limiter.New(40, limiter.WithName("llm"), limiter.WithAcquireTimeout(30*time.Second),
		limiter.WithTaskTimeout(5*time.Minute))
	fmt.Println(db.Stats().Limit, llm.Stats().Limit)
	// Output: 10 40
}
