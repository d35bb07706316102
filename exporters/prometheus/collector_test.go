package prometheus_test

import (
	"bytes"
	"context"
	"io"
	"regexp"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/goloom/loom/exporters/internal/exporttest"
	loomprom "github.com/goloom/loom/exporters/prometheus"
	"github.com/goloom/loom/fleet"
	"github.com/goloom/loom/inspect"
	"github.com/goloom/loom/limiter"
	"github.com/goloom/loom/scope"
)

// The names DESIGN gives the metrics, each family with its label.
var wantFamilies = map[string][]string{
	"loom_limiter_in_flight":           {"limiter"},
	"loom_limiter_waiting":             {"limiter"},
	"loom_limiter_limit":               {"limiter"},
	"loom_limiter_rate_waiting":        {"limiter"},
	"loom_limiter_calls_total":         {"limiter", "outcome"},
	"loom_limiter_panics_total":        {"limiter"},
	"loom_limiter_limit_changes_total": {"limiter"},
	"loom_fleet_capacity":              {"semaphore"},
	"loom_fleet_permits_held":          {"semaphore"},
	"loom_fleet_waiting":               {"semaphore"},
	"loom_fleet_acquired_total":        {"semaphore"},
	"loom_fleet_leases_lost_total":     {"semaphore"},
	"loom_fleet_unavailable_total":     {"semaphore"},
	"loom_fleet_degraded_total":        {"semaphore"},
	"loom_fleet_round_trips_total":     {"semaphore"},
	"loom_scopes_open":                 {"scope"},
	"loom_subtasks_running":            {"scope"},
}

func TestLimiterSeriesAreItsStats(t *testing.T) {
	busy := exporttest.Unique("metrics-busy")
	reg := newRegistry(t)
	l, release := exporttest.BusyLimiter(t, busy)
	defer release()
	got, s := atRest(t, reg, l.Stats)
	assert.Equal(t, limiterSeries(busy, s), of(got, "limiter", busy))
}

func TestRateWaitingAndLimitChanges(t *testing.T) {
	ratedName, adaptiveName := exporttest.Unique("metrics-rated"), exporttest.Unique("metrics-adaptive")
	reg := newRegistry(t)
	rated, moved, release := exporttest.RatedAndMoved(t, ratedName, adaptiveName)
	defer release()

	got, s := atRest(t, reg, rated.Stats)
	assert.Equal(t, limiterSeries(ratedName, s), of(got, "limiter", ratedName))
	assert.Equal(t, 1.0, got[key("loom_limiter_rate_waiting", "limiter", ratedName)])
	got, m := atRest(t, reg, moved.Stats)
	assert.Equal(t, limiterSeries(adaptiveName, m), of(got, "limiter", adaptiveName))
	assert.Positive(t, got[key("loom_limiter_limit_changes_total", "limiter", adaptiveName)])
	assert.Greater(t, got[key("loom_limiter_limit", "limiter", adaptiveName)], 2.0, "the limit as it is now")
}

// The collector reads limiter.Stats and fleet.Stats by field name, through the registry: each
// field it reads must still be there, under the name it reads.
func TestEveryStatReadIsThere(t *testing.T) {
	limiters, semaphores := loomprom.StatsRead()
	exporttest.CheckStatsRead(t, limiters, semaphores)
}

// TestSameNameIsSummed: two limiters of one name are one series each, their sum (Prometheus
// rejects a scrape with two series of the same name and labels); two fleet semaphores of one
// name show the capacity they share.
func TestSameNameIsSummed(t *testing.T) {
	twice := exporttest.Unique("metrics-twice")
	reg := newRegistry(t)
	limiters, semaphores, release := exporttest.Twice(t, twice)
	defer release()

	got, s := atRest(t, reg, limiters)
	assert.Equal(t, limiterSeries(twice, s), of(got, "limiter", twice))
	assert.Equal(t, 7.0, got[key("loom_limiter_limit", "limiter", twice)], "2 + 5")
	got, f := atRest(t, reg, semaphores)
	assert.Equal(t, 3.0, got[key("loom_fleet_capacity", "semaphore", twice)], "the capacity both share, not 3 + 3")
	assert.Equal(t, 3.0, got[key("loom_fleet_permits_held", "semaphore", twice)], "2 + 1")
	assert.Equal(t, float64(f.Acquired), got[key("loom_fleet_acquired_total", "semaphore", twice)])
	assert.Equal(t, float64(f.RoundTrips), got[key("loom_fleet_round_trips_total", "semaphore", twice)])
}

