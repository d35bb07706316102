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
// and the limiter's Stats.
//
// A second local API limits call starts instead: at most 10 per second, in bursts of 10 (a token
// bucket, as most per-second quotas are), and 429 beyond that. A burst of callers straight at it
// gets 429s; through
//
//	api := limiter.New(10, limiter.WithRate(10, 10), limiter.WithAcquireTimeout(30*time.Second))
//
// the calls start 10 at once, then one every 100 ms, in the limiter's one FIFO queue, and none is
// refused. Both parts take about four seconds:
//
//	go run ./examples/outbound
//	go run ./examples/outbound -callers 200 -limit 10 -latency 10ms -rate 10 -rate-callers 30
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
	rate := fs.Int("rate", 10, "call starts per second the rate-limited API allows, in bursts of as many, before answering 429")
	rateCallers := fs.Int("rate-callers", 30, "concurrent callers of the rate-limited API")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *callers < 1 || *allowed < 1 || *limit < 1 || *rate < 1 || *rateCallers < 1 {
		return errors.New("-callers, -allowed, -limit, -rate and -rate-callers must be at least 1")
	}

	api := &testAPI{allowed: int64(*allowed), latency: *latency}
	rated := newRateAPI(*rate, *rate, rateJitter)
	mux := http.NewServeMux()
	mux.Handle("/v1/generate", api)
	mux.Handle("/v1/search", rated)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
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
	api.maxSeen.Store(0)
	r1 := fanOut(ctx, *callers, func(ctx context.Context) (int, error) { return get(ctx, unprotected, url) })
	r1.maxInFlight = api.maxSeen.Load()

	// Phase 2: the same callers go through a limiter sized to what the API allows.
	lim := limiter.New(*limit,
		limiter.WithName("generate-api"),
		limiter.WithAcquireTimeout(30*time.Second),
		limiter.WithTaskTimeout(5*time.Second))
	protected := newClient(*limit)
	defer protected.CloseIdleConnections()
	api.maxSeen.Store(0)
	r2 := fanOut(ctx, *callers, func(ctx context.Context) (int, error) {
		return limiter.Call(ctx, lim, func(ctx context.Context) (int, error) { return get(ctx, protected, url) })
	})
	r2.maxInFlight = api.maxSeen.Load()
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

	return rateLimited(ctx, w, "http://"+ln.Addr().String()+"/v1/search", rated, *limit, *rate, *rateCallers)
}

// rateJitter is how much earlier than its token bucket allows the rate-limited API lets a call
// arrive. Calls sent exactly on schedule do not arrive so: the first ones of a burst wait for their
// connections while a later one finds a connection ready, and a loaded machine delays some sends
// more than others (a few milliseconds, measured here under -race on a busy machine). Real APIs
// forgive as much, or count in coarser windows. newRateAPI keeps it below half the time between
// two tokens, so a burst still gets exactly burst calls through at any rate.
const rateJitter = 50 * time.Millisecond

