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
// stands for the fleet's Redis). It prints, for both runs, the calls the API got, its 429s and the
// most calls it saw in flight, and exits non-zero if the fleet let more than 40 through or the API
// answered any 429. It takes a second or two:
//
//	go run ./examples/fleet
//
// The same program on a real Redis, with each replica a process of its own, is in the
// fleet/redisfleet module (it needs go-redis, which this module does not); both run the program
// of internal/fleetdemo:
//
//	cd fleet/redisfleet && go run ./examples/fleet -redis localhost:6379 -processes
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"

	"github.com/goloom/loom/fleet"
	"github.com/goloom/loom/internal/fleetdemo"
)

func main() {
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
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := f.Check(); err != nil {
		return err
	}
	mem := fleet.NewMemory() // one backend for every replica
	open := func(fleetdemo.Config) (fleet.Backend, func()) { return mem, func() {} }
	return fleetdemo.Run(ctx, w, f, fleetdemo.Setup{
		Name:    "llm-api",
		Backend: "fleet.NewMemory(): one in-memory backend for all replicas, standing for the fleet's Redis",
		Kind:    "goroutines",
		Replica: func(ctx context.Context, cfg fleetdemo.Config, logs io.Writer) (fleetdemo.Result, error) {
			return fleetdemo.RunReplica(ctx, cfg, open, logs)
		},
	})
}
