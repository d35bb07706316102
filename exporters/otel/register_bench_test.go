package otel_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/goloom/loom/exporters/internal/exporttest"
	loomotel "github.com/goloom/loom/exporters/otel"
	"github.com/goloom/loom/limiter"
)

// BenchmarkDo is a named limiter's uncontended call, with and without loom's instruments
// registered: they are read when a reader collects only, so the two must cost the same.
func BenchmarkDo(b *testing.B) {
	exporttest.BenchmarkDo(b, "registered", func(b *testing.B) {
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		b.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
		if _, err := loomotel.Register(mp); err != nil {
			b.Fatal(err)
		}
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkCollect is one collection of a process with 1,000 named limiters through the SDK's
// ManualReader.
func BenchmarkCollect(b *testing.B) {
	ls := make([]*limiter.Limiter, 1000)
	for i := range ls {
		ls[i] = limiter.New(8, limiter.WithName(fmt.Sprintf("bench-collect-%04d", i)))
	}
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	if _, err := loomotel.Register(mp); err != nil {
		b.Fatal(err)
	}
	b.Run("limiters=1000", func(b *testing.B) {
		var rm metricdata.ResourceMetrics
		b.ReportAllocs()
		for b.Loop() {
			if err := reader.Collect(context.Background(), &rm); err != nil {
				b.Fatal(err)
			}
		}
	})
	runtime.KeepAlive(ls)
}
