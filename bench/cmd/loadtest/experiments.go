package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goloom/loom/limiter"
	"github.com/goloom/loom/scope"
	"github.com/goloom/loom/semaphore"
)

// ---- blocking: 100,000 blocking tasks ----

// runBlocking runs the article's VirtualThreadBenchmark: every task sleeps for the block time; a
// fixed pool runs them workers at a time, a scope runs each in its own subtask.
func runBlocking(ctx context.Context, e *env) error {
	c := e.cfg
	fmt.Fprintf(e.out, "%s tasks, each blocks %v: newFixedThreadPool(%d) -> a pool of %d goroutines fed by a channel;\n",
		commas(int64(c.tasks)), c.block, c.workers, c.workers)
	fmt.Fprintf(e.out, "newVirtualThreadPerTaskExecutor() -> scope.Open(ctx) and one s.Go per task. Latency: submit to completion.\n\n")

	type outcome struct {
		took time.Duration
		lat  []time.Duration
		peak int64
	}
	var done atomic.Int64
	measure := func(label string, runTasks func(task func(ctx context.Context, i int) error) error) (outcome, error) {
		done.Store(0)
		lat := make([]time.Duration, c.tasks)
		start := time.Now()
		var g *goroutineSampler
		task := func(ctx context.Context, i int) error {
			g.sample()
			err := sleep(ctx, c.block)
			lat[i] = time.Since(start) // all submitted at start: this is submit-to-completion
			done.Add(1)
			return err
		}
		stop := e.prog.track(label, func() string {
			return fmt.Sprintf("%s/%s tasks done, %v", commas(done.Load()), commas(int64(c.tasks)), time.Since(start).Truncate(time.Second))
		})
		g = sampleGoroutines()
		err := runTasks(task)
		peak := g.finish()
		stop()
		return outcome{took: time.Since(start), lat: lat, peak: peak}, err
	}

	pool, err := measure("blocking pool", func(task func(context.Context, int) error) error {
		jobs := make(chan int)
		var (
			wg    sync.WaitGroup
			errMu sync.Mutex
			first error
		)
		for range c.workers {
			wg.Go(func() {
				for i := range jobs {
					if err := task(ctx, i); err != nil {
						errMu.Lock()
						first = cmpOr(first, err)
						errMu.Unlock()
					}
				}
			})
		}
	feed:
		for i := range c.tasks {
			select {
			case jobs <- i:
			case <-ctx.Done():
				break feed
			}
		}
		close(jobs)
		wg.Wait()
		return cmpOr(first, ctx.Err())
	})
	if err != nil {
		return err
	}
	sc, err := measure("blocking scope", func(task func(context.Context, int) error) error {
		s := scope.Open(ctx)
		defer s.Close()
		for i := range c.tasks {
			s.Go(func(ctx context.Context) error { return task(ctx, i) })
		}
		return s.Join()
	})
	if err != nil {
		return err
	}

	ps, ss := summarize(pool.lat), summarize(sc.lat)
	ideal := time.Duration((c.tasks+c.workers-1)/c.workers) * c.block
	printComparison(e.out, "pool of 200", "virtual threads", fmt.Sprintf("pool of %d", c.workers), "scope", []comparison{
		{metric: "wall time (s)", articleA: "~50", articleB: "~1-2", articleRatio: "~0.03x",
			oursA: pool.took.Seconds(), oursB: sc.took.Seconds(), decimals: 2},
		{metric: "tasks per second", articleA: "~2,000", articleB: "~50,000-100,000", articleRatio: "~25-50x",
			oursA: float64(c.tasks) / pool.took.Seconds(), oursB: float64(c.tasks) / sc.took.Seconds()},
		{metric: "task latency p50 (ms)", articleA: "-", articleB: "-", articleRatio: "-", oursA: ms(ps.p50), oursB: ms(ss.p50)},
		{metric: "task latency p99 (ms)", articleA: "-", articleB: "-", articleRatio: "-", oursA: ms(ps.p99), oursB: ms(ss.p99)},
		{metric: "peak goroutines / threads", articleA: "200", articleB: "100,000 virtual", articleRatio: "-",
			oursA: float64(pool.peak), oursB: float64(sc.peak)},
	})
	fmt.Fprintf(e.out, "the pool cannot beat %s tasks / %d workers x %v = %v; the scope is bound by the block time, not a thread count\n",
		commas(int64(c.tasks)), c.workers, c.block, ideal)
	e.plot(series{fmt.Sprintf("blocking: pool of %d", c.workers), ps})
	e.plot(series{"blocking: scope", ss})
	return nil
}

