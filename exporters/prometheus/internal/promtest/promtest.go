// Package promtest starts a real Prometheus server for tests (Debian's prometheus package, which
// CI installs) and asks it what it stored, through its HTTP API.
package promtest

import (
	"bytes"
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
)

// ScrapeEvery is the scrape interval of the servers Start starts: short, so that a test sees
// several samples in a few seconds.
const ScrapeEvery = 200 * time.Millisecond

// A Server is a Prometheus server that a test started on a loopback port, with a config of its
// own and a storage directory in the test's temp dir. It is stopped when the test ends.
type Server struct {
	URL    string
	client *http.Client
	log    *lockedBuffer
}

// Start starts Prometheus scraping target (host:port, path /metrics) as job "loom", and waits
// until it has tried a first scrape (Prometheus hands discovered targets to its scrape loops
// every 5 s, so that takes a few seconds; the target need not be up yet). Without a prometheus binary on $PATH the test is skipped, unless CI=true:
// then it fails.
func Start(t testing.TB, target string) *Server {
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
	if err := os.WriteFile(config, fmt.Appendf(nil, `global:
  scrape_interval: %[1]s
  scrape_timeout: %[1]s
  evaluation_interval: %[1]s
scrape_configs:
  - job_name: loom
    static_configs:
      - targets: [%[2]q]
`, ScrapeEvery, target), 0o644); err != nil {
		t.Fatal(err)
	}

	// The port is free when we pick it, and another process could take it before Prometheus
	// binds it: then Prometheus exits, and we try another.
	var lastLog string
	for range 3 {
		addr := FreeAddr(t)
		log := &lockedBuffer{}
		cmd := exec.Command(bin,
			"--config.file="+config,
			"--storage.tsdb.path="+filepath.Join(dir, "data"),
			"--web.listen-address="+addr,
			"--log.level=warn",
		)
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		s := &Server{URL: "http://" + addr, client: &http.Client{Timeout: 10 * time.Second}, log: log}
		if s.waitReady(exited) {
			defer s.waitFirstScrape(t)
			t.Cleanup(func() {
				_ = cmd.Process.Signal(os.Interrupt)
				select {
				case <-exited:
				case <-time.After(10 * time.Second):
					_ = cmd.Process.Kill()
					<-exited
				}
				s.client.CloseIdleConnections()
				if t.Failed() {
					t.Logf("prometheus's log:\n%s", log.String())
				}
			})
			return s
		}
		_ = cmd.Process.Kill()
		<-exited
		lastLog = log.String()
	}
	t.Fatalf("prometheus did not start:\n%s", lastLog)
	return nil
}

// waitFirstScrape polls until up{job="loom"} has a sample: Prometheus has tried the target once.
func (s *Server) waitFirstScrape(t testing.TB) {
	t.Helper()
	for start := time.Now(); ; {
		up, err := s.Query(`up{job="loom"}`)
		if err != nil {
			t.Fatal(err)
		}
		if len(up) > 0 {
			return
		}
		if time.Since(start) > 60*time.Second {
			t.Fatalf("prometheus has not scraped its target in 60 s; its log:\n%s", s.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitReady polls /-/ready until Prometheus answers, or it exits, or 60 s pass.
func (s *Server) waitReady(exited <-chan error) bool {
	for start := time.Now(); time.Since(start) < 60*time.Second; {
		select {
		case <-exited:
			return false
		case <-time.After(20 * time.Millisecond):
		}
		resp, err := s.client.Get(s.URL + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true
			}
		}
	}
	return false
}

// Version returns the server's version, as its build information says.
func (s *Server) Version() (string, error) {
	resp, err := s.client.Get(s.URL + "/api/v1/status/buildinfo")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var body struct {
		Data struct {
			Version string `json:"version"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return "", err
	}
	if body.Data.Version == "" {
		return "", errors.New("buildinfo: no version")
	}
	return body.Data.Version, nil
}

// Log returns what Prometheus has logged so far.
func (s *Server) Log() string { return s.log.String() }

// FreeAddr returns a loopback address whose port was free a moment ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// A Sample is one point of a series.
type Sample struct {
	T time.Time
	V float64
}

// A Series is a series of a query's result: its labels and its samples (one for an instant
// vector).
type Series struct {
	Metric  map[string]string
	Samples []Sample
}

// Query evaluates expr now through the HTTP API (/api/v1/query): an instant vector or, for a
// range selector, a matrix of the raw samples.
func (s *Server) Query(expr string) ([]Series, error) {
	return s.api("/api/v1/query", url.Values{"query": {expr}})
}

// QueryRange evaluates expr from start to end every step (/api/v1/query_range).
func (s *Server) QueryRange(expr string, start, end time.Time, step time.Duration) ([]Series, error) {
	unix := func(t time.Time) string { return strconv.FormatFloat(float64(t.UnixMilli())/1000, 'f', 3, 64) }
	return s.api("/api/v1/query_range", url.Values{
		"query": {expr},
		"start": {unix(start)},
		"end":   {unix(end)},
		"step":  {strconv.FormatFloat(step.Seconds(), 'f', 3, 64)},
	})
}

func (s *Server) api(path string, params url.Values) ([]Series, error) {
	resp, err := s.client.PostForm(s.URL+path, params)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
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
	var out []Series
	for _, r := range body.Data.Result {
		ser := Series{Metric: r.Metric}
		points := r.Values
		if r.Value != nil {
			points = [][]any{r.Value}
		}
		for _, pt := range points {
			smp, err := parsePoint(pt)
			if err != nil {
				return nil, err
			}
			ser.Samples = append(ser.Samples, smp)
		}
		out = append(out, ser)
	}
	return out, nil
}

// parsePoint reads a [unix seconds, "value"] pair of the API.
func parsePoint(pt []any) (Sample, error) {
	if len(pt) != 2 {
		return Sample{}, fmt.Errorf("a point of %d elements", len(pt))
	}
	ts, ok1 := pt[0].(float64)
	vs, ok2 := pt[1].(string)
	if !ok1 || !ok2 {
		return Sample{}, errors.New("a point that is not [time, \"value\"]")
	}
	v, err := strconv.ParseFloat(vs, 64)
	if err != nil {
		return Sample{}, err
	}
	return Sample{T: time.UnixMilli(int64(ts * 1000)), V: v}, nil
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
