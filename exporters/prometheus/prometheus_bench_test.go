package prometheus_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/goloom/loom/exporters/prometheus/internal/promtest"
	"github.com/goloom/loom/limiter"
)

// BenchmarkPrometheusScrape lets a real Prometheus server scrape 1,000 named limiters (as
// BenchmarkScrape makes them) every 200 ms for 10 s, with and without the gzip it asks for, and
// reports the median of its own scrape_duration_seconds: the time from sending the request to
// having parsed and stored the 11,000 samples, on the same machine. Its floor, target=static, is
// the same scrape of the same bytes made once beforehand: Prometheus's own share. It reports too
// the median time of the handler's ServeHTTP, measured in the target. Run it with
// -benchtime=1x; ns/op is the whole run's.
func BenchmarkPrometheusScrape(b *testing.B) {
	const n = 1000
	ls := make([]*limiter.Limiter, n)
	for i := range ls {
		ls[i] = limiter.New(8, limiter.WithName(fmt.Sprintf("bench-prom-%04d", i*7919%n)),
			limiter.WithRate(1000, 100), limiter.WithAcquireTimeout(time.Second), limiter.WithTaskTimeout(time.Minute), limiter.WithMaxWaiting(100))
	}
	reg := newRegistry(b)
	loom := promhttp.HandlerFor(reg, promhttp.HandlerOpts{DisableCompression: true})
	rec := httptest.NewRecorder()
	loom.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body, contentType := rec.Body.Bytes(), rec.Header().Get("Content-Type")
	static := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", contentType)
		_, _ = w.Write(body)
	})
	for _, target := range []struct {
		name string
		h    http.Handler
	}{
		{"loom/gzip", promhttp.HandlerFor(reg, promhttp.HandlerOpts{})},
		{"loom", loom},
		{"static", static},
	} {
		b.Run(fmt.Sprintf("limiters=%d/target=%s", n, target.name), func(b *testing.B) {
			var mu sync.Mutex
			var served []float64 // the handler's time of each scrape, in ms
			exposed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				start := time.Now()
				target.h.ServeHTTP(w, r)
				mu.Lock()
				served = append(served, float64(time.Since(start).Microseconds())/1e3)
				mu.Unlock()
			}))
			defer exposed.Close()
			var ms []float64
			for b.Loop() {
				prom := promtest.Start(b, strings.TrimPrefix(exposed.URL, "http://"))
				start := time.Now()
				time.Sleep(10 * time.Second) // scrapes go on meanwhile; nothing is waited for
				got, err := prom.Query(`scrape_duration_seconds{job="loom"}[` + fmt.Sprint(time.Since(start).Milliseconds()) + `ms]`)
				if err != nil || len(got) != 1 {
					b.Fatalf("%v %v; its log:\n%s", got, err, prom.Log())
				}
				for _, s := range got[0].Samples {
					ms = append(ms, s.V*1e3)
				}
				samples, err := prom.Query(`scrape_samples_scraped{job="loom"}`)
				if err != nil || len(samples) != 1 || samples[0].Samples[0].V != 11*n {
					b.Fatalf("Prometheus did not store the 11,000 samples of a scrape: %v %v", samples, err)
				}
			}
			slices.Sort(ms)
			b.ReportMetric(ms[len(ms)/2], "scrape-p50-ms")
			mu.Lock()
			slices.Sort(served)
			b.ReportMetric(served[len(served)/2], "handler-p50-ms")
			mu.Unlock()
			b.ReportMetric(float64(len(ms)), "scrapes")
		})
	}
	runtime.KeepAlive(ls)
}