func cmpOr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// ---- spike: spike load, I/O-bound and CPU-bound ----

func runSpike(ctx context.Context, e *env) error {
	c := e.cfg
	iters := calibrate(c.cpuWork)
	fmt.Fprintf(e.out, "%d concurrent clients for %v against a handler that waits %v (I/O-bound) or burns %v of CPU (CPU-bound,\n",
		c.spikeClients, c.duration, c.ioWait, c.cpuWork)
	fmt.Fprintf(e.out, "%s rounds of arithmetic; the article's loop of 2e9 additions is scaled down to fit %d cores).\n",
		commas(int64(iters)), runtime.GOMAXPROCS(0))
	fmt.Fprintf(e.out, "Tomcat, server.tomcat.threads.max=200 -> handlers hand their work to a pool of %d goroutines and wait;\n", c.workers)
	fmt.Fprintln(e.out, "spring.threads.virtual.enabled=true -> one goroutine per request, the work a subtask of a scope.")
	fmt.Fprintln(e.out)

	workloads := []struct {
		name string
		fn   work
	}{
		{"io", func(ctx context.Context) error { return sleep(ctx, c.ioWait) }},
		{"cpu", func(context.Context) error { burn(iters); return nil }},
	}
	results := map[string]loadResult{}
	for _, wl := range workloads {
		for _, m := range []model{poolModel, scopeModel} {
			label := fmt.Sprintf("spike %s %s", wl.name, m)
			r, err := serveAndLoad(ctx, e, m, c.workers, wl.fn, c.spikeClients, c.duration, label)
			if err != nil {
				return fmt.Errorf("%s: %w", label, err)
			}
			results[wl.name+" "+m.String()] = r
		}
	}
	ip, is := summarize(results["io pool"].latencies), summarize(results["io scope"].latencies)
	cp, cs := summarize(results["cpu pool"].latencies), summarize(results["cpu scope"].latencies)
	printComparison(e.out, "200 threads", "virtual threads", fmt.Sprintf("pool of %d", c.workers), "scope", []comparison{
		{metric: "I/O throughput (req/s)", articleA: "651.68", articleB: "1,625.67", articleRatio: "2.49x",
			oursA: results["io pool"].throughput, oursB: results["io scope"].throughput, decimals: 1},
		{metric: "I/O mean (ms)", articleA: "747.40", articleB: "306.64", articleRatio: "0.41x", oursA: ms(ip.mean), oursB: ms(is.mean), decimals: 1},
		{metric: "I/O p95 (ms)", articleA: "908.46", articleB: "315.55", articleRatio: "0.35x", oursA: ms(ip.p95), oursB: ms(is.p95), decimals: 1},
		{metric: "CPU throughput (req/s)", articleA: "11.31", articleB: "10.55", articleRatio: "0.93x",
			oursA: results["cpu pool"].throughput, oursB: results["cpu scope"].throughput, decimals: 1},
		{metric: "CPU mean (s)", articleA: "29.98", articleB: "22.64", articleRatio: "0.76x", oursA: cp.mean.Seconds(), oursB: cs.mean.Seconds(), decimals: 2},
		{metric: "CPU p95 (s)", articleA: "44.03", articleB: "42.63", articleRatio: "0.97x", oursA: cp.p95.Seconds(), oursB: cs.p95.Seconds(), decimals: 2},
	})
	fmt.Fprintf(e.out, "ideal I/O: pool %d/%v = %.0f req/s, scope %d/%v = %.0f req/s; failed requests: %d\n",
		c.workers, c.ioWait, float64(c.workers)/c.ioWait.Seconds(), c.spikeClients, c.ioWait,
		float64(c.spikeClients)/c.ioWait.Seconds(),
		results["io pool"].failed+results["io scope"].failed+results["cpu pool"].failed+results["cpu scope"].failed)
	e.plot(series{fmt.Sprintf("spike I/O: pool of %d", c.workers), ip})
	e.plot(series{"spike I/O: scope", is})
	e.plot(series{fmt.Sprintf("spike CPU: pool of %d", c.workers), cp})
	e.plot(series{"spike CPU: scope", cs})
	return nil
}

