package otel_test

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	loomotel "github.com/goloom/loom/exporters/otel"
	"github.com/goloom/loom/limiter"
)

// Register loom's instruments on a MeterProvider, and every collection reads every named
// limiter: here, the call in flight while it runs.
func ExampleRegister() {
	reader := sdkmetric.NewManualReader() // in a service: a periodic reader and an exporter
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	reg, err := loomotel.Register(mp)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer reg.Unregister()

	api := limiter.New(40, limiter.WithName("llm-api"))
	inFlight := func() {
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			fmt.Println(err)
			return
		}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if m.Name != "loom.limiter.in_flight" {
					continue
				}
				for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
					if v, _ := dp.Attributes.Value("loom.limiter.name"); v == attribute.StringValue("llm-api") {
						fmt.Printf("%s %s %d %s\n", m.Name, dp.Attributes.Encoded(attribute.DefaultEncoder()), dp.Value, m.Unit)
					}
				}
			}
		}
	}
	_ = api.Do(context.Background(), func(context.Context) error {
		inFlight() // collected while the call runs
		return nil
	})
	inFlight()
	// Output:
	// loom.limiter.in_flight loom.limiter.name=llm-api 1 {call}
	// loom.limiter.in_flight loom.limiter.name=llm-api 0 {call}
}
