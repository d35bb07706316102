// Command loadtest reproduces, in Go with loom, five experiments that Korean articles on Java 21's
// virtual threads published, and prints each article's figures beside loom's:
//
//   - blocking, after "자바 스레드만 알던 개발자가 가상 스레드를 파헤쳐 봤습니다" (A developer who only
//     knew Java threads digs into virtual threads): 100,000 tasks that each block for 100 ms, run by
//     a fixed pool of 200 workers and by a scope with one subtask per task (the article: about 50 s
//     vs 1-2 s);
//   - spike, after "자바 플랫폼 vs 가상 스레드 - 언제, 왜 성능 차이가 나는가?" (Platform vs virtual
//     threads: when and why performance differs): spike load on an HTTP server, 500 concurrent
//     clients for 15 s, with a handler that waits 300 ms (I/O-bound) or burns CPU (CPU-bound),
//     handlers run on a pool of 200 workers vs one goroutine per request with a scope (the article:
//     652 vs 1,626 req/s, p95 908 vs 316 ms, no gain when CPU-bound);
//   - dbapi, after "Virtual Threads로 Spring MVC 성능 극대화하기" (Getting the most out of Spring MVC
//     with virtual threads): 1,000 concurrent clients of a handler that makes a 50 ms "DB" call and
//     a 100 ms "API" call, pool of 200 vs scope (the article: p99 ~3,000 vs ~160 ms, ~650 vs ~5,800
//     req/s);
//   - parked, after "17장. 가상 스레드의 기계 — 마운트, 언마운트, 그리고 pinning" (Chapter 17: the
//     machinery of virtual threads — mount, unmount and pinning): the memory of a parked subtask,
//     with 1,000,000 of them parked in one scope (the article: 735-1,001 bytes per parked virtual
//     thread);
//   - pool, after "[Java 21] 가상 스레드(Virtual Threads) 사용기" ([Java 21] Using virtual threads):
//     jobs that each need one of 40 database connections, run as unbounded goroutines that exhaust
//     the pool, and through a limiter with limit 40 and a 30 s acquire timeout (the article's
//     ConcurrencyLimiterExecutor).
//
// Everything runs in this one process: the HTTP servers listen on 127.0.0.1 and the load comes
// from goroutines standing in for k6's virtual users, so client and server share the CPUs.
//
// Usage, from the bench directory:
//
//	go run ./cmd/loadtest                  # the articles' sizes: about 3 minutes, 3 GB at peak (parked)
//	go run ./cmd/loadtest -quick           # all five, scaled down, under a minute
//	go run ./cmd/loadtest -exp spike -duration 5s
//	go run ./cmd/loadtest -exp blocking,parked -scale 0.2
//	go run ./cmd/loadtest -quick -svg latency.svg
//
// -scale multiplies the counts (tasks, parked subtasks, jobs) and the load durations; flags set
// explicitly (-tasks, -duration, ...) win over -quick and -scale. Runs longer than a few
// seconds show a progress line on stderr (-progress=false turns it off). -svg writes a chart of
// p50/p95/p99 latency per configuration, drawn with the standard library.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, os.Stderr, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(1)
	}
}

// config holds every knob; defaults are the articles' sizes.
type config struct {
	exps []string

	// blocking (workers also sizes the pools of spike and dbapi)
	tasks   int
	workers int
	block   time.Duration

	// spike
	spikeClients int
	duration     time.Duration
	ioWait       time.Duration
	cpuWork      time.Duration // CPU time per request, on one core of this machine

	// dbapi
	dbapiClients  int
	dbapiDuration time.Duration
	db, api       time.Duration

	// parked
	parked int

	// pool
	jobs     int
	conns    int
	limit    int
	query    time.Duration
	poolWait time.Duration

	svg      string
	progress bool
}

func defaults() config {
	return config{
		tasks: 100_000, workers: 200, block: 100 * time.Millisecond,
		spikeClients: 500, duration: 15 * time.Second, ioWait: 300 * time.Millisecond, cpuWork: 10 * time.Millisecond,
		dbapiClients: 1000, dbapiDuration: 10 * time.Second, db: 50 * time.Millisecond, api: 100 * time.Millisecond,
		parked: 1_000_000,
		jobs:   2000, conns: 40, limit: 40, query: 100 * time.Millisecond, poolWait: time.Second,
		progress: true,
	}
}

// quick scales the defaults down so that all five experiments finish in under a minute.
func (c *config) quick() {
	c.tasks = 10_000
	c.duration, c.dbapiDuration = 3*time.Second, 3*time.Second
	c.cpuWork = 2 * time.Millisecond
	c.parked = 100_000
	c.jobs, c.query, c.poolWait = 1000, 50*time.Millisecond, 500*time.Millisecond
}

func (c *config) scale(f float64) {
	n := func(v int) int { return max(1, int(math.Round(float64(v)*f))) }
	d := func(v time.Duration) time.Duration { return max(time.Millisecond, time.Duration(float64(v)*f)) }
	c.tasks, c.parked, c.jobs = n(c.tasks), n(c.parked), n(c.jobs)
	c.duration, c.dbapiDuration = d(c.duration), d(c.dbapiDuration)
}

