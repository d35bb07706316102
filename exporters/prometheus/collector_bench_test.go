package prometheus_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/goloom/loom/exporters/internal/exporttest"
	loomprom "github.com/goloom/loom/exporters/prometheus"
	"github.com/goloom/loom/limiter"
)

// BenchmarkDo is a named limiter's uncontended call, with and without the collector registered:
// the collector reads at scrape time only, so the two must cost the same.
func BenchmarkDo(b *testing.B) {
	exporttest.BenchmarkDo(b, "collector", func(b *testing.B) {
		reg := prometheus.NewRegistry()
		reg.MustRegister(loomprom.NewCollector())
		if _, err := reg.Gather(); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkScrape is one scrape of a process with 1,000 named limiters: the collector's own
// Collect (reading loom's registry and making the 11,000 samples), the registry's Gather of it
// (what a handler encodes), and the text exposition a Prometheus server reads. Beside them, the
// floor: Gather of the same 11,000 series made beforehand as const metrics, which is
// client_golang's own work. The limiters are made as a service makes them: with a rate and
// timeouts, and in an order other than their names' (the registry lists them in the order they
// were made, an exposition in the order of their names).
func BenchmarkScrape(b *testing.B) {
	const n = 1000
	ls := make([]*limiter.Limiter, n)
	for i := range ls {
		ls[i] = limiter.New(8, limiter.WithName(fmt.Sprintf("bench-scrape-%04d", i*7919%n)), // 7919 is prime: a permutation
			limiter.WithRate(1000, 100), limiter.WithAcquireTimeout(time.Second), limiter.WithTaskTimeout(time.Minute), limiter.WithMaxWaiting(100))
	}
	c := loomprom.NewCollector()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	families, err := reg.Gather()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("limiters=1000/collect", func(b *testing.B) {
		ch := make(chan prometheus.Metric, 16*n)
		b.ReportAllocs()
		defer reportCPU(b)()
		for b.Loop() {
			c.Collect(ch)
			for len(ch) > 0 {
				<-ch
			}
		}
	})
	b.Run("limiters=1000/gather", func(b *testing.B) {
		b.ReportAllocs()
		defer reportCPU(b)()
		for b.Loop() {
			if _, err := reg.Gather(); err != nil {
				b.Fatal(err)
			}
		}
	})
	// busy: every limiter has completed a call since the last scrape, as in a process that uses
	// them all (1,000 of the 11,000 values change); the calls are not timed.
	b.Run("limiters=1000/gather-busy", func(b *testing.B) {
		b.ReportAllocs()
		var cpu time.Duration
		for b.Loop() {
			b.StopTimer()
			for _, l := range ls {
				if err := l.Do(b.Context(), func(context.Context) error { return nil }); err != nil {
					b.Fatal(err)
				}
			}
			start, _ := cpuTime()
			b.StartTimer()
			if _, err := reg.Gather(); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			end, _ := cpuTime()
			cpu += end - start
			b.StartTimer()
		}
		b.ReportMetric(float64(cpu)/float64(b.N)/1e6, "cpu-ms/op")
	})
	h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	// http: the handler's whole answer, written to a ResponseWriter that takes the bytes as a
	// socket does, without keeping them (an httptest.ResponseRecorder's growing buffer cost a
	// scrape 2.1 MB and a tenth of its time, which no server spends).
	b.Run("limiters=1000/http", func(b *testing.B) {
		b.ReportAllocs()
		defer reportCPU(b)()
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		for b.Loop() {
			w := &discardWriter{header: http.Header{}}
			h.ServeHTTP(w, req)
			if w.code != http.StatusOK || w.n == 0 {
				b.Fatal(w.code, w.n)
			}
		}
	})
	floor := prometheus.NewRegistry()
	floor.MustRegister(newConstCollector(families))
	b.Run("limiters=1000/gather-const-baseline", func(b *testing.B) {
		b.ReportAllocs()
		defer reportCPU(b)()
		for b.Loop() {
			if _, err := floor.Gather(); err != nil {
				b.Fatal(err)
			}
		}
	})
	runtime.KeepAlive(ls)
}

// constCollector collects const metrics made once: a Collect that costs nothing but its sends,
// so that a Gather of it is client_golang's share of a scrape.
type constCollector []prometheus.Metric

func newConstCollector(families []*dto.MetricFamily) constCollector {
	var cc constCollector
	for _, f := range families {
		for _, m := range f.GetMetric() {
			var names, values []string
			for _, l := range m.GetLabel() {
				names, values = append(names, l.GetName()), append(values, l.GetValue())
			}
			desc := prometheus.NewDesc(f.GetName(), f.GetHelp(), names, nil)
			v, kind := m.GetGauge().GetValue(), prometheus.GaugeValue
			if f.GetType() == dto.MetricType_COUNTER {
				v, kind = m.GetCounter().GetValue(), prometheus.CounterValue
			}
			cc = append(cc, prometheus.MustNewConstMetric(desc, kind, v, values...))
		}
	}
	return cc
}

func (constCollector) Describe(chan<- *prometheus.Desc) {} // unchecked

func (cc constCollector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range cc {
		ch <- m
	}
}

// reportCPU reports the CPU time per op from now to the call of the function it returns, as
// cpu-ms/op: the scrape's cost with its GC, which the wall clock of a shared machine inflates.
func reportCPU(b *testing.B) func() {
	start, ok := cpuTime()
	return func() {
		if end, _ := cpuTime(); ok && b.N > 0 {
			b.ReportMetric(float64(end-start)/float64(b.N)/1e6, "cpu-ms/op")
		}
	}
}

// A discardWriter is an http.ResponseWriter that counts what it is given and keeps none of it.
type discardWriter struct {
	header http.Header
	code   int
	n      int
}

func (w *discardWriter) Header() http.Header  { return w.header }
func (w *discardWriter) WriteHeader(code int) { w.code = code }
func (w *discardWriter) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	w.n += len(p)
	return len(p), nil
}
