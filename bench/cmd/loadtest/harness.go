package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goloom/loom/scope"
)

// ---- latency summaries ----

// summary describes a set of latencies.
type summary struct {
	n                          int
	mean, p50, p95, p99, worst time.Duration
}

func summarize(d []time.Duration) summary {
	if len(d) == 0 {
		return summary{}
	}
	d = slices.Clone(d)
	slices.Sort(d)
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	q := func(p float64) time.Duration { // nearest rank
		i := int(math.Ceil(p*float64(len(d)))) - 1
		return d[min(max(i, 0), len(d)-1)]
	}
	return summary{n: len(d), mean: sum / time.Duration(len(d)), p50: q(0.50), p95: q(0.95), p99: q(0.99), worst: d[len(d)-1]}
}

// ---- CPU work ----

var sink atomic.Uint64 // keeps the compiler from dropping the work

// burn does iters rounds of arithmetic: a fixed amount of CPU work, however long the scheduler
// makes it take. (A loop that spins until a deadline would be unfair: it finishes on time
// whether or not it got the CPU.)
func burn(iters int) {
	x := uint64(iters)
	for range iters {
		x = x*6364136223846793005 + 1442695040888963407
	}
	sink.Add(x)
}

// calibrate returns how many rounds of burn take d on one core of this machine, from the fastest
// of a few tries (the machine may be busy).
func calibrate(d time.Duration) int {
	const probe = 2_000_000
	best := time.Duration(math.MaxInt64)
	for range 5 {
		start := time.Now()
		burn(probe)
		best = min(best, time.Since(start))
	}
	return max(1, int(float64(probe)*float64(d)/float64(best)))
}

// ---- HTTP servers ----

// model is how a server runs its handlers' work.
type model int

const (
	// poolModel hands every request's work to a fixed pool of worker goroutines and waits for it:
	// Tomcat with server.tomcat.threads.max=200 (or newFixedThreadPool(200)).
	poolModel model = iota
	// scopeModel runs the work on the request's own goroutine, as a subtask of a scope opened on
	// the request's context: one goroutine per request, Java's virtual thread per request.
	scopeModel
)

func (m model) String() string {
	if m == poolModel {
		return "pool"
	}
	return "scope"
}

// work is what a handler does for a request.
type work func(ctx context.Context) error

type testServer struct {
	url     string
	srv     *http.Server
	jobs    chan job
	workers sync.WaitGroup
}

type job struct {
	ctx  context.Context
	fn   work
	done chan error
}

// startServer serves fn at /work on a loopback port, under the given model; workers is the size
// of the pool for poolModel.
func startServer(m model, workers int, fn work) (*testServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	ts := &testServer{url: "http://" + ln.Addr().String() + "/work"}
	var h http.HandlerFunc
	switch m {
	case poolModel:
		ts.jobs = make(chan job)
		for range workers {
			ts.workers.Go(func() {
				for j := range ts.jobs {
					j.done <- j.fn(j.ctx)
				}
			})
		}
		h = func(w http.ResponseWriter, r *http.Request) {
			j := job{ctx: r.Context(), fn: fn, done: make(chan error, 1)}
			select {
			case ts.jobs <- j: // queued until a worker is free, in arrival order
			case <-r.Context().Done():
				return
			}
			reply(w, <-j.done)
		}
	case scopeModel:
		h = func(w http.ResponseWriter, r *http.Request) {
			s := scope.Open(r.Context(), scope.WithTimeout(time.Minute))
			defer s.Close()
			s.Go(fn)
			reply(w, s.Join())
		}
	}
	ts.srv = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = ts.srv.Serve(ln) }()
	return ts, nil
}

func reply(w http.ResponseWriter, err error) {
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	_, _ = io.WriteString(w, "done")
}

// close stops the server, waits for its handlers and stops the pool's workers.
func (ts *testServer) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = ts.srv.Shutdown(ctx)
	if ts.jobs != nil {
		close(ts.jobs)
		ts.workers.Wait()
	}
}

// ---- load generator ----

// loadResult is what a closed-loop load run measured.
type loadResult struct {
	answered   int             // requests answered 200
	failed     int             // requests that failed
	latencies  []time.Duration // of every request answered 200
	elapsed    time.Duration   // from the start until the last answer
	throughput float64         // answered per second of elapsed
}

// load runs clients concurrent clients against url for d, like k6's virtual users: each sends
// a request, waits for the answer and sends the next, until d has passed. Requests under way at
// the end are awaited and counted, as k6 does, so the throughput is every answer over the time
// until the last one: waves of answers that straddle the end do not skew it.
func load(ctx context.Context, url string, clients int, d time.Duration, prog *progress, label string) (loadResult, error) {
	tr := &http.Transport{MaxIdleConnsPerHost: clients, DisableCompression: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 2 * time.Minute}

	var (
		answered atomic.Int64 // for the progress line
		mu       sync.Mutex
		res      loadResult
		firstErr error
	)
	start := time.Now()
	stop := prog.track(label, func() string {
		return fmt.Sprintf("%v/%v, %s requests answered", time.Since(start).Truncate(time.Second), d, commas(answered.Load()))
	})
	defer stop()
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			var lat []time.Duration
			failed := 0
			for ctx.Err() == nil && time.Since(start) < d {
				t0 := time.Now()
				if err := get(ctx, client, url); err != nil {
					failed++
					mu.Lock()
					firstErr = cmpOr(firstErr, err)
					mu.Unlock()
					continue
				}
				lat = append(lat, time.Since(t0))
				answered.Add(1)
			}
			mu.Lock()
			res.latencies = append(res.latencies, lat...)
			res.failed += failed
			mu.Unlock()
		})
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	res.answered = len(res.latencies)
	res.throughput = float64(res.answered) / res.elapsed.Seconds()
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if res.answered == 0 && firstErr != nil {
		return res, fmt.Errorf("no request succeeded: %w", firstErr)
	}
	return res, nil
}

func get(ctx context.Context, c *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return errors.New(resp.Status)
	}
	return nil
}

// sleep blocks for d or until ctx ends, like an I/O call that honours its context.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// ---- goroutine sampling ----

// goroutineSampler records the most goroutines seen above a baseline while it runs.
type goroutineSampler struct {
	base int
	peak atomic.Int64
	stop chan struct{}
	done chan struct{}
}

func sampleGoroutines() *goroutineSampler {
	g := &goroutineSampler{base: runtime.NumGoroutine(), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(g.done)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			g.sample()
			select {
			case <-t.C:
			case <-g.stop:
				return
			}
		}
	}()
	return g
}

func (g *goroutineSampler) sample() {
	n := int64(runtime.NumGoroutine() - g.base - 1) // not counting the sampler
	for m := g.peak.Load(); n > m && !g.peak.CompareAndSwap(m, n); m = g.peak.Load() {
	}
}

// finish stops sampling and returns the peak.
func (g *goroutineSampler) finish() int64 {
	close(g.stop)
	<-g.done
	return g.peak.Load()
}
