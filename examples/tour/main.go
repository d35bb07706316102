// Command tour shows every loom package at work in a few seconds, printing compact tables:
//
//  1. scope: a fan-out to five backends in which one fails and one is too slow, under the
//     default FailFast policy and under AwaitAll with a timeout, with the State of each subtask;
//  2. scopedvalue: a request ID and a user bound once and read in every fork, also in a nested
//     scope, while a shadowing binding stays local;
//  3. semaphore: a fair semaphore serves a large request in arrival order, an unfair one lets a
//     stream of small requests barge past it;
//  4. limiter: a small connection pool in front of a slow downstream, flooded by unbounded
//     goroutines and then protected by a limiter (its Stats at the end);
//  5. blocking tasks in miniature: 2,000 tasks that each block for 100 ms, run by a pool of 200
//     workers (Java's newFixedThreadPool(200)) and by a scope, one subtask per task (Java's
//     virtual threads);
//  6. inspect: the dump of a request's fan-out taken while it runs — its scopes as a tree, each
//     subtask's age and the line it was forked at, a nested scope, a named limiter's queue.
//
// Run it with:
//
//	go run ./examples/tour
//
// It needs no network, takes about 3 seconds on 2 cores and exits non-zero
// if anything it shows did not hold.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/goloom/loom/inspect"
	"github.com/goloom/loom/limiter"
	"github.com/goloom/loom/scope"
	"github.com/goloom/loom/scopedvalue"
	"github.com/goloom/loom/semaphore"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "tour:", err)
		os.Exit(1)
	}
}

// config is what the flags set; the defaults are the tour as documented.
type config struct {
	tasks   int           // tasks in the miniature benchmark
	workers int           // workers of the fixed pool in the miniature benchmark
	block   time.Duration // how long each benchmark task blocks
}

func run(ctx context.Context, w io.Writer, args []string) error {
	fs := flag.NewFlagSet("tour", flag.ContinueOnError)
	fs.SetOutput(w)
	var c config
	fs.IntVar(&c.tasks, "tasks", 2000, "tasks in the miniature benchmark")
	fs.IntVar(&c.workers, "workers", 200, "workers of the fixed pool in the miniature benchmark")
	fs.DurationVar(&c.block, "block", 100*time.Millisecond, "how long each benchmark task blocks")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if c.tasks < 1 || c.workers < 1 || c.block < 0 {
		return errors.New("-tasks and -workers must be at least 1, -block not negative")
	}

	fmt.Fprintln(w, "loom tour: structured concurrency for Go, one package at a time")
	steps := []struct {
		name string
		fn   func(context.Context, io.Writer, config) error
	}{
		{"scope", tourScope},
		{"scopedvalue", tourScopedValue},
		{"semaphore", tourSemaphore},
		{"limiter", tourLimiter},
		{"benchmark", tourBenchmark},
		{"inspect", tourInspect},
	}
	for _, step := range steps {
		if err := ctx.Err(); err != nil {
			return err
		}
		fmt.Fprintln(w)
		if err := step.fn(ctx, w, c); err != nil {
			return fmt.Errorf("%s: %w", step.name, err)
		}
	}
	return nil
}

// table returns a tabwriter for a compact, left-aligned table; the caller flushes it.
func table(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0) }

// sleep blocks for d or until ctx ends, like a well-behaved I/O call.
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

// oneLine puts errors.Join's lines on one line.
func oneLine(err error) string {
	if err == nil {
		return "<nil>"
	}
	return strings.ReplaceAll(err.Error(), "\n", "; ")
}

// round makes a duration readable: whole milliseconds below a second, else 10 ms steps.
func round(d time.Duration) time.Duration {
	if d < time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(10 * time.Millisecond)
}