// serveAndLoad starts a server of the given model, runs the load against it and stops it.
func serveAndLoad(ctx context.Context, e *env, m model, workers int, fn work, clients int, d time.Duration, label string) (loadResult, error) {
	ts, err := startServer(m, workers, fn)
	if err != nil {
		return loadResult{}, err
	}
	defer ts.close()
	return load(ctx, ts.url, clients, d, e.prog, label)
}

// ---- dbapi: a DB + API handler under 1,000 concurrent requests ----

func runDBAPI(ctx context.Context, e *env) error {
	c := e.cfg
	fmt.Fprintf(e.out, "%s concurrent clients for %v; the handler calls a %v \"DB\" and then a %v \"API\" (both blocking waits)\n",
		commas(int64(c.dbapiClients)), c.dbapiDuration, c.db, c.api)
	fmt.Fprintf(e.out, "Tomcat (200 threads) -> a pool of %d goroutines; Virtual Threads -> one goroutine per request and a scope\n\n", c.workers)
	handler := func(ctx context.Context) error {
		if err := sleep(ctx, c.db); err != nil { // orderRepo.findById
			return err
		}
		return sleep(ctx, c.api) // stockClient.getStock
	}
	pool, err := serveAndLoad(ctx, e, poolModel, c.workers, handler, c.dbapiClients, c.dbapiDuration, "dbapi pool")
	if err != nil {
		return err
	}
	sc, err := serveAndLoad(ctx, e, scopeModel, c.workers, handler, c.dbapiClients, c.dbapiDuration, "dbapi scope")
	if err != nil {
		return err
	}
	ps, ss := summarize(pool.latencies), summarize(sc.latencies)
	printComparison(e.out, "Tomcat 200", "virtual threads", fmt.Sprintf("pool of %d", c.workers), "scope", []comparison{
		{metric: "p99 (ms)", articleA: "~3,000", articleB: "~160", articleRatio: "~0.05x", oursA: ms(ps.p99), oursB: ms(ss.p99)},
		{metric: "throughput (req/s)", articleA: "~650", articleB: "~5,800", articleRatio: "~8.9x", oursA: pool.throughput, oursB: sc.throughput},
		{metric: "p50 (ms)", articleA: "-", articleB: "-", articleRatio: "-", oursA: ms(ps.p50), oursB: ms(ss.p50)},
		{metric: "mean (ms)", articleA: "-", articleB: "-", articleRatio: "-", oursA: ms(ps.mean), oursB: ms(ss.mean)},
	})
	work := c.db + c.api
	fmt.Fprintf(e.out, "ideal: pool %d/%v = %.0f req/s, scope %s/%v = %.0f req/s; failed requests: %d\n",
		c.workers, work, float64(c.workers)/work.Seconds(), commas(int64(c.dbapiClients)), work,
		float64(c.dbapiClients)/work.Seconds(), pool.failed+sc.failed)
	e.plot(series{fmt.Sprintf("dbapi: pool of %d", c.workers), ps})
	e.plot(series{"dbapi: scope", ss})
	return nil
}

// ---- parked: memory per parked subtask ----

// articleBytes are the article's bytes per parked virtual thread (JDK 25, -Xmx1g), by count.
var articleBytes = map[int]string{
	200_000: "1,001", 400_000: "891", 600_000: "828", 800_000: "828",
	1_000_000: "790", 1_200_000: "768", 1_400_000: "735",
}

