package limiter_test

import (
	"context"
	"testing"
	"time"

	"github.com/goloom/loom/limiter"
	"github.com/goloom/loom/limiter/adaptive"
	"github.com/goloom/loom/semaphore"
)

// The benchmarks against x/sync's semaphore, channels, errgroup, conc and ants, with these loops
// as their loom rows, and the throughput and memory benchmarks are in the bench module
// (bench/limiter_test.go); these are for comparing loom with itself.

// nop is a task; a package variable, so that no loop below can inline it.
var nop = func(context.Context) error { return nil }

// BenchmarkDo: Do without a task timeout, uncontended, beside Call and the bare semaphore the
// limiter wraps (an acquire + call + release).
func BenchmarkDo(b *testing.B) {
	ctx := context.Background()
	b.Run("limiter.Do", func(b *testing.B) {
		l := limiter.New(8)
		b.ReportAllocs()
		for b.Loop() {
			if err := l.Do(ctx, nop); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("limiter.Do+rate", func(b *testing.B) {
		// A bucket that never runs dry: what WithRate adds to an uncontended call.
		l := limiter.New(8, limiter.WithRate(1e9, 1_000_000_000))
		b.ReportAllocs()
		for b.Loop() {
			if err := l.Do(ctx, nop); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("limiter.Do+adaptive", func(b *testing.B) {
		// What WithAdaptive adds to an uncontended call: a mark at the start, a look at the end.
		l := limiter.New(8, limiter.WithAdaptive(adaptive.AIMD{Min: 8, Max: 8}))
		b.ReportAllocs()
		for b.Loop() {
			if err := l.Do(ctx, nop); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("limiter.Call", func(b *testing.B) {
		l := limiter.New(8)
		fn := func(ctx context.Context) (int, error) { return 1, nop(ctx) }
		b.ReportAllocs()
		for b.Loop() {
			if _, err := limiter.Call(ctx, l, fn); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("semaphore", func(b *testing.B) {
		s := semaphore.New(8)
		b.ReportAllocs()
		for b.Loop() {
			if err := s.Acquire(ctx, 1); err != nil {
				b.Fatal(err)
			}
			_ = nop(ctx)
			s.Release(1)
		}
	})
}

// BenchmarkDoParallel: Do from every P at once, limit 8 (the contended fast path), beside the bare
// semaphore used the same way.
func BenchmarkDoParallel(b *testing.B) {
	ctx := context.Background()
	b.Run("limiter.Do", func(b *testing.B) {
		l := limiter.New(8)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_ = l.Do(ctx, nop)
			}
		})
	})
	b.Run("semaphore", func(b *testing.B) {
		s := semaphore.New(8)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if s.Acquire(ctx, 1) == nil {
					_ = nop(ctx)
					s.Release(1)
				}
			}
		})
	})
}

// BenchmarkDoTaskTimeout: the cost of the task-timeout machinery, one timer (the task context's)
// and one goroutine per call, beside Do without it.
func BenchmarkDoTaskTimeout(b *testing.B) {
	ctx := context.Background()
	b.Run("limiter.Do+timeout", func(b *testing.B) {
		l := limiter.New(8, limiter.WithTaskTimeout(time.Minute))
		b.ReportAllocs()
		for b.Loop() {
			if err := l.Do(ctx, nop); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("limiter.Do", func(b *testing.B) {
		l := limiter.New(8)
		b.ReportAllocs()
		for b.Loop() {
			if err := l.Do(ctx, nop); err != nil {
				b.Fatal(err)
			}
		}
	})
}
