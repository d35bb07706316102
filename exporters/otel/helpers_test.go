package otel_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/goloom/loom/exporters/internal/exporttest"
	loomotel "github.com/goloom/loom/exporters/otel"
	"github.com/goloom/loom/limiter"
)

// atRest collects r at an instant when stats reads the same before and after (see
// exporttest.AtRest).
func atRest[S comparable](t testing.TB, r *sdkmetric.ManualReader, stats func() S) (map[string]point, S) {
	t.Helper()
	return exporttest.AtRest(t, func() map[string]point { return collect(t, r) }, stats)
}

// newReader returns a ManualReader of a fresh MeterProvider on which loom's instruments are
// registered; the provider shuts down when the test ends.
func newReader(t testing.TB) *sdkmetric.ManualReader {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { require.NoError(t, mp.Shutdown(context.Background())) })
	reg, err := loomotel.Register(mp)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, reg.Unregister()) })
	return reader
}

// A point is one data point as the reader collected it, with what its instrument is.
type point struct {
	Value int64
	Unit  string
	Kind  string // "counter" (monotonic cumulative sum), "updown" (non-monotonic sum), "gauge"
}

// collect reads r and returns every loom data point as `name{attr="value",...}` → point,
// attributes sorted by key.
func collect(t testing.TB, r *sdkmetric.ManualReader) map[string]point {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.Collect(context.Background(), &rm))
	out := map[string]point{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != loomotel.ScopeName {
			continue
		}
		for _, m := range sm.Metrics {
			var dps []metricdata.DataPoint[int64]
			var kind string
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				require.Equal(t, metricdata.CumulativeTemporality, d.Temporality, m.Name)
				dps, kind = d.DataPoints, "updown"
				if d.IsMonotonic {
					kind = "counter"
				}
			case metricdata.Gauge[int64]:
				dps, kind = d.DataPoints, "gauge"
			default:
				t.Fatalf("%s: unexpected data %T", m.Name, m.Data)
			}
			for _, dp := range dps {
				k := m.Name + attrs(dp.Attributes)
				_, dup := out[k]
				require.False(t, dup, "two points of %s", k)
				out[k] = point{dp.Value, m.Unit, kind}
			}
		}
	}
	return out
}

func attrs(s attribute.Set) string {
	var kv []string
	for _, a := range s.ToSlice() { // sorted by key
		kv = append(kv, fmt.Sprintf("%s=%q", a.Key, a.Value.String()))
	}
	return "{" + strings.Join(kv, ",") + "}"
}

// key is the key of name's point with the one attribute attr=value.
func key(name, attr, value string) string { return fmt.Sprintf("%s{%s=%q}", name, attr, value) }

// values keeps the values of the points with attribute attr=value.
func values(all map[string]point, attr, value string) map[string]int64 {
	out := map[string]int64{}
	for k, p := range all {
		if strings.Contains(k, fmt.Sprintf("%s=%q", attr, value)) {
			out[k] = p.Value
		}
	}
	return out
}

// limiterPoints is what the exporter must show of a limiter name whose stats are s: written out
// here from the field names, apart from the exporter's own table.
func limiterPoints(name string, s limiter.Stats) map[string]int64 {
	const attr = "loom.limiter.name"
	out := map[string]int64{
		key("loom.limiter.in_flight", attr, name):     int64(s.InFlight),
		key("loom.limiter.waiting", attr, name):       int64(s.Waiting),
		key("loom.limiter.limit", attr, name):         int64(s.Limit),
		key("loom.limiter.rate_waiting", attr, name):  int64(s.RateWaiting),
		key("loom.limiter.panics", attr, name):        s.Panicked,
		key("loom.limiter.limit_changes", attr, name): s.LimitChanges,
	}
	for outcome, n := range map[string]int64{"completed": s.Completed, "failed": s.Failed, "rejected": s.Rejected, "timed_out": s.TimedOut, "cancelled": s.Cancelled} {
		out[fmt.Sprintf("loom.limiter.calls{%s=%q,loom.limiter.outcome=%q}", attr, name, outcome)] = n
	}
	return out
}

// sortedKeys returns m's keys, sorted.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