func runParked(ctx context.Context, e *env) error {
	c := e.cfg
	fmt.Fprintf(e.out, "%s subtasks forked into one scope, each parked on a channel receive; memory from runtime.MemStats\n",
		commas(int64(c.parked)))
	fmt.Fprintln(e.out, "(HeapAlloc + StackInuse after runtime.GC, minus the same before), next to bare goroutines parked the same way.")
	fmt.Fprintln(e.out, "The article: Thread.ofVirtual().start(() -> latch.await()) in a 1 GB heap, totalMemory() - freeMemory().")
	fmt.Fprintln(e.out)

	steps := 5
	counts := make([]int, steps)
	for i := range steps {
		counts[i] = c.parked * (i + 1) / steps
	}
	type point struct {
		bytes     uint64
		osThreads int
	}
	park := func(label string, start func(n int, started *atomic.Int64, release <-chan struct{}) (wait func() error)) ([]point, error) {
		var started atomic.Int64
		release := make(chan struct{})
		base := memUsed()
		var (
			points []point
			waits  []func() error
			have   int
		)
		stop := e.prog.track(label, func() string {
			return fmt.Sprintf("%s/%s parked", commas(started.Load()), commas(int64(c.parked)))
		})
		defer stop()
		for _, n := range counts {
			waits = append(waits, start(n-have, &started, release))
			have = n
			for started.Load() < int64(n) { // every one of them is parked on release now
				if err := ctx.Err(); err != nil {
					close(release)
					return nil, err
				}
				time.Sleep(time.Millisecond)
			}
			points = append(points, point{bytes: memUsed() - min(base, memUsed()), osThreads: pprof.Lookup("threadcreate").Count()})
		}
		close(release)
		for _, wait := range waits {
			if err := wait(); err != nil {
				return nil, err
			}
		}
		return points, nil
	}

	bareGoroutines := func(n int, started *atomic.Int64, release <-chan struct{}) func() error {
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				started.Add(1)
				<-release
			})
		}
		return func() error { wg.Wait(); return nil }
	}
	// Go allocates a goroutine's descriptor (the runtime's g) once and reuses it after the goroutine
	// ends, so new goroutines cost more than later ones, and earlier experiments in this process
	// have left descriptors behind. So: bare goroutines first, to have enough descriptors (the
	// last step's increment, beyond what was left behind, gives a new descriptor's size); then
	// the subtasks and bare goroutines again, both reusing descriptors, each plus that size.
	bareNew, err := park("parked goroutines", bareGoroutines)
	if err != nil {
		return err
	}
	// One scope holds every subtask: Fork them in batches, Join at the end.
	s := scope.Open(ctx)
	defer s.Close()
	scoped, err := park("parked scope", func(n int, started *atomic.Int64, release <-chan struct{}) func() error {
		for range n {
			s.Go(func(ctx context.Context) error {
				started.Add(1)
				select {
				case <-release:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			})
		}
		return func() error { return nil }
	})
	if err != nil {
		return err
	}
	if err := s.Join(); err != nil {
		return err
	}
	bareReused, err := park("parked goroutines again", bareGoroutines)
	if err != nil {
		return err
	}
	last := len(counts) - 1
	step := func(p []point) int64 { return int64(p[last].bytes) - int64(p[max(last-1, 0)].bytes) }
	stepN := int64(counts[last] - counts[max(last-1, 0)])
	if last == 0 {
		step = func(p []point) int64 { return int64(p[0].bytes) }
		stepN = int64(counts[0])
	}
	descriptor := max(0, (step(bareNew)-step(bareReused))/stepN)

	tw := newTable(e.out)
	fmt.Fprintln(tw, "parked\tloom: MB\tloom: bytes per subtask\tbare goroutine: bytes each\tOS threads\tarticle: bytes per virtual thread")
	for i, n := range counts {
		a := articleBytes[n]
		if a == "" {
			a = "-"
		}
		perSubtask := int64(scoped[i].bytes)/int64(n) + descriptor
		perGoroutine := int64(bareReused[i].bytes)/int64(n) + descriptor
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", commas(int64(n)), num(float64(perSubtask*int64(n))/(1<<20), 0),
			commas(perSubtask), commas(perGoroutine), scoped[i].osThreads, a)
	}
	tw.Flush()
	fmt.Fprintf(e.out, "Both bytes columns include the goroutine's descriptor (%s bytes, what a new goroutine costs more than a\n", commas(descriptor))
	fmt.Fprintln(e.out, "reused one). Article (JDK 25, Apple M1): 735-1,001 bytes per parked virtual thread, 15 platform threads.")
	fmt.Fprintln(e.out, "A goroutine starts with a 2 KiB stack (a virtual thread's frames live in the heap, as small as its depth),")
	fmt.Fprintln(e.out, "so a parked goroutine costs more than a parked virtual thread; a subtask adds its bookkeeping on top.")
	return nil
}

