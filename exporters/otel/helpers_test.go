package otel_test

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

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	loomotel "github.com/goloom/loom/exporters/otel"
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

// add returns the field-by-field sum of two Stats structs of integer fields.
func add[S any](a, b S) S {
	va, vb := reflect.ValueOf(&a).Elem(), reflect.ValueOf(b)
	for i := range va.NumField() {
		f := va.Field(i)
		f.SetInt(f.Int() + vb.Field(i).Int())
	}
	return a
}

// atRest collects r at an instant when stats reads the same before and after, and returns the
// points and those stats: a collection whose numbers moved meanwhile is taken again.
func atRest[S comparable](t testing.TB, r *sdkmetric.ManualReader, stats func() S) (map[string]point, S) {
	t.Helper()
	for start := time.Now(); ; {
		before := stats()
		got := collect(t, r)
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

// sortedKeys returns m's keys, sorted.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
