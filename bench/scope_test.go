package bench_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/sourcegraph/conc"
	"github.com/sourcegraph/conc/iter"
	"github.com/sourcegraph/conc/pool"
	"golang.org/x/sync/errgroup"

	"github.com/goloom/loom/scope"
)

// perSubtask reports the loop's time per subtask, so that the sizes compare.
func perSubtask(b *testing.B, n int) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/subtask")
}

// BenchmarkScopeForkJoin: Open + n no-op forks + Join, against the same shape with the peers: bare
// goroutines with a WaitGroup, errgroup.WithContext, conc's WaitGroup and its context pool. The
// -limit8 rows run at most 8 at once: scope.WithLimit(8), errgroup's SetLimit(8) and conc's
// WithMaxGoroutines(8).
func BenchmarkScopeForkJoin(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{1, 10, 100, 1000} {
		b.Run(fmt.Sprintf("n=%d/impl=scope", n), func(b *testing.B) {
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
		b.Run(fmt.Sprintf("n=%d/impl=scope-go", n), func(b *testing.B) {
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
		b.Run(fmt.Sprintf("n=%d/impl=scope-limit8", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				s := scope.Open(ctx, scope.WithLimit(8))
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
		b.Run(fmt.Sprintf("n=%d/impl=go-waitgroup", n), func(b *testing.B) {
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
		b.Run(fmt.Sprintf("n=%d/impl=errgroup", n), func(b *testing.B) {
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
		b.Run(fmt.Sprintf("n=%d/impl=errgroup-limit8", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				g, _ := errgroup.WithContext(ctx)
				g.SetLimit(8)
				for range n {
					g.Go(func() error { return nil })
				}
				if err := g.Wait(); err != nil {
					b.Fatal(err)
				}
			}
			perSubtask(b, n)
		})
		b.Run(fmt.Sprintf("n=%d/impl=conc-waitgroup", n), func(b *testing.B) {
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
		b.Run(fmt.Sprintf("n=%d/impl=conc-pool", n), func(b *testing.B) {
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
		b.Run(fmt.Sprintf("n=%d/impl=conc-pool-limit8", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p := pool.New().WithContext(ctx).WithCancelOnError().WithMaxGoroutines(8)
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

// BenchmarkScopeMap: 10,000 cheap items, at most 8 at a time, against errgroup.SetLimit(8) and
// conc's iter.Mapper with 8 goroutines.
func BenchmarkScopeMap(b *testing.B) {
	ctx := context.Background()
	in := make([]int, 10_000)
	for i := range in {
		in[i] = i
	}
	double := func(_ context.Context, v int) (int, error) { return 2 * v, nil }
	b.Run("impl=scope-limit8", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			out, err := scope.Map(ctx, in, double, scope.WithLimit(8))
			if err != nil || out[len(out)-1] != 2*(len(in)-1) {
				b.Fatal(err)
			}
		}
	})
	b.Run("impl=errgroup-limit8", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			out := make([]int, len(in))
			g, ctx := errgroup.WithContext(ctx)
			g.SetLimit(8)
			for i, v := range in {
				g.Go(func() error {
					r, err := double(ctx, v)
					out[i] = r
					return err
				})
			}
			if err := g.Wait(); err != nil || out[len(out)-1] != 2*(len(in)-1) {
				b.Fatal(err)
			}
		}
	})
	b.Run("impl=conc-iter-8", func(b *testing.B) {
		b.ReportAllocs()
		m := iter.Mapper[int, int]{MaxGoroutines: 8}
		for b.Loop() {
			out := m.Map(in, func(v *int) int { r, _ := double(ctx, *v); return r })
			if out[len(out)-1] != 2*(len(in)-1) {
				b.Fatal("wrong result")
			}
		}
	})
}

// BenchmarkScopeParked: 100,000 subtasks each blocked in time.Sleep(100ms) in one scope, against as
// many bare goroutines with a WaitGroup; ns/op is the wall time of the whole batch. Run it in a
// process of its own: 100k goroutines leave the runtime's list of goroutines long, which slows
// every later benchmark's garbage collections.
func BenchmarkScopeParked(b *testing.B) {
	n := sized(100_000, 10_000)
	const nap = 100 * time.Millisecond
	ctx := context.Background()
	b.Run("impl=scope", func(b *testing.B) {
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
	b.Run("impl=go-waitgroup", func(b *testing.B) {
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

// BenchmarkScopeParkedMemory: the memory of 100,000 parked subtasks, measured while every one of
// them is blocked (on a gate, so that none has finished yet). heap-B/parked is what the heap grew
// by per subtask — the scope's bookkeeping plus the goroutine's closure — and stack-B/parked the
// goroutine stacks (the runtime's floor is 2 KiB). Run it in a process of its own, like
// BenchmarkScopeParked.
func BenchmarkScopeParkedMemory(b *testing.B) {
	n := sized(100_000, 10_000)
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
		b.ReportMetric(heap/float64(b.N)/float64(n), "heap-B/parked")
		b.ReportMetric(stack/float64(b.N)/float64(n), "stack-B/parked")
	}
	b.Run("impl=scope", func(b *testing.B) {
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
	b.Run("impl=go-waitgroup", func(b *testing.B) {
		var wg sync.WaitGroup
		measure(b, func(gate <-chan struct{}, started *sync.WaitGroup) {
			for range n {
				wg.Add(1)
				go func() { started.Done(); <-gate; wg.Done() }()
			}
		}, wg.Wait)
	})
}

// BenchmarkScopeLimitThroughput: 100,000 tasks of about 1µs through a limit of 40, one Fork (or
// Go) per task on a scope with WithLimit(40), against conc's pool.WithMaxGoroutines(40) and
// errgroup's SetLimit(40). The fork blocks while every slot is taken, as theirs do.
func BenchmarkScopeLimitThroughput(b *testing.B) {
	const limit = 40
	tasks := sized(100_000, 10_000)
	ctx := context.Background()
	b.Run("impl=scope.Fork", func(b *testing.B) {
		calibrate(b)
		b.ReportAllocs()
		for b.Loop() {
			s := scope.Open(ctx, scope.WithLimit(limit))
			for range tasks {
				scope.Fork(s, func(context.Context) (struct{}, error) { work(); return struct{}{}, nil })
			}
			if err := s.Join(); err != nil {
				b.Fatal(err)
			}
			s.Close()
		}
	})
	b.Run("impl=scope.Go", func(b *testing.B) {
		calibrate(b)
		b.ReportAllocs()
		for b.Loop() {
			s := scope.Open(ctx, scope.WithLimit(limit))
			for range tasks {
				s.Go(func(context.Context) error { work(); return nil })
			}
			if err := s.Join(); err != nil {
				b.Fatal(err)
			}
			s.Close()
		}
	})
	b.Run("impl=conc", func(b *testing.B) {
		calibrate(b)
		b.ReportAllocs()
		for b.Loop() {
			p := pool.New().WithContext(ctx).WithCancelOnError().WithMaxGoroutines(limit)
			for range tasks {
				p.Go(func(context.Context) error { work(); return nil })
			}
			if err := p.Wait(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("impl=errgroup", func(b *testing.B) {
		calibrate(b)
		b.ReportAllocs()
		for b.Loop() {
			g, _ := errgroup.WithContext(ctx)
			g.SetLimit(limit)
			for range tasks {
				g.Go(func() error { work(); return nil })
			}
			if err := g.Wait(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
