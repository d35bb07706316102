// Command fleet holds one limit of calls in flight across every replica of a service.
//
// A local test API allows at most 40 calls in flight and answers 429 Too Many Requests beyond
// that. Five replicas of a service call it, each with its own HTTP client and its own
// limiter.New(40, ...). On their own, each replica keeps its own 40, so the API sees up to 5 × 40
// and answers 429s. Then each replica also holds one permit of a limit shared by all of them:
//
//	sem := fleet.New(backend, "llm-api", 40, fleet.WithLease(time.Second)) // one per replica
//	defer sem.Close()
//	api := limiter.New(40, limiter.WithFleet(sem), limiter.WithAcquireTimeout(30*time.Second))
//
// and the API never sees more than 40, whichever replicas make the calls. The replicas are
// goroutines, each with its own fleet.Semaphore on one in-memory backend (fleet.NewMemory, which
// stands for the fleet's Redis), unless -redis names a Redis server: then each replica has its
// own client of it, through fleet/redisfleet, and with -processes each replica is a process of
// its own. It prints, for both runs, the calls the API got, its 429s and the most calls it saw in
// flight, and exits non-zero if the fleet let more than 40 through or the API answered any 429.
// It takes a second or two. From the fleet/redisfleet module (the root module's examples/fleet
// is the in-memory run alone, without go-redis; both run the program of loom's
// internal/fleetdemo):
//
//	go run ./examples/fleet
//	go run ./examples/fleet -redis localhost:6379
//	go run ./examples/fleet -redis localhost:6379 -processes
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/goloom/loom/fleet"
	"github.com/goloom/loom/fleet/redisfleet"
	"github.com/goloom/loom/internal/fleetdemo"
)

// replicaEnv carries a replica's configuration (JSON) to a process started by -processes.
const replicaEnv = "LOOM_EXAMPLE_FLEET_REPLICA"

func main() {
	if cfg, ok := os.LookupEnv(replicaEnv); ok { // a replica process started by -processes
		os.Exit(replicaMain(cfg))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, w io.Writer, args []string) error {
	fs := flag.NewFlagSet("fleet", flag.ContinueOnError)
	fs.SetOutput(w)
	var f fleetdemo.Flags
	f.Register(fs)
	redisAddr := fs.String("redis", "", "host:port of a Redis server to hold the fleet's limit (default: the in-memory backend)")
	processes := fs.Bool("processes", false, "run each replica as a process of its own (needs -redis)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := f.Check(); err != nil {
		return err
	}
	if *processes && *redisAddr == "" {
		return errors.New("-processes needs -redis: the in-memory backend lives in one process")
	}

	s := fleetdemo.Setup{
		Name:    "llm-api",
		Backend: "fleet.NewMemory(): one in-memory backend for all replicas, standing for the fleet's Redis",
		Kind:    "goroutines",
	}
	mem := fleet.NewMemory()
	open := func(fleetdemo.Config) (fleet.Backend, func()) { return mem, func() {} }
	if *redisAddr != "" {
		if err := pingRedis(ctx, *redisAddr); err != nil {
			return err
		}
		// A fresh name per run: its first use pauses admissions for one lease TTL (the backend
		// cannot tell a new name from one whose state it lost), so the lease is short.
		s.Addr, s.Name = *redisAddr, "loom-example-fleet-"+strings.ToLower(rand.Text()[:10])
		defer func() { _ = deleteName(*redisAddr, s.Name) }()
		s.Backend = fmt.Sprintf("Redis at %s, through redisfleet.New(redis.NewClient(...)), a client per replica;\n"+
			"  name %q, lease %v (a name's first use pauses admissions for one lease TTL)", *redisAddr, s.Name, f.Lease)
		open = openRedis
	}
	s.Replica = func(ctx context.Context, cfg fleetdemo.Config, logs io.Writer) (fleetdemo.Result, error) {
		return fleetdemo.RunReplica(ctx, cfg, open, logs)
	}
	if *processes {
		s.Kind, s.Replica = "processes", runProcess
	}
	return fleetdemo.Run(ctx, w, f, s)
}

// openRedis gives a replica its own client of the Redis at cfg.Addr.
func openRedis(cfg fleetdemo.Config) (fleet.Backend, func()) {
	rdb := redis.NewClient(&redis.Options{Addr: cfg.Addr, ContextTimeoutEnabled: true})
	return redisfleet.New(rdb), func() { _ = rdb.Close() }
}

// runProcess runs one replica as a process of its own: this program again, told by replicaEnv.
// The process's log records, if any, go to logs.
func runProcess(ctx context.Context, cfg fleetdemo.Config, logs io.Writer) (fleetdemo.Result, error) {
	exe, err := os.Executable()
	if err != nil {
		return fleetdemo.Result{}, err
	}
	js, err := json.Marshal(cfg)
	if err != nil {
		return fleetdemo.Result{}, err
	}
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), replicaEnv+"="+string(js))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fleetdemo.Result{}, fmt.Errorf("replica %d: %w: %s", cfg.Replica, err, bytes.TrimSpace(stderr.Bytes()))
	}
	_, _ = logs.Write(stderr.Bytes())
	var r fleetdemo.Result
	if err := json.Unmarshal(out, &r); err != nil {
		return fleetdemo.Result{}, fmt.Errorf("replica %d: %w", cfg.Replica, err)
	}
	return r, nil
}

// replicaMain is the main function of a replica process: it runs the replica of the
// configuration js, on its own client of the Redis there, and prints its result as JSON.
func replicaMain(js string) int {
	var cfg fleetdemo.Config
	if err := json.Unmarshal([]byte(js), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "fleet replica:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	r, err := fleetdemo.RunReplica(ctx, cfg, openRedis, os.Stderr)
	if err == nil {
		err = json.NewEncoder(os.Stdout).Encode(r)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "fleet replica %d: %v\n", cfg.Replica, err)
		return 1
	}
	return 0
}

// pingRedis checks that a Redis answers at addr, so that a wrong address fails at once.
func pingRedis(ctx context.Context, addr string) error {
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("no Redis at %s: %w", addr, err)
	}
	return nil
}

// deleteName removes the keys the fleet left on the Redis at addr for name (package redisfleet
// keeps a name's keys under "fleet:{NAME}:"), so that runs with fresh names leave nothing behind.
func deleteName(addr, name string) error {
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var keys []string
	it := rdb.Scan(ctx, 0, "fleet:{"+name+"}:*", 100).Iterator() // SCAN, not KEYS: never blocks the server
	for it.Next(ctx) {
		keys = append(keys, it.Val())
	}
	if err := it.Err(); err != nil || len(keys) == 0 {
		return err
	}
	return rdb.Del(ctx, keys...).Err()
}
