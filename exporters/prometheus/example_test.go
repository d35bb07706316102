package prometheus_test

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	loomprom "github.com/goloom/loom/exporters/prometheus"
	"github.com/goloom/loom/limiter"
)

// Register the collector on a registry, and a scrape shows every named limiter: here, the call
// in flight while it runs.
func ExampleNewCollector() {
	reg := prometheus.NewRegistry()
	reg.MustRegister(loomprom.NewCollector())

	api := limiter.New(40, limiter.WithName("llm-api"))
	inFlight := func() {
		families, err := reg.Gather()
		if err != nil {
			fmt.Println(err)
			return
		}
		for _, f := range families {
			for _, m := range f.GetMetric() {
				if f.GetName() == "loom_limiter_in_flight" && m.GetLabel()[0].GetValue() == "llm-api" {
					fmt.Printf("loom_limiter_in_flight{limiter=\"llm-api\"} %v\n", m.GetGauge().GetValue())
				}
			}
		}
	}
	_ = api.Do(context.Background(), func(context.Context) error {
		inFlight() // scraped while the call runs
		return nil
	})
	inFlight()
	// Output:
	// loom_limiter_in_flight{limiter="llm-api"} 1
	// loom_limiter_in_flight{limiter="llm-api"} 0
}
