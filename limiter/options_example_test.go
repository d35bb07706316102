package limiter_test

import (
	"context"
	"errors"
	"fmt"
	"runtime/pprof"
	"time"

	"github.com/goloom/loom/fleet"
	"github.com/goloom/loom/inspect"
	"github.com/goloom/loom/limiter"
	"github.com/goloom/loom/limiter/adaptive"
)

// The acquire timeout bounds the wait for a slot: a call that gets none in time is rejected,
// counted Rejected, and never runs; with no wait allowed, a full limiter rejects at once.
func ExampleWithAcquireTimeout() {
	ctx := context.Background()
	l := limiter.New(1, limiter.WithAcquireTimeout(10*time.Millisecond))
	release := make(chan struct{})
	busy := limiter.Submit(ctx, l, func(context.Context) (int, error) { <-release; return 0, nil })
	err := l.Do(ctx, func(context.Context) error { return nil }) // waits 10ms for the busy slot
	fmt.Println(err)
	fmt.Println(errors.Is(err, limiter.ErrRejected), errors.Is(err, context.DeadlineExceeded))

	now := limiter.New(1, limiter.WithAcquireTimeout(0)) // never wait
	_ = now.Do(ctx, func(ctx context.Context) error {
		fmt.Println(now.Do(ctx, func(context.Context) error { return nil })) // the only slot is ours
		return nil
	})
	close(release)
	_, _ = busy.Wait(ctx)
	fmt.Println("rejected:", l.Stats().Rejected, now.Stats().Rejected)
	// Output:
	// limiter: rejected: no slot within the acquire timeout
	// true true
	// limiter: rejected: no slot within the acquire timeout
	// rejected: 1 1
}

// Two call starts a minute, in bursts of two, besides at most 10 in flight: the first two calls
// start at once; the third's token would come in about 30 s, later than its acquire timeout
// allows, so it is rejected at once instead of waiting for nothing.
func ExampleWithRate() {
	ctx := context.Background()
	api := limiter.New(10, limiter.WithRate(2.0/60, 2), limiter.WithAcquireTimeout(time.Second))
	for i := range 3 {
		start := time.Now()
		err := api.Do(ctx, func(context.Context) error { return nil })
		fmt.Println(i, err, time.Since(start) < time.Second)
	}
	s := api.Stats()
	fmt.Println("completed", s.Completed, "rejected", s.Rejected)
	// Output:
	// 0 <nil> true
	// 1 <nil> true
	// 2 limiter: rejected: no slot within the acquire timeout true
	// completed 2 rejected 1
}

// One limit across the replicas of a service: two limiters, each with its own Semaphore on one
// backend (an in-memory one here, standing for Redis), share the fleet's single permit. While
// one replica's call holds it, the other's call waits for it within its acquire timeout, and is
// rejected when that runs out; once it is back, the call runs.
func ExampleWithFleet() {
	ctx := context.Background()
	backend := fleet.NewMemory()
	semA := fleet.New(backend, "llm-api", 1, fleet.WithLease(time.Second), fleet.WithLogger(nil))
	semB := fleet.New(backend, "llm-api", 1, fleet.WithLease(time.Second), fleet.WithLogger(nil))
	defer semA.Close()
	defer semB.Close()
	replicaA := limiter.New(10, limiter.WithFleet(semA))
	replicaB := limiter.New(10, limiter.WithFleet(semB), limiter.WithAcquireTimeout(50*time.Millisecond))

	holding, release := make(chan struct{}), make(chan struct{})
	a := limiter.Submit(ctx, replicaA, func(context.Context) (string, error) {
		close(holding) // the fleet's only permit is A's
		<-release
		return "a done", nil
	})
	<-holding
	err := replicaB.Do(ctx, func(context.Context) error { return nil })
	fmt.Println("b:", err)
	close(release)
	fmt.Println(a.Wait(ctx))
	fmt.Println("b:", replicaB.Do(ctx, func(context.Context) error { return nil }))
	// Output:
	// b: limiter: rejected: no slot within the acquire timeout
	// a done <nil>
	// b: <nil>
}