// memUsed returns the live heap plus the goroutine stacks, after a collection.
func memUsed() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc + m.StackInuse
}

// ---- pool: a limiter in front of a connection pool ----

// errPoolTimeout is the pool's "Connection is not available, request timed out after ...".
var errPoolTimeout = errors.New("pool: connection not available, request timed out")

// connPool is a database connection pool like HikariCP: a fixed number of connections, and a
// bound on how long a caller may wait for one. Its queue is FIFO (a loom semaphore).
type connPool struct {
	conns *semaphore.Semaphore
	wait  time.Duration
}

func newConnPool(size int, wait time.Duration) *connPool {
	return &connPool{conns: semaphore.New(int64(size)), wait: wait}
}

// with runs fn holding a connection and reports how long it waited for one.
func (p *connPool) with(ctx context.Context, fn func() error) (waited time.Duration, err error) {
	if !p.conns.TryAcquire(1) {
		start := time.Now()
		err := p.conns.AcquireTimeout(ctx, 1, p.wait)
		waited = time.Since(start)
		if errors.Is(err, semaphore.ErrTimeout) {
			return waited, errPoolTimeout
		}
		if err != nil {
			return waited, err
		}
	}
	defer p.conns.Release(1)
	return waited, fn()
}

func runPool(ctx context.Context, e *env) error {
	c := e.cfg
	fmt.Fprintf(e.out, "%s jobs at once, each holds one of %d pooled connections for %v (a slow downstream); the pool lets a\n",
		commas(int64(c.jobs)), c.conns, c.query)
	fmt.Fprintf(e.out, "caller wait %v for a connection (HikariCP's connectionTimeout, 30 s by default, scaled down). Meanwhile an\n", c.poolWait)
	fmt.Fprintln(e.out, "interactive request needs a connection for 1 ms every 20 ms. done p50/p99: from submission to the end of a job;")
	fmt.Fprintln(e.out, "waits: for a connection, at the pool (a job's wait in the limiter's queue is not a wait at the pool).")
	fmt.Fprintln(e.out, "The article's ConcurrencyLimiterExecutor:")
	fmt.Fprintf(e.out, "new Semaphore(40) + tryAcquire(30 s) -> limiter.New(%d, limiter.WithAcquireTimeout(30*time.Second)).\n\n", c.limit)

	type outcome struct {
		name             string
		ok, poolTimeouts int
		other            int
		took             time.Duration
		lat              []time.Duration
		connWait         []time.Duration
		peak             int64
		probe            []time.Duration
		probeTimeouts    int
	}
	query := func(ctx context.Context, pool *connPool) (time.Duration, error) {
		return pool.with(ctx, func() error { return sleep(ctx, c.query) })
	}
	measure := func(name string, runJobs func(pool *connPool, job func(i int) error)) outcome {
		pool := newConnPool(c.conns, c.poolWait)
		o := outcome{name: name, lat: make([]time.Duration, c.jobs), connWait: make([]time.Duration, c.jobs)}
		errs := make([]error, c.jobs)
		var done atomic.Int64
		start := time.Now()
		stop := e.prog.track("pool "+name, func() string {
			return fmt.Sprintf("%s/%s jobs done", commas(done.Load()), commas(int64(c.jobs)))
		})
		defer stop()

		// The interactive requests arrive every 20ms, each on its own goroutine, while the jobs run.
		var (
			probeMu sync.Mutex
			probeWG sync.WaitGroup
		)
		stopProbes := make(chan struct{})
		probeWG.Go(func() {
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-tick.C:
				case <-stopProbes:
					return
				}
				probeWG.Go(func() {
					waited, err := pool.with(ctx, func() error { return sleep(ctx, time.Millisecond) })
					probeMu.Lock()
					defer probeMu.Unlock()
					switch {
					case errors.Is(err, errPoolTimeout):
						o.probeTimeouts++
					case err == nil:
						o.probe = append(o.probe, waited)
					}
				})
			}
		})

		g := sampleGoroutines()
		runJobs(pool, func(i int) error {
			g.sample()
			waited, err := query(ctx, pool)
			o.lat[i] = time.Since(start) // every job was submitted at start
			o.connWait[i] = waited
			errs[i] = err
			done.Add(1)
			return err
		})
		o.peak = g.finish()
		o.took = time.Since(start)
		close(stopProbes)
		probeWG.Wait()
		for _, err := range errs {
			switch {
			case err == nil:
				o.ok++
			case errors.Is(err, errPoolTimeout):
				o.poolTimeouts++
			default:
				o.other++
			}
		}
		return o
	}

	var outcomes []outcome
	outcomes = append(outcomes, measure("unbounded goroutines", func(_ *connPool, job func(int) error) {
		var wg sync.WaitGroup
		for i := range c.jobs {
			wg.Go(func() { _ = job(i) })
		}
		wg.Wait()
	}))
	var stats []limiter.Stats
	outcomes = append(outcomes, measure("limiter, a goroutine per job (Do)", func(_ *connPool, job func(int) error) {
		lim := limiter.New(c.limit, limiter.WithAcquireTimeout(30*time.Second))
		var wg sync.WaitGroup
		for i := range c.jobs {
			wg.Go(func() { _ = lim.Do(ctx, func(context.Context) error { return job(i) }) })
		}
		wg.Wait()
		stats = append(stats, lim.Stats())
	}))
	outcomes = append(outcomes, measure("limiter, queued jobs (Submit)", func(_ *connPool, job func(int) error) {
		lim := limiter.New(c.limit, limiter.WithAcquireTimeout(30*time.Second))
		futures := make([]*limiter.Future[struct{}], c.jobs)
		for i := range c.jobs {
			futures[i] = limiter.Submit(ctx, lim, func(context.Context) (struct{}, error) { return struct{}{}, job(i) })
		}
		for _, f := range futures {
			_, _ = f.Wait(ctx)
		}
		stats = append(stats, lim.Stats())
	}))

	tw := newTable(e.out)
	fmt.Fprintln(tw, "jobs run as\tok\tpool timeouts\tdone p50\tdone p99\ttook\tpeak goroutines\tjob's wait at the pool p99\tinteractive wait p99\tinteractive timeouts")
	for _, o := range outcomes {
		s, p, cw := summarize(o.lat), summarize(o.probe), summarize(o.connWait)
		probeP99 := "-"
		if p.n > 0 {
			probeP99 = p.p99.Round(time.Millisecond).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%v\t%v\t%s\t%v\t%s\t%d\n", o.name, commas(int64(o.ok)), commas(int64(o.poolTimeouts)),
			s.p50.Round(time.Millisecond), s.p99.Round(time.Millisecond), o.took.Round(10*time.Millisecond),
			commas(o.peak), cw.p99.Round(time.Millisecond), probeP99, o.probeTimeouts)
		label := "pool: " + o.name
		if failed := o.poolTimeouts + o.other; failed > 0 {
			label += fmt.Sprintf(", %s failed", commas(int64(failed)))
		}
		e.plot(series{label, s})
	}
	tw.Flush()
	fmt.Fprintln(e.out)
	tw = newTable(e.out)
	fmt.Fprintln(tw, "limiter Stats\tLimit\tSubmitted\tCompleted\tFailed\tRejected\tTimedOut\tCancelled")
	for i, st := range stats {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%d\t%d\t%d\n", outcomes[i+1].name, st.Limit, commas(st.Submitted), commas(st.Completed),
			st.Failed, st.Rejected, st.TimedOut, st.Cancelled)
	}
	tw.Flush()
	fmt.Fprintln(e.out, "article (k6, 10 users, 2 min): unbounded virtual threads 0% failures vs a 200-thread pool 4% timeouts;")
	fmt.Fprintln(e.out, "it printed no figures for its limiter, whose point is the pool above: waiting moves from the pool to the limiter.")
	fmt.Fprintf(e.out, "With the limit equal to the pool size, interactive requests still wait for a job's connection; a limit a\n")
	fmt.Fprintf(e.out, "little below the pool size (say %d of %d) would leave them connections of their own.\n", c.conns*3/4, c.conns)
	for _, o := range outcomes[1:] {
		if o.poolTimeouts != 0 || o.other != 0 {
			return fmt.Errorf("%s: %d pool timeouts, %d other errors", o.name, o.poolTimeouts, o.other)
		}
	}
	return nil
}
