package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goloom/loom/fleet"
)

// Three replicas share one limit of 2 calls in flight: each replica has its own Semaphore, and
// the backend (here in memory; in production Redis, through fleet/redisfleet) holds the leases.
func Example() {
	backend := fleet.NewMemory()
	var inFlight, most atomic.Int64
	var wg sync.WaitGroup
	for range 3 { // three replicas
		sem := fleet.New(backend, "llm-api", 2, fleet.WithLease(time.Second))
		defer sem.Close()
		for range 4 { // four callers in each
			wg.Go(func() {
				p, err := sem.Acquire(context.Background(), 1)
				if err != nil {
					fmt.Println(err)
					return
				}
				defer p.Release()
				n := inFlight.Add(1)
				for old := most.Load(); n > old && !most.CompareAndSwap(old, n); old = most.Load() {
				}
				time.Sleep(time.Millisecond) // the call
				inFlight.Add(-1)
			})
		}
	}
	wg.Wait()
	fmt.Println("calls in flight at most:", most.Load())
	// Output: calls in flight at most: 2
}

func ExampleNew() {
	sem := fleet.New(fleet.NewMemory(), "llm-api", 40, fleet.WithLease(15*time.Second))
	defer sem.Close()
	p, err := sem.Acquire(context.Background(), 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Release()
	fmt.Println("holding", p.N(), "of", sem.Capacity(), "permits of", sem.Name())
	// Output: holding 1 of 40 permits of llm-api
}

func ExampleSemaphore_Acquire() {
	backend := fleet.NewMemory()
	replicaA := fleet.New(backend, "db", 1, fleet.WithLease(time.Second))
	replicaB := fleet.New(backend, "db", 1, fleet.WithLease(time.Second))
	defer replicaA.Close()
	defer replicaB.Close()

	a, _ := replicaA.Acquire(context.Background(), 1)
	got := make(chan *fleet.Permit)
	go func() {
		b, _ := replicaB.Acquire(context.Background(), 1) // waits: replica A holds the only permit
		got <- b
	}()
	time.Sleep(10 * time.Millisecond)
	a.Release() // replica B is told at once
	b := <-got
	fmt.Println("B's token is larger:", b.Token() > a.Token())
	b.Release()
	// Output: B's token is larger: true
}

func ExampleSemaphore_AcquireTimeout() {
	backend := fleet.NewMemory()
	sem := fleet.New(backend, "db", 1, fleet.WithLease(time.Second))
	defer sem.Close()
	p, _ := sem.Acquire(context.Background(), 1)
	defer p.Release()

	_, err := sem.AcquireTimeout(context.Background(), 1, 20*time.Millisecond)
	fmt.Println(err)
	fmt.Println("a deadline error:", errors.Is(err, context.DeadlineExceeded))
	// Output:
	// fleet: acquire timed out
	// a deadline error: true
}

func ExampleSemaphore_Stats() {
	sem := fleet.New(fleet.NewMemory(), "db", 4, fleet.WithLease(time.Second))
	defer sem.Close()
	p, _ := sem.Acquire(context.Background(), 3)
	st := sem.Stats()
	fmt.Printf("held %d of %d, %d round trip\n", st.Held, st.Capacity, st.RoundTrips)
	p.Release()
	st = sem.Stats()
	fmt.Printf("acquired %d, released %d, %d round trips\n", st.Acquired, st.Released, st.RoundTrips)
	// Output:
	// held 3 of 4, 1 round trip
	// acquired 1, released 1, 2 round trips
}

// Guarded work runs under the permit's context: if the lease is lost (here, this replica is cut
// off from the backend, so it cannot renew), the work is cancelled with ErrLeaseLost before the
// backend lets another replica in.
func ExamplePermit_WithContext() {
	backend := fleet.NewMemory()
	sem := fleet.New(backend, "db", 1, fleet.WithLease(time.Second), fleet.WithLogger(nil))
	defer sem.Close()
	p, _ := sem.Acquire(context.Background(), 1)
	defer p.Release()
	ctx, stop := p.WithContext(context.Background())
	defer stop()

	backend.SetDown(true) // no renewal gets through
	<-ctx.Done()
	fmt.Println(context.Cause(ctx))
	// Output: fleet: lease lost
}

func ExampleWhenUnavailable() {
	backend := fleet.NewMemory()
	strict := fleet.New(backend, "api", 10, fleet.WithLogger(nil))
	lenient := fleet.New(backend, "api", 10, fleet.WithLogger(nil),
		fleet.WhenUnavailable(fleet.Degrade(2))) // at most 2 per replica while the backend is down
	defer strict.Close()
	defer lenient.Close()

	backend.SetDown(true)
	_, err := strict.Acquire(context.Background(), 1)
	fmt.Println("strict:", errors.Is(err, fleet.ErrUnavailable))
	p, err := lenient.Acquire(context.Background(), 2)
	fmt.Println("lenient:", err, p.Degraded())
	_, err = lenient.AcquireTimeout(context.Background(), 1, 10*time.Millisecond)
	fmt.Println("lenient, a third:", err)
	p.Release()
	// Output:
	// strict: true
	// lenient: <nil> true
	// lenient, a third: fleet: acquire timed out
}

// A backend that loses its data (a Redis restarted without persistence): the permit held across
// the loss registers again, and new permits wait one lease TTL, so the bound holds throughout.
// The pause is in Stats (and logged once, with its reason).
func ExampleMemory_Restart() {
	backend := fleet.NewMemory()
	sem := fleet.New(backend, "api", 2, fleet.WithLease(time.Second), fleet.WithLogger(nil))
	defer sem.Close()
	p, _ := sem.Acquire(context.Background(), 1)

	backend.Restart()
	fmt.Println("held on the backend after the loss:", backend.Held("api"))
	_, err := sem.AcquireTimeout(context.Background(), 1, 0) // sees the loss
	fmt.Println("a new permit at once:", err)
	fmt.Println("paused:", !sem.Stats().PausedUntil.IsZero())
	for backend.Held("api") == 0 { // seeing the loss, the holder renews at once: it registers again
		time.Sleep(time.Millisecond)
	}
	fmt.Println("held after the renewal:", backend.Held("api"))
	fmt.Println("still ours:", p.Context().Err() == nil)
	p.Release()
	// Output:
	// held on the backend after the loss: 0
	// a new permit at once: fleet: acquire timed out
	// paused: true
	// held after the renewal: 1
	// still ours: true
}

func ExampleNewMemory() {
	backend := fleet.NewMemory()
	sem := fleet.New(backend, "api", 3, fleet.WithLease(time.Second))
	defer sem.Close()
	p, _ := sem.Acquire(context.Background(), 2)
	fmt.Println("held:", backend.Held("api"), "round trips:", backend.RoundTrips())
	p.Release()
	fmt.Println("held:", backend.Held("api"), "round trips:", backend.RoundTrips())
	// Output:
	// held: 2 round trips: 1
	// held: 0 round trips: 2
}

func ExampleNewRate() {
	backend := fleet.NewMemory()
	// Every replica's Rate of this name shares one bucket: 100 starts per second, bursts of 3.
	rate := fleet.NewRate(backend, "llm-api", 100, 3)
	for i := range 5 {
		ok, _ := rate.Allow(context.Background())
		fmt.Println("call", i+1, "may start now:", ok)
	}
	// Output:
	// call 1 may start now: true
	// call 2 may start now: true
	// call 3 may start now: true
	// call 4 may start now: false
	// call 5 may start now: false
}

// A caller with a deadline learns at once whether the next token comes in time, and gives it
// back if it leaves before using it.
func ExampleRate_Reserve() {
	rate := fleet.NewRate(fleet.NewMemory(), "llm-api", 2, 1) // one start every 500 ms
	_ = rate.Wait(context.Background())                       // the burst

	res, _ := rate.Reserve(context.Background(), 100*time.Millisecond)
	fmt.Println("within 100ms:", res.OK(), "- it comes in", res.Delay().Round(100*time.Millisecond))
	res, _ = rate.Reserve(context.Background(), time.Second)
	fmt.Println("within 1s:", res.OK())
	res.Cancel() // not used after all: the next caller gets it
	res, _ = rate.Reserve(context.Background(), time.Second)
	fmt.Println("the next caller's wait:", res.Delay().Round(100*time.Millisecond))
	// Output:
	// within 100ms: false - it comes in 500ms
	// within 1s: true
	// the next caller's wait: 500ms
}

func ExampleRate_Wait() {
	rate := fleet.NewRate(fleet.NewMemory(), "llm-api", 50, 1) // one start every 20 ms
	start := time.Now()
	for range 3 {
		if err := rate.Wait(context.Background()); err != nil {
			fmt.Println(err)
			return
		}
	}
	fmt.Println("three starts took at least 40ms:", time.Since(start) >= 40*time.Millisecond)
	// Output: three starts took at least 40ms: true
}

// Close gives back every permit the Semaphore holds, in one round trip, and fails its waiters;
// the permits' contexts say why.
func ExampleSemaphore_Close() {
	backend := fleet.NewMemory()
	sem := fleet.New(backend, "api", 2, fleet.WithLease(time.Second))
	p, _ := sem.Acquire(context.Background(), 2)
	fmt.Println("held:", backend.Held("api"))
	fmt.Println("close:", sem.Close())
	fmt.Println("held:", backend.Held("api"))
	fmt.Println("the permit's cause:", context.Cause(p.Context()))
	_, err := sem.Acquire(context.Background(), 1)
	fmt.Println("acquire after close:", err)
	// Output:
	// held: 2
	// close: <nil>
	// held: 0
	// the permit's cause: fleet: lease lost: fleet: semaphore closed
	// acquire after close: fleet: semaphore closed
}

// A guarded resource keeps the largest token it has seen and refuses smaller ones: a holder whose
// lease was lost without its knowing carries a smaller token than whoever was admitted after it.
func ExamplePermit_Token() {
	sem := fleet.New(fleet.NewMemory(), "db", 1, fleet.WithLease(time.Second))
	defer sem.Close()
	var newest uint64
	write := func(token uint64) error {
		if token < newest {
			return errors.New("refused: a newer holder exists")
		}
		newest = token
		return nil
	}
	first, _ := sem.Acquire(context.Background(), 1)
	stale := first.Token()
	first.Release()
	second, _ := sem.Acquire(context.Background(), 1)
	fmt.Println("second writes:", write(second.Token()))
	fmt.Println("first, late, writes:", write(stale))
	second.Release()
	// Output:
	// second writes: <nil>
	// first, late, writes: refused: a newer holder exists
}

// A release that cannot reach the backend returns at once; the Semaphore gives the permit back
// once the backend answers again.
func ExamplePermit_Release() {
	backend := fleet.NewMemory()
	sem := fleet.New(backend, "api", 1, fleet.WithLease(time.Minute), fleet.WithLogger(nil))
	defer sem.Close()
	p, _ := sem.Acquire(context.Background(), 1)
	backend.SetDown(true)
	p.Release() // the backend is down: retried in the background
	fmt.Println("held on the backend while it is down:", backend.Held("api"))
	backend.SetDown(false)
	for backend.Held("api") != 0 { // the retry comes within a second
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Println("held once it is back:", backend.Held("api"))
	// Output:
	// held on the backend while it is down: 1
	// held once it is back: 0
}

// A frozen backend (a Redis stopped with SIGSTOP) costs a timed Acquire its time, not the
// client's timeout.
func ExampleMemory_Freeze() {
	backend := fleet.NewMemory()
	sem := fleet.New(backend, "api", 1, fleet.WithLease(time.Second), fleet.WithLogger(nil))
	defer sem.Close()
	backend.Freeze(true)
	_, err := sem.AcquireTimeout(context.Background(), 1, 50*time.Millisecond)
	fmt.Println(err)
	backend.Freeze(false)
	p, err := sem.Acquire(context.Background(), 1)
	fmt.Println("thawed:", err)
	p.Release()
	// Output:
	// fleet: acquire timed out
	// thawed: <nil>
}

// A backend brought back from an older snapshot (an RDB taken before the last grant) lacks a
// lease still held: nothing is admitted beside it, and the holder's lease registers again.
func ExampleMemory_Restore() {
	backend := fleet.NewMemory()
	a := fleet.New(backend, "api", 1, fleet.WithLease(time.Second), fleet.WithLogger(nil))
	b := fleet.New(backend, "api", 1, fleet.WithLease(time.Second), fleet.WithLogger(nil))
	defer a.Close()
	defer b.Close()
	snap := backend.Snapshot() // nothing held yet
	p, _ := a.Acquire(context.Background(), 1)
	backend.Restore(snap)
	fmt.Println("held on the restored backend:", backend.Held("api"))
	_, err := b.AcquireTimeout(context.Background(), 1, 0)
	fmt.Println("another process at once:", err)
	for backend.Held("api") == 0 { // the holder registers again
		time.Sleep(time.Millisecond)
	}
	fmt.Println("held again:", backend.Held("api"), "- still a's:", p.Context().Err() == nil)
	p.Release()
	// Output:
	// held on the restored backend: 0
	// another process at once: fleet: acquire timed out
	// held again: 1 - still a's: true
}

func ExampleDegrade() {
	backend := fleet.NewMemory()
	sem := fleet.New(backend, "api", 10, fleet.WithLogger(nil),
		fleet.WhenUnavailable(fleet.Degrade(2))) // 2 per process while the backend is down, leases included
	defer sem.Close()
	held, _ := sem.Acquire(context.Background(), 1) // a lease
	backend.SetDown(true)
	p, err := sem.Acquire(context.Background(), 1)
	fmt.Println("degraded:", err, p.Degraded())
	_, err = sem.AcquireTimeout(context.Background(), 1, 10*time.Millisecond)
	fmt.Println("a third (the lease counts):", err)
	p.Release()
	held.Release()
	// Output:
	// degraded: <nil> true
	// a third (the lease counts): fleet: acquire timed out
}

func ExampleRate_Allow() {
	rate := fleet.NewRate(fleet.NewMemory(), "api", 1, 2) // one a second, bursts of 2
	for range 3 {
		ok, err := rate.Allow(context.Background())
		fmt.Println(ok, err)
	}
	// Output:
	// true <nil>
	// true <nil>
	// false <nil>
}
