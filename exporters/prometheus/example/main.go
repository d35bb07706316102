// Command example serves loom's metrics at /metrics beside its live dump at /debug/loom, under a
// load that moves each of the numbers:
//
//	reg := prometheus.NewRegistry()
//	reg.MustRegister(loomprom.NewCollector())
//	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
//	mux.Handle("/debug/loom", inspect.Handler())
//
// Its API, GET /profile/{id}, fans out to two backend calls in a scope named "profile". Each call
// goes through the limiter "backend" (4 calls at once, 2 waiting at most, 50 ms to get in, a
// 100 ms task timeout), which also holds a permit of the fleet semaphore "backend-fleet"
// (capacity 6, on fleet.NewMemory, which stands for the fleet's Redis; at most 2 degraded
// permits while it is down). Clients call the API in five phases, each -phase long:
//
//	steady    1 client; the backend answers in 5 ms
//	burst     16 clients: calls wait for a slot, and the limiter rejects what does not fit
//	slow      3 clients; the backend takes 250 ms: tasks time out after 100 ms
//	outage    16 clients; the fleet's backend is down: 2 permits at most, degraded ones
//	recovery  1 client; all is well again
//
// Run alone, it serves on a loopback port, runs the phases (about 1.5 s), prints what the
// clients got, the limiter as /debug/loom showed it during the burst, and loom's series from
// /metrics, and exits (non-zero if a phase did not show what it is there to show):
//
//	cd exporters/prometheus && go run ./example
//
// With -serve it runs the phases once and keeps serving until interrupted, for a Prometheus
// server to scrape (grafana/loom.json beside this folder is a dashboard of these series):
//
//	go run ./example -serve -addr 127.0.0.1:8080 -phase 30s
//	curl http://127.0.0.1:8080/metrics
//	curl http://127.0.0.1:8080/debug/loom
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	loomprom "github.com/goloom/loom/exporters/prometheus"
	"github.com/goloom/loom/fleet"
	"github.com/goloom/loom/inspect"
	"github.com/goloom/loom/limiter"
	"github.com/goloom/loom/scope"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "example:", err)
		os.Exit(1)
	}
}

// A phase is a stretch of load: how many clients call the API, how long the backend takes, and
// whether the fleet's backend is down.
type phase struct {
	name    string
	clients int
	latency time.Duration
	down    bool
	what    string // what it shows
}

var phases = []phase{
	{"steady", 1, 5 * time.Millisecond, false, "calls complete"},
	{"burst", 16, 5 * time.Millisecond, false, "calls wait; the limiter rejects what does not fit"},
	{"slow", 3, 250 * time.Millisecond, false, "tasks time out after 100 ms"},
	{"outage", 16, 5 * time.Millisecond, true, "the fleet is down: 2 degraded permits at most"},
	{"recovery", 1, 5 * time.Millisecond, false, "calls complete again"},
}

