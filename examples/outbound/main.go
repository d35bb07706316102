// Command outbound rate-limits outbound API calls with a limiter.
//
// A local test API allows at most 10 requests in flight and answers 429 Too Many Requests beyond
// that, like many SaaS APIs. 1,000 concurrent callers hit it first unprotected, then through
//
//	api := limiter.New(10,
//		limiter.WithAcquireTimeout(30*time.Second), // no slot within 30s: limiter.ErrRejected
//		limiter.WithTaskTimeout(5*time.Second))     // a call running longer: limiter.ErrTaskTimeout
//	status, err := limiter.Call(ctx, api, func(ctx context.Context) (int, error) { return get(ctx) })
//
// which is Java's ConcurrencyLimiterExecutor pattern (Semaphore(40), a 30 s acquire timeout, a
// task timeout) in Go. It prints the 429s each way, the most requests the API saw in flight,
// and the limiter's Stats. It takes about two seconds:
//
//	go run ./examples/outbound
//	go run ./examples/outbound -callers 200 -limit 10 -latency 10ms
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/goloom/loom/limiter"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "outbound:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, w io.Writer, args []string) error {
	fs := flag.NewFlagSet("outbound", flag.ContinueOnError)
	fs.SetOutput(w)
	callers := fs.Int("callers", 1000, "concurrent callers")
	allowed := fs.Int("allowed", 10, "requests the API allows in flight before answering 429")
	limit := fs.Int("limit", 10, "the limiter's limit")
	latency := fs.Duration("latency", 10*time.Millisecond, "how long the API takes per request")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *callers < 1 || *allowed < 1 || *limit < 1 {
		return errors.New("-callers, -allowed and -limit must be at least 1")
	}

	api := &testAPI{allowed: int64(*allowed), latency: *latency}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: api, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	url := "http://" + ln.Addr().String() + "/v1/generate"

	fmt.Fprintf(w, "test API on %s: %v per request, at most %d in flight, 429 beyond that\n", url, *latency, *allowed)
	fmt.Fprintf(w, "%s callers, each makes one request, all at once\n\n", commas(*callers))

	// Phase 1: every caller goes straight to the API.
	unprotected := newClient(*callers)
	defer unprotected.CloseIdleConnections()
	r1 := fanOut(ctx, *callers, api, func(ctx context.Context) (int, error) { return get(ctx, unprotected, url) })

	// Phase 2: the same callers go through a limiter sized to what the API allows.
	lim := limiter.New(*limit,
		limiter.WithName("generate-api"),
		limiter.WithAcquireTimeout(30*time.Second),
		limiter.WithTaskTimeout(5*time.Second))
	protected := newClient(*limit)
	defer protected.CloseIdleConnections()
	r2 := fanOut(ctx, *callers, api, func(ctx context.Context) (int, error) {
		return limiter.Call(ctx, lim, func(ctx context.Context) (int, error) { return get(ctx, protected, url) })
	})
	if err := lim.Shutdown(ctx); err != nil {
		return err
	}

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "callers go\t200 OK\t429\tother errors\tmost in flight at the API\tp50\tp99\ttook")
	for _, r := range []struct {
		name string
		phase
	}{
		{"straight to the API", r1},
		{fmt.Sprintf("through limiter.New(%d, ...)", *limit), r2},
	} {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%v\t%v\t%v\n", r.name, r.ok, r.tooMany, r.other, r.maxInFlight,
			r.p50.Round(time.Millisecond), r.p99.Round(time.Millisecond), r.took.Round(time.Millisecond))
	}
	tw.Flush()

	st := lim.Stats()
	fmt.Fprintln(w, "\nthe limiter's Stats():")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "Limit\tInFlight\tWaiting\tOverrunning\tSubmitted\tCompleted\tFailed\tRejected\tTimedOut\tCancelled\tPanicked")
	fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", st.Limit, st.InFlight, st.Waiting, st.Overrunning,
		st.Submitted, st.Completed, st.Failed, st.Rejected, st.TimedOut, st.Cancelled, st.Panicked)
	tw.Flush()
	fmt.Fprintln(w, "\nWaiting callers queue in the limiter (in FIFO order, cheaply), not at the API, and none is turned away.")

	if r2.tooMany != 0 || r2.other != 0 || r2.maxInFlight > int64(*limit) {
		return fmt.Errorf("through the limiter: %d answers 429, %d other errors, %d in flight at once",
			r2.tooMany, r2.other, r2.maxInFlight)
	}
	if st.Completed != int64(*callers) {
		return fmt.Errorf("limiter completed %d calls of %d", st.Completed, *callers)
	}
	return nil
}

// testAPI answers 200 after its latency while at most allowed requests are in flight, and 429 at
// once beyond that. It records the most requests it saw in flight, 429s included.
type testAPI struct {
	allowed  int64
	latency  time.Duration
	inFlight atomic.Int64
	maxSeen  atomic.Int64
}

func (a *testAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := a.inFlight.Add(1)
	defer a.inFlight.Add(-1) // before the response is sent: net/http flushes after we return
	for m := a.maxSeen.Load(); n > m && !a.maxSeen.CompareAndSwap(m, n); m = a.maxSeen.Load() {
	}
	if n > a.allowed {
		w.Header().Set("Retry-After", "1")
		http.Error(w, "too many requests in flight", http.StatusTooManyRequests)
		return
	}
	t := time.NewTimer(a.latency)
	defer t.Stop()
	select {
	case <-t.C:
		_, _ = io.WriteString(w, `{"text":"ok"}`)
	case <-r.Context().Done():
	}
}

func newClient(conns int) *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conns, DisableCompression: true}}
}

// get makes one request and returns the status code.
func get(ctx context.Context, c *http.Client, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, err
}

type phase struct {
	ok, tooMany, other int
	maxInFlight        int64
	p50, p99, took     time.Duration
}

// fanOut runs call from n goroutines at once and tallies the answers.
func fanOut(ctx context.Context, n int, api *testAPI, call func(context.Context) (int, error)) phase {
	api.maxSeen.Store(0)
	codes := make([]int, n)
	errs := make([]error, n)
	lat := make([]time.Duration, n)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			t0 := time.Now()
			codes[i], errs[i] = call(ctx)
			lat[i] = time.Since(t0)
		})
	}
	wg.Wait()
	p := phase{took: time.Since(start), maxInFlight: api.maxSeen.Load()}
	for i := range n {
		switch {
		case errs[i] != nil:
			p.other++
		case codes[i] == http.StatusOK:
			p.ok++
		case codes[i] == http.StatusTooManyRequests:
			p.tooMany++
		default:
			p.other++
		}
	}
	slices.Sort(lat)
	p.p50, p.p99 = lat[n*50/100], lat[min(n-1, n*99/100)]
	return p
}

// commas formats n with thousands separators: 1000 -> "1,000".
func commas(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
