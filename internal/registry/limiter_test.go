package registry_test

import (
	"context"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/internal/registry"
	"github.com/goloom/loom/internal/registry/regtest"
)

func limiterNamed(name string) (registry.LimiterRecord, bool) {
	for _, l := range registry.CollectLimiters() {
		if l.Name == name {
			return l, true
		}
	}
	return registry.LimiterRecord{}, false
}

func statValue(stats []registry.Stat, name string) (int64, bool) {
	for _, s := range stats {
		if s.Name == name {
			return s.Value, true
		}
	}
	return 0, false
}

func TestNamedLimiterListedWhateverTheFeatures(t *testing.T) {
	enable(t, 0)
	lim := regtest.NewLimiter(2, "queue-api")
	regtest.NewLimiter(2, "") // unnamed: never listed
	holding, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 3)
	go func() {
		done <- lim.Do(t.Context(), func(context.Context) error { holding <- struct{}{}; <-release; return nil })
	}()
	go func() {
		done <- lim.Do(t.Context(), func(context.Context) error { holding <- struct{}{}; <-release; return nil })
	}()
	<-holding
	<-holding
	go func() { done <- lim.Do(t.Context(), func(context.Context) error { return nil }) }()
	require.Eventually(t, func() bool { return lim.Waiting() == 1 }, testTimeout, pollEvery)
	time.Sleep(5 * time.Millisecond) // the waiter's age must be visible, not its exact value

	l, ok := limiterNamed("queue-api")
	require.True(t, ok)
	var names []string
	for _, s := range l.Stats {
		names = append(names, s.Name)
	}
	assert.Equal(t, []string{"limit", "inFlight", "waiting", "overrunning", "submitted", "completed",
		"failed", "rejected", "timedOut", "cancelled", "panicked"}, names, "Stats fields in lowerCamelCase, in order")
	for name, want := range map[string]int64{"limit": 2, "inFlight": 2, "waiting": 1, "submitted": 3} {
		got, _ := statValue(l.Stats, name)
		assert.Equal(t, want, got, name)
	}
	assert.GreaterOrEqual(t, l.OldestWaiting, 5*time.Millisecond)
	for _, other := range registry.CollectLimiters() {
		assert.NotEmpty(t, other.Name, "an unnamed limiter is never listed")
	}
	close(release)
	for range 3 {
		require.NoError(t, <-done)
	}
	l, _ = limiterNamed("queue-api")
	assert.Zero(t, l.OldestWaiting)
	runtime.KeepAlive(lim)
}

// The registry never keeps a limiter alive: drop the last reference, collect, and it is gone
// from the dump at once, and from the registry's list once its cleanup has run.
func TestCollectedLimiterLeaves(t *testing.T) {
	func() {
		lim := regtest.NewLimiter(1, "short-lived")
		require.NoError(t, lim.Do(t.Context(), func(context.Context) error { return nil }))
		_, ok := limiterNamed("short-lived")
		require.True(t, ok)
	}()
	runtime.GC()
	_, ok := limiterNamed("short-lived")
	assert.False(t, ok, "still listed after the last reference was dropped and the GC ran")
	// Cleanups run on their own goroutine after the collection.
	require.Eventually(t, func() bool {
		runtime.GC()
		return !slices.Contains(registry.ListedLimiters(), "short-lived")
	}, testTimeout, pollEvery)
}

type customStats struct {
	RTTMin      time.Duration
	ID          uint32
	Ratio       float64
	Name        string // not a number: skipped
	unexported  int
	LimitChange int
}

func TestStatsOfAnyStruct(t *testing.T) {
	type holder struct{ s customStats }
	h := &holder{customStats{RTTMin: 3, ID: 7, Ratio: 2.6, Name: "x", unexported: 1, LimitChange: -4}}
	registry.AddLimiter(h, "custom", func(h *holder) registry.LimiterInfo { return registry.LimiterInfo{Stats: &h.s} }, nil)
	l, ok := limiterNamed("custom")
	require.True(t, ok)
	assert.Equal(t, []registry.Stat{{Name: "rttMin", Value: 3}, {Name: "id", Value: 7}, {Name: "ratio", Value: 3}, {Name: "limitChange", Value: -4}}, l.Stats)

	g := &holder{}
	registry.AddLimiter(g, "given", func(*holder) registry.LimiterInfo {
		return registry.LimiterInfo{Stats: []registry.Stat{{Name: "leases", Value: 9}}}
	}, nil)
	l, ok = limiterNamed("given")
	require.True(t, ok)
	assert.Equal(t, []registry.Stat{{Name: "leases", Value: 9}}, l.Stats)
	runtime.KeepAlive(h)
	runtime.KeepAlive(g)
}

