package prometheus_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/exporters/internal/exporttest"
	loomprom "github.com/goloom/loom/exporters/prometheus"
	"github.com/goloom/loom/limiter"
)

// key is the series key of metric for the one label label=value.
func key(metric, label, value string) string { return fmt.Sprintf("%s{%s=%q}", metric, label, value) }

// atRest gathers reg at an instant when stats reads the same before and after (see
// exporttest.AtRest).
func atRest[S comparable](t testing.TB, reg prometheus.Gatherer, stats func() S) (map[string]float64, S) {
	t.Helper()
	return exporttest.AtRest(t, func() map[string]float64 { return series(t, reg) }, stats)
}

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

// keys returns m's keys, sorted.
func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
