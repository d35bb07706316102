package prometheus_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/exporters/prometheus/internal/promtest"
	"github.com/goloom/loom/limiter"
)

// TestScrapedByPrometheus lets a real Prometheus server scrape the collector while a limiter
// rejects calls, and asks it, through its HTTP API, what it stored: the rejections have a rate,
// and in-flight never exceeded the limit in any sample.
func TestScrapedByPrometheus(t *testing.T) {
	const limit = 2
	reg := newRegistry(t)
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	exposed := httptest.NewServer(mux)
	defer exposed.Close()

	// Four callers on a limiter of 2 that never queues: whenever both slots are held, a call is
	// rejected at once.
	api := limiter.New(limit, limiter.WithName("prom-api"), limiter.WithMaxWaiting(0))
	ctx, stop := context.WithCancel(t.Context())
	wait := load(ctx, 4, func(ctx context.Context) error {
		err := api.Do(ctx, func(context.Context) error {
			time.Sleep(200 * time.Microsecond) // the call's work
			return nil
		})
		if err != nil {
			time.Sleep(time.Millisecond) // a rejected caller backs off, as a client would
		}
		return err
	})
	defer func() { stop(); wait() }()

	prom := promtest.Start(t, strings.TrimPrefix(exposed.URL, "http://"))

	// rate() needs two samples of the counter in its window.
	var rate []promtest.Series
	require.Eventually(t, func() bool {
		var err error
		rate, err = prom.Query(`rate(loom_limiter_calls_total{limiter="prom-api",outcome="rejected"}[5s])`)
		require.NoError(t, err)
		return len(rate) == 1 && rate[0].Samples[0].V > 0
	}, 60*time.Second, 50*time.Millisecond, "Prometheus never saw a rejection rate; its log:\n%s", prom.Log())
	assert.Equal(t, "loom", rate[0].Metric["job"])
	assert.Equal(t, "prom-api", rate[0].Metric["limiter"])
	t.Logf("rejections: %.0f/s", rate[0].Samples[0].V)

	// Every sample stored so far, raw.
	busiest := 0.0
	for _, tt := range []struct {
		metric string
		check  func(v float64) bool
	}{
		{"loom_limiter_in_flight", func(v float64) bool { return v >= 0 && v <= limit }},
		{"loom_limiter_limit", func(v float64) bool { return v == limit }},
		{"loom_limiter_waiting", func(v float64) bool { return v == 0 }}, // WithMaxWaiting(0)
	} {
		got, err := prom.Query(tt.metric + `{limiter="prom-api"}[10m]`)
		require.NoError(t, err)
		require.Len(t, got, 1, tt.metric)
		require.GreaterOrEqual(t, len(got[0].Samples), 2, tt.metric)
		for _, s := range got[0].Samples {
			assert.True(t, tt.check(s.V), "%s = %v at %v", tt.metric, s.V, s.T)
			if tt.metric == "loom_limiter_in_flight" {
				busiest = max(busiest, s.V)
			}
		}
	}
	assert.Positive(t, busiest, "some scrape saw calls in flight")
	// Calls ran: every completed-calls sample grows.
	got, err := prom.Query(`loom_limiter_calls_total{limiter="prom-api",outcome="completed"}[10m]`)
	require.NoError(t, err)
	require.Len(t, got, 1)
	for i := 1; i < len(got[0].Samples); i++ {
		assert.GreaterOrEqual(t, got[0].Samples[i].V, got[0].Samples[i-1].V, "a counter never goes down")
	}
	assert.Positive(t, got[0].Samples[len(got[0].Samples)-1].V)
	up, err := prom.Query(`up{job="loom"}`)
	require.NoError(t, err)
	require.Len(t, up, 1)
	assert.Equal(t, 1.0, up[0].Samples[0].V, "the scrape succeeds")
}

// load calls do in a loop on each of workers goroutines until ctx ends; it returns a function
// that waits for the workers.
func load(ctx context.Context, workers int, do func(context.Context) error) (wait func()) {
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				_ = do(ctx)
			}
		})
	}
	return wg.Wait
}
