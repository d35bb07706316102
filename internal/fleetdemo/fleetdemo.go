// Package fleetdemo is the program of the fleet example, shared by its two commands: the root
// module's examples/fleet, on the in-memory backend, and fleet/redisfleet's examples/fleet, which
// adds a real Redis and replicas that are processes of their own (and needs go-redis, which the
// root module does not). Each command parses its flags, says how a replica reaches its backend,
// and calls [Run].
package fleetdemo

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/goloom/loom/fleet"
	"github.com/goloom/loom/limiter"
)

// Flags are the flags both commands take.
type Flags struct {
	Replicas, Limit, Calls int
	Latency, Lease         time.Duration
}

// Register defines the flags on fs, with their defaults.
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.IntVar(&f.Replicas, "replicas", 5, "replicas of the service")
	fs.IntVar(&f.Limit, "limit", 40, "calls the API allows in flight (429 beyond that): each replica's limiter.New(limit) and the fleet's capacity")
	fs.IntVar(&f.Calls, "calls", 200, "calls each replica makes, all at once")
	fs.DurationVar(&f.Latency, "latency", 20*time.Millisecond, "how long the API takes per call")
	fs.DurationVar(&f.Lease, "lease", time.Second, "the fleet's lease TTL (at least 1s)")
}

// Check says what is wrong with the flags, if anything.
func (f Flags) Check() error {
	switch {
	case f.Replicas < 1 || f.Limit < 1 || f.Calls < 1:
		return errors.New("-replicas, -limit and -calls must be at least 1")
	case f.Latency < 0:
		return errors.New("-latency must not be negative")
	case f.Lease < fleet.MinLease:
		return fmt.Errorf("-lease must be at least %v", fleet.MinLease)
	}
	return nil
}

// A Setup says how the replicas of a run reach their backend.
type Setup struct {
	Name    string // the fleet's name for the limit
	Addr    string // given to every replica in Config.Addr: where its own backend client connects, or ""
	Backend string // the backend, in words, for the header
	Kind    string // what a replica is, for the header: "goroutines", "processes"
	// Replica runs one replica (RunReplica, in this process or another) and returns what it saw.
	Replica func(ctx context.Context, cfg Config, logs io.Writer) (Result, error)
}

// A Config is what one replica needs; a replica process gets it as JSON.
type Config struct {
	Replica int           // 1, 2, ...
	URL     string        // the API
	Calls   int           // calls to make, all at once
	Limit   int           // the local limit, and the fleet's capacity
	Fleet   bool          // hold a fleet permit for every call (limiter.WithFleet)
	Name    string        // the fleet's name for the limit
	Lease   time.Duration // the fleet's lease TTL
	Addr    string        // Setup.Addr
}

// A Result is what a replica saw: the answers it got, and its Stats.
type Result struct {
	OK, Other int // answers 200, and anything but 200 or 429 (errors included); the API counts its 429s
	Limiter   limiter.Stats
	Fleet     fleet.Stats // zero without the fleet
}

// phase is one run of every replica: what the API saw, what the replicas got.
type phase struct {
	calls, tooMany, maxInFlight int64 // as the API counted them
	ok, other                   int   // as the replicas got them
	took                        time.Duration
	replicas                    []Result
}

// Run runs the example: a test API that answers 429 above f.Limit calls in flight, f.Replicas
// replicas calling it f.Calls times each, first each through its own limiter alone, then each
// also through a fleet.Semaphore of capacity f.Limit; it prints both runs as tables, and fails if
// the fleet let more than f.Limit through, the API answered a 429 to it, or a replica's counts do
// not add up.
func Run(ctx context.Context, w io.Writer, f Flags, s Setup) error {
	logs := &lockedWriter{w: w} // the replicas' fleet log records, if any, between the tables

	api := &testAPI{allowed: int64(f.Limit), latency: f.Latency}
	srv := httptest.NewServer(api)
	defer srv.Close()

	cfg := Config{URL: srv.URL + "/v1/generate", Calls: f.Calls, Limit: f.Limit, Lease: f.Lease, Name: s.Name, Addr: s.Addr}
	fmt.Fprintf(w, "test API on %s: %v per call, at most %d in flight, 429 beyond that (after %v too)\n",
		cfg.URL, f.Latency, f.Limit, f.Latency)
	fmt.Fprintf(w, "%d replicas (%s), each with its own HTTP client and limiter.New(%d, ...), %d calls each, all at once\n",
		f.Replicas, s.Kind, f.Limit, f.Calls)
	fmt.Fprintf(w, "fleet backend: %s\n\n", s.Backend)

	alone, err := runPhase(ctx, api, cfg, f.Replicas, s, logs)
	if err != nil {
		return err
	}
	cfg.Fleet = true
	shared, err := runPhase(ctx, api, cfg, f.Replicas, s, logs)
	if err != nil {
		return err
	}

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "each replica calls through\tcalls\t200 OK\t429\tother errors\tmost in flight at the API\ttook")
	for _, r := range []struct {
		name string
		phase
	}{
		{fmt.Sprintf("limiter.New(%d)", f.Limit), alone},
		{fmt.Sprintf("limiter.New(%d, limiter.WithFleet(sem))", f.Limit), shared},
	} {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%v\n", r.name, r.calls, r.ok, r.tooMany, r.other, r.maxInFlight,
			r.took.Round(time.Millisecond))
	}
	tw.Flush()

	fmt.Fprintln(w, "\nthe fleet run, per replica (its limiter's and its Semaphore's Stats):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "replica\tCompleted\tRejected\tAcquired\tReleased\tLeasesLost\tRoundTrips\tround trips per permit")
	for i, r := range shared.replicas {
		perPermit := float64(r.Fleet.RoundTrips) / float64(max(1, r.Fleet.Acquired))
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.1f\n", i+1, r.Limiter.Completed, r.Limiter.Rejected,
			r.Fleet.Acquired, r.Fleet.Released, r.Fleet.LeasesLost, r.Fleet.RoundTrips, perPermit)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nEach replica still has its own limit of %d, but every call also holds one of the fleet's %d\n"+
		"leased permits while it runs: waiting calls queue in their replica, in one FIFO order across the fleet.\n",
		f.Limit, f.Limit)

	if shared.maxInFlight > int64(f.Limit) || shared.tooMany != 0 || shared.other != 0 {
		return fmt.Errorf("through the fleet: %d calls in flight at once, %d answers 429, %d other errors",
			shared.maxInFlight, shared.tooMany, shared.other)
	}
	for i, r := range shared.replicas {
		if r.Limiter.Completed != int64(f.Calls) || r.Fleet.Acquired != r.Fleet.Released || r.Fleet.LeasesLost != 0 {
			return fmt.Errorf("replica %d: %d of %d calls completed, %d permits acquired, %d released, %d leases lost",
				i+1, r.Limiter.Completed, f.Calls, r.Fleet.Acquired, r.Fleet.Released, r.Fleet.LeasesLost)
		}
	}
	return nil
}