func TestFleetSeriesAreItsStats(t *testing.T) {
	reg := newRegistry(t)
	fleetName, downName := exporttest.Unique("metrics-fleet"), exporttest.Unique("metrics-fleet-down")
	sem, down, release := exporttest.BusyFleet(t, fleetName, downName)
	defer release()

	want := func(name string, s fleet.Stats) map[string]float64 {
		l := `{semaphore="` + name + `"}`
		return map[string]float64{
			"loom_fleet_capacity" + l:          float64(s.Capacity),
			"loom_fleet_permits_held" + l:      float64(s.Held),
			"loom_fleet_waiting" + l:           float64(s.Waiting),
			"loom_fleet_acquired_total" + l:    float64(s.Acquired),
			"loom_fleet_leases_lost_total" + l: float64(s.LeasesLost),
			"loom_fleet_unavailable_total" + l: float64(s.Unavailable),
			"loom_fleet_degraded_total" + l:    float64(s.Degraded),
			"loom_fleet_round_trips_total" + l: float64(s.RoundTrips),
		}
	}
	got, s := atRest(t, reg, sem.Stats)
	assert.Equal(t, want(fleetName, s), of(got, "semaphore", fleetName))
	assert.Equal(t, 3.0, got[key("loom_fleet_permits_held", "semaphore", fleetName)])
	assert.Equal(t, 1.0, got[key("loom_fleet_waiting", "semaphore", fleetName)])
	got, d := atRest(t, reg, down.Stats)
	assert.Equal(t, want(downName, d), of(got, "semaphore", downName))
	assert.Positive(t, got[key("loom_fleet_unavailable_total", "semaphore", downName)])
	assert.Positive(t, got[key("loom_fleet_degraded_total", "semaphore", downName)])

}

func TestScopeSeries(t *testing.T) {
	profile, unrecorded := exporttest.Unique("metrics-profile"), exporttest.Unique("metrics-unrecorded")
	reg := newRegistry(t)
	join := exporttest.OpenScopes(t, profile)
	got := series(t, reg)
	assert.Equal(t, 2.0, got[key("loom_scopes_open", "scope", profile)])
	assert.Equal(t, 3.0, got[key("loom_subtasks_running", "scope", profile)])

	join() // and Scopes is off
	got = series(t, reg)
	open, ok := got[key("loom_scopes_open", "scope", profile)]
	assert.True(t, ok, "a name seen once stays, at 0")
	assert.Zero(t, open)
	assert.Zero(t, got[key("loom_subtasks_running", "scope", profile)])

	c := scope.Open(t.Context(), scope.WithName(unrecorded))
	_, ok = series(t, reg)[key("loom_scopes_open", "scope", unrecorded)]
	assert.False(t, ok, "a scope opened with Scopes off is not counted")
	require.NoError(t, c.Join())
}

// A limiter that has been garbage collected leaves the next scrape.
func TestCollectedLimiterLeaves(t *testing.T) {
	gone := exporttest.Unique("metrics-gone")
	reg := newRegistry(t)
	func() {
		l := limiter.New(1, limiter.WithName(gone))
		require.Contains(t, series(t, reg), key("loom_limiter_limit", "limiter", gone))
		runtime.KeepAlive(l)
	}()
	mem := fleet.NewMemory()
	func() {
		s := fleet.New(mem, gone, 1)
		require.Contains(t, series(t, reg), key("loom_fleet_capacity", "semaphore", gone))
		require.NoError(t, s.Close()) // its worker holds it until Close
	}()
	exporttest.Eventually(t, func() bool {
		runtime.GC()
		got := series(t, reg)
		return len(of(got, "limiter", gone)) == 0 && len(of(got, "semaphore", gone)) == 0
	}, "a collected limiter and semaphore leave the scrape")
}

