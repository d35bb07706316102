package scope_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/goloom/loom/scope"
	"github.com/sourcegraph/conc"
	"github.com/sourcegraph/conc/pool"
	"golang.org/x/sync/errgroup"
)

// perSubtask reports the loop's time and allocations per subtask, so that the sizes compare.
func perSubtask(b *testing.B, n int) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/subtask")
}

// BenchmarkForkJoin: Open + n no-op forks + Join, against the same shape with the peers (issue 4).
func BenchmarkForkJoin(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{1, 10, 100, 1000} {
		b.Run(fmt.Sprintf("n=%d/scope", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				s := scope.Open(ctx)
				for range n {
					scope.Fork(s, func(context.Context) (int, error) { return 0, nil })
				}
				if err := s.Join(); err != nil {
					b.Fatal(err)
				}
				s.Close()
			}
			perSubtask(b, n)
		})
		b.Run(fmt.Sprintf("n=%d/scope-go", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				s := scope.Open(ctx)
				for range n {
					s.Go(func(context.Context) error { return nil })
				}
				if err := s.Join(); err != nil {
					b.Fatal(err)
				}
				s.Close()
			}
			perSubtask(b, n)
		})
		b.Run(fmt.Sprintf("n=%d/go-waitgroup", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var wg sync.WaitGroup
				for range n {
					wg.Add(1)
					go func() { wg.Done() }()
				}
				wg.Wait()
			}
			perSubtask(b, n)
		})
		b.Run(fmt.Sprintf("n=%d/errgroup", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				g, _ := errgroup.WithContext(ctx)
				for range n {
					g.Go(func() error { return nil })
				}
				if err := g.Wait(); err != nil {
					b.Fatal(err)
				}
			}
			perSubtask(b, n)
		})
		b.Run(fmt.Sprintf("n=%d/conc-waitgroup", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var wg conc.WaitGroup
				for range n {
					wg.Go(func() {})
				}
				wg.Wait()
			}
			perSubtask(b, n)
		})
		b.Run(fmt.Sprintf("n=%d/conc-pool", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p := pool.New().WithContext(ctx).WithCancelOnError()
				for range n {
					p.Go(func(context.Context) error { return nil })
				}
				if err := p.Wait(); err != nil {
					b.Fatal(err)
				}
			}
			perSubtask(b, n)
		})
	}
}

// BenchmarkParked: 100,000 subtasks each blocked in time.Sleep(100ms) in one scope, against as many
// raw goroutines; ns/op is the wall time of the whole batch (issue 4). Run it in a process of its
// own: 100k goroutines leave the runtime's list of goroutines long, which slows every later
// benchmark's garbage collections.
func BenchmarkParked(b *testing.B) {
	const n = 100_000
	const nap = 100 * time.Millisecond
	ctx := context.Background()
	b.Run("scope", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			s := scope.Open(ctx)
			for range n {
				s.Go(func(context.Context) error { time.Sleep(nap); return nil })
			}
			if err := s.Join(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("go-waitgroup", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var wg sync.WaitGroup
			for range n {
				wg.Add(1)
				go func() { time.Sleep(nap); wg.Done() }()
			}
			wg.Wait()
		}
	})
}

// BenchmarkParkedMemory: the memory of 100,000 parked subtasks, measured while every one of them
// is blocked (on a gate, so that none has finished yet). heap-B/parked is what the heap grew by per
// subtask — the scope's bookkeeping plus the goroutine's closure — and stack-B/parked the goroutine
// stacks (the runtime's floor is 2 KiB). Run it in a process of its own, like BenchmarkParked.
func BenchmarkParkedMemory(b *testing.B) {
	const n = 100_000
	ctx := context.Background()
	measure := func(b *testing.B, start func(gate <-chan struct{}, started *sync.WaitGroup), wait func()) {
		var heap, stack float64
		for b.Loop() {
			var before, during runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			gate := make(chan struct{})
			var started sync.WaitGroup
			started.Add(n)
			start(gate, &started)
			started.Wait() // every subtask is running and about to block on the gate
			runtime.ReadMemStats(&during)
			close(gate)
			wait()
			heap += float64(during.HeapAlloc) - float64(before.HeapAlloc)
			stack += float64(during.StackInuse) - float64(before.StackInuse)
		}
		b.ReportMetric(heap/float64(b.N)/n, "heap-B/parked")
		b.ReportMetric(stack/float64(b.N)/n, "stack-B/parked")
	}
	b.Run("scope", func(b *testing.B) {
		var s *scope.Scope
		measure(b, func(gate <-chan struct{}, started *sync.WaitGroup) {
			s = scope.Open(ctx)
			for range n {
				s.Go(func(context.Context) error { started.Done(); <-gate; return nil })
			}
		}, func() {
			if err := s.Join(); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("go-waitgroup", func(b *testing.B) {
		var wg sync.WaitGroup
		measure(b, func(gate <-chan struct{}, started *sync.WaitGroup) {
			for range n {
				wg.Add(1)
				go func() { started.Done(); <-gate; wg.Done() }()
			}
		}, wg.Wait)
	})
}
