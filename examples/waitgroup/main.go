// Command waitgroup replaces hand-rolled fan-out code with a scope.
//
// Three versions fetch eight prices at once, on the same input: item 3 fails after 10ms, item 5
// is slow (200ms) and does not heed cancellation, the others take 50ms and stop when cancelled.
//
//   - wg: sync.WaitGroup, a mutex-guarded first error and a manual context.WithCancel — correct,
//     and about twenty lines of plumbing to get right in every handler;
//   - wg-shortcut: the common shortcut that returns on the first error from a channel, without
//     waiting — it returns sooner, leaving goroutines running (and calling the backend) behind it;
//   - scope: scope.Open, scope.Fork, s.Join — the same behaviour as wg in five lines, plus each
//     subtask's State.
//
// It prints what each returns, how long it took, how many calls were still running when it
// returned, and how many goroutines were left a moment later. It takes about a second:
//
//	go run ./examples/waitgroup
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
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/goloom/loom/scope"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "waitgroup:", err)
		os.Exit(1)
	}
}

// fetcher is the work being fanned out: fetch the price of item i.
type fetcher func(ctx context.Context, i int) (int, error)

var errOutOfStock = errors.New("item 3: out of stock")

// newFetcher returns the input every version runs on; unit scales its durations. running counts
// the calls that have not returned yet.
func newFetcher(unit time.Duration, running *atomic.Int64) fetcher {
	return func(ctx context.Context, i int) (int, error) {
		running.Add(1)
		defer running.Add(-1)
		switch i {
		case 3:
			time.Sleep(unit) // 10ms
			return 0, errOutOfStock
		case 5:
			time.Sleep(20 * unit) // 200ms, deaf to ctx, like a call without a context
			return 500, nil
		default:
			t := time.NewTimer(5 * unit) // 50ms
			defer t.Stop()
			select {
			case <-t.C:
				return 100 * i, nil
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}
	}
}

// fetchAllWaitGroup is the classic hand-rolled fan-out, done right.
func fetchAllWaitGroup(ctx context.Context, n int, fetch fetcher) ([]int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	prices := make([]int, n)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := fetch(ctx, i)
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
					cancel() // stop the others
				}
				mu.Unlock()
				return
			}
			prices[i] = p
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	return prices, nil
}

// fetchAllShortcut returns on the first error without waiting for the rest: the goroutines it
// started outlive it, still calling the backend and writing into prices after it returned.
func fetchAllShortcut(ctx context.Context, n int, fetch fetcher) ([]int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	prices := make([]int, n)
	errc := make(chan error, n)
	for i := range n {
		go func() {
			p, err := fetch(ctx, i)
			if err == nil {
				prices[i] = p // after an error, nobody will read this: the work is wasted
			}
			errc <- err
		}()
	}
	for range n {
		if err := <-errc; err != nil {
			return nil, err // the others are still running
		}
	}
	return prices, nil
}

// fetchAllScope is the same fan-out with a scope.
func fetchAllScope(ctx context.Context, n int, fetch fetcher) ([]int, []*scope.Subtask[int], error) {
	s := scope.Open(ctx) // FailFast: the first failure cancels the rest and is what Join returns
	defer s.Close()
	tasks := make([]*scope.Subtask[int], n)
	for i := range n {
		tasks[i] = scope.Fork(s, func(ctx context.Context) (int, error) { return fetch(ctx, i) })
	}
	if err := s.Join(); err != nil { // when Join returns, every subtask has returned
		return nil, tasks, err
	}
	prices := make([]int, n)
	for i, t := range tasks {
		prices[i] = t.Get()
	}
	return prices, tasks, nil
}

func run(ctx context.Context, w io.Writer, args []string) error {
	fs := flag.NewFlagSet("waitgroup", flag.ContinueOnError)
	fs.SetOutput(w)
	unit := fs.Duration("unit", 10*time.Millisecond, "time unit of the input: item 3 fails after 1, item 5 takes 20")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *unit <= 0 {
		return errors.New("-unit must be positive")
	}
	const n = 8
	var running atomic.Int64
	fetch := newFetcher(*unit, &running)
	fmt.Fprintf(w, "fetch %d prices at once: item 3 fails after %v, item 5 takes %v and ignores cancellation,\n", n, *unit, 20**unit)
	fmt.Fprintf(w, "the others take %v and stop when cancelled\n\n", 5**unit)

	type row struct {
		name, returned string
		took           time.Duration
		leftAtReturn   int // calls still running when the version returned
		leftLater      int // goroutines above the baseline a moment later
	}
	var (
		rows  []row
		tasks []*scope.Subtask[int]
	)
	versions := []struct {
		name string
		fn   func() ([]int, error)
	}{
		{"wg (WaitGroup + mutex + cancel)", func() ([]int, error) { return fetchAllWaitGroup(ctx, n, fetch) }},
		{"wg-shortcut (return on first error)", func() ([]int, error) { return fetchAllShortcut(ctx, n, fetch) }},
		{"scope (Open, Fork, Join)", func() ([]int, error) {
			p, t, err := fetchAllScope(ctx, n, fetch)
			tasks = t
			return p, err
		}},
	}
	for _, v := range versions {
		base := runtime.NumGoroutine()
		start := time.Now()
		prices, err := v.fn()
		took := time.Since(start)
		left := int(running.Load())
		// Give stragglers time to finish, so each version starts from the same baseline.
		later := settle(base, 40**unit)
		returned := fmt.Sprintf("%v", prices)
		if err != nil {
			returned = "error: " + err.Error()
		}
		rows = append(rows, row{v.name, returned, took, left, later})
	}

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "version\treturned\ttook\tcalls still running at return\tgoroutines left a moment later")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%v\t%d\t%d\n", r.name, r.returned, r.took.Round(time.Millisecond), r.leftAtReturn, r.leftLater)
	}
	tw.Flush()

	fmt.Fprintln(w, "\nthe scope's subtasks after Join:")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "item\tState\tErr")
	for i, t := range tasks {
		errText := "-"
		if t.Err() != nil {
			errText = t.Err().Error()
		}
		fmt.Fprintf(tw, "%d\t%v\t%s\n", i, t.State(), errText)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nThe scope waits for item 5 like the careful WaitGroup does (a goroutine that ignores its context")
	fmt.Fprintln(w, "cannot be stopped, only waited for), returns the root cause, not a sibling's context.Canceled,")
	fmt.Fprintln(w, "and leaves nothing running; the shortcut returns sooner but leaks goroutines that write after return.")

	for _, r := range []row{rows[0], rows[2]} {
		if r.leftAtReturn != 0 || !strings.Contains(r.returned, errOutOfStock.Error()) {
			return fmt.Errorf("%s: returned %s with %d calls running", r.name, r.returned, r.leftAtReturn)
		}
	}
	if rows[1].leftAtReturn == 0 {
		return errors.New("the shortcut left no call running: the input did not do its job")
	}
	return nil
}

// settle waits until the goroutine count is back to base, for at most d, and returns how many
// goroutines are still running above it.
func settle(base int, d time.Duration) int {
	deadline := time.Now().Add(d)
	for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	return max(0, runtime.NumGoroutine()-base)
}
