package redisfleet_test

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/goloom/loom/fleet"
	"github.com/goloom/loom/fleet/redisfleet"
	"github.com/goloom/loom/fleet/redisfleet/internal/redistest"
)

// The fleet's throughput with real processes: replica processes (this test binary again,
// TestBenchReplica) of a few goroutines each share one capacity on one redis-server; every
// goroutine loops Acquire, a task of 1 ms, Release, for two seconds, all processes starting at
// once. The benchmark reports grants/s, the share of the ideal C / task time it reached, round
// trips per permit (as the Semaphores count them), scripts and script-µs per permit (INFO
// commandstats), and the most permits in use at once (from the processes' own stamps of when each
// permit was held).

const benchReplicaEnv = "LOOM_FLEET_BENCH_REPLICA"

type benchConfig struct {
	Redis    string
	Name     string
	Capacity int64
	Workers  int
	Task     time.Duration
	Run      time.Duration
}

type benchResult struct {
	Grants     int64
	RoundTrips int64
	Held       [][2]int64 // unix ns from Acquire's return to Release, per permit
}

// TestBenchReplica is a replica process of BenchmarkThroughput; run directly, it skips. It warms
// its name up, prints READY, waits for a line on stdin, runs its workers for cfg.Run, and prints
// its result on a line starting with RESULT.
func TestBenchReplica(t *testing.T) {
	raw := os.Getenv(benchReplicaEnv)
	if raw == "" {
		t.Skip("runs only as a replica process of BenchmarkThroughput")
	}
	var cfg benchConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: cfg.Redis, ContextTimeoutEnabled: true, PoolSize: cfg.Workers + 2})
	defer rdb.Close()
	sem := fleet.New(redisfleet.New(rdb), cfg.Name, cfg.Capacity, fleet.WithLease(time.Second), fleet.WithLogger(nil))
	defer sem.Close()
	p, err := sem.AcquireTimeout(context.Background(), 1, 10*time.Second) // past the first-use pause
	if err != nil {
		t.Fatal(err)
	}
	p.Release()
	fmt.Println("READY")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	trips0 := sem.Stats().RoundTrips
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Run)
	defer cancel()
	var mu sync.Mutex
	var res benchResult
	var wg sync.WaitGroup
	for range cfg.Workers {
		wg.Go(func() {
			var held [][2]int64
			for {
				p, err := sem.Acquire(ctx, 1)
				if err != nil {
					break
				}
				t0 := time.Now().UnixNano()
				time.Sleep(cfg.Task)
				held = append(held, [2]int64{t0, time.Now().UnixNano()})
				p.Release()
			}
			mu.Lock()
			res.Held = append(res.Held, held...)
			mu.Unlock()
		})
	}
	wg.Wait()
	res.Grants = int64(len(res.Held))
	res.RoundTrips = sem.Stats().RoundTrips - trips0
	out, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("RESULT %s\n", out)
}

type benchProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
}

func startBenchReplica(b *testing.B, cfg benchConfig) *benchProc {
	raw, err := json.Marshal(cfg)
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestBenchReplica$", "-test.count=1")
	cmd.Env = append(os.Environ(), benchReplicaEnv+"="+string(raw))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return &benchProc{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)}
}

// line reads the process's output up to a line starting with prefix, and returns the rest of it.
func (p *benchProc) line(b *testing.B, prefix string) string {
	for {
		l, err := p.out.ReadString('\n')
		if err != nil {
			b.Fatalf("replica: %v (waiting for %s)", err, prefix)
		}
		if rest, ok := strings.CutPrefix(l, prefix); ok {
			return strings.TrimSpace(rest)
		}
	}
}

func BenchmarkThroughput(b *testing.B) {
	for _, c := range []struct{ procs, workers, capacity int }{
		{10, 4, 10}, // issue figure: 7-9 % of ideal before
		{1, 40, 10},
		{10, 8, 40}, // at least 2x the C=10 rate
	} {
		b.Run(fmt.Sprintf("procs=%d/workers=%d/C=%d", c.procs, c.workers, c.capacity), func(b *testing.B) {
			srv := redistest.Start(b)
			admin := srv.Client()
			const task, run = time.Millisecond, 2 * time.Second
			var grants, trips, scripts, most int64
			var scriptUs float64
			for i := range b.N {
				b.StopTimer()
				cfg := benchConfig{Redis: srv.Addr, Name: fmt.Sprintf("bench-%d", i), Capacity: int64(c.capacity),
					Workers: c.workers, Task: task, Run: run}
				var ps []*benchProc
				for range c.procs {
					ps = append(ps, startBenchReplica(b, cfg))
				}
				for _, p := range ps {
					p.line(b, "READY")
				}
				scripts0, us0 := scriptCalls(b, admin), scriptMicros(b, admin)
				b.StartTimer()
				for _, p := range ps {
					_, _ = io.WriteString(p.stdin, "go\n")
				}
				var held [][2]int64
				for _, p := range ps {
					var r benchResult
					if err := json.Unmarshal([]byte(p.line(b, "RESULT ")), &r); err != nil {
						b.Fatal(err)
					}
					grants += r.Grants
					trips += r.RoundTrips
					held = append(held, r.Held...)
				}
				b.StopTimer()
				scripts += scriptCalls(b, admin) - scripts0
				scriptUs += scriptMicros(b, admin) - us0
				most = max(most, mostAtOnce(held))
				for _, p := range ps {
					_ = p.stdin.Close()
					_ = p.cmd.Wait()
				}
			}
			perSec := float64(grants) / (float64(b.N) * run.Seconds())
			b.ReportMetric(perSec, "grants/s")
			b.ReportMetric(100*perSec*task.Seconds()/float64(c.capacity), "%ideal")
			b.ReportMetric(float64(trips)/float64(grants), "trips/permit")
			b.ReportMetric(float64(scripts)/float64(grants), "scripts/permit")
			b.ReportMetric(scriptUs/float64(grants), "script-µs/permit")
			b.ReportMetric(float64(most), "most-in-use")
		})
	}
}

// mostAtOnce returns the most intervals that overlap at one instant.
func mostAtOnce(held [][2]int64) int64 {
	type edge struct {
		at    int64
		delta int64
	}
	edges := make([]edge, 0, 2*len(held))
	for _, h := range held {
		edges = append(edges, edge{h[0], 1}, edge{h[1], -1})
	}
	slices.SortFunc(edges, func(a, b edge) int {
		if c := cmp.Compare(a.at, b.at); c != 0 {
			return c
		}
		return cmp.Compare(a.delta, b.delta) // an end before a start at the same instant
	})
	var n, most int64
	for _, e := range edges {
		n += e.delta
		most = max(most, n)
	}
	return most
}