// An experiment is one article's measurement, reproduced.
type experiment struct {
	name    string // what -exp selects
	title   string
	article string // the article's title, and its English translation
	run     func(ctx context.Context, e *env) error
}

var experiments = []experiment{
	{"blocking", "100,000 blocking tasks: a pool of 200 workers vs a scope",
		"자바 스레드만 알던 개발자가 가상 스레드를 파헤쳐 봤습니다 (A developer who only knew Java threads digs into virtual threads)",
		runBlocking},
	{"spike", "spike load on an HTTP server, I/O-bound and CPU-bound",
		"자바 플랫폼 vs 가상 스레드 - 언제, 왜 성능 차이가 나는가? (Platform vs virtual threads: when and why performance differs)",
		runSpike},
	{"dbapi", "1,000 concurrent requests to a DB + API handler",
		"Virtual Threads로 Spring MVC 성능 극대화하기 (Getting the most out of Spring MVC with virtual threads)",
		runDBAPI},
	{"parked", "memory per parked subtask",
		"17장. 가상 스레드의 기계 — 마운트, 언마운트, 그리고 pinning (Chapter 17: the machinery of virtual threads — mount, unmount and pinning)",
		runParked},
	{"pool", "a limiter in front of a 40-connection pool",
		"[Java 21] 가상 스레드(Virtual Threads) 사용기 ([Java 21] Using virtual threads)",
		runPool},
}

// experimentNames lists the names -exp accepts, for messages.
func experimentNames() string {
	names := make([]string, len(experiments))
	for i, x := range experiments {
		names[i] = x.name
	}
	return strings.Join(names, ", ")
}

// env is what an experiment gets: the config, where to print, and where to put chart series.
type env struct {
	cfg   config
	out   io.Writer
	prog  *progress
	chart *[]series
}

func (e *env) plot(s series) { *e.chart = append(*e.chart, s) }

func run(ctx context.Context, stdout, stderr io.Writer, args []string) error {
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := defaults()
	exps := fs.String("exp", "all", "experiments to run: all, or a comma-separated list of "+experimentNames())
	quick := fs.Bool("quick", false, "scale everything down: all five in under a minute")
	scale := fs.Float64("scale", 1, "multiply counts and load durations by this factor")
	fs.IntVar(&c.tasks, "tasks", c.tasks, "blocking: tasks")
	fs.IntVar(&c.workers, "workers", c.workers, "blocking, spike, dbapi: workers of the fixed pool")
	fs.DurationVar(&c.block, "block", c.block, "blocking: how long each task blocks")
	fs.IntVar(&c.spikeClients, "clients", c.spikeClients, "spike: concurrent clients")
	fs.DurationVar(&c.duration, "duration", c.duration, "spike: duration of each load run")
	fs.DurationVar(&c.cpuWork, "cpu", c.cpuWork, "spike: CPU time per request in the CPU-bound run, on one core")
	fs.IntVar(&c.dbapiClients, "dbapi-clients", c.dbapiClients, "dbapi: concurrent clients")
	fs.DurationVar(&c.dbapiDuration, "dbapi-duration", c.dbapiDuration, "dbapi: duration of each load run")
	fs.IntVar(&c.parked, "parked", c.parked, "parked: subtasks parked at once")
	fs.IntVar(&c.jobs, "jobs", c.jobs, "pool: jobs")
	fs.DurationVar(&c.query, "query", c.query, "pool: how long each job holds its connection")
	fs.DurationVar(&c.poolWait, "poolwait", c.poolWait, "pool: how long the pool lets a caller wait for a connection")
	fs.StringVar(&c.svg, "svg", "", "write a latency chart (p50/p95/p99 per configuration) to this SVG file")
	fs.BoolVar(&c.progress, "progress", true, "show a progress line on stderr during long runs")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	// -quick and -scale change the defaults; flags given explicitly keep their values.
	explicit := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
	if *quick || *scale != 1 {
		set := c
		if *quick {
			c.quick()
		}
		if *scale <= 0 {
			return errors.New("-scale must be positive")
		}
		c.scale(*scale)
		keep := map[string]func(){
			"tasks": func() { c.tasks = set.tasks }, "duration": func() { c.duration = set.duration },
			"cpu": func() { c.cpuWork = set.cpuWork }, "dbapi-duration": func() { c.dbapiDuration = set.dbapiDuration },
			"parked": func() { c.parked = set.parked }, "jobs": func() { c.jobs = set.jobs },
			"query": func() { c.query = set.query }, "poolwait": func() { c.poolWait = set.poolWait },
		}
		for name, restore := range keep {
			if explicit[name] {
				restore()
			}
		}
	}
	if c.tasks < 1 || c.workers < 1 || c.spikeClients < 1 || c.dbapiClients < 1 || c.parked < 1 || c.jobs < 1 ||
		c.duration <= 0 || c.dbapiDuration <= 0 || c.cpuWork <= 0 || c.query <= 0 || c.poolWait <= 0 {
		return errors.New("counts must be at least 1 and durations positive")
	}
	if *exps == "all" {
		for _, x := range experiments {
			c.exps = append(c.exps, x.name)
		}
	} else {
		for name := range strings.SplitSeq(*exps, ",") {
			name = strings.TrimSpace(name)
			if !slices.ContainsFunc(experiments, func(x experiment) bool { return x.name == name }) {
				return fmt.Errorf("unknown experiment %q (want one of %s)", name, experimentNames())
			}
			c.exps = append(c.exps, name)
		}
	}

	fmt.Fprintf(stdout, "loom loadtest: %s, GOMAXPROCS=%d (NumCPU %d), %s/%s\n",
		runtime.Version(), runtime.GOMAXPROCS(0), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintln(stdout, "client and server share this process and its CPUs; on a shared machine the figures are noisy")

	var chart []series
	e := &env{cfg: c, out: stdout, prog: &progress{w: stderr, on: c.progress}, chart: &chart}
	for _, x := range experiments {
		if !slices.Contains(c.exps, x.name) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "\n== %s: %s\n", x.name, x.title)
		fmt.Fprintf(stdout, "after the article %s\n", x.article)
		start := time.Now()
		if err := x.run(ctx, e); err != nil {
			return fmt.Errorf("%s: %w", x.name, err)
		}
		fmt.Fprintf(stdout, "(%s took %v)\n", x.name, time.Since(start).Round(100*time.Millisecond))
	}
	if c.svg != "" {
		f, err := os.Create(c.svg)
		if err != nil {
			return err
		}
		if err := writeSVG(f, "loom loadtest: latency per configuration (log scale)", chart); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "\nlatency chart written to %s\n", c.svg)
	}
	return nil
}

