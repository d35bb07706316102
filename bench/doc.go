// Package bench measures loom against its peers: errgroup, conc, ants, x/sync/semaphore,
// channel semaphores, bare goroutines with a WaitGroup and context.WithValue. Each benchmark
// runs loom and every peer as sibling sub-benchmarks of one function, so that one run of
// benchstat shows the ratios between them; cmd/loadtest reproduces the virtual-thread
// experiments that the README quotes.
//
// It is a module of its own so that users of loom never inherit the peers as dependencies. Its
// go.mod replaces github.com/goloom/loom with the checkout around it, so it always measures the
// working tree. From the repository root:
//
//	scripts/bench.sh                                       # every figure in the README
//	go -C bench test -run '^$' -bench ForkJoin -benchmem   # one benchmark
//	go -C bench run ./cmd/loadtest -quick                  # the experiments, scaled down
//
// With -short, the benchmarks that park a million goroutines or tasks use ten thousand instead:
// enough to check that they run, not to quote.
package bench
