package semaphore_test

import (
	"context"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"github.com/goloom/loom/semaphore"
)

// The benchmarks against x/sync's semaphore, a channel and a mutex, with these loops as their loom
// rows, and the fairness benchmark are in the bench module (bench/semaphore_test.go); these are
// for comparing loom with itself.

// BenchmarkUncontended is one goroutine doing Acquire(ctx, 1) + Release(1): the fast path, fair,
// unfair, and with a cancellable context (a real request's) instead of Background.
func BenchmarkUncontended(b *testing.B) {
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
	b.Run("impl=loom-cancelctx", func(b *testing.B) {
		b.ReportAllocs()
		s := semaphore.New(1)
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		for b.Loop() {
			_ = s.Acquire(ctx, 1)
			s.Release(1)
		}
	})
}

// peer is one configuration of the semaphore under comparison; Contended calls it through
// closures, as bench/semaphore_test.go does for loom and its peers, so the figures compare.
type peer struct {
	name string
	make func(capacity int64) (acquire, release func())
}

func peers() []peer {
	ctx := context.Background()
	return []peer{
		{name: "loom", make: func(c int64) (func(), func()) {
			s := semaphore.New(c)
			return func() { _ = s.Acquire(ctx, 1) }, func() { s.Release(1) }
		}},
		{name: "loom-unfair", make: func(c int64) (func(), func()) {
			s := semaphore.New(c, semaphore.Unfair())
			return func() { _ = s.Acquire(ctx, 1) }, func() { s.Release(1) }
		}},
	}
}

// BenchmarkContended has GOMAXPROCS goroutines, then 64, hammering a semaphore of capacity 1 and
// then 4, each holding its permit for a moment of work. The b.N operations are split evenly
// between the goroutines (not b.RunParallel, whose estimate of b.N goes wild when most of 64
// goroutines are parked).
func BenchmarkContended(b *testing.B) {
	for _, goroutines := range []int{0, 64} { // 0: GOMAXPROCS
		for _, capacity := range []int64{1, 4} {
			for _, p := range peers() {
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