// commas formats n with thousands separators: 12345 -> "12,345".
func commas(n int64) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + commas(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// ---- 1. scope ----

type backend struct {
	name string
	took time.Duration
	err  error // returned after took
}

var errDeclined = errors.New("payments: upstream answered 503")

// The gaps between the durations are wide so that the outcome does not depend on scheduling, even
// on a loaded machine: the tour checks what it prints.
var backends = []backend{
	{name: "users", took: 10 * time.Millisecond},
	{name: "orders", took: 30 * time.Millisecond},
	{name: "payments", took: 100 * time.Millisecond, err: errDeclined},
	{name: "ads", took: 250 * time.Millisecond},
	{name: "recommendations", took: 3 * time.Second},
}

func tourScope(ctx context.Context, w io.Writer, _ config) error {
	fmt.Fprintln(w, "1. scope: fan out to five backends; payments fails after 100ms, recommendations needs 3s")
	fmt.Fprintln(w, `   FailFast:  s := scope.Open(ctx)                                   // the default policy`)
	fmt.Fprintln(w, `   AwaitAll:  s := scope.Open(ctx, scope.AwaitAll(), scope.WithTimeout(500*time.Millisecond))`)
	fmt.Fprintln(w)

	type outcome struct {
		states []scope.State
		err    error
		took   time.Duration
	}
	fanOut := func(opts ...scope.Option) outcome {
		start := time.Now()
		s := scope.Open(ctx, opts...)
		defer s.Close()
		tasks := make([]*scope.Subtask[string], len(backends))
		for i, b := range backends {
			tasks[i] = scope.Fork(s, func(ctx context.Context) (string, error) {
				if err := sleep(ctx, b.took); err != nil {
					return "", err
				}
				return b.name + " ok", b.err
			})
		}
		err := s.Join()
		o := outcome{err: err, took: time.Since(start)}
		for _, t := range tasks {
			o.states = append(o.states, t.State())
		}
		return o
	}
	ff := fanOut()
	aa := fanOut(scope.AwaitAll(), scope.WithTimeout(500*time.Millisecond))

	tw := table(w)
	fmt.Fprintln(tw, "   subtask\tdoes\tFailFast\tAwaitAll + 500ms timeout")
	for i, b := range backends {
		does := fmt.Sprintf("succeeds after %v", b.took)
		if b.err != nil {
			does = fmt.Sprintf("fails after %v", b.took)
		}
		fmt.Fprintf(tw, "   %s\t%s\t%v\t%v\n", b.name, does, ff.states[i], aa.states[i])
	}
	fmt.Fprintf(tw, "   Join took\t\t%v\t%v\n", round(ff.took), round(aa.took))
	tw.Flush()
	fmt.Fprintf(w, "   FailFast Join: %s\n", oneLine(ff.err))
	fmt.Fprintf(w, "   AwaitAll Join: %s\n", oneLine(aa.err))
	fmt.Fprintf(w, "   errors.Is(AwaitAll's error, scope.ErrTimeout) = %v, errors.Is(..., errDeclined) = %v\n",
		errors.Is(aa.err, scope.ErrTimeout), errors.Is(aa.err, errDeclined))

	// What the table shows must hold, or the tour fails.
	want := []scope.State{scope.Succeeded, scope.Succeeded, scope.Failed, scope.Cancelled, scope.Cancelled}
	if !slices.Equal(ff.states, want) || !errors.Is(ff.err, errDeclined) {
		return fmt.Errorf("FailFast: states %v, error %v", ff.states, ff.err)
	}
	want = []scope.State{scope.Succeeded, scope.Succeeded, scope.Failed, scope.Succeeded, scope.Cancelled}
	if !slices.Equal(aa.states, want) || !errors.Is(aa.err, scope.ErrTimeout) || !errors.Is(aa.err, errDeclined) {
		return fmt.Errorf("AwaitAll: states %v, error %v", aa.states, aa.err)
	}
	return nil
}

// ---- 2. scopedvalue ----

var (
	requestID = scopedvalue.New[string]("request-id")
	user      = scopedvalue.New[string]("user")
)

func tourScopedValue(ctx context.Context, w io.Writer, _ config) error {
	fmt.Fprintln(w, `2. scopedvalue: bound once with scopedvalue.Where(requestID, "r-42").And(scopedvalue.Where(user, "alice")).Run(ctx, handle)`)
	fmt.Fprintln(w)

	type row struct{ where, id, user string }
	var (
		mu   sync.Mutex
		rows []row
	)
	see := func(ctx context.Context, where string) {
		mu.Lock()
		defer mu.Unlock()
		rows = append(rows, row{where, requestID.OrElse(ctx, "(unbound)"), user.OrElse(ctx, "(unbound)")})
	}
	var err error
	handle := func(ctx context.Context) {
		see(ctx, "handler, inside Run")
		s := scope.Open(ctx)
		defer s.Close()
		fork := func(fn func(ctx context.Context)) {
			s.Go(func(ctx context.Context) error { fn(ctx); return nil })
		}
		fork(func(ctx context.Context) { see(ctx, "fork \"load-profile\"") })
		fork(func(ctx context.Context) { see(ctx, "fork \"load-orders\"") })
		fork(func(ctx context.Context) {
			inner := scope.Open(ctx)
			defer inner.Close()
			inner.Go(func(ctx context.Context) error { see(ctx, "fork of a scope nested in a fork"); return nil })
			_ = inner.Join()
		})
		// The owner binds something else after Open: forks still see what Open saw, by construction.
		scopedvalue.Where(requestID, "other").Run(ctx, func(ctx2 context.Context) {
			see(ctx2, `owner, inside Where(requestID, "other")`)
			fork(func(ctx context.Context) {
				see(ctx, `fork made there (sees Open's bindings)`)
			})
		})
		fork(func(ctx context.Context) {
			scopedvalue.Where(requestID, "r-42/retry").Run(ctx, func(ctx context.Context) {
				see(ctx, `fork with Where(requestID, "r-42/retry")`)
			})
		})
		err = s.Join()
	}
	carrier := scopedvalue.Where(requestID, "r-42").And(scopedvalue.Where(user, "alice"))
	carrier.Run(ctx, handle)
	see(ctx, "caller, after Run returned")
	if err != nil {
		return err
	}

	// Forks ran concurrently; print them in a fixed order.
	rank := map[string]int{
		"handler, inside Run":                      0,
		`owner, inside Where(requestID, "other")`:  1,
		"fork \"load-profile\"":                    2,
		"fork \"load-orders\"":                     3,
		"fork of a scope nested in a fork":         4,
		`fork made there (sees Open's bindings)`:   5,
		`fork with Where(requestID, "r-42/retry")`: 6,
		"caller, after Run returned":               7,
	}
	slices.SortFunc(rows, func(a, b row) int { return rank[a.where] - rank[b.where] })
	tw := table(w)
	fmt.Fprintln(tw, "   read in\trequestID\tuser")
	for _, r := range rows {
		fmt.Fprintf(tw, "   %s\t%s\t%s\n", r.where, r.id, r.user)
	}
	tw.Flush()

	wantID := []string{"r-42", "other", "r-42", "r-42", "r-42", "r-42", "r-42/retry", "(unbound)"}
	var gotID []string
	for _, r := range rows {
		gotID = append(gotID, r.id)
	}
	if !slices.Equal(gotID, wantID) {
		return fmt.Errorf("request IDs seen %v, want %v", gotID, wantID)
	}
	return nil
}

// ---- 3. semaphore ----

func tourSemaphore(ctx context.Context, w io.Writer, _ config) error {
	fmt.Fprintln(w, `3. semaphore: 4 permits, 2 held by a worker; "big" asks for 4, then six requests for 1 arrive one by one`)
	fmt.Fprintln(w, "   (a small one that gets its permit gives it back before the next arrives; then the worker releases its 2)")
	fmt.Fprintln(w)
	tw := table(w)
	fmt.Fprintln(tw, "   semaphore\tserved before big\tserved after big\tTryAcquire(1) while big waits")
	for _, mode := range []struct {
		name string
		opts []semaphore.Option
	}{
		{"semaphore.New(4)", nil},
		{"semaphore.New(4, semaphore.Unfair())", []semaphore.Option{semaphore.Unfair()}},
	} {
		res, err := serveOrder(ctx, mode.opts...)
		if err != nil {
			return err
		}
		fmt.Fprintf(tw, "   %s\t%s\t%s\t%v\n", mode.name, list(res.before), list(res.after), res.try)
		fair := mode.opts == nil
		if fair && (len(res.before) != 0 || res.try) || !fair && (len(res.before) != 6 || !res.try) {
			return fmt.Errorf("%s: %+v", mode.name, res)
		}
	}
	tw.Flush()
	fmt.Fprintln(w, "   Fair (the default) is strict FIFO: a large request is never starved by a stream of small ones.")
	fmt.Fprintln(w, "   Unfair trades that order for throughput, like Java's new Semaphore(n, false).")
	return nil
}

func list(names []string) string {
	if len(names) == 0 {
		return "-"
	}
	return strings.Join(names, " ")
}

type served struct {
	before, after []string // small requests served before and after big
	try           bool     // what TryAcquire(1) returned with permits free and big queued
}

// serveOrder runs the scenario of tourSemaphore. Small requests served after big may be granted
// together, so that part is reported as a sorted set.
func serveOrder(ctx context.Context, opts ...semaphore.Option) (served, error) {
	var res served
	sem := semaphore.New(4, opts...)
	if err := sem.Acquire(ctx, 2); err != nil { // the worker
		return res, err
	}
	var (
		mu    sync.Mutex
		order []string
		wg    sync.WaitGroup
	)
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(order) }
	request := func(name string, n int64) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := sem.Acquire(ctx, n); err != nil {
				return
			}
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			sem.Release(n)
		}()
	}
	// settle waits until the request just made has been served and is done, or has queued.
	settle := func(servedBefore, queuedBefore int) error {
		deadline := time.Now().Add(5 * time.Second)
		for {
			if n := count(); n > servedBefore && sem.Available() == 2 || sem.Waiting() > queuedBefore {
				return nil
			}
			if time.Now().After(deadline) {
				return errors.New("semaphore: a request neither got its permits nor queued")
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	request("big", 4)
	if err := settle(0, 0); err != nil {
		return res, err
	}
	if res.try = sem.TryAcquire(1); res.try {
		sem.Release(1)
	}
	for i := 1; i <= 6; i++ {
		n, q := count(), sem.Waiting()
		request(fmt.Sprintf("s%d", i), 1)
		if err := settle(n, q); err != nil {
			return res, err
		}
	}
	sem.Release(2) // the worker is done
	wg.Wait()
	big := slices.Index(order, "big")
	res.before = order[:big]
	res.after = slices.Sorted(slices.Values(order[big+1:]))
	return res, nil
}

// ---- 4. limiter ----

// errTooManyConnections is the downstream refusing a query because its pool is exhausted.
var errTooManyConnections = errors.New("db: too many connections")

// database is a downstream with a fixed number of connections; a query beyond that is refused.
type database struct {
	conns    int64
	inFlight atomic.Int64
	maxSeen  atomic.Int64
}

func (db *database) query(ctx context.Context, d time.Duration) error {
	n := db.inFlight.Add(1)
	defer db.inFlight.Add(-1)
	for m := db.maxSeen.Load(); n > m && !db.maxSeen.CompareAndSwap(m, n); m = db.maxSeen.Load() {
	}
	if n > db.conns {
		return errTooManyConnections
	}
	return sleep(ctx, d)
}

func tourLimiter(ctx context.Context, w io.Writer, _ config) error {
	const (
		callers = 160
		conns   = 8
		query   = 20 * time.Millisecond
		slow    = 300 * time.Millisecond // every 40th query hangs this long
	)
	fmt.Fprintf(w, "4. limiter: a database with %d connections, %v per query (every 40th hangs %v); %d callers at once\n",
		conns, query, slow, callers)
	fmt.Fprintln(w, "   lim := limiter.New(8, limiter.WithAcquireTimeout(5*time.Second), limiter.WithTaskTimeout(100*time.Millisecond))")
	fmt.Fprintln(w)
	queryTime := func(i int) time.Duration {
		if i%40 == 39 {
			return slow
		}
		return query
	}

	type result struct {
		ok, refused, timedOut, other int
		maxSeen                      int64
		took                         time.Duration
	}
	count := func(errs []error, db *database, took time.Duration) result {
		r := result{maxSeen: db.maxSeen.Load(), took: took}
		for _, err := range errs {
			switch {
			case err == nil:
				r.ok++
			case errors.Is(err, errTooManyConnections):
				r.refused++
			case errors.Is(err, limiter.ErrTaskTimeout):
				r.timedOut++
			default:
				r.other++
			}
		}
		return r
	}
	fanOut := func(call func(i int) error) []error {
		errs := make([]error, callers)
		var wg sync.WaitGroup
		for i := range callers {
			wg.Go(func() { errs[i] = call(i) })
		}
		wg.Wait()
		return errs
	}

	db := &database{conns: conns}
	start := time.Now()
	errs := fanOut(func(i int) error {
		qctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond) // the same per-query timeout
		defer cancel()
		err := db.query(qctx, queryTime(i))
		if errors.Is(err, context.DeadlineExceeded) {
			return limiter.ErrTaskTimeout // counted in the same column
		}
		return err
	})
	unbounded := count(errs, db, time.Since(start))

	db = &database{conns: conns}
	lim := limiter.New(conns,
		limiter.WithName("inventory-db"),
		limiter.WithAcquireTimeout(5*time.Second),
		limiter.WithTaskTimeout(100*time.Millisecond))
	start = time.Now()
	errs = fanOut(func(i int) error {
		return lim.Do(ctx, func(ctx context.Context) error { return db.query(ctx, queryTime(i)) })
	})
	limited := count(errs, db, time.Since(start))
	if err := lim.Shutdown(ctx); err != nil {
		return err
	}

	tw := table(w)
	fmt.Fprintln(tw, "   callers go\tok\trefused by the db\ttimed out\tother errors\tmost queries at once\ttook")
	for _, r := range []struct {
		name string
		result
	}{{"straight to the db", unbounded}, {"through the limiter", limited}} {
		fmt.Fprintf(tw, "   %s\t%d\t%d\t%d\t%d\t%d\t%v\n", r.name, r.ok, r.refused, r.timedOut, r.other, r.maxSeen, round(r.took))
	}
	tw.Flush()

	st := lim.Stats()
	fmt.Fprintln(w)
	fmt.Fprintln(w, "   lim.Stats():")
	tw = table(w)
	fmt.Fprintln(tw, "   Limit\tInFlight\tWaiting\tOverrunning\tSubmitted\tCompleted\tFailed\tRejected\tTimedOut\tCancelled\tPanicked")
	fmt.Fprintf(tw, "   %d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", st.Limit, st.InFlight, st.Waiting, st.Overrunning,
		st.Submitted, st.Completed, st.Failed, st.Rejected, st.TimedOut, st.Cancelled, st.Panicked)
	tw.Flush()

	if limited.refused != 0 || limited.other != 0 || limited.maxSeen > conns || limited.timedOut < callers/40 {
		return fmt.Errorf("through the limiter: %+v", limited)
	}
	if st.Submitted != callers || st.Completed+st.TimedOut != callers || st.InFlight != 0 {
		return fmt.Errorf("limiter stats %+v", st)
	}
	return nil
}

// ---- 5. blocking tasks in miniature ----

// peak tracks the most goroutines seen while a runner works.
type peak struct{ max atomic.Int64 }

func (p *peak) sample() {
	n := int64(runtime.NumGoroutine())
	for m := p.max.Load(); n > m && !p.max.CompareAndSwap(m, n); m = p.max.Load() {
	}
}

func tourBenchmark(ctx context.Context, w io.Writer, c config) error {
	fmt.Fprintf(w, "5. blocking tasks in miniature: %s tasks, each blocks %v (an I/O call)\n", commas(int64(c.tasks)), c.block)
	fmt.Fprintf(w, "   Java: newFixedThreadPool(%d) vs newVirtualThreadPerTaskExecutor(); Go: a pool of %d workers vs a scope\n",
		c.workers, c.workers)
	fmt.Fprintln(w)
	task := func(ctx context.Context, p *peak) error {
		p.sample()
		return sleep(ctx, c.block)
	}
	base := int64(runtime.NumGoroutine())

	type row struct {
		name  string
		ideal time.Duration
		run   func(p *peak) error
	}
	rounds := (c.tasks + c.workers - 1) / c.workers
	rows := []row{
		{fmt.Sprintf("pool of %d workers", c.workers), time.Duration(rounds) * c.block, func(p *peak) error {
			jobs := make(chan int)
			errs := make(chan error, c.workers)
			var wg sync.WaitGroup
			for range c.workers {
				wg.Go(func() {
					var first error
					for range jobs {
						if err := task(ctx, p); err != nil && first == nil {
							first = err
						}
					}
					errs <- first
				})
			}
			for i := range c.tasks {
				jobs <- i
			}
			close(jobs)
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					return err
				}
			}
			return nil
		}},
		{fmt.Sprintf("scope.Open(ctx, scope.WithLimit(%d))", c.workers), time.Duration(rounds) * c.block, func(p *peak) error {
			s := scope.Open(ctx, scope.WithLimit(c.workers))
			defer s.Close()
			for range c.tasks {
				s.Go(func(ctx context.Context) error { return task(ctx, p) })
			}
			return s.Join()
		}},
		{"scope.Open(ctx), one subtask per task", c.block, func(p *peak) error {
			s := scope.Open(ctx)
			defer s.Close()
			for range c.tasks {
				s.Go(func(ctx context.Context) error { return task(ctx, p) })
			}
			return s.Join()
		}},
	}
	tw := table(w)
	fmt.Fprintln(tw, "   runner\ttook\tideal\ttasks/s\tpeak goroutines")
	var took []time.Duration
	for _, r := range rows {
		var p peak
		start := time.Now()
		if err := r.run(&p); err != nil {
			return err
		}
		d := time.Since(start)
		took = append(took, d)
		fmt.Fprintf(tw, "   %s\t%v\t%v\t%s\t%s\n", r.name, round(d), r.ideal,
			commas(int64(float64(c.tasks)/d.Seconds())), commas(p.max.Load()-base))
	}
	tw.Flush()
	fmt.Fprintf(w, "   one subtask per task finished %.1fx sooner than the pool (in Java, 100,000 such tasks take ~50 s on\n"+
		"   newFixedThreadPool(200) and 1-2 s on virtual threads)\n",
		took[0].Seconds()/took[2].Seconds())
	return nil
}

