package registry_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/goloom/loom/internal/registry"
	"github.com/goloom/loom/internal/registry/regtest"
)

// BenchmarkSumByName merges what a scrape of 1,000 named limiters reads, every name distinct.
func BenchmarkSumByName(b *testing.B) {
	recs := make([]registry.LimiterRecord, 1000)
	for i := range recs {
		recs[i] = registry.LimiterRecord{Name: fmt.Sprintf("limiter-%04d", i), Stats: stats(
			"limit", 8, "inFlight", 1, "waiting", 0, "overrunning", 0, "rateWaiting", 0, "submitted", 10,
			"completed", 9, "failed", 1, "rejected", 0, "timedOut", 0, "cancelled", 0, "panicked", 0, "limitChanges", 0)}
	}
	b.ReportAllocs()
	for b.Loop() {
		registry.SumByName(recs)
	}
}

// BenchmarkCollectLimiters reads 1,000 named limiters, as a dump or a scrape does: each one's
// Stats struct turned into named numbers.
func BenchmarkCollectLimiters(b *testing.B) {
	lims := make([]*regtest.Limiter, 1000)
	for i := range lims {
		lims[i] = regtest.NewLimiter(8, fmt.Sprintf("bench-limiter-%04d", i))
	}
	b.ReportAllocs()
	for b.Loop() {
		registry.CollectLimiters()
	}
	runtime.KeepAlive(lims)
}