// One rate across the replicas of a service: the bucket lives on the backend, and every
// replica's calls take their tokens from it. One token a minute: replica A's call takes it, and
// replica B's, whose token would come a minute later, is rejected at once.
func ExampleWithFleetRate() {
	ctx := context.Background()
	backend := fleet.NewMemory()
	rateA := fleet.NewRate(backend, "llm-api", 1.0/60, 1, fleet.WithLogger(nil))
	rateB := fleet.NewRate(backend, "llm-api", 1.0/60, 1, fleet.WithLogger(nil))
	replicaA := limiter.New(10, limiter.WithFleetRate(rateA))
	replicaB := limiter.New(10, limiter.WithFleetRate(rateB), limiter.WithAcquireTimeout(time.Second))
	fmt.Println("a:", replicaA.Do(ctx, func(context.Context) error { return nil }))
	start := time.Now()
	fmt.Println("b:", replicaB.Do(ctx, func(context.Context) error { return nil }), time.Since(start) < time.Second)
	// Output:
	// a: <nil>
	// b: limiter: rejected: no slot within the acquire timeout true
}

// An adaptive limit starts at the limit given to New, clamped into the controller's range, and
// moves from there as windows of calls close.
func ExampleWithAdaptive() {
	api := limiter.New(100, limiter.WithAdaptive(adaptive.Gradient{Min: 4, Max: 50}))
	s := api.Stats()
	fmt.Println("limit", s.Limit, "moves", s.LimitChanges)
	// Output: limit 50 moves 0
}

// WithOverload says which errors mean "overloaded": here the downstream's 429s. The calls run
// until the first window closes (about 100 ms of them); half of them were refused, and the
// AIMD controller cuts the limit to what the downstream served — one call at a time from a
// single caller — which its Min raises to 2.
func ExampleWithOverload() {
	ctx := context.Background()
	errTooMany := errors.New("429 too many requests")
	api := limiter.New(8,
		limiter.WithAdaptive(adaptive.AIMD{Min: 2, Max: 8}),
		limiter.WithOverload(func(err error) bool { return errors.Is(err, errTooMany) }))
	calls := 0
	for api.Stats().LimitChanges == 0 {
		calls++
		_ = api.Do(ctx, func(context.Context) error {
			if calls%2 == 0 {
				return errTooMany
			}
			return nil
		})
	}
	fmt.Println("limit", api.Stats().Limit)
	// Output: limit 2
}

// A name is the limiter's in its log records, in package inspect's dumps (with how long its
// oldest waiting call has waited) and in the pprof label loom.limiter of its tasks while
// inspect's Labels are on.
func ExampleWithName() {
	ctx := context.Background()
	l := limiter.New(1, limiter.WithName("checkout-db"))
	release := make(chan struct{})
	busy := limiter.Submit(ctx, l, func(context.Context) (int, error) { <-release; return 0, nil })
	queued := limiter.Submit(ctx, l, func(context.Context) (int, error) { return 0, nil })
	for _, d := range inspect.Snapshot().Limiters {
		if d.Name == "checkout-db" {
			waiting, _ := d.Stats.Get("waiting")
			fmt.Println(d.Name, "waiting", waiting, "oldest waited:", d.OldestWaiting > 0)
		}
	}
	close(release)
	_, _ = busy.Wait(ctx)
	_, _ = queued.Wait(ctx)

	inspect.Enable(inspect.Labels)
	defer inspect.Disable(inspect.Labels)
	_ = l.Do(ctx, func(ctx context.Context) error {
		name, _ := pprof.Label(ctx, "loom.limiter")
		fmt.Println("label:", name)
		return nil
	})
	// Output:
	// checkout-db waiting 1 oldest waited: true
	// label: checkout-db
}