func TestNamesThatAreNotUTF8(t *testing.T) {
	reg := newRegistry(t)
	base := exporttest.Unique("metrics-utf8")
	a := limiter.New(1, limiter.WithName(base+"\xff"))
	b := limiter.New(2, limiter.WithName(base+"\xfe"))
	got := series(t, reg) // must not fail nor panic
	assert.Equal(t, 3.0, got[key("loom_limiter_limit", "limiter", base+"\uFFFD")])
	runtime.KeepAlive(a)
	runtime.KeepAlive(b)
}

// TestFamiliesAndLint gathers a process with a limiter, a fleet semaphore and a scope: every
// family DESIGN names is there with its labels, no other, and the exposition passes promlint.
func TestFamiliesAndLint(t *testing.T) {
	lint := exporttest.Unique("metrics-lint")
	reg := newRegistry(t)
	inspect.Enable(inspect.Scopes)
	defer inspect.Disable(inspect.Scopes)
	l, release := exporttest.BusyLimiter(t, lint)
	defer release()
	sem := fleet.New(fleet.NewMemory(), lint, 1)
	defer sem.Close()
	s := scope.Open(t.Context(), scope.WithName(lint))
	defer s.Join()

	families, err := reg.Gather()
	require.NoError(t, err)
	got := map[string][]string{}
	for _, f := range families {
		labels := map[string]bool{}
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = true
			}
		}
		got[f.GetName()] = keys(labels)
		assert.NotEmpty(t, f.GetHelp(), f.GetName())
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			assert.Regexp(t, `_total$`, f.GetName())
		case dto.MetricType_GAUGE:
			assert.NotRegexp(t, `_total$`, f.GetName())
		default:
			t.Errorf("%s is a %v", f.GetName(), f.GetType())
		}
	}
	assert.Equal(t, wantFamilies, got)
	outcomes := map[string]bool{}
	for k := range of(series(t, reg), "limiter", lint) {
		if m := regexp.MustCompile(`outcome="([^"]*)"`).FindStringSubmatch(k); m != nil {
			outcomes[m[1]] = true
		}
	}
	assert.Equal(t, []string{"cancelled", "completed", "failed", "rejected", "timed_out"}, keys(outcomes))

	problems, err := promlint.NewWithMetricFamilies(families).Lint()
	require.NoError(t, err)
	assert.Empty(t, problems)
	// And as a Prometheus server reads it: the text exposition.
	var text bytes.Buffer
	enc := expfmt.NewEncoder(&text, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range families {
		require.NoError(t, enc.Encode(f))
	}
	problems, err = promlint.New(&text).Lint()
	require.NoError(t, err)
	assert.Empty(t, problems)
	runtime.KeepAlive(l)
}

// The collector is checked: it describes every family it exports, and a registry refuses a
// second one.
func TestDescribe(t *testing.T) {
	ch := make(chan *prometheus.Desc, 100)
	loomprom.NewCollector().Describe(ch)
	close(ch)
	var n int
	for d := range ch {
		n++
		assert.Regexp(t, `fqName: "loom_`, d.String())
	}
	assert.Equal(t, len(wantFamilies), n, "one description per family")
	reg := newRegistry(t)
	err := reg.Register(loomprom.NewCollector())
	var already prometheus.AlreadyRegisteredError
	assert.ErrorAs(t, err, &already)
}

// The collector starts no goroutine: none is left beside those that ran before it was made,
// registered and scraped.
func TestNoGoroutine(t *testing.T) {
	before := goleak.IgnoreCurrent()
	reg := newRegistry(t)
	series(t, reg)
	goleak.VerifyNone(t, before)
}

// A Collect sends the series of each family in the order a Gather sorts them into (by label
// values: the name, then a call's outcome), whatever the order the limiters, semaphores and
// scopes were made in: sorting them is then one pass (BenchmarkScrape).
func TestCollectSendsInGatherOrder(t *testing.T) {
	base := exporttest.Unique("metrics-order")
	inspect.Enable(inspect.Scopes)
	defer inspect.Disable(inspect.Scopes)
	mem := fleet.NewMemory()
	for _, suffix := range []string{"-z", "-m", "-a"} { // made in the reverse order of their names
		l := limiter.New(1, limiter.WithName(base+suffix))
		defer runtime.KeepAlive(l)
		sem := fleet.New(mem, base+suffix, 1)
		defer sem.Close()
		s := scope.Open(t.Context(), scope.WithName(base+suffix))
		defer s.Join()
	}

	ch := make(chan prometheus.Metric, 1<<16)
	loomprom.NewCollector().Collect(ch)
	close(ch)
	byFamily := map[*prometheus.Desc][][]string{}
	for m := range ch {
		var out dto.Metric
		require.NoError(t, m.Write(&out))
		var values []string
		for _, l := range out.GetLabel() {
			values = append(values, l.GetValue())
		}
		byFamily[m.Desc()] = append(byFamily[m.Desc()], values)
	}
	require.Len(t, byFamily, len(wantFamilies))
	for d, values := range byFamily {
		assert.True(t, slices.IsSortedFunc(values, slices.Compare), "%s: %q", d, values)
	}
}

