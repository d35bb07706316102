package bench_test

import (
	"context"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	xsem "golang.org/x/sync/semaphore"

	"github.com/goloom/loom/semaphore"
)

// semPeer is one semaphore implementation under comparison.
type semPeer struct {
	name string
	make func(capacity int64) (acquire, release func())
}

func semPeers() []semPeer {
	ctx := context.Background()
	return []semPeer{
		{name: "loom", make: func(c int64) (func(), func()) {
			s := semaphore.New(c)
			return func() { _ = s.Acquire(ctx, 1) }, func() { s.Release(1) }
		}},
		{name: "loom-unfair", make: func(c int64) (func(), func()) {
			s := semaphore.New(c, semaphore.Unfair())
			return func() { _ = s.Acquire(ctx, 1) }, func() { s.Release(1) }
		}},
		{name: "xsync", make: func(c int64) (func(), func()) {
			s := xsem.NewWeighted(c)
			return func() { _ = s.Acquire(ctx, 1) }, func() { s.Release(1) }
		}},
		{name: "chan", make: func(c int64) (func(), func()) {
			ch := make(chan struct{}, c)
			return func() { ch <- struct{}{} }, func() { <-ch }
		}},
	}
}

// BenchmarkSemaphoreUncontended is one goroutine doing Acquire(ctx, 1) + Release(1): the fast path.
// The loops are written out per peer so no indirection is measured.
func BenchmarkSemaphoreUncontended(b *testing.B) {
	ctx := context.Background()
	b.Run("impl=loom", func(b *testing.B) {
		b.ReportAllocs()
		s := semaphore.New(1)
		for b.Loop() {
			_ = s.Acquire(ctx, 1)
			s.Release(1)
		}
	})
	b.Run("impl=loom-unfair", func(b *testing.B) {
		b.ReportAllocs()
		s := semaphore.New(1, semaphore.Unfair())
		for b.Loop() {
			_ = s.Acquire(ctx, 1)
			s.Release(1)
		}
	})
	b.Run("impl=loom-cancelctx", func(b *testing.B) { // a real request context, not Background
		b.ReportAllocs()
		s := semaphore.New(1)
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		for b.Loop() {
			_ = s.Acquire(ctx, 1)
			s.Release(1)
		}
	})
	b.Run("impl=xsync", func(b *testing.B) {
		b.ReportAllocs()
		s := xsem.NewWeighted(1)
		for b.Loop() {
			_ = s.Acquire(ctx, 1)
			s.Release(1)
		}
	})
	b.Run("impl=chan", func(b *testing.B) {
		b.ReportAllocs()
		ch := make(chan struct{}, 1)
		for b.Loop() {
			ch <- struct{}{}
			<-ch
		}
	})
	b.Run("impl=mutex", func(b *testing.B) { // the floor of a lock-based design
		b.ReportAllocs()
		var mu sync.Mutex
		n := 1
		for b.Loop() {
			mu.Lock()
			n--
			mu.Unlock()
			mu.Lock()
			n++
			mu.Unlock()
		}
	})
}

// BenchmarkSemaphoreContended has GOMAXPROCS goroutines, then 64, hammering a semaphore of capacity
// 1 and then 4, each holding its permit for a moment of work. The b.N operations are split evenly
// between the goroutines (not b.RunParallel, whose estimate of b.N goes wild when most of 64
// goroutines are parked).
func BenchmarkSemaphoreContended(b *testing.B) {
	for _, goroutines := range []int{0, 64} { // 0: GOMAXPROCS
		for _, capacity := range []int64{1, 4} {
			for _, p := range semPeers() {
				name := "g=procs"
				if goroutines > 0 {
					name = "g=64"
				}
				b.Run(name+"/cap="+strconv.FormatInt(capacity, 10)+"/impl="+p.name, func(b *testing.B) {
					b.ReportAllocs()
					g := goroutines
					if g == 0 {
						g = runtime.GOMAXPROCS(0)
					}
					acquire, release := p.make(capacity)
					start := make(chan struct{})
					var wg sync.WaitGroup
					for i := range g {
						n := b.N / g
						if i < b.N%g {
							n++
						}
						wg.Add(1)
						go func() {
							defer wg.Done()
							<-start
							x := 0
							for range n {
								acquire()
								x++
								release()
							}
							_ = x
						}()
					}
					b.ResetTimer()
					close(start)
					wg.Wait()
				})
			}
		}
	}
}

// BenchmarkSemaphoreFairness has 64 goroutines hammer a capacity-1 semaphore and reports, over a
// 100 ms window per iteration, Jain's fairness index of the acquisitions per goroutine (1 is
// perfectly even) and the 99th percentile of the time an Acquire waited. The window opens only once
// every goroutine has acquired at least once: before that, the first goroutine the scheduler runs
// has the semaphore to itself, which says something about the scheduler, not the semaphore. Run it
// with -benchtime=1x or a few x.
func BenchmarkSemaphoreFairness(b *testing.B) {
	const goroutines = 64
	for _, p := range semPeers() {
		b.Run("impl="+p.name, func(b *testing.B) {
			var total [goroutines]int64
			var waits []time.Duration
			for b.Loop() {
				acquire, release := p.make(1)
				var counts [goroutines]atomic.Int64
				var started sync.WaitGroup
				var measuring, stop atomic.Bool
				var wg sync.WaitGroup
				var mu sync.Mutex
				started.Add(goroutines)
				for g := range goroutines {
					wg.Add(1)
					go func() {
						defer wg.Done()
						local := make([]time.Duration, 0, 4096)
						first := true
						for !stop.Load() {
							start := time.Now()
							acquire()
							if measuring.Load() {
								local = append(local, time.Since(start))
							}
							counts[g].Add(1)
							release()
							if first {
								started.Done()
								first = false
							}
						}
						mu.Lock()
						waits = append(waits, local...)
						mu.Unlock()
					}()
				}
				started.Wait()
				var before [goroutines]int64
				for g := range counts {
					before[g] = counts[g].Load()
				}
				measuring.Store(true)
				time.Sleep(100 * time.Millisecond)
				for g := range counts {
					total[g] += counts[g].Load() - before[g]
				}
				stop.Store(true)
				wg.Wait()
			}
			var sum, sumSq float64
			for _, c := range total {
				sum += float64(c)
				sumSq += float64(c) * float64(c)
			}
			slices.Sort(waits)
			b.ReportMetric(sum*sum/(goroutines*sumSq), "jain")
			b.ReportMetric(float64(waits[len(waits)*99/100].Microseconds()), "p99-wait-µs")
			b.ReportMetric(sum/float64(b.N)/0.1, "acquires/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}
