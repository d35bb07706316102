package fleet_test

import (
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/fleet"
	"github.com/goloom/loom/internal/registry"
)

func semaphoreRecord(name string) (registry.LimiterRecord, bool) {
	for _, r := range registry.CollectSemaphores() {
		if r.Name == name {
			return r, true
		}
	}
	return registry.LimiterRecord{}, false
}

// A Semaphore is listed for dumps and exporters with its Stats while it is reachable, and leaves
// once Close has stopped its worker and nothing refers to it.
func TestSemaphoreListedUntilCollected(t *testing.T) {
	mem := fleet.NewMemory()
	func() {
		s := fleet.New(mem, "listed-api", 4, fleet.WithLease(ttl), fleet.WithLogger(nil))
		p, err := s.Acquire(t.Context(), 2)
		require.NoError(t, err)
		r, ok := semaphoreRecord("listed-api")
		require.True(t, ok)
		held := slices.IndexFunc(r.Stats, func(s registry.Stat) bool { return s.Name == "held" })
		require.GreaterOrEqual(t, held, 0, "stats: %v", r.Stats)
		assert.Equal(t, int64(2), r.Stats[held].Value)
		p.Release()
		require.NoError(t, s.Close())
	}()
	require.Eventually(t, func() bool {
		runtime.GC()
		return !slices.Contains(registry.ListedSemaphores(), "listed-api")
	}, 10*time.Second, 10*time.Millisecond)
}
