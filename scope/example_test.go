package scope_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goloom/loom/scope"
)

type User struct{ Name string }

type Order struct{ ID int }

type Profile struct {
	User   User
	Orders []Order
}

func getUser(ctx context.Context, id int) (User, error) { return User{Name: "ada"}, ctx.Err() }

func listOrders(ctx context.Context, id int) ([]Order, error) {
	return []Order{{ID: 1}, {ID: 2}}, ctx.Err()
}

// The package at a glance: a scope forks subtasks, the first failure cancels the others, and Join
// waits for all of them — it returns that failure, never a sibling's cancellation — so that no
// goroutine outlives the scope. Each subtask ends Succeeded, Failed or Cancelled.
func Example() {
	errNotFound := errors.New("user not found")
	s := scope.Open(context.Background())
	defer s.Close()
	user := scope.Fork(s, func(ctx context.Context) (string, error) { return "", errNotFound })
	orders := scope.Fork(s, func(ctx context.Context) (int, error) {
		<-ctx.Done() // a slow call: cancelled when the user's lookup fails
		return 0, ctx.Err()
	})
	err := s.Join()
	fmt.Println(err, errors.Is(err, errNotFound))
	fmt.Println(user.State(), orders.State())
	// Output:
	// user not found true
	// Failed Cancelled
}

// A request handler fetches the user and their orders in parallel, with a deadline for both. If
// either fails, the other is cancelled and the first error is returned.
func ExampleOpen_requestHandler() {
	profile := func(ctx context.Context, id int) (Profile, error) {
		s := scope.Open(ctx, scope.WithTimeout(2*time.Second))
		defer s.Close()
		user := scope.Fork(s, func(ctx context.Context) (User, error) { return getUser(ctx, id) })
		orders := scope.Fork(s, func(ctx context.Context) ([]Order, error) { return listOrders(ctx, id) })
		if err := s.Join(); err != nil {
			return Profile{}, err
		}
		return Profile{user.Get(), orders.Get()}, nil
	}
	p, err := profile(context.Background(), 7)
	fmt.Println(p.User.Name, len(p.Orders), err)
	// Output: ada 2 <nil>
}

func ExampleFork() {
	s := scope.Open(context.Background())
	defer s.Close()
	var squares []*scope.Subtask[int]
	for _, n := range []int{1, 2, 3} {
		squares = append(squares, scope.Fork(s, func(ctx context.Context) (int, error) { return n * n, nil }))
	}
	err := s.Join()
	fmt.Println(squares[0].Get(), squares[1].Get(), squares[2].Get(), err)
	// Output: 1 4 9 <nil>
}

// The default policy, FailFast: the first failure cancels the rest and is what Join returns.
func ExampleScope_Join() {
	s := scope.Open(context.Background())
	defer s.Close()
	slow := scope.Fork(s, func(ctx context.Context) (string, error) {
		<-ctx.Done() // cancelled by the failure below
		return "", ctx.Err()
	})
	scope.Fork(s, func(ctx context.Context) (string, error) { return "", errors.New("db down") })
	err := s.Join()
	fmt.Println(err)
	fmt.Println(slow.State(), slow.Err())
	// Output:
	// db down
	// Cancelled db down
}

// Close in a defer covers early returns: it cancels whatever still runs and waits for it.
func ExampleScope_Close() {
	var cleanedUp atomic.Bool
	handler := func(ctx context.Context) error {
		s := scope.Open(ctx)
		defer s.Close()
		scope.Fork(s, func(ctx context.Context) (int, error) {
			<-ctx.Done()
			cleanedUp.Store(true)
			return 0, ctx.Err()
		})
		return errors.New("bad request") // returns before Join
	}
	fmt.Println(handler(context.Background()), cleanedUp.Load())
	// Output: bad request true
}

func ExampleScope_Context() {
	s := scope.Open(context.Background(), scope.WithName("report"))
	defer s.Close()
	nested := scope.Fork(s, func(ctx context.Context) (string, error) {
		// A scope opened on a subtask's context is a child of this one.
		inner := scope.Open(ctx)
		defer inner.Close()
		part := scope.Fork(inner, func(context.Context) (string, error) { return "part", nil })
		if err := inner.Join(); err != nil {
			return "", err
		}
		return part.Get(), nil
	})
	fmt.Println(s.Join(), nested.Get(), s.Name(), s.Context().Err())
	// Output: <nil> part report context canceled
}