// ---- 6. inspect ----

// tourInspect takes a dump of a fan-out of its own while it runs: what /debug/loom shows of a
// service (see examples/handler -serve), here printed as text.
func tourInspect(ctx context.Context, w io.Writer, _ config) error {
	fmt.Fprintln(w, "6. inspect: a dump of this fan-out, taken while it runs (what /debug/loom serves)")
	fmt.Fprintln(w, `   inspect.Enable(inspect.Scopes)  // or LOOM_INSPECT=scopes; then inspect.Snapshot().WriteText(w)`)
	fmt.Fprintln(w)
	inspect.Enable(inspect.Scopes)
	defer inspect.Disable(inspect.Scopes)

	db := limiter.New(2, limiter.WithName("tour-db"))
	release := make(chan struct{})
	running := make(chan struct{}, 8)
	query := func(ctx context.Context) error {
		return db.Do(ctx, func(ctx context.Context) error {
			running <- struct{}{}
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}
	s := scope.Open(ctx, scope.WithName("checkout"), scope.WithTimeout(5*time.Second))
	defer s.Close()
	s.Go(query) // two queries hold the database's connections...
	s.Go(query)
	s.Go(func(ctx context.Context) error { // ...a third waits for one, in a nested scope
		inner := scope.Open(ctx, scope.WithName("pricing"))
		defer inner.Close()
		inner.Go(query)
		return inner.Join()
	})
	<-running
	<-running
	for db.Stats().Waiting == 0 {
		if err := sleep(ctx, time.Millisecond); err != nil {
			return err
		}
	}
	if err := sleep(ctx, 20*time.Millisecond); err != nil { // some age to show
		return err
	}
	var dump strings.Builder
	if err := inspect.Snapshot().WriteText(&dump); err != nil {
		return err
	}
	for line := range strings.Lines(dump.String()) {
		fmt.Fprint(w, "   "+line)
	}
	close(release)
	if err := s.Join(); err != nil {
		return err
	}

	// What the dump shows must hold, or the tour fails.
	for _, want := range []string{`"checkout" FailFast running`, `"pricing" FailFast`, `limiter "tour-db" limit 2  in flight 2  waiting 1`} {
		if !strings.Contains(dump.String(), want) {
			return fmt.Errorf("the dump has no %q:\n%s", want, dump.String())
		}
	}
	return nil
}