// rateLimited is the second part: callers all at once at an API that answers 429 above rate call
// starts per second, first straight, then through a limiter with WithRate(rate, rate).
func rateLimited(ctx context.Context, w io.Writer, url string, api *rateAPI, limit, rate, callers int) error {
	fmt.Fprintf(w, "\nrate-limited API on %s: at most %d call starts per second, in bursts of %d, 429 beyond that\n",
		url, rate, rate)
	fmt.Fprintf(w, "%s callers, each makes one request, all at once\n\n", commas(callers))

	// Phase 1: every caller goes straight to the API.
	unprotected := newClient(callers)
	defer unprotected.CloseIdleConnections()
	api.reset()
	r1 := fanOut(ctx, callers, func(ctx context.Context) (int, error) { return get(ctx, unprotected, url) })
	s1 := api.startRate()

	// Phase 2: the same callers go through a limiter that holds both limits in its one queue.
	lim := limiter.New(limit,
		limiter.WithName("search-api"),
		limiter.WithRate(float64(rate), rate),      // at most rate call starts per second, bursts of rate
		limiter.WithAcquireTimeout(30*time.Second)) // a token that would come later: ErrAcquireTimeout at once
	protected := newClient(limit)
	defer protected.CloseIdleConnections()
	api.reset()
	r2 := fanOut(ctx, callers, func(ctx context.Context) (int, error) {
		return limiter.Call(ctx, lim, func(ctx context.Context) (int, error) { return get(ctx, protected, url) })
	})
	s2 := api.startRate()
	if err := lim.Shutdown(ctx); err != nil {
		return err
	}

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "callers go\t200 OK\t429\tother errors\tcall starts per second after the first %d\ttook\n", rate)
	for _, r := range []struct {
		name string
		phase
		starts string
	}{
		{"straight to the API", r1, s1},
		{fmt.Sprintf("through limiter.New(%d, limiter.WithRate(%d, %d))", limit, rate, rate), r2, s2},
	} {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%v\n", r.name, r.ok, r.tooMany, r.other, r.starts, r.took.Round(time.Millisecond))
	}
	tw.Flush()

	st := lim.Stats()
	fmt.Fprintln(w, "\nthe limiter's Stats():")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "Limit\tInFlight\tWaiting\tRateWaiting\tSubmitted\tCompleted\tFailed\tRejected\tTimedOut\tCancelled")
	fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", st.Limit, st.InFlight, st.Waiting, st.RateWaiting,
		st.Submitted, st.Completed, st.Failed, st.Rejected, st.TimedOut, st.Cancelled)
	tw.Flush()
	fmt.Fprintf(w, "\nThrough the limiter the first %d calls start at once and the others one every %v, in FIFO order;\n"+
		"a call waiting for its token holds back the calls behind it, and none is turned away.\n",
		rate, (time.Second / time.Duration(rate)).Round(time.Millisecond))

	if r2.tooMany != 0 || r2.other != 0 || st.Completed != int64(callers) {
		return fmt.Errorf("through the rate limiter: %d answers 429, %d other errors, %d of %d calls completed",
			r2.tooMany, r2.other, st.Completed, callers)
	}
	return nil
}

// rateAPI answers 200 at once to the calls that fit its token bucket of perSecond tokens per
// second, in bursts of burst, and 429 to the others (which take no token), judged on its own clock
// by the generic cell rate algorithm: one number, the theoretical arrival time of the next call.
// It lets a call arrive up to jitter earlier than the bucket allows (see rateJitter), and records
// when each call arrived.
type rateAPI struct {
	interval  time.Duration // between tokens: 1/perSecond
	tolerance time.Duration // how far ahead of the next token a call may arrive: burst-1 tokens, plus the jitter
	burst     int

	mu       sync.Mutex
	tat      time.Time   // the theoretical arrival time of the next call
	arrivals []time.Time // of every call, answered 200 or 429
}

func newRateAPI(perSecond, burst int, jitter time.Duration) *rateAPI {
	interval := time.Second / time.Duration(perSecond)
	jitter = min(jitter, interval/2)
	return &rateAPI{interval: interval, tolerance: time.Duration(burst-1)*interval + jitter, burst: burst}
}

// reset fills the bucket and forgets the arrivals.
func (a *rateAPI) reset() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.tat, a.arrivals = time.Time{}, nil
}

// admit reports whether a call arriving now fits the bucket, and takes its token if so.
func (a *rateAPI) admit(now time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.arrivals = append(a.arrivals, now)
	tat := a.tat
	if tat.Before(now) {
		tat = now // the bucket is full: tokens do not pile up beyond burst
	}
	if tat.Sub(now) > a.tolerance {
		return false
	}
	a.tat = tat.Add(a.interval)
	return true
}

// startRate returns the calls per second that arrived after the first burst ones, formatted.
func (a *rateAPI) startRate() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := len(a.arrivals)
	if n <= a.burst {
		return "-"
	}
	t := slices.SortedFunc(slices.Values(a.arrivals), time.Time.Compare)
	perSecond := float64(n-a.burst) / t[n-1].Sub(t[a.burst-1]).Seconds()
	if perSecond >= 100 {
		return commas(int(perSecond)) + "/s"
	}
	return fmt.Sprintf("%.1f/s", perSecond)
}

func (a *rateAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !a.admit(time.Now()) {
		w.Header().Set("Retry-After", "1")
		http.Error(w, "too many requests per second", http.StatusTooManyRequests)
		return
	}
	_, _ = io.WriteString(w, `{"hits":[]}`)
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
func fanOut(ctx context.Context, n int, call func(context.Context) (int, error)) phase {
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
	p := phase{took: time.Since(start)}
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
