package prometheus_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	loomprom "github.com/goloom/loom/exporters/prometheus"
	"github.com/goloom/loom/limiter"
)

// Every wait in these tests polls for its condition with this deadline: far above what any
// condition takes on a loaded machine.
const (
	deadline  = 10 * time.Second
	pollEvery = time.Millisecond
)

var names atomic.Int64

// unique returns base with a number of its own: a limiter of an earlier run of the test (go test
// -count) may not have been collected yet, and would add to the numbers of one of the same name.
func unique(base string) string { return fmt.Sprintf("%s-%d", base, names.Add(1)) }

// key is the series key of metric for the one label label=value.
func key(metric, label, value string) string { return fmt.Sprintf("%s{%s=%q}", metric, label, value) }

// newRegistry returns a fresh registry with the collector registered.
func newRegistry(t testing.TB) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(loomprom.NewCollector()))
	return reg
}

// series gathers reg and returns every loom sample as "name{label="value",...}" → value, labels
// in their order of the exposition (sorted by name).
func series(t testing.TB, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			out[f.GetName()+"{"+strings.Join(labels, ",")+"}"] = v
		}
	}
	return out
}

// of keeps the series whose label label is value.
func of(all map[string]float64, label, value string) map[string]float64 {
	out := map[string]float64{}
	for k, v := range all {
		if strings.Contains(k, fmt.Sprintf("%s=%q", label, value)) {
			out[k] = v
		}
	}
	return out
}

// limiterSeries is what the collector must show of a limiter name whose stats are s: written
// out here from the field names, apart from the collector's own table.
func limiterSeries(name string, s limiter.Stats) map[string]float64 {
	l := fmt.Sprintf("limiter=%q", name)
	calls := func(outcome string, n int64) (string, float64) {
		return fmt.Sprintf("loom_limiter_calls_total{%s,outcome=%q}", l, outcome), float64(n)
	}
	out := map[string]float64{
		"loom_limiter_in_flight{" + l + "}":           float64(s.InFlight),
		"loom_limiter_waiting{" + l + "}":             float64(s.Waiting),
		"loom_limiter_limit{" + l + "}":               float64(s.Limit),
		"loom_limiter_rate_waiting{" + l + "}":        float64(s.RateWaiting),
		"loom_limiter_panics_total{" + l + "}":        float64(s.Panicked),
		"loom_limiter_limit_changes_total{" + l + "}": float64(s.LimitChanges),
	}
	for _, c := range []struct {
		outcome string
		n       int64
	}{{"completed", s.Completed}, {"failed", s.Failed}, {"rejected", s.Rejected}, {"timed_out", s.TimedOut}, {"cancelled", s.Cancelled}} {
		k, v := calls(c.outcome, c.n)
		out[k] = v
	}
	return out
}

// add returns the field-by-field sum of two Stats structs of integer fields.
func add[S any](a, b S) S {
	va, vb := reflect.ValueOf(&a).Elem(), reflect.ValueOf(b)
	for i := range va.NumField() {
		f := va.Field(i)
		f.SetInt(f.Int() + vb.Field(i).Int())
	}
	return a
}

// atRest gathers reg at an instant when stats reads the same before and after, and returns the
// series and those stats: a gather whose numbers moved meanwhile is taken again.
func atRest[S comparable](t testing.TB, reg prometheus.Gatherer, stats func() S) (map[string]float64, S) {
	t.Helper()
	for start := time.Now(); ; {
		before := stats()
		got := series(t, reg)
		if after := stats(); after == before {
			return got, before
		}
		require.Less(t, time.Since(start), deadline, "the numbers never stood still")
	}
}

// eventually polls cond until it holds, failing the test after the deadline.
func eventually(t testing.TB, cond func() bool, msg string) {
	t.Helper()
	require.Eventually(t, cond, deadline, pollEvery, msg)
}

var errTask = errors.New("task failed")

// busyLimiter returns a limiter called name with every outcome counted at least once, and its
// gauges held still: 2 slots held by tasks that overran their timeout, 1 call waiting, 1
// rejected (too many waiting). release lets the held tasks and the waiter finish; it waits for
// them.
func busyLimiter(t *testing.T, name string) (l *limiter.Limiter, release func()) {
	t.Helper()
	l = limiter.New(2, limiter.WithName(name), limiter.WithMaxWaiting(1), limiter.WithTaskTimeout(20*time.Millisecond))
	ctx := t.Context()
	require.NoError(t, l.Do(ctx, func(context.Context) error { return nil }))
	require.ErrorIs(t, l.Do(ctx, func(context.Context) error { return errTask }), errTask)
	var pe *limiter.PanicError
	require.ErrorAs(t, l.Do(ctx, func(context.Context) error { panic("boom") }), &pe)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	require.Error(t, l.Do(cancelled, func(context.Context) error { return nil }))

	// Two tasks that ignore their timeout: their calls end TimedOut, and they keep their slots.
	hold := make(chan struct{})
	held := make(chan struct{}, 2)
	for range 2 {
		_, err := limiter.Call(ctx, l, func(context.Context) (struct{}, error) {
			held <- struct{}{}
			<-hold
			return struct{}{}, nil
		})
		require.ErrorIs(t, err, limiter.ErrTaskTimeout)
	}
	<-held
	<-held
	waited := make(chan error, 1)
	go func() { waited <- l.Do(ctx, func(context.Context) error { return nil }) }()
	eventually(t, func() bool { return l.Stats().Waiting == 1 }, "a call waits for a slot")
	require.ErrorIs(t, l.Do(ctx, func(context.Context) error { return nil }), limiter.ErrRejected)

	s := l.Stats()
	for _, n := range []int64{s.Completed, s.Failed, s.Rejected, s.TimedOut, s.Cancelled, s.Panicked} {
		require.Positive(t, n, "every outcome is counted: %+v", s)
	}
	require.Equal(t, 2, s.InFlight)
	return l, func() {
		close(hold)
		require.NoError(t, <-waited)
		eventually(t, func() bool { return l.Stats().InFlight == 0 }, "the held tasks return")
	}
}

// keys returns m's keys, sorted.
func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
