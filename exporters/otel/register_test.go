package otel_test

import (
	"context"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.uber.org/goleak"

	"github.com/goloom/loom/exporters/internal/exporttest"
	loomotel "github.com/goloom/loom/exporters/otel"
	"github.com/goloom/loom/fleet"
	"github.com/goloom/loom/inspect"
	"github.com/goloom/loom/limiter"
	"github.com/goloom/loom/scope"
)

// The instruments, each with its unit, its kind and its attributes.
var wantInstruments = map[string]struct{ unit, kind, attrs string }{
	"loom.limiter.in_flight":      {"{call}", "updown", "loom.limiter.name"},
	"loom.limiter.waiting":        {"{call}", "updown", "loom.limiter.name"},
	"loom.limiter.limit":          {"{call}", "updown", "loom.limiter.name"},
	"loom.limiter.rate_waiting":   {"{call}", "updown", "loom.limiter.name"},
	"loom.limiter.calls":          {"{call}", "counter", "loom.limiter.name,loom.limiter.outcome"},
	"loom.limiter.panics":         {"{panic}", "counter", "loom.limiter.name"},
	"loom.limiter.limit_changes":  {"{change}", "counter", "loom.limiter.name"},
	"loom.fleet.capacity":         {"{permit}", "gauge", "loom.fleet.name"},
	"loom.fleet.permits_held":     {"{permit}", "updown", "loom.fleet.name"},
	"loom.fleet.waiting":          {"{call}", "updown", "loom.fleet.name"},
	"loom.fleet.acquired":         {"{permit}", "counter", "loom.fleet.name"},
	"loom.fleet.leases_lost":      {"{permit}", "counter", "loom.fleet.name"},
	"loom.fleet.unavailable":      {"{call}", "counter", "loom.fleet.name"},
	"loom.fleet.degraded":         {"{permit}", "counter", "loom.fleet.name"},
	"loom.fleet.round_trips":      {"{round_trip}", "counter", "loom.fleet.name"},
	"loom.scope.open":             {"{scope}", "updown", "loom.scope.name"},
	"loom.scope.subtasks_running": {"{subtask}", "updown", "loom.scope.name"},
}

// TestLimiterPointsAreItsStats reads a limiter with every outcome counted through a
// ManualReader, with the limiter at rest, so that the collection and Stats() are of one instant.
func TestLimiterPointsAreItsStats(t *testing.T) {
	reader := newReader(t)
	name := exporttest.Unique("otel-busy")
	l, release := exporttest.BusyLimiter(t, name)
	defer release()
	got, s := atRest(t, reader, l.Stats)
	assert.Equal(t, limiterPoints(name, s), values(got, "loom.limiter.name", name))
}

func TestRateWaitingAndLimitChanges(t *testing.T) {
	reader := newReader(t)
	ratedName, movedName := exporttest.Unique("otel-rated"), exporttest.Unique("otel-adaptive")
	rated, moved, release := exporttest.RatedAndMoved(t, ratedName, movedName)
	defer release()

	got, s := atRest(t, reader, rated.Stats)
	assert.Equal(t, limiterPoints(ratedName, s), values(got, "loom.limiter.name", ratedName))
	assert.Equal(t, int64(1), got[key("loom.limiter.rate_waiting", "loom.limiter.name", ratedName)].Value)
	got, m := atRest(t, reader, moved.Stats)
	assert.Equal(t, limiterPoints(movedName, m), values(got, "loom.limiter.name", movedName))
	assert.Positive(t, got[key("loom.limiter.limit_changes", "loom.limiter.name", movedName)].Value)
}

func TestInstruments(t *testing.T) {
	reader := newReader(t)
	inspect.Enable(inspect.Scopes)
	defer inspect.Disable(inspect.Scopes)
	name := exporttest.Unique("otel-kinds")
	l, release := exporttest.BusyLimiter(t, name)
	defer release()
	sem := fleet.New(fleet.NewMemory(), name, 1)
	defer sem.Close()
	s := scope.Open(t.Context(), scope.WithName(name))
	defer s.Join()

	type inst struct{ unit, kind, attrs string }
	got := map[string]inst{}
	outcomes := map[string]bool{}
	for k, p := range collect(t, reader) {
		if !strings.Contains(k, `"`+name+`"`) {
			continue
		}
		metric, rest, _ := strings.Cut(k, "{")
		var keys []string
		for kv := range strings.SplitSeq(strings.TrimSuffix(rest, "}"), ",") {
			k, v, _ := strings.Cut(kv, "=")
			keys = append(keys, k)
			if k == "loom.limiter.outcome" {
				outcomes[strings.Trim(v, `"`)] = true
			}
		}
		got[metric] = inst{p.Unit, p.Kind, strings.Join(keys, ",")}
	}
	want := map[string]inst{}
	for k, v := range wantInstruments {
		want[k] = inst(v)
	}
	assert.Equal(t, want, got)
	assert.Equal(t, []string{"cancelled", "completed", "failed", "rejected", "timed_out"}, sortedKeys(outcomes))
	runtime.KeepAlive(l)
}

