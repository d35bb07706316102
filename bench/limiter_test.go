package bench_test

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/panjf2000/ants/v2"
	"github.com/sourcegraph/conc/pool"
	"golang.org/x/sync/errgroup"
	xsemaphore "golang.org/x/sync/semaphore"
	"golang.org/x/time/rate"

	"github.com/goloom/loom/limiter"
	"github.com/goloom/loom/semaphore"
)

// nop is a task; a package variable, so that no loop below can inline it.
var nop = func(context.Context) error { return nil }

// BenchmarkLimiterDo: Do without a task timeout, uncontended, beside Call, the bare loom semaphore
// the limiter wraps, and an acquire + call + release of x/sync's semaphore and of a channel.
func BenchmarkLimiterDo(b *testing.B) {
	ctx := context.Background()
	b.Run("impl=limiter.Do", func(b *testing.B) {
		l := limiter.New(8)
		b.ReportAllocs()
		for b.Loop() {
			if err := l.Do(ctx, nop); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("impl=limiter.Call", func(b *testing.B) {
		l := limiter.New(8)
		fn := func(ctx context.Context) (int, error) { return 1, nop(ctx) }
		b.ReportAllocs()
		for b.Loop() {
			if _, err := limiter.Call(ctx, l, fn); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("impl=loom-semaphore", func(b *testing.B) {
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
	b.Run("impl=x-sync-semaphore", func(b *testing.B) {
		s := xsemaphore.NewWeighted(8)
		b.ReportAllocs()
		for b.Loop() {
			if err := s.Acquire(ctx, 1); err != nil {
				b.Fatal(err)
			}
			_ = nop(ctx)
			s.Release(1)
		}
	})
	b.Run("impl=chan-semaphore", func(b *testing.B) {
		s := make(chan struct{}, 8)
		b.ReportAllocs()
		for b.Loop() {
			s <- struct{}{}
			_ = nop(ctx)
			<-s
		}
	})
}

// BenchmarkLimiterDoParallel: Do from every P at once, limit 8 (the contended fast path), beside
// the bare loom semaphore and a channel semaphore used the same way.
func BenchmarkLimiterDoParallel(b *testing.B) {
	ctx := context.Background()
	b.Run("impl=limiter.Do", func(b *testing.B) {
		l := limiter.New(8)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_ = l.Do(ctx, nop)
			}
		})
	})
	b.Run("impl=loom-semaphore", func(b *testing.B) {
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
	b.Run("impl=chan-semaphore", func(b *testing.B) {
		s := make(chan struct{}, 8)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				s <- struct{}{}
				_ = nop(ctx)
				<-s
			}
		})
	})
}

// BenchmarkLimiterDoTaskTimeout: the cost of the task-timeout machinery, one timer (the task
// context's) and one goroutine per call, beside Do without it and the same done by hand.
func BenchmarkLimiterDoTaskTimeout(b *testing.B) {
	ctx := context.Background()
	b.Run("impl=limiter.Do+timeout", func(b *testing.B) {
		l := limiter.New(8, limiter.WithTaskTimeout(time.Minute))
		b.ReportAllocs()
		for b.Loop() {
			if err := l.Do(ctx, nop); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("impl=limiter.Do", func(b *testing.B) {
		l := limiter.New(8)
		b.ReportAllocs()
		for b.Loop() {
			if err := l.Do(ctx, nop); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("impl=by-hand", func(b *testing.B) {
		// semaphore + context.WithTimeoutCause + goroutine + channel: what a caller would write.
		s := semaphore.New(8)
		b.ReportAllocs()
		for b.Loop() {
			if err := s.Acquire(ctx, 1); err != nil {
				b.Fatal(err)
			}
			tctx, cancel := context.WithTimeoutCause(ctx, time.Minute, limiter.ErrTaskTimeout)
			done := make(chan error, 1)
			go func() {
				defer s.Release(1)
				done <- nop(tctx)
			}()
			select {
			case err := <-done:
				_ = err
			case <-tctx.Done():
			}
			cancel()
		}
	})
}

// BenchmarkLimiterRate: an uncontended call under a rate limit whose bucket never runs dry —
// limiter.WithRate, which takes the token in the limiter's own queue, beside what a caller writes
// without it (x/time/rate's Wait, then Do), and Do alone.
func BenchmarkLimiterRate(b *testing.B) {
	ctx := context.Background()
	const perSecond, burst = 1e9, 1_000_000_000
	b.Run("impl=limiter.Do+WithRate", func(b *testing.B) {
		l := limiter.New(8, limiter.WithRate(perSecond, burst))
		b.ReportAllocs()
		for b.Loop() {
			if err := l.Do(ctx, nop); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("impl=x-time-rate.Wait+limiter.Do", func(b *testing.B) {
		l := limiter.New(8)
		r := rate.NewLimiter(rate.Limit(perSecond), burst)
		b.ReportAllocs()
		for b.Loop() {
			if err := r.Wait(ctx); err != nil {
				b.Fatal(err)
			}
			if err := l.Do(ctx, nop); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("impl=limiter.Do", func(b *testing.B) {
		l := limiter.New(8)
		b.ReportAllocs()
		for b.Loop() {
			if err := l.Do(ctx, nop); err != nil {
				b.Fatal(err)
			}
		}
	})
}

var (
	spinOnce  sync.Once
	spinIters int
	spinSink  uint64
)

// work burns about a microsecond of CPU, calibrated once.
func work() {
	x := uint64(88172645463325252)
	for range spinIters {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	if x == 0 {
		spinSink++
	}
}

// calibrate sets work's spin to about a microsecond, once; BENCH_SPIN=n fixes it at n iterations
// instead, so that runs under callgrind (where a microsecond is far fewer) do the same work.
func calibrate(b *testing.B) {
	spinOnce.Do(func() {
		if n, err := strconv.Atoi(os.Getenv("BENCH_SPIN")); err == nil && n > 0 {
			spinIters = n
			return
		}
		spinIters = 1000
		start := time.Now()
		for range 2000 {
			work()
		}
		per := time.Since(start) / 2000
		spinIters = max(1, int(float64(spinIters)*float64(time.Microsecond)/float64(per)))
	})
	b.ResetTimer()
}

// reportCPU reports, once the benchmark's loop is over, the CPU time the process spent per op
// (cpu-ns/op): every thread's, the garbage collector's included. Another process busy on the
// machine stretches ns/op, not this.
func reportCPU(b *testing.B) {
	start := cpuTime()
	b.Cleanup(func() {
		if b.N > 0 {
			b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
		}
	})
}

// BenchmarkLimiterThroughput: 100,000 tasks of about 1µs through a limit of 40, through Submit and
// through errgroup's SetLimit, a conc pool, an ants pool and a channel semaphore. Besides ns/op,
// cpu-ns/op: the CPU the process spent per 100,000 tasks, which the load of other processes on
// the machine does not inflate.
func BenchmarkLimiterThroughput(b *testing.B) {
	const limit = 40
	tasks := sized(100_000, 10_000)
	ctx := context.Background()
	b.Run("impl=limiter.Submit", func(b *testing.B) {
		calibrate(b)
		reportCPU(b)
		l := limiter.New(limit)
		task := func(context.Context) (struct{}, error) { work(); return struct{}{}, nil }
		futures := make([]*limiter.Future[struct{}], tasks)
		b.ReportAllocs()
		for b.Loop() {
			for i := range futures {
				futures[i] = limiter.Submit(ctx, l, task)
			}
			for _, f := range futures {
				if _, err := f.Wait(ctx); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("impl=errgroup", func(b *testing.B) {
		calibrate(b)
		reportCPU(b)
		b.ReportAllocs()
		for b.Loop() {
			var g errgroup.Group
			g.SetLimit(limit)
			for range tasks {
				g.Go(func() error { work(); return nil })
			}
			if err := g.Wait(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("impl=conc", func(b *testing.B) {
		calibrate(b)
		reportCPU(b)
		b.ReportAllocs()
		for b.Loop() {
			p := pool.New().WithMaxGoroutines(limit)
			for range tasks {
				p.Go(work)
			}
			p.Wait()
		}
	})
	b.Run("impl=ants", func(b *testing.B) {
		calibrate(b)
		reportCPU(b)
		p, err := ants.NewPool(limit)
		if err != nil {
			b.Fatal(err)
		}
		defer func() {
			if err := p.ReleaseTimeout(10 * time.Second); err != nil {
				b.Error(err)
			}
		}()
		var wg sync.WaitGroup
		b.ReportAllocs()
		for b.Loop() {
			for range tasks {
				wg.Add(1)
				if err := p.Submit(func() { work(); wg.Done() }); err != nil {
					b.Fatal(err)
				}
			}
			wg.Wait()
		}
	})
	b.Run("impl=chan-semaphore", func(b *testing.B) {
		calibrate(b)
		reportCPU(b)
		sem := make(chan struct{}, limit)
		var wg sync.WaitGroup
		b.ReportAllocs()
		for b.Loop() {
			for range tasks {
				sem <- struct{}{}
				wg.Add(1)
				go func() {
					work()
					<-sem
					wg.Done()
				}()
			}
			wg.Wait()
		}
	})
}

// memInUse is the heap and stack memory in use, after a collection.
func memInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc + m.StackInuse
}

// BenchmarkLimiterWaitingMemory: the memory of 1,000,000 tasks waiting for a slot, queued Submits
// against goroutines parked on a semaphore, reported as B/waiter. Run it in a process of its own.
func BenchmarkLimiterWaitingMemory(b *testing.B) {
	n := sized(1_000_000, 10_000)
	ctx := context.Background()
	task := func(context.Context) (struct{}, error) { return struct{}{}, nil }
	submits := func(b *testing.B, ctx context.Context) {
		for b.Loop() {
			l := limiter.New(1)
			release := make(chan struct{})
			limiter.Submit(ctx, l, func(context.Context) (struct{}, error) { <-release; return struct{}{}, nil })
			futures := make([]*limiter.Future[struct{}], n)
			before := memInUse()
			for i := range futures {
				futures[i] = limiter.Submit(ctx, l, task)
			}
			after := memInUse()
			if w := l.Stats().Waiting; w != n {
				b.Fatalf("%d waiting, want %d", w, n)
			}
			b.ReportMetric(float64(after-before)/float64(n), "B/waiter")
			close(release)
			if err := l.Shutdown(ctx); err != nil {
				b.Fatal(err)
			}
			runtime.KeepAlive(futures)
		}
	}
	b.Run("impl=limiter.Submit", func(b *testing.B) { submits(b, ctx) })
	b.Run("impl=limiter.Submit-cancellable-ctx", func(b *testing.B) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		submits(b, ctx)
	})
	b.Run("impl=goroutines-on-semaphore", func(b *testing.B) {
		for b.Loop() {
			s := semaphore.New(1)
			if err := s.Acquire(ctx, 1); err != nil {
				b.Fatal(err)
			}
			var wg sync.WaitGroup
			before := memInUse()
			for range n {
				wg.Go(func() {
					if s.Acquire(ctx, 1) == nil {
						s.Release(1)
					}
				})
			}
			for s.Waiting() < n {
				time.Sleep(time.Millisecond)
			}
			after := memInUse()
			b.ReportMetric(float64(after-before)/float64(n), "B/waiter")
			s.Release(1)
			wg.Wait()
		}
	})
}