func TestAddLimiterMisuse(t *testing.T) {
	require.PanicsWithValue(t, "registry: AddLimiter: nil limiter or info", func() {
		registry.AddLimiter[int](nil, "x", func(*int) registry.LimiterInfo { return registry.LimiterInfo{} }, nil)
	})
}

func TestLowerCamel(t *testing.T) {
	for give, want := range map[string]string{
		"Limit": "limit", "InFlight": "inFlight", "TimedOut": "timedOut", "ID": "id", "RTTMin": "rttMin",
		"X": "x", "already": "already", "LimitChanges": "limitChanges", "HTTPStatus": "httpStatus",
	} {
		assert.Equal(t, want, registry.LowerCamel(give), give)
	}
}

func TestSemaphoresListedApartFromLimiters(t *testing.T) {
	type sem struct{ held int64 }
	s := &sem{held: 3}
	registry.AddSemaphore(s, "fleet-api", func(s *sem) registry.LimiterInfo {
		return registry.LimiterInfo{Stats: []registry.Stat{{Name: "held", Value: s.held}}}
	}, nil)
	_, asLimiter := limiterNamed("fleet-api")
	assert.False(t, asLimiter, "a semaphore is not a limiter")
	var got []registry.LimiterRecord
	for _, r := range registry.CollectSemaphores() {
		if r.Name == "fleet-api" {
			got = append(got, r)
		}
	}
	require.Len(t, got, 1)
	assert.Equal(t, []registry.Stat{{Name: "held", Value: 3}}, got[0].Stats)
	runtime.KeepAlive(s)

	require.PanicsWithValue(t, "registry: AddSemaphore: nil semaphore or info", func() {
		registry.AddSemaphore[int](nil, "x", func(*int) registry.LimiterInfo { return registry.LimiterInfo{} }, nil)
	})
}

func TestCollectedSemaphoreLeaves(t *testing.T) {
	func() {
		type sem struct{ _ [16]byte } // not a zero-size value: those share one address
		registry.AddSemaphore(&sem{}, "short-lived-sem", func(*sem) registry.LimiterInfo { return registry.LimiterInfo{} }, nil)
	}()
	require.Eventually(t, func() bool {
		runtime.GC()
		return !slices.Contains(registry.ListedSemaphores(), "short-lived-sem")
	}, testTimeout, pollEvery)
}

// A dump reads a limiter's and a semaphore's configuration, an exporter only their numbers: the
// Collect*Stats reads never call config, and their records have no Config.
func TestStatsReadsLeaveTheConfigurationOut(t *testing.T) {
	type thing struct{ n int64 }
	var configs atomic.Int64
	config := func(*thing) []registry.Setting {
		configs.Add(1)
		return []registry.Setting{{Name: "rate", Value: "10/s"}}
	}
	info := func(p *thing) registry.LimiterInfo {
		return registry.LimiterInfo{Stats: []registry.Stat{{Name: "n", Value: p.n}}}
	}
	l, s := &thing{n: 1}, &thing{n: 2}
	registry.AddLimiter(l, "config-limiter", info, config)
	registry.AddSemaphore(s, "config-semaphore", info, config)
	find := func(recs []registry.LimiterRecord, name string) registry.LimiterRecord {
		i := slices.IndexFunc(recs, func(r registry.LimiterRecord) bool { return r.Name == name })
		require.GreaterOrEqual(t, i, 0, name)
		return recs[i]
	}

	for _, r := range []registry.LimiterRecord{find(registry.CollectLimiterStats(), "config-limiter"), find(registry.CollectSemaphoreStats(), "config-semaphore")} {
		assert.Nil(t, r.Config, r.Name)
		assert.NotEmpty(t, r.Stats, r.Name)
	}
	assert.Zero(t, configs.Load(), "an exporter's read formatted the configuration")
	want := []registry.Setting{{Name: "rate", Value: "10/s"}}
	assert.Equal(t, want, find(registry.CollectLimiters(), "config-limiter").Config)
	assert.Equal(t, want, find(registry.CollectSemaphores(), "config-semaphore").Config)
	assert.Equal(t, []registry.Stat{{Name: "n", Value: 2}}, find(registry.CollectSemaphores(), "config-semaphore").Stats)
	runtime.KeepAlive(l)
	runtime.KeepAlive(s)
}