// ---- output helpers ----

func newTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0) }

// commas formats n with thousands separators: 12345 -> "12,345".
func commas(n int64) string {
	if n < 0 {
		return "-" + commas(-n)
	}
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// num formats x with thousands separators and the given decimals.
func num(x float64, decimals int) string {
	if math.IsNaN(x) {
		return "-"
	}
	neg := x < 0
	x = math.Abs(x)
	s := fmt.Sprintf("%.*f", decimals, x)
	intPart, frac, _ := strings.Cut(s, ".")
	var n int64
	fmt.Sscan(intPart, &n)
	out := commas(n)
	if decimals > 0 {
		out += "." + frac
	}
	if neg {
		out = "-" + out
	}
	return out
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// comparison is one row of an article-vs-loom table: the article's figures as it printed them,
// and ours. The ratios are B/A on both sides, so they compare directly.
type comparison struct {
	metric       string
	articleA     string // the article's baseline: platform threads, a pool of 200
	articleB     string // the article's virtual threads
	articleRatio string
	oursA, oursB float64
	decimals     int
}

// printComparison prints rows under a header naming the two configurations of each side.
func printComparison(w io.Writer, headA, headB, oursA, oursB string, rows []comparison) {
	tw := newTable(w)
	fmt.Fprintf(tw, "metric\tarticle: %s\tarticle: %s\tarticle B/A\tloom: %s\tloom: %s\tloom B/A\n", headA, headB, oursA, oursB)
	for _, r := range rows {
		ratio := "-"
		if r.oursA > 0 && !math.IsNaN(r.oursB) {
			ratio = fmt.Sprintf("%.2fx", r.oursB/r.oursA)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.metric, r.articleA, r.articleB, r.articleRatio,
			num(r.oursA, r.decimals), num(r.oursB, r.decimals), ratio)
	}
	tw.Flush()
}

// ---- progress ----

// progress writes a one-line status to stderr, rewritten in place, while a long step runs.
type progress struct {
	w            io.Writer
	on           bool
	delay, every time.Duration // zero: 2s and 1s
	mu           sync.Mutex
}

// track shows label and status() every second, starting after two seconds (short steps show
// nothing), until the returned stop is called, which clears the line.
func (p *progress) track(label string, status func() string) (stop func()) {
	if !p.on {
		return func() {}
	}
	delay, every := cmp.Or(p.delay, 2*time.Second), cmp.Or(p.every, time.Second)
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		wait := time.NewTimer(delay)
		defer wait.Stop()
		select {
		case <-wait.C:
		case <-quit:
			return
		}
		tick := time.NewTicker(every)
		defer tick.Stop()
		width := 0
		for {
			line := fmt.Sprintf("  [%s] %s", label, status())
			p.mu.Lock()
			fmt.Fprintf(p.w, "\r%-*s", width, line)
			p.mu.Unlock()
			width = max(width, len(line))
			select {
			case <-tick.C:
			case <-quit:
				p.mu.Lock()
				fmt.Fprintf(p.w, "\r%*s\r", width, "")
				p.mu.Unlock()
				return
			}
		}
	}()
	return func() { close(quit); <-done }
}