// The exporter reads limiter.Stats and fleet.Stats by field name, through the registry: each
// field it reads must still be there, under the name it reads.
func TestEveryStatReadIsThere(t *testing.T) {
	limiters, semaphores := loomotel.StatsRead()
	exporttest.CheckStatsRead(t, limiters, semaphores)
}

func TestSameNameIsSummed(t *testing.T) {
	reader := newReader(t)
	name := exporttest.Unique("otel-twice")
	limiters, semaphores, release := exporttest.Twice(t, name)
	defer release()

	got, s := atRest(t, reader, limiters)
	assert.Equal(t, limiterPoints(name, s), values(got, "loom.limiter.name", name))
	assert.Equal(t, int64(7), got[key("loom.limiter.limit", "loom.limiter.name", name)].Value, "2 + 5")
	got, f := atRest(t, reader, semaphores)
	assert.Equal(t, int64(3), got[key("loom.fleet.capacity", "loom.fleet.name", name)].Value, "the capacity both share, not 3 + 3")
	assert.Equal(t, int64(3), got[key("loom.fleet.permits_held", "loom.fleet.name", name)].Value, "2 + 1")
	assert.Equal(t, f.Acquired, got[key("loom.fleet.acquired", "loom.fleet.name", name)].Value)
}

func TestFleetPointsAreItsStats(t *testing.T) {
	reader := newReader(t)
	name, downName := exporttest.Unique("otel-fleet"), exporttest.Unique("otel-fleet-down")
	sem, down, release := exporttest.BusyFleet(t, name, downName)
	defer release()

	want := func(name string, s fleet.Stats) map[string]int64 {
		const attr = "loom.fleet.name"
		return map[string]int64{
			key("loom.fleet.capacity", attr, name):     s.Capacity,
			key("loom.fleet.permits_held", attr, name): s.Held,
			key("loom.fleet.waiting", attr, name):      int64(s.Waiting),
			key("loom.fleet.acquired", attr, name):     s.Acquired,
			key("loom.fleet.leases_lost", attr, name):  s.LeasesLost,
			key("loom.fleet.unavailable", attr, name):  s.Unavailable,
			key("loom.fleet.degraded", attr, name):     s.Degraded,
			key("loom.fleet.round_trips", attr, name):  s.RoundTrips,
		}
	}
	got, s := atRest(t, reader, sem.Stats)
	assert.Equal(t, want(name, s), values(got, "loom.fleet.name", name))
	assert.Equal(t, int64(1), got[key("loom.fleet.waiting", "loom.fleet.name", name)].Value)
	got, d := atRest(t, reader, down.Stats)
	assert.Equal(t, want(downName, d), values(got, "loom.fleet.name", downName))
	assert.Positive(t, d.Unavailable)
	assert.Positive(t, d.Degraded)
}

func TestScopePoints(t *testing.T) {
	reader := newReader(t)
	name := exporttest.Unique("otel-profile")
	join := exporttest.OpenScopes(t, name)
	got := collect(t, reader)
	assert.Equal(t, int64(2), got[key("loom.scope.open", "loom.scope.name", name)].Value)
	assert.Equal(t, int64(3), got[key("loom.scope.subtasks_running", "loom.scope.name", name)].Value)
	join()
	got = collect(t, reader)
	p, ok := got[key("loom.scope.open", "loom.scope.name", name)]
	assert.True(t, ok, "a name seen once stays, at 0")
	assert.Zero(t, p.Value)
}

func TestCollectedLimiterLeaves(t *testing.T) {
	reader := newReader(t)
	name := exporttest.Unique("otel-gone")
	func() {
		l := limiter.New(1, limiter.WithName(name))
		require.Contains(t, collect(t, reader), key("loom.limiter.limit", "loom.limiter.name", name))
		runtime.KeepAlive(l)
	}()
	func() {
		s := fleet.New(fleet.NewMemory(), name, 1)
		require.Contains(t, collect(t, reader), key("loom.fleet.capacity", "loom.fleet.name", name))
		require.NoError(t, s.Close()) // its worker holds it until Close
	}()
	exporttest.Eventually(t, func() bool {
		runtime.GC()
		got := collect(t, reader)
		return len(values(got, "loom.limiter.name", name)) == 0 && len(values(got, "loom.fleet.name", name)) == 0
	}, "a collected limiter and semaphore leave the next collection")
}

func TestUnregisterStopsTheObservations(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	reg, err := loomotel.Register(mp)
	require.NoError(t, err)
	name := exporttest.Unique("otel-unregister")
	l := limiter.New(1, limiter.WithName(name))
	require.Contains(t, collect(t, reader), key("loom.limiter.limit", "loom.limiter.name", name))
	require.NoError(t, reg.Unregister())
	assert.NotContains(t, collect(t, reader), key("loom.limiter.limit", "loom.limiter.name", name))
	runtime.KeepAlive(l)
}

func TestRegisterNil(t *testing.T) {
	reg, err := loomotel.Register(nil)
	assert.Nil(t, reg)
	assert.EqualError(t, err, "otel: Register: nil MeterProvider")
}

// Register starts no goroutine: none is left beside those that ran before it registered and a
// collection ran.
func TestNoGoroutine(t *testing.T) {
	before := goleak.IgnoreCurrent()
	reader := newReader(t)
	collect(t, reader)
	goleak.VerifyNone(t, before)
}
