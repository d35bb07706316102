package otel

import (
	"context"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/goloom/loom/exporters/internal/kept"
	"github.com/goloom/loom/limiter"
)

// The exporter forgets a name that has left the registry: the attributes it keeps between
// collections do not grow with every limiter the process ever made.
func TestExporterForgetsLeftNames(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	e, _, err := register(mp)
	require.NoError(t, err)
	collect := func() {
		var rm metricdata.ResourceMetrics
		require.NoError(t, reader.Collect(context.Background(), &rm))
	}
	kept := func(name string) bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return slices.Contains(e.names.Keys(), kept.Key{Label: "loom.limiter.name", Name: name})
	}
	const name = "otel-kept-forget"
	func() {
		l := limiter.New(1, limiter.WithName(name))
		collect()
		require.True(t, kept(name), "a name observed is kept for the next collection")
		runtime.KeepAlive(l)
	}()
	require.Eventually(t, func() bool {
		runtime.GC()
		collect()
		return !kept(name)
	}, 10*time.Second, 10*time.Millisecond, "the exporter forgets a collected limiter's name")
}