func run(ctx context.Context, w io.Writer, args []string) error {
	fs := flag.NewFlagSet("example", flag.ContinueOnError)
	fs.SetOutput(w)
	serve := fs.Bool("serve", false, "after the phases, keep serving on -addr until interrupted")
	addr := fs.String("addr", "127.0.0.1:0", "address to serve on")
	phaseLen := fs.Duration("phase", 300*time.Millisecond, "length of each load phase")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *phaseLen < 150*time.Millisecond {
		return fmt.Errorf("-phase %v: at least 150ms, so that a slow call can time out in it", *phaseLen)
	}

	// Scopes are recorded only while inspect's Scopes is on (LOOM_INSPECT=scopes in a service).
	inspect.Enable(inspect.Scopes)
	defer inspect.Disable(inspect.Scopes)

	mem := fleet.NewMemory()
	sem := fleet.New(mem, "backend-fleet", 6, fleet.WhenUnavailable(fleet.Degrade(2)),
		fleet.WithLogger(slog.New(slog.DiscardHandler))) // the outage is on purpose
	defer sem.Close()
	app := &service{backend: limiter.New(4,
		limiter.WithName("backend"),
		limiter.WithMaxWaiting(2),
		limiter.WithAcquireTimeout(50*time.Millisecond),
		limiter.WithTaskTimeout(100*time.Millisecond),
		limiter.WithFleet(sem))}
	defer app.backend.Shutdown(context.Background())

	reg := prometheus.NewRegistry()
	reg.MustRegister(loomprom.NewCollector())
	mux := http.NewServeMux()
	mux.HandleFunc("GET /profile/{id}", app.profile)
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("/debug/loom", inspect.Handler())
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	defer func() {
		_ = srv.Close()
		<-served
	}()
	url := "http://" + l.Addr().String()
	tr := &http.Transport{MaxIdleConnsPerHost: 32}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}

	if *serve {
		fmt.Fprintf(w, "serving on %s: /profile/{id}, /metrics, /debug/loom\n", url)
	}
	var results []phaseResult
	var burstDump string
	for _, p := range phases {
		fmt.Fprintf(w, "phase %s (%v): %s\n", p.name, *phaseLen, p.what)
		app.latency.Store(int64(p.latency))
		mem.SetDown(p.down)
		var dump func() (string, error)
		if p.name == "burst" {
			dump = func() (string, error) { return during(client, url) }
		}
		r, d, err := drive(ctx, client, url, p, *phaseLen, dump)
		if err != nil {
			if *serve && ctx.Err() != nil {
				return nil // interrupted
			}
			return err
		}
		if d != "" {
			burstDump = d
		}
		results = append(results, r)
	}
	mem.SetDown(false)
	// The last answers may still be on their way: let the handlers finish before reading.
	for start := time.Now(); app.backend.Stats().InFlight > 0 || sem.Stats().Held > 0; {
		if time.Since(start) > 10*time.Second {
			return fmt.Errorf("calls still in flight 10s after the load: %+v", app.backend.Stats())
		}
		if err := sleep(ctx, time.Millisecond); err != nil {
			return nil // interrupted
		}
	}
	if *serve {
		fmt.Fprintf(w, "phases done; serving until interrupted\n")
		<-ctx.Done()
		return nil
	}

	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tclients\t200 OK\t503 rejected\t504 timed out\t")
	for i, r := range results {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t\n", phases[i].name, phases[i].clients, r.ok, r.rejected, r.timedOut)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nduring the burst:\n%s", burstDump)

	series, err := scrape(client, url)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\nloom's series on /metrics after the phases:\n\n")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, s := range series {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", s.name, s.labels, s.value)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return check(series)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// A service is the API: each profile is two backend calls, forked in one scope.
type service struct {
	backend *limiter.Limiter
	latency atomic.Int64 // the backend's, a time.Duration
}

func (s *service) profile(w http.ResponseWriter, r *http.Request) {
	sc := scope.Open(r.Context(), scope.WithName("profile"))
	defer sc.Close()
	user := scope.Fork(sc, func(ctx context.Context) (string, error) { return s.call(ctx, "user "+r.PathValue("id")) })
	orders := scope.Fork(sc, func(ctx context.Context) (string, error) { return s.call(ctx, "orders of "+r.PathValue("id")) })
	switch err := sc.Join(); {
	case err == nil:
		fmt.Fprintf(w, "%s, %s\n", user.Get(), orders.Get())
	case errors.Is(err, limiter.ErrRejected):
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
	case errors.Is(err, limiter.ErrTaskTimeout):
		http.Error(w, err.Error(), http.StatusGatewayTimeout)
	default:
		http.Error(w, err.Error(), http.StatusBadGateway)
	}
}

// call is one backend call, through the limiter; the backend takes the current latency.
func (s *service) call(ctx context.Context, what string) (string, error) {
	return limiter.Call(ctx, s.backend, func(ctx context.Context) (string, error) {
		t := time.NewTimer(time.Duration(s.latency.Load()))
		defer t.Stop()
		select {
		case <-t.C:
			return what, nil
		case <-ctx.Done():
			return "", context.Cause(ctx)
		}
	})
}

type phaseResult struct{ ok, rejected, timedOut, other int64 }

