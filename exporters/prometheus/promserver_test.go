package prometheus_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A promServer is a real Prometheus server (Debian's prometheus package) that the test started
// on a loopback port, with a config of its own and a storage directory in the test's temp dir.
// It is stopped when the test ends.
type promServer struct {
	url    string
	client *http.Client
	log    *lockedBuffer
}

// scrapeEvery is the scrape interval of the test's servers: short, so that a test sees several
// samples in a few seconds.
const scrapeEvery = 200 * time.Millisecond

// startPrometheus starts Prometheus scraping target (host:port, path /metrics) as job "loom".
// Without a prometheus binary the test is skipped, unless CI=true: then it fails.
func startPrometheus(t *testing.T, target string) *promServer {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("prometheus is not installed (apt-get install prometheus): %v", err)
		}
		t.Skipf("prometheus is not installed (apt-get install prometheus): %v", err)
	}
	dir := t.TempDir()
	config := filepath.Join(dir, "prometheus.yml")
	require.NoError(t, os.WriteFile(config, fmt.Appendf(nil, `global:
  scrape_interval: %[1]s
  scrape_timeout: %[1]s
  evaluation_interval: %[1]s
scrape_configs:
  - job_name: loom
    static_configs:
      - targets: [%[2]q]
`, scrapeEvery, target), 0o644))

	// The port is free when we pick it, and another process could take it before Prometheus
	// binds it: then Prometheus exits, and we try another.
	var lastLog string
	for range 3 {
		addr := freeAddr(t)
		log := &lockedBuffer{}
		cmd := exec.Command(bin,
			"--config.file="+config,
			"--storage.tsdb.path="+filepath.Join(dir, "data"),
			"--web.listen-address="+addr,
			"--log.level=warn",
		)
		cmd.Stdout, cmd.Stderr = log, log
		require.NoError(t, cmd.Start())
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		p := &promServer{url: "http://" + addr, client: &http.Client{Timeout: 5 * time.Second}, log: log}
		if p.waitReady(exited) {
			t.Cleanup(func() {
				_ = cmd.Process.Signal(os.Interrupt)
				select {
				case <-exited:
				case <-time.After(10 * time.Second):
					_ = cmd.Process.Kill()
					<-exited
				}
				p.client.CloseIdleConnections()
				if t.Failed() {
					t.Logf("prometheus's log:\n%s", log.String())
				}
			})
			return p
		}
		_ = cmd.Process.Kill()
		<-exited
		lastLog = log.String()
	}
	t.Fatalf("prometheus did not start:\n%s", lastLog)
	return nil
}

// waitReady polls /-/ready until Prometheus answers, or it exits, or 60 s pass.
func (p *promServer) waitReady(exited <-chan error) bool {
	for start := time.Now(); time.Since(start) < 60*time.Second; {
		select {
		case <-exited:
			return false
		case <-time.After(20 * time.Millisecond):
		}
		resp, err := p.client.Get(p.url + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true
			}
		}
	}
	return false
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// A sample is one point of a series.
type sample struct {
	T time.Time
	V float64
}

// A promSeries is a series of a query's result: its labels and its samples (one for an
// instant vector).
type promSeries struct {
	Metric  map[string]string
	Samples []sample
}

// query evaluates expr at now through the HTTP API (/api/v1/query): an instant vector or, for a
// range selector, a matrix of raw samples.
func (p *promServer) query(expr string) ([]promSeries, error) {
	return p.api("/api/v1/query", url.Values{"query": {expr}})
}

func (p *promServer) api(path string, params url.Values) ([]promSeries, error) {
	resp, err := p.client.PostForm(p.url+path, params)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  []any             `json:"value"`
				Values [][]any           `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("%s %q: %s", path, params.Get("query"), body.Error)
	}
	var out []promSeries
	for _, r := range body.Data.Result {
		s := promSeries{Metric: r.Metric}
		points := r.Values
		if r.Value != nil {
			points = [][]any{r.Value}
		}
		for _, pt := range points {
			smp, err := parsePoint(pt)
			if err != nil {
				return nil, err
			}
			s.Samples = append(s.Samples, smp)
		}
		out = append(out, s)
	}
	return out, nil
}

// parsePoint reads a [unix seconds, "value"] pair of the API.
func parsePoint(pt []any) (sample, error) {
	if len(pt) != 2 {
		return sample{}, fmt.Errorf("a point of %d elements", len(pt))
	}
	ts, ok1 := pt[0].(float64)
	vs, ok2 := pt[1].(string)
	if !ok1 || !ok2 {
		return sample{}, errors.New("a point that is not [time, \"value\"]")
	}
	v, err := strconv.ParseFloat(vs, 64)
	if err != nil {
		return sample{}, err
	}
	return sample{T: time.UnixMilli(int64(ts * 1000)), V: v}, nil
}

// lockedBuffer collects a process's output while the test may read it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
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
