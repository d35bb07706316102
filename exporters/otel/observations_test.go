package otel_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/goloom/loom/exporters/internal/exporttest"
	loomotel "github.com/goloom/loom/exporters/otel"
	"github.com/goloom/loom/fleet"
	"github.com/goloom/loom/limiter"
)

// A recordingProvider hands out a meter whose instruments know their names and whose
// RegisterCallback keeps the callback, so that a test can run it with an Observer of its own:
// what the exporter observes, before any SDK aggregates it.
type recordingProvider struct {
	noop.MeterProvider
	meter *recordingMeter
}

func (p *recordingProvider) Meter(string, ...metric.MeterOption) metric.Meter { return p.meter }

type recordingMeter struct {
	noop.Meter
	callback metric.Callback
}

type namedCounter struct {
	noop.Int64ObservableCounter
	name string
}

type namedUpDown struct {
	noop.Int64ObservableUpDownCounter
	name string
}

type namedGauge struct {
	noop.Int64ObservableGauge
	name string
}

func (m *recordingMeter) Int64ObservableCounter(name string, _ ...metric.Int64ObservableCounterOption) (metric.Int64ObservableCounter, error) {
	return namedCounter{name: name}, nil
}

func (m *recordingMeter) Int64ObservableUpDownCounter(name string, _ ...metric.Int64ObservableUpDownCounterOption) (metric.Int64ObservableUpDownCounter, error) {
	return namedUpDown{name: name}, nil
}

func (m *recordingMeter) Int64ObservableGauge(name string, _ ...metric.Int64ObservableGaugeOption) (metric.Int64ObservableGauge, error) {
	return namedGauge{name: name}, nil
}

func (m *recordingMeter) RegisterCallback(f metric.Callback, _ ...metric.Observable) (metric.Registration, error) {
	m.callback = f
	return noop.Registration{}, nil
}

// A recordingObserver counts the observations of each series.
type recordingObserver struct {
	noop.Observer
	seen map[string]int
}

func (o *recordingObserver) ObserveInt64(obs metric.Int64Observable, _ int64, opts ...metric.ObserveOption) {
	name := fmt.Sprint(obs)
	switch i := obs.(type) {
	case namedCounter:
		name = i.name
	case namedUpDown:
		name = i.name
	case namedGauge:
		name = i.name
	}
	o.seen[name+attrs(metric.NewObserveConfig(opts).Attributes())]++
}

// TestOneObservationPerSeries: two limiters and two fleet semaphores of one name, and a name
// that is not valid UTF-8, make one observation per series. The OpenTelemetry spec asks
// callbacks not to observe one series twice; an SDK may sum the two, keep one, or warn.
func TestOneObservationPerSeries(t *testing.T) {
	p := &recordingProvider{meter: &recordingMeter{}}
	_, err := loomotel.Register(p)
	require.NoError(t, err)
	require.NotNil(t, p.meter.callback)

	name := exporttest.Unique("otel-once")
	a := limiter.New(1, limiter.WithName(name))
	b := limiter.New(2, limiter.WithName(name))
	c := limiter.New(1, limiter.WithName(name+"\xff"))
	d := limiter.New(1, limiter.WithName(name+"\xfe"))
	mem := fleet.NewMemory()
	s1 := fleet.New(mem, name, 3)
	defer s1.Close()
	s2 := fleet.New(mem, name, 3)
	defer s2.Close()

	o := &recordingObserver{seen: map[string]int{}}
	require.NoError(t, p.meter.callback(context.Background(), o))
	for k, n := range o.seen {
		assert.Equal(t, 1, n, "observations of %s", k)
	}
	for _, k := range []string{
		key("loom.limiter.limit", "loom.limiter.name", name),
		key("loom.limiter.limit", "loom.limiter.name", name+"\uFFFD"),
		key("loom.fleet.capacity", "loom.fleet.name", name),
	} {
		assert.Contains(t, o.seen, k)
	}
	runtime.KeepAlive([]*limiter.Limiter{a, b, c, d})
}
