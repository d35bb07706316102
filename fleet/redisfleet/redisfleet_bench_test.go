package redisfleet_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/goloom/loom/fleet"
	"github.com/goloom/loom/fleet/redisfleet"
	"github.com/goloom/loom/fleet/redisfleet/internal/redistest"
)

// BenchmarkAcquireRelease is an uncontended Acquire and Release (two scripts) beside its floor,
// two bare EVALSHA round trips of a trivial script, on the same Redis, each on a connection of its
// own, interleaved in one run: blocks of 64 fleet pairs and 64 bare pairs alternate, each pair
// timed on its own, so that both see the same machine. It reports the p50 of each pair and their
// ratio, and the time Redis spent running scripts per pair of each (INFO commandstats, read
// between the blocks). A third block, on the bare connection, sends two trivial scripts with the
// keys and arguments of an Acquire and a Release, and replies of their shapes (args-p50-µs,
// args-ratio beside the bare pair): what any two scripts of this protocol cost before they do
// anything. ns/op is the time of the three pairs together.
func BenchmarkAcquireRelease(b *testing.B) {
	srv := redistest.Start(b)
	admin := srv.Client()
	oneConn := func(o *redis.Options) { o.PoolSize, o.MinIdleConns = 1, 1 }
	ctx := context.Background()
	bare := srv.Client(oneConn)
	trivial := redis.NewScript("return 1")
	if err := trivial.Load(ctx, bare).Err(); err != nil {
		b.Fatal(err)
	}
	s := fleet.New(redisfleet.New(srv.Client(oneConn)), "bench", 8, fleet.WithLease(2*time.Second), fleet.WithLogger(nil))
	defer s.Close()
	warmUp(b, s)
	fleetPair := func() {
		p, err := s.Acquire(ctx, 1)
		if err != nil {
			b.Fatal(err)
		}
		p.Release()
	}
	barePair := func() {
		for range 2 {
			if err := trivial.EvalSha(ctx, bare, []string{"bench"}).Err(); err != nil {
				b.Fatal(err)
			}
		}
	}
	keys, _ := redisfleet.Keys("bench")
	keys = keys[:4] // s, l, q, qx: the semaphore scripts' KEYS
	argsAcquire := redis.NewScript("return {1, 1796195696125580, 1796195696125580, 0, 0, 2000000, 0, 7}")
	argsRelease := redis.NewScript("return {1, 0, 7}")
	argsPair := func() {
		m := "0123456789abcdef.1:8:1" // (a member as a Semaphore makes them)
		if err := argsAcquire.Run(ctx, bare, keys, m, "2000000", "1", "800000", "0", "1a2b3c", "0").Err(); err != nil {
			b.Fatal(err)
		}
		if err := argsRelease.Run(ctx, bare, keys, 1, m).Err(); err != nil {
			b.Fatal(err)
		}
	}
	const block = 64
	fleetTimes, bareTimes := make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)
	argsTimes := make([]time.Duration, 0, b.N)
	var fleetUs, bareUs float64
	timed := func(n int, pair func(), into *[]time.Duration) float64 {
		b.StopTimer()
		us0 := scriptMicros(b, admin)
		b.StartTimer()
		for range n {
			t0 := time.Now()
			pair()
			*into = append(*into, time.Since(t0))
		}
		b.StopTimer()
		defer b.StartTimer()
		return scriptMicros(b, admin) - us0
	}
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; done += block {
		n := min(block, b.N-done)
		fleetUs += timed(n, fleetPair, &fleetTimes)
		bareUs += timed(n, barePair, &bareTimes)
		timed(n, argsPair, &argsTimes)
	}
	b.StopTimer()
	fp, bp, ap := p50(fleetTimes), p50(bareTimes), p50(argsTimes)
	b.ReportMetric(float64(fp.Nanoseconds())/1e3, "fleet-p50-µs")
	b.ReportMetric(float64(bp.Nanoseconds())/1e3, "evalsha-p50-µs")
	b.ReportMetric(float64(fp)/float64(bp), "p50-ratio")
	b.ReportMetric(float64(ap.Nanoseconds())/1e3, "args-p50-µs")
	b.ReportMetric(float64(ap)/float64(bp), "args-ratio")
	b.ReportMetric(fleetUs/float64(b.N), "fleet-script-µs")
	b.ReportMetric(bareUs/float64(b.N), "evalsha-script-µs")
}

// p50 returns the median of ds (which it sorts).
func p50(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// warmUp takes a new name past its first-use pause (one lease TTL) and loads the scripts. The
// benchmarks use a lease of 2 s so that this costs little; the lease's length does not change the
// cost of an Acquire or a Release (renewals add a few scripts per second).
func warmUp(b *testing.B, s *fleet.Semaphore) {
	b.Helper()
	p, err := s.AcquireTimeout(context.Background(), 1, s.Lease()+5*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	p.Release()
}

// BenchmarkContention: 4 processes (each its own client and Semaphore) share a capacity of 8,
// with 1, 4 or 16 workers each, every worker acquiring, holding 100µs and releasing. It reports
// round trips (scripts sent) per permit, as counted by the Semaphores and by Redis: they must
// not grow with the number of workers waiting in a process.
func BenchmarkContention(b *testing.B) {
	srv := redistest.Start(b)
	admin := srv.Client()
	for _, workers := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("procs=4/workers=%d", workers), func(b *testing.B) {
			name := fmt.Sprintf("contention-%d", workers)
			var sems []*fleet.Semaphore
			for range 4 {
				s := fleet.New(redisfleet.New(srv.Client()), name, 8, fleet.WithLease(2*time.Second), fleet.WithLogger(nil))
				defer s.Close()
				sems = append(sems, s)
			}
			warmUp(b, sems[0])
			for _, s := range sems { // each process's scripts and subscription in place
				warmUp(b, s)
			}
			var trips0 int64
			for _, s := range sems {
				trips0 += s.Stats().RoundTrips
			}
			scripts0 := scriptCalls(b, admin)
			var left atomic.Int64
			left.Store(int64(b.N))
			b.ResetTimer()
			var wg sync.WaitGroup
			for _, s := range sems {
				for range workers {
					wg.Go(func() {
						for left.Add(-1) >= 0 {
							p, err := s.Acquire(context.Background(), 1)
							if err != nil {
								b.Error(err)
								return
							}
							time.Sleep(100 * time.Microsecond)
							p.Release()
						}
					})
				}
			}
			wg.Wait()
			b.StopTimer()
			var trips int64
			for _, s := range sems {
				trips += s.Stats().RoundTrips
			}
			b.ReportMetric(float64(trips-trips0)/float64(b.N), "trips/permit")
			b.ReportMetric(float64(scriptCalls(b, admin)-scripts0)/float64(b.N), "scripts/permit")
		})
	}
}

// BenchmarkRateReserve is one reservation of a never-empty fleet bucket (one script).
func BenchmarkRateReserve(b *testing.B) {
	srv := redistest.Start(b)
	r := fleet.NewRate(redisfleet.New(srv.Client(func(o *redis.Options) { o.PoolSize = 1 })), "bench", fleet.MaxRate, 1<<30)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		res, err := r.Reserve(ctx, 0)
		if err != nil || !res.OK() {
			b.Fatal(err)
		}
	}
}