// Migrating from errgroup: WithContext becomes Open, g.Go becomes s.Go (the function receives the
// context), g.Wait becomes s.Join, and Close makes sure nothing outlives the function.
func ExampleScope_Go() {
	urls := []string{"a", "b", "c"}
	fetch := func(ctx context.Context, url string) error { return ctx.Err() }

	// Before:
	//	g, ctx := errgroup.WithContext(ctx)
	//	for _, url := range urls {
	//		g.Go(func() error { return fetch(ctx, url) })
	//	}
	//	return g.Wait()
	s := scope.Open(context.Background())
	defer s.Close()
	for _, url := range urls {
		s.Go(func(ctx context.Context) error { return fetch(ctx, url) })
	}
	fmt.Println(s.Join())
	// Output: <nil>
}

func ExampleSubtask_Result() {
	s := scope.Open(context.Background(), scope.AwaitAll())
	defer s.Close()
	ok := scope.Fork(s, func(context.Context) (int, error) { return 1, nil })
	bad := scope.Fork(s, func(context.Context) (int, error) { return 0, errors.New("nope") })
	fmt.Println(s.Join())
	fmt.Println(ok.Result())
	fmt.Println(bad.Result())
	fmt.Println(bad.State())
	// Output:
	// nope
	// 1 <nil>
	// 0 nope
	// Failed
}

func ExampleFailFast() {
	s := scope.Open(context.Background(), scope.FailFast()) // the default
	defer s.Close()
	scope.Fork(s, func(context.Context) (int, error) { return 0, errors.New("first") })
	err := s.Join()
	fmt.Println(err, context.Cause(s.Context()))
	// Output: first first
}

func ExampleAwaitAll() {
	s := scope.Open(context.Background(), scope.AwaitAll())
	defer s.Close()
	for _, name := range []string{"a", "b", "c"} {
		s.Go(func(context.Context) error {
			if name == "b" {
				return nil
			}
			return errors.New(name + " failed")
		})
	}
	err := s.Join()
	fmt.Println(strings.Count(err.Error(), "failed"), "failures")
	// Output: 2 failures
}

