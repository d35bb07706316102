package redisfleet_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/goloom/loom/fleet"
	"github.com/goloom/loom/fleet/redisfleet"
	"github.com/goloom/loom/limiter"
)

// The multi-process harness: the test binary runs itself again as replica processes
// (TestReplica, selected by the environment variable below), each with its own Redis client and
// Semaphore and several workers calling a fake upstream that the parent serves on loopback and
// that counts the calls in flight.

const replicaEnv = "LOOM_FLEET_REPLICA" // its value: the replica's configuration, as JSON

type replicaConfig struct {
	ID       int
	Redis    string
	Upstream string
	Name     string
	Capacity int64
	Lease    time.Duration
	Workers  int
	// Direct: the workers call through the Semaphore itself (Acquire, WithContext, Release)
	// rather than through a limiter, and send each call's fencing token and the time its Acquire
	// began, so that the upstream can check the order of the grants.
	Direct bool
}

// A call is how a replica's call reached the upstream: through a fleet permit that was asked
// for at Asked (a replica's clock: the machine's, as the upstream's) and carries Token; Start and
// End are the upstream's. Calls through a limiter carry neither (Token 0).
type call struct {
	Replica    int
	Asked      time.Time
	Token      uint64
	Start, End time.Time
}

// guarded is a replica's one call path: by default through a limiter whose calls each hold a
// fleet permit (limiter.WithFleet), so fn runs under a context that ends if the lease is lost;
// workers is the local limit: every worker gets a local slot, and the fleet's capacity is what
// binds. Direct, the same through the Semaphore itself, with the permit's token and the time its
// Acquire began passed to fn.
func guarded(sem *fleet.Semaphore, workers int, direct bool) func(context.Context, func(context.Context, http.Header) error) error {
	if direct {
		return func(ctx context.Context, fn func(context.Context, http.Header) error) error {
			asked := time.Now()
			ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			p, err := sem.Acquire(ctx, 1)
			if err != nil {
				return err
			}
			defer p.Release()
			pctx, stop := p.WithContext(ctx)
			defer stop()
			h := http.Header{}
			h.Set("X-Asked", strconv.FormatInt(asked.UnixNano(), 10))
			h.Set("X-Token", strconv.FormatUint(p.Token(), 10))
			return fn(pctx, h)
		}
	}
	api := limiter.New(workers, limiter.WithFleet(sem), limiter.WithAcquireTimeout(2*time.Second))
	return func(ctx context.Context, fn func(context.Context, http.Header) error) error {
		return api.Do(ctx, func(ctx context.Context) error { return fn(ctx, nil) })
	}
}

// TestReplica is a replica process of TestChaos and TestFairnessAcrossProcesses; run directly, it
// skips. It works until its stdin closes, then closes everything, prints its Stats on a line
// starting with "STATS " and ends; TestMain's goleak check then fails the process if a goroutine
// is left.
func TestReplica(t *testing.T) {
	raw := os.Getenv(replicaEnv)
	if raw == "" {
		t.Skip("runs only as a replica process of the multi-process tests")
	}
	var cfg replicaConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{
		Addr: cfg.Redis, ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1,
		DialTimeout: 200 * time.Millisecond, ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond,
	})
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("replica", cfg.ID)
	sem := fleet.New(redisfleet.New(rdb), cfg.Name, cfg.Capacity, fleet.WithLease(cfg.Lease), fleet.WithLogger(logger))
	transport := &http.Transport{MaxIdleConnsPerHost: cfg.Workers}
	client := &http.Client{Transport: transport}
	do := guarded(sem, cfg.Workers, cfg.Direct)

	ctx, stop := context.WithCancel(context.Background())
	go func() { // the parent closes stdin to stop us
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop()
	}()
	var wg sync.WaitGroup
	var calls, refused atomic.Int64
	for range cfg.Workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				err := do(ctx, func(ctx context.Context, h http.Header) error {
					req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Upstream, nil)
					if err != nil {
						return err
					}
					for k, v := range h {
						req.Header[k] = v
					}
					req.Header.Set("X-Replica", strconv.Itoa(cfg.ID))
					resp, err := client.Do(req)
					if err != nil {
						return err
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					return resp.Body.Close()
				})
				switch {
				case err == nil:
					calls.Add(1)
				case errors.Is(err, fleet.ErrUnavailable), errors.Is(err, fleet.ErrTimeout):
					refused.Add(1)
					time.Sleep(10 * time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	if err := sem.Close(); err != nil {
		logger.Warn("close", "error", err)
	}
	_ = rdb.Close()
	transport.CloseIdleConnections()
	st := sem.Stats()
	out, _ := json.Marshal(map[string]any{"stats": st, "calls": calls.Load(), "refused": refused.Load()})
	fmt.Printf("STATS %s\n", out)
}

// replica is a running replica process.
type replica struct {
	id    int
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *syncBuffer
	done  chan error
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func startReplica(t *testing.T, cfg replicaConfig) *replica {
	t.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestReplica$", "-test.count=1", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), replicaEnv+"="+string(raw))
	out := new(syncBuffer)
	cmd.Stdout, cmd.Stderr = out, out
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &replica{id: cfg.ID, cmd: cmd, stdin: stdin, out: out, done: make(chan error, 1)}
	go func() { r.done <- cmd.Wait() }()
	t.Cleanup(func() { // whatever happened, no replica outlives the test
		_ = cmd.Process.Kill()
		<-r.done
		r.done <- nil
	})
	return r
}

// kill ends the replica at once, as a crash does: nothing is released.
func (r *replica) kill() {
	_ = r.cmd.Process.Kill()
}

// stop asks the replica to finish and returns its STATS line's JSON.
func (r *replica) stop(t *testing.T, within time.Duration) (map[string]any, error) {
	t.Helper()
	_ = r.stdin.Close()
	select {
	case err := <-r.done:
		r.done <- err
		if err != nil {
			return nil, fmt.Errorf("replica %d: %v\n%s", r.id, err, r.out.String())
		}
	case <-time.After(within):
		return nil, fmt.Errorf("replica %d did not stop within %v\n%s", r.id, within, r.out.String())
	}
	sc := bufio.NewScanner(strings.NewReader(r.out.String()))
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), "STATS "); ok {
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				return nil, err
			}
			return m, nil
		}
	}
	return nil, fmt.Errorf("replica %d printed no stats\n%s", r.id, r.out.String())
}