// runPhase runs every replica at once and tallies the phase.
func runPhase(ctx context.Context, api *testAPI, cfg Config, n int, s Setup, logs io.Writer) (phase, error) {
	api.reset()
	results := make([]Result, n)
	errs := make([]error, n)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range n {
		c := cfg
		c.Replica = i + 1
		wg.Go(func() {
			results[i], errs[i] = s.Replica(ctx, c, logs)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return phase{}, err
	}
	p := phase{took: time.Since(start), replicas: results,
		calls: api.calls.Load(), tooMany: api.tooMany.Load(), maxInFlight: api.maxSeen.Load()}
	for _, r := range results {
		p.ok += r.OK
		p.other += r.Other
	}
	return p, nil
}

// RunReplica is one replica of the service: its own HTTP client, its own limiter and, with
// cfg.Fleet, its own Semaphore on the backend that open returns (close, called after the
// Semaphore's Close, ends what open started). It makes cfg.Calls calls at once, as that many
// request handlers would, and returns when all have ended.
func RunReplica(ctx context.Context, cfg Config, open func(Config) (b fleet.Backend, close func()), logs io.Writer) (Result, error) {
	opts := []limiter.Option{
		limiter.WithName(fmt.Sprintf("llm-api-replica-%d", cfg.Replica)),
		limiter.WithAcquireTimeout(30 * time.Second),
	}
	var sem *fleet.Semaphore
	if cfg.Fleet {
		backend, closeBackend := open(cfg)
		defer closeBackend() // after sem.Close, which gives its leases back through it
		logger := slog.New(slog.NewTextHandler(logs, nil)).With("replica", cfg.Replica)
		sem = fleet.New(backend, cfg.Name, int64(cfg.Limit), fleet.WithLease(cfg.Lease), fleet.WithLogger(logger))
		defer sem.Close()
		opts = append(opts, limiter.WithFleet(sem))
	}
	api := limiter.New(cfg.Limit, opts...)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: cfg.Limit, DisableCompression: true}}
	defer client.CloseIdleConnections()

	var ok, other atomic.Int64
	var wg sync.WaitGroup
	for range cfg.Calls {
		wg.Go(func() {
			code, err := limiter.Call(ctx, api, func(ctx context.Context) (int, error) { return get(ctx, client, cfg.URL) })
			switch {
			case err == nil && code == http.StatusOK:
				ok.Add(1)
			case err == nil && code == http.StatusTooManyRequests:
				// counted by the API (phase.tooMany)
			default:
				other.Add(1)
			}
		})
	}
	wg.Wait()
	if err := api.Shutdown(ctx); err != nil {
		return Result{}, err
	}
	r := Result{OK: int(ok.Load()), Other: int(other.Load()), Limiter: api.Stats()}
	if sem != nil {
		if err := sem.Close(); err != nil {
			return Result{}, err
		}
		r.Fleet = sem.Stats()
	}
	return r, nil
}

// testAPI answers 200 while at most allowed calls are in flight, and 429 beyond that, both after
// its latency: a call is in flight from its arrival to its answer, and an overloaded API is slow
// to say no too, so the calls a fleet sends at once are the calls the API has in flight. It counts
// the calls and the 429s, and records the most calls it saw in flight, 429s included.
type testAPI struct {
	allowed  int64
	latency  time.Duration
	inFlight atomic.Int64
	maxSeen  atomic.Int64
	calls    atomic.Int64
	tooMany  atomic.Int64
}

func (a *testAPI) reset() {
	a.maxSeen.Store(0)
	a.calls.Store(0)
	a.tooMany.Store(0)
}

func (a *testAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.calls.Add(1)
	n := a.inFlight.Add(1)
	defer a.inFlight.Add(-1) // before the response is sent: net/http flushes after we return
	for m := a.maxSeen.Load(); n > m && !a.maxSeen.CompareAndSwap(m, n); m = a.maxSeen.Load() {
	}
	t := time.NewTimer(a.latency)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
		return
	}
	if n > a.allowed {
		a.tooMany.Add(1)
		w.Header().Set("Retry-After", "1")
		http.Error(w, "too many requests in flight", http.StatusTooManyRequests)
		return
	}
	_, _ = io.WriteString(w, `{"text":"ok"}`)
}

// get makes one call and returns the status code.
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

// A lockedWriter serializes the writes of several goroutines to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
