package scope_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/goloom/loom/scope"
)

// The benchmarks against errgroup, conc and bare goroutines, with these loops as their loom
// rows, are in the bench module (bench/scope_test.go); these are for comparing loom with itself.

// perSubtask reports the loop's time per subtask, so that the sizes compare.
func perSubtask(b *testing.B, n int) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/subtask")
}

// BenchmarkForkJoin: Open + n no-op forks + Join, through Fork, through Go, and through Go on a
// scope limited to 8 subtasks at once (the semaphore WithLimit makes is part of each operation).
// The start=closure rows start each fork's goroutine through a closure of its own, as `go
// st.start()` would, instead of through the subtask's own allocation (see launch.go):
//
//	go test -run '^$' -bench 'ForkJoin/n=100/' -count 10 ./scope | tee fj.txt
//	benchstat -col /start fj.txt
func BenchmarkForkJoin(b *testing.B) {
	ctx := context.Background()
	b.Run("n=100/start=closure", func(b *testing.B) {
		was := scope.SetLaunch(false)
		defer scope.SetLaunch(was)
		b.ReportAllocs()
		for b.Loop() {
			s := scope.Open(ctx)
			for range 100 {
				scope.Fork(s, func(context.Context) (int, error) { return 0, nil })
			}
			if err := s.Join(); err != nil {
				b.Fatal(err)
			}
			s.Close()
		}
		perSubtask(b, 100)
	})
	b.Run("n=100/start=launch", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			s := scope.Open(ctx)
			for range 100 {
				scope.Fork(s, func(context.Context) (int, error) { return 0, nil })
			}
			if err := s.Join(); err != nil {
				b.Fatal(err)
			}
			s.Close()
		}
		perSubtask(b, 100)
	})
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
		// The floor: bare goroutines and a WaitGroup (the other peers are in bench/).
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
		b.Run(fmt.Sprintf("n=%d/scope-limit8", n), func(b *testing.B) {
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
	}
}

// BenchmarkOpenJoinEmpty: Open, Join and Close of a scope with no subtask — what a scope costs on
// its own (and, with LOOM_INSPECT=scopes, what recording it adds).
func BenchmarkOpenJoinEmpty(b *testing.B) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		s := scope.Open(ctx)
		if err := s.Join(); err != nil {
			b.Fatal(err)
		}
		s.Close()
	}
}