// drive runs p's clients for d, each calling the API in a loop (a refused call is retried after
// 5 ms, as a client backs off), and counts the answers. dump, if not nil, is called once, a
// third of the way in.
func drive(parent context.Context, client *http.Client, url string, p phase, d time.Duration, dump func() (string, error)) (phaseResult, string, error) {
	ctx, cancel := context.WithTimeout(parent, d)
	defer cancel()
	var r phaseResult
	var wg sync.WaitGroup
	errs := make(chan error, p.clients)
	for i := range p.clients {
		wg.Go(func() {
			for ctx.Err() == nil {
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/profile/%d", url, i), nil)
				if err != nil {
					errs <- err
					return
				}
				resp, err := client.Do(req)
				if err != nil {
					if ctx.Err() == nil {
						errs <- err
					}
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				switch resp.StatusCode {
				case http.StatusOK:
					atomic.AddInt64(&r.ok, 1)
					continue
				case http.StatusServiceUnavailable:
					atomic.AddInt64(&r.rejected, 1)
				case http.StatusGatewayTimeout:
					atomic.AddInt64(&r.timedOut, 1)
				default:
					atomic.AddInt64(&r.other, 1)
				}
				select {
				case <-ctx.Done():
				case <-time.After(5 * time.Millisecond):
				}
			}
		})
	}
	var dumped string
	var dumpErr error
	if dump != nil {
		select {
		case <-ctx.Done():
		case <-time.After(d / 3):
			dumped, dumpErr = dump()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return r, "", err
	}
	if err := parent.Err(); err != nil {
		return r, "", err
	}
	return r, dumped, dumpErr
}

// during describes the backend limiter as /debug/loom shows it, and the profile scopes as
// /metrics does.
func during(client *http.Client, url string) (string, error) {
	line, err := limiterLine(client, url)
	if err != nil {
		return "", err
	}
	ss, err := scrape(client, url)
	if err != nil {
		return "", err
	}
	out := "  /debug/loom: " + line + "\n"
	for _, s := range ss {
		if strings.HasPrefix(s.labels, "scope=") {
			out += fmt.Sprintf("  /metrics: %s{%s} %s\n", s.name, s.labels, s.value)
		}
	}
	return out, nil
}

// limiterLine reads the dump as JSON and describes the backend limiter as it shows it.
func limiterLine(client *http.Client, url string) (string, error) {
	resp, err := client.Get(url + "/debug/loom?format=json")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var dump struct {
		Limiters []struct {
			Name  string           `json:"name"`
			Stats map[string]int64 `json:"stats"`
		} `json:"limiters"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&dump); err != nil {
		return "", fmt.Errorf("/debug/loom: %w", err)
	}
	for _, l := range dump.Limiters {
		if l.Name == "backend" {
			return fmt.Sprintf("limiter %q limit %d, in flight %d, waiting %d, rejected so far %d",
				l.Name, l.Stats["limit"], l.Stats["inFlight"], l.Stats["waiting"], l.Stats["rejected"]), nil
		}
	}
	return "", errors.New("/debug/loom does not list the backend limiter")
}

// A series is one line of the text exposition.
type series struct{ name, labels, value string }

// scrape reads /metrics and keeps the series of the limiter, the semaphore and the scope of this
// program.
func scrape(client *http.Client, url string) ([]series, error) {
	resp, err := client.Get(url + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out []series
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		name, rest, ok := strings.Cut(line, "{")
		if !ok || !strings.HasPrefix(name, "loom_") {
			continue
		}
		labels, value, _ := strings.Cut(rest, "} ")
		if strings.Contains(labels, `limiter="backend"`) || strings.Contains(labels, `semaphore="backend-fleet"`) ||
			strings.Contains(labels, `scope="profile"`) {
			out = append(out, series{name, labels, value})
		}
	}
	return out, sc.Err()
}

// check fails unless the series show what the phases are there to show.
func check(ss []series) error {
	get := func(name, labels string) float64 {
		for _, s := range ss {
			if s.name == name && s.labels == labels {
				v, _ := strconv.ParseFloat(s.value, 64)
				return v
			}
		}
		return -1
	}
	for _, c := range []struct{ name, labels string }{
		{"loom_limiter_calls_total", `limiter="backend",outcome="completed"`},
		{"loom_limiter_calls_total", `limiter="backend",outcome="rejected"`},
		{"loom_limiter_calls_total", `limiter="backend",outcome="timed_out"`},
		{"loom_fleet_acquired_total", `semaphore="backend-fleet"`},
		{"loom_fleet_unavailable_total", `semaphore="backend-fleet"`},
		{"loom_fleet_degraded_total", `semaphore="backend-fleet"`},
	} {
		if v := get(c.name, c.labels); v <= 0 {
			return fmt.Errorf("%s{%s} is %v after the phases, want more than 0", c.name, c.labels, v)
		}
	}
	if v := get("loom_scopes_open", `scope="profile"`); v < 0 {
		return errors.New(`no loom_scopes_open{scope="profile"} on /metrics`)
	}
	return nil
}
