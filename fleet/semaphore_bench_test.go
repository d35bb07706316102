package fleet_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goloom/loom/fleet"
	"github.com/goloom/loom/semaphore"
)

// BenchmarkAcquireRelease is an uncontended Acquire and Release through the in-memory backend: the
// cost of the fleet client (lease, permit, context, renewal bookkeeping) without a network, against
// a process-local semaphore. Against Redis, see package redisfleet's benchmarks.
func BenchmarkAcquireRelease(b *testing.B) {
	ctx := context.Background()
	b.Run("baseline=semaphore", func(b *testing.B) {
		s := semaphore.New(8)
		b.ReportAllocs()
		for b.Loop() {
			if err := s.Acquire(ctx, 1); err != nil {
				b.Fatal(err)
			}
			s.Release(1)
		}
	})
	b.Run("fleet/memory", func(b *testing.B) {
		s := fleet.New(fleet.NewMemory(), "bench", 8, fleet.WithLogger(nil))
		defer s.Close()
		b.ReportAllocs()
		for b.Loop() {
			p, err := s.Acquire(ctx, 1)
			if err != nil {
				b.Fatal(err)
			}
			p.Release()
		}
	})
}

// BenchmarkContention: 4 Semaphores on one in-memory backend share a capacity of 8, with 1, 4 or
// 16 workers each; it reports backend round trips per permit, which must not grow with the
// workers waiting in a process.
func BenchmarkContention(b *testing.B) {
	for _, workers := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("procs=4/workers=%d", workers), func(b *testing.B) {
			m := fleet.NewMemory()
			var sems []*fleet.Semaphore
			for range 4 {
				s := fleet.New(m, "bench", 8, fleet.WithLogger(nil))
				defer s.Close()
				sems = append(sems, s)
			}
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
							for t := time.Now(); time.Since(t) < 20*time.Microsecond; { // the work
							}
							p.Release()
						}
					})
				}
			}
			wg.Wait()
			b.ReportMetric(float64(m.RoundTrips())/float64(b.N), "trips/permit")
		})
	}
}