// A hedged request: ask two replicas, take whichever answers first, cancel the other.
func ExampleFirstSuccess_hedgedRequest() {
	replica := func(name string, delay time.Duration) func(context.Context) (string, error) {
		return func(ctx context.Context) (string, error) {
			select {
			case <-time.After(delay):
				return name, nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
	}
	s := scope.Open(context.Background(), scope.FirstSuccess())
	defer s.Close()
	a := scope.Fork(s, replica("replica-a", time.Hour))
	b := scope.Fork(s, replica("replica-b", 0))
	fmt.Println(s.Join())
	fmt.Println(b.Get(), a.State())
	// Output:
	// <nil>
	// replica-b Cancelled
}

func ExampleCancelWhen() {
	// Stop as soon as some subtask finds a match; failures alone do not stop the search.
	s := scope.Open(context.Background(), scope.CancelWhen(func(t scope.Task) bool {
		return t.Value() == "match"
	}))
	defer s.Close()
	scope.Fork(s, func(context.Context) (string, error) { return "", errors.New("shard 1 unreachable") })
	found := scope.Fork(s, func(context.Context) (string, error) { return "match", nil })
	fmt.Println(s.Join(), found.Get())
	// Output: <nil> match
}

// quorum is a custom policy: succeed once two subtasks have succeeded.
type quorum struct {
	n, need atomic.Int32
}

func (q *quorum) OnFork(scope.Task) error { return nil }

func (q *quorum) OnComplete(t scope.Task) bool {
	return t.State() == scope.Succeeded && q.n.Add(1) >= q.need.Load()
}

func (q *quorum) Result() error {
	if q.n.Load() < q.need.Load() {
		return errors.New("no quorum")
	}
	return nil
}

func ExampleWithJoiner() {
	q := &quorum{}
	q.need.Store(2)
	s := scope.Open(context.Background(), scope.WithJoiner(q))
	defer s.Close()
	for _, ok := range []bool{true, false, true} {
		s.Go(func(context.Context) error {
			if !ok {
				return errors.New("write failed")
			}
			return nil
		})
	}
	fmt.Println(s.Join())
	// Output: <nil>
}

func ExampleWithTimeout() {
	s := scope.Open(context.Background(), scope.WithTimeout(250*time.Millisecond))
	defer s.Close()
	fast := scope.Fork(s, func(context.Context) (string, error) { return "fast", nil })
	for fast.State() == scope.Running {
		runtime.Gosched()
	}
	slow := scope.Fork(s, func(ctx context.Context) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	})
	err := s.Join()
	fmt.Println(errors.Is(err, scope.ErrTimeout), errors.Is(err, context.DeadlineExceeded))
	fmt.Println(fast.Get(), slow.State()) // results from before the deadline are kept
	// Output:
	// true true
	// fast Cancelled
}

func ExampleWithLimit() {
	s := scope.Open(context.Background(), scope.WithLimit(2))
	defer s.Close()
	var running, peak atomic.Int32
	for range 10 {
		s.Go(func(context.Context) error {
			n := running.Add(1)
			for m := peak.Load(); n > m && !peak.CompareAndSwap(m, n); m = peak.Load() {
			}
			time.Sleep(time.Millisecond)
			running.Add(-1)
			return nil
		})
	}
	fmt.Println(s.Join(), peak.Load() <= 2)
	// Output: <nil> true
}

func ExamplePanicsAsErrors() {
	s := scope.Open(context.Background(), scope.PanicsAsErrors())
	defer s.Close()
	scope.Fork(s, func(context.Context) (int, error) {
		panic(errors.New("invariant broken"))
	})
	err := s.Join()
	var pe *scope.PanicError
	fmt.Println(errors.As(err, &pe), pe.Value)
	// Error() goes on with the child's stack, so that a log line shows where it panicked.
	fmt.Println(strings.SplitN(err.Error(), "\n", 2)[0])
	// Output:
	// true invariant broken
	// scope: subtask panicked: invariant broken
}

// By default a subtask's panic is re-raised by Join on the owner's goroutine, with the child's
// stack in the *PanicError.
func ExamplePanicError() {
	defer func() {
		pe := recover().(*scope.PanicError)
		fmt.Println(pe.Value, strings.Contains(string(pe.Stack), "scope_test"))
	}()
	s := scope.Open(context.Background())
	defer s.Close()
	scope.Fork(s, func(context.Context) (int, error) { panic("boom") })
	_ = s.Join()
	// Output: boom true
}

func ExampleAll() {
	double := func(n int) func(context.Context) (int, error) {
		return func(context.Context) (int, error) { return 2 * n, nil }
	}
	got, err := scope.All(context.Background(), double(1), double(2), double(3))
	fmt.Println(got, err)
	// Output: [2 4 6] <nil>
}

func ExampleRace() {
	got, err := scope.Race(context.Background(),
		func(ctx context.Context) (string, error) { <-ctx.Done(); return "", ctx.Err() },
		func(context.Context) (string, error) { return "winner", nil })
	fmt.Println(got, err)

	_, err = scope.Race[string](context.Background())
	fmt.Println(errors.Is(err, scope.ErrNoSubtasks))
	// Output:
	// winner <nil>
	// true
}

// Map with a limit: at most four requests in flight, results in input order.
func ExampleMap_withLimit() {
	ids := []int{1, 2, 3, 4, 5, 6, 7, 8}
	names, err := scope.Map(context.Background(), ids, func(ctx context.Context, id int) (string, error) {
		return fmt.Sprintf("user-%d", id), nil
	}, scope.WithLimit(4))
	fmt.Println(names, err)
	// Output: [user-1 user-2 user-3 user-4 user-5 user-6 user-7 user-8] <nil>
}

func ExampleErrGoexit() {
	s := scope.Open(context.Background())
	defer s.Close()
	scope.Fork(s, func(context.Context) (int, error) {
		runtime.Goexit() // as t.FailNow does
		return 0, nil
	})
	fmt.Println(errors.Is(s.Join(), scope.ErrGoexit))
	// Output: true
}

// TryGo hands work to a limited scope only when a slot is free, and lets the caller do something
// else — here, shed the request — instead of waiting.
func ExampleScope_TryGo() {
	s := scope.Open(context.Background(), scope.WithLimit(1))
	defer s.Close()
	release := make(chan struct{})
	s.Go(func(context.Context) error { <-release; return nil }) // takes the only slot
	fmt.Println("second accepted:", s.TryGo(func(context.Context) error { return nil }))
	close(release)
	fmt.Println(s.Join())
	// Output:
	// second accepted: false
	// <nil>
}

func ExampleTryFork() {
	s := scope.Open(context.Background(), scope.WithLimit(2))
	defer s.Close()
	st, ok := scope.TryFork(s, func(context.Context) (string, error) { return "fits", nil })
	fmt.Println(ok, s.Join(), st.Get())
	// Output: true <nil> fits
}

// hedged collects the replies of a fan-out and, when the scope's deadline fires, returns what it
// has instead of failing: a Joiner with OnTimeout.
type hedged struct {
	mu      sync.Mutex
	replies []string
}

func (h *hedged) OnFork(scope.Task) error { return nil }

func (h *hedged) OnComplete(t scope.Task) bool {
	if t.State() == scope.Succeeded {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.replies = append(h.replies, t.Value().(string))
	}
	return false
}

func (h *hedged) Result() error { return nil }

// OnTimeout is called instead of failing with scope.ErrTimeout when the deadline ends the scope.
func (h *hedged) OnTimeout() error {
	if len(h.replies) == 0 {
		return scope.ErrTimeout
	}
	return nil // the replies that came in time are enough
}

// A fan-out to three replicas with a deadline: the two that answer in time are used, the slow one
// is cancelled, and Join does not fail. (Joiner.OnTimeout, as JDK 26 has it.)
func ExampleJoiner_onTimeout() {
	h := &hedged{}
	s := scope.Open(context.Background(), scope.WithJoiner(h), scope.WithTimeout(50*time.Millisecond))
	defer s.Close()
	for _, d := range []time.Duration{time.Millisecond, 2 * time.Millisecond, time.Hour} {
		scope.Fork(s, func(ctx context.Context) (string, error) {
			select {
			case <-time.After(d):
				return "reply after " + d.String(), nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		})
	}
	err := s.Join()
	slices.Sort(h.replies)
	fmt.Println(err, h.replies)
	// Output: <nil> [reply after 1ms reply after 2ms]
}

// Stream results to an HTTP response in input order while at most four lookups run at once:
// each line is written as soon as it and every line before it are ready, and a client that goes
// away (a failed write) ends the loop, which cancels and waits for the lookups still running.
func ExampleStream_httpResponse() {
	lookup := func(ctx context.Context, id int) (string, error) {
		time.Sleep(time.Duration(5-id) * time.Millisecond) // later ids answer sooner
		return fmt.Sprintf("user %d", id), ctx.Err()
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ids := slices.Values([]int{1, 2, 3, 4, 5})
		for name, err := range scope.Stream(r.Context(), ids, lookup, scope.WithLimit(4)) {
			if err != nil {
				fmt.Fprintln(w, "error:", err)
				return
			}
			if _, err := fmt.Fprintln(w, name); err != nil {
				return // the client is gone: breaking out cancels the rest
			}
		}
	})
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, httptest.NewRequest("GET", "/users", nil))
	fmt.Print(rec.Body.String())
	// Output:
	// user 1
	// user 2
	// user 3
	// user 4
	// user 5
}