// completedKey is the series key of the completed calls of the limiter name.
func completedKey(name string) string {
	k := key("loom_limiter_calls_total", "limiter", name)
	return k[:len(k)-1] + `,outcome="completed"}`
}

// A scrape shows the values of its instant, and a later one leaves an earlier one's result as it
// was: the collector sends again the sample of a value that has not changed, and a new one for a
// value that has.
func TestScrapesDoNotShareChangedValues(t *testing.T) {
	name := exporttest.Unique("metrics-values")
	l := limiter.New(2, limiter.WithName(name))
	reg := newRegistry(t)
	completed := completedKey(name)
	limit := key("loom_limiter_limit", "limiter", name)

	first, err := reg.Gather()
	require.NoError(t, err)
	require.NoError(t, l.Do(t.Context(), func(context.Context) error { return nil }))
	second := series(t, reg)
	require.NoError(t, l.Do(t.Context(), func(context.Context) error { return nil }))
	third := series(t, reg)

	assert.Equal(t, 1.0, second[completed])
	assert.Equal(t, 2.0, third[completed])
	assert.Equal(t, 2.0, third[limit])
	firstSeries := series(t, prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) { return first, nil }))
	assert.Equal(t, 0.0, firstSeries[completed], "a later scrape changed an earlier one's result")
	assert.Equal(t, 2.0, firstSeries[limit])
	runtime.KeepAlive(l)
}

// The collector forgets a name that has left the registry: what it keeps between scrapes does
// not grow with every limiter the process ever made.
func TestCollectorForgetsLeftNames(t *testing.T) {
	gone := exporttest.Unique("metrics-forget")
	c := loomprom.NewCollector()
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(c))
	func() {
		l := limiter.New(1, limiter.WithName(gone))
		series(t, reg)
		require.Contains(t, loomprom.Kept(c), "limiter="+gone)
		runtime.KeepAlive(l)
	}()
	exporttest.Eventually(t, func() bool {
		runtime.GC()
		series(t, reg)
		return !slices.Contains(loomprom.Kept(c), "limiter="+gone)
	}, "the collector forgets a collected limiter's name")
}

// Scrapes run at once on one collector, each encoding what it gathered (protobuf, which writes
// the size caches of the messages, and text) while a limiter's calls change its numbers: under
// -race, a sample changed after it was sent, or a map read outside the lock, fails. Each
// scrape's counter is at least the last one's.
func TestConcurrentScrapes(t *testing.T) {
	name := exporttest.Unique("metrics-concurrent")
	l := limiter.New(4, limiter.WithName(name))
	reg := newRegistry(t)
	completed := completedKey(name)

	done := make(chan struct{})
	var calls sync.WaitGroup
	calls.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
				_ = l.Do(t.Context(), func(context.Context) error { return nil })
			}
		}
	})
	var scrapes sync.WaitGroup
	for _, format := range []expfmt.Format{expfmt.NewFormat(expfmt.TypeProtoDelim), expfmt.NewFormat(expfmt.TypeTextPlain)} {
		scrapes.Go(func() {
			last := -1.0
			for range 300 {
				families, err := reg.Gather()
				if !assert.NoError(t, err) {
					return
				}
				enc := expfmt.NewEncoder(io.Discard, format)
				for _, f := range families {
					if !assert.NoError(t, enc.Encode(f)) {
						return
					}
				}
				got := series(t, prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) { return families, nil }))[completed]
				if !assert.GreaterOrEqual(t, got, last) {
					return
				}
				last = got
			}
		})
	}
	scrapes.Wait()
	close(done)
	calls.Wait()
	runtime.KeepAlive(l)
}