// upstream is the fake API the replicas call: it holds each call for a while and counts the
// calls in flight, in total and per replica, and per phase of the test the most at once.
type upstream struct {
	URL      string
	hold     time.Duration
	long     time.Duration // every tenth call holds this long instead (0: none)
	n        atomic.Int64  // calls so far
	capacity int64
	srv      *http.Server
	l        net.Listener
	served   sync.WaitGroup

	inFlight   atomic.Int64
	phase      atomic.Int32
	most       [8]atomic.Int64
	calls      [8]atomic.Int64
	full       [8]atomic.Int64 // unix nanoseconds when the calls in flight first reached the capacity in the phase (0: not yet)
	fullAfter  [8]atomic.Int64 // unix nanoseconds before which reaching the capacity does not count as full
	perReplica [32]atomic.Int64
	starts     [32]atomic.Int64

	logMu  sync.Mutex
	logged []time.Time // every call's start, in order
	log    []call      // every call that ended, in the order they ended
}

// calls returns every call that ended so far.
func (u *upstream) callLog() []call {
	u.logMu.Lock()
	defer u.logMu.Unlock()
	return append([]call(nil), u.log...)
}

// startsBetween returns the calls' starts from a to b, in order.
func (u *upstream) startsBetween(a, b time.Time) []time.Time {
	u.logMu.Lock()
	defer u.logMu.Unlock()
	var out []time.Time
	for _, t := range u.logged {
		if !t.Before(a) && !t.After(b) {
			out = append(out, t)
		}
	}
	return out
}

// longestGap returns the longest time without a call start from a to b (counting from a and to b).
func longestGap(starts []time.Time, a, b time.Time) time.Duration {
	var gap time.Duration
	last := a
	for _, t := range append(starts, b) {
		gap = max(gap, t.Sub(last))
		last = t
	}
	return gap
}

func startUpstream(t *testing.T, capacity int64, hold, long time.Duration) *upstream {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &upstream{URL: "http://" + l.Addr().String() + "/", hold: hold, long: long, capacity: capacity, l: l}
	u.srv = &http.Server{Handler: http.HandlerFunc(u.serve)}
	u.served.Add(1)
	go func() {
		defer u.served.Done()
		_ = u.srv.Serve(l)
	}()
	t.Cleanup(func() {
		_ = u.srv.Close()
		u.served.Wait()
	})
	return u
}

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	id, _ := strconv.Atoi(r.Header.Get("X-Replica"))
	id %= len(u.perReplica)
	c := call{Replica: id, Start: time.Now()}
	if ns, err := strconv.ParseInt(r.Header.Get("X-Asked"), 10, 64); err == nil {
		c.Asked = time.Unix(0, ns)
	}
	c.Token, _ = strconv.ParseUint(r.Header.Get("X-Token"), 10, 64)
	ph := u.phase.Load()
	u.logMu.Lock()
	u.logged = append(u.logged, c.Start)
	u.logMu.Unlock()
	u.starts[id].Add(1)
	u.perReplica[id].Add(1)
	n := u.inFlight.Add(1)
	for old := u.most[ph].Load(); n > old && !u.most[ph].CompareAndSwap(old, n); old = u.most[ph].Load() {
	}
	if now := time.Now().UnixNano(); n >= u.capacity && now >= u.fullAfter[ph].Load() {
		u.full[ph].CompareAndSwap(0, now)
	}
	hold := u.hold
	if u.long > 0 && u.n.Add(1)%10 == 0 {
		hold = u.long
	}
	t := time.NewTimer(hold)
	select {
	case <-t.C:
	case <-r.Context().Done(): // the caller gave up (its lease was lost) or died
		t.Stop()
	}
	// Out of flight before the reply leaves, so a caller never releases its permit while it is
	// still counted here.
	u.inFlight.Add(-1)
	u.perReplica[id].Add(-1)
	u.calls[ph].Add(1)
	c.End = time.Now()
	u.logMu.Lock()
	u.log = append(u.log, c)
	u.logMu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// enter starts phase ph: its peak starts from what is in flight now; reaching the capacity
// counts as "full" only from notBefore on.
func (u *upstream) enter(ph int, notBefore time.Time) {
	u.fullAfter[ph].Store(notBefore.UnixNano())
	u.most[ph].Store(u.inFlight.Load())
	u.phase.Store(int32(ph))
}

// rearm makes reaching the capacity in phase ph count as full again, from notBefore on, keeping
// the phase's peak.
func (u *upstream) rearm(ph int, notBefore time.Time) {
	u.fullAfter[ph].Store(notBefore.UnixNano())
	u.full[ph].Store(0)
}

// waitFull waits until the calls in flight have reached the capacity in phase ph and returns
// when that happened, or false after within.
func (u *upstream) waitFull(ph int, within time.Duration) (time.Time, bool) {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if at := u.full[ph].Load(); at != 0 {
			return time.Unix(0, at), true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Time{}, false
}