// A pipeline of two Streams: the second stage's input is the first stage's output, and each stage
// runs its own calls concurrently while the order is kept end to end.
func ExampleStream_pipeline() {
	ctx := context.Background()
	fetch := func(_ context.Context, id int) (string, error) { return fmt.Sprintf("doc-%d", id), nil }
	measure := func(_ context.Context, doc string) (int, error) { return len(doc), nil }

	// The first stage's pairs become the second stage's input; a failure there would stop it.
	docs := func(yield func(string) bool) {
		for doc, err := range scope.Stream(ctx, slices.Values([]int{7, 42, 1000}), fetch) {
			if err != nil || !yield(doc) {
				return
			}
		}
	}
	for n, err := range scope.Stream(ctx, docs, measure) {
		fmt.Println(n, err)
	}
	// Output:
	// 5 <nil>
	// 6 <nil>
	// 8 <nil>
}

// ForkNamed names a subtask for package inspect's dumps, where the calls of a fan-out forked
// from one line would otherwise look alike; the subtask is a Fork in every other way.
func ExampleForkNamed() {
	s := scope.Open(context.Background(), scope.WithName("profile"))
	defer s.Close()
	user := scope.ForkNamed(s, "user", func(context.Context) (string, error) { return "ada", nil })
	orders := scope.ForkNamed(s, "orders", func(context.Context) (int, error) { return 3, nil })
	if err := s.Join(); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(user.Get(), orders.Get())
	// Output: ada 3
}

// GoNamed is Go with a name, as ForkNamed is Fork.
func ExampleScope_GoNamed() {
	s := scope.Open(context.Background())
	defer s.Close()
	s.GoNamed("warm-cache", func(context.Context) error { return nil })
	fmt.Println(s.Join())
	// Output: <nil>
}
