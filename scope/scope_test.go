package scope_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/goloom/loom/scope"
	"github.com/goloom/loom/scopedvalue"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) } // checks after all tests, so t.Parallel is fine

var (
	errA = errors.New("a failed")
	errB = errors.New("b failed")
)

// value returns a subtask function that succeeds with v.
func value[T any](v T) func(context.Context) (T, error) {
	return func(context.Context) (T, error) { return v, nil }
}

// failing returns a subtask function that fails with err.
func failing(err error) func(context.Context) (int, error) {
	return func(context.Context) (int, error) { return 0, err }
}

// untilDone returns a subtask function that waits for its context and returns its error.
func untilDone(ctx context.Context) (int, error) {
	<-ctx.Done()
	return 0, ctx.Err()
}

func TestForkJoinResults(t *testing.T) {
	t.Parallel()
	s := scope.Open(t.Context())
	defer s.Close()
	a := scope.Fork(s, value(1))
	b := scope.Fork(s, value("two"))
	require.NoError(t, s.Join())
	assert.Equal(t, scope.Succeeded, a.State())
	assert.Equal(t, 1, a.Get())
	assert.Equal(t, "two", b.Get())
	assert.NoError(t, b.Err())
}

// "Join — waits until every subtask has returned … When Join returns, no goroutine of the scope is
// running". (Subtasks that outlive a cancellation: TestFailFastLaterFailuresDoNotCount.)
func TestJoinWaitsForEverySubtask(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := scope.Open(t.Context())
		defer s.Close()
		release := make(chan struct{})
		var returned atomic.Int32
		for range 3 {
			scope.Fork(s, func(context.Context) (int, error) {
				<-release
				returned.Add(1)
				return 0, nil
			})
		}
		joined := make(chan error)
		go func() { joined <- s.Join() }()
		synctest.Wait()
		select {
		case <-joined:
			t.Fatal("Join returned while subtasks were running")
		default:
		}
		close(release)
		require.NoError(t, <-joined)
		assert.Equal(t, int32(3), returned.Load())
	})
}

// "When Join returns … the scope's context is done", after a success and with no subtasks at all.
func TestJoinLeavesContextDone(t *testing.T) {
	t.Parallel()
	s := scope.Open(t.Context())
	defer s.Close()
	scope.Fork(s, value(1))
	require.NoError(t, s.Join())
	select {
	case <-s.Context().Done():
	default:
		t.Fatal("scope context not done after Join")
	}

	empty := scope.Open(t.Context())
	defer empty.Close()
	require.NoError(t, empty.Join())
	assert.Error(t, empty.Context().Err(), "scope context not done after Join with no subtasks")
}

// "Calling it again returns the same error": the very value, nil included, also after Close.
func TestJoinAgainReturnsSameError(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		opts []scope.Option
		fns  []func(context.Context) (int, error)
		want error // matched by the first Join's error
	}{
		{"nil", nil, []func(context.Context) (int, error){value(1)}, nil},
		{"FailFast", nil, []func(context.Context) (int, error){failing(errA)}, errA},
		{"AwaitAll", []scope.Option{scope.AwaitAll()}, []func(context.Context) (int, error){failing(errA), failing(errB)}, errB},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := scope.Open(t.Context(), tt.opts...)
			defer s.Close()
			for _, fn := range tt.fns {
				scope.Fork(s, fn)
			}
			err := s.Join()
			if tt.want == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tt.want)
			}
			assert.True(t, err == s.Join(), "not the same error value")
			s.Close()
			assert.True(t, err == s.Join(), "Join after Close")
		})
	}
}

func TestCloseAfterJoinIsQuiet(t *testing.T) {
	t.Parallel()
	s := scope.Open(t.Context())
	bad := scope.Fork(s, failing(errA))
	require.ErrorIs(t, s.Join(), errA)
	assert.NotPanics(t, s.Close)
	assert.NotPanics(t, s.Close)
	assert.Equal(t, scope.Failed, bad.State(), "Close after Join keeps the results")
	assert.Equal(t, errA, bad.Err())
}

// "func (s *Scope) Close() — cancels the scope if Join has not completed and waits for every subtask;
// idempotent; safe in defer after an early return. Never panics for a missing Join".
func TestCloseWithoutJoinCancelsThenWaits(t *testing.T) {
	t.Parallel()
	s := scope.Open(t.Context())
	started := make(chan struct{})
	var returned atomic.Bool
	st := scope.Fork(s, func(ctx context.Context) (int, error) {
		close(started)
		<-ctx.Done()
		returned.Store(true)
		return 1, nil // ignored: it completes after the cancellation
	})
	<-started
	s.Close()
	assert.True(t, returned.Load(), "Close returned before the subtask")
	assert.Equal(t, scope.Cancelled, st.State())
	assert.ErrorIs(t, st.Err(), context.Canceled)
	assert.NotPanics(t, s.Close, "Close is idempotent")
	assert.ErrorIs(t, s.Join(), context.Canceled, "Join after a Close that cancelled running work")

	// Also when a subtask failed and nobody joined.
	f := scope.Open(t.Context())
	bad := scope.Fork(f, failing(errA))
	<-waitDone(bad)
	assert.NotPanics(t, f.Close)
	assert.Equal(t, scope.Failed, bad.State())
}

func TestCloseWithNothingRunningChangesNothing(t *testing.T) {
	t.Parallel()
	s := scope.Open(t.Context())
	st := scope.Fork(s, value(7))
	for st.State() == scope.Running {
		runtime.Gosched()
	}
	s.Close()
	assert.Equal(t, 7, st.Get())
	assert.NoError(t, s.Join())
}

// "after Join has returned or after Close, Fork panics with `scope: fork after join` / `scope: fork
// after close`", whatever Join returned, and fn never runs.
func TestForkAfterJoinPanics(t *testing.T) {
	t.Parallel()
	for _, fn := range []func(context.Context) (int, error){value(1), failing(errA)} {
		s := scope.Open(t.Context())
		scope.Fork(s, fn)
		_ = s.Join()
		ran := false
		require.PanicsWithValue(t, "scope: fork after join", func() {
			scope.Fork(s, func(context.Context) (int, error) { ran = true; return 1, nil })
		})
		require.PanicsWithValue(t, "scope: fork after join", func() {
			s.Go(func(context.Context) error { ran = true; return nil })
		})
		assert.False(t, ran)
		s.Close()
	}
}

func TestForkAfterClosePanics(t *testing.T) {
	t.Parallel()
	s := scope.Open(t.Context())
	s.Close()
	require.PanicsWithValue(t, "scope: fork after close", func() { scope.Fork(s, value(1)) })

	limited := scope.Open(t.Context(), scope.WithLimit(1))
	limited.Close()
	require.PanicsWithValue(t, "scope: fork after close", func() { scope.Fork(limited, value(1)) })

	both := scope.Open(t.Context()) // joined, then closed: either message says it
	require.NoError(t, both.Join())
	both.Close()
	msg := func() (r any) {
		defer func() { r = recover() }()
		scope.Fork(both, value(1))
		return nil
	}()
	assert.Contains(t, []any{"scope: fork after join", "scope: fork after close"}, msg)
}

func TestForkNilPanics(t *testing.T) {
	t.Parallel()
	s := scope.Open(t.Context())
	defer s.Close()
	require.PanicsWithValue(t, "scope: Fork: nil function", func() { scope.Fork[int](s, nil) })
	require.PanicsWithValue(t, "scope: Go: nil function", func() { s.Go(nil) })
	require.PanicsWithValue(t, "scope: ForkNamed: nil function", func() { scope.ForkNamed[int](s, "x", nil) })
	require.PanicsWithValue(t, "scope: GoNamed: nil function", func() { s.GoNamed("x", nil) })
	var nilCtx context.Context
	require.PanicsWithValue(t, "scope: Open: nil context", func() { scope.Open(nilCtx) })
}

// "Fork on a cancelled (not yet joined) scope does not run fn and returns a Cancelled subtask."
func TestForkOnCancelledScopeDoesNotRun(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		opts []scope.Option
	}{
		{"default", nil},
		{"limit", []scope.Option{scope.WithLimit(2)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := scope.Open(t.Context(), tt.opts...)
			defer s.Close()
			scope.Fork(s, failing(errA))
			<-s.Context().Done()
			ran := false
			st := scope.Fork(s, func(context.Context) (int, error) { ran = true; return 1, nil })
			assert.Equal(t, scope.Cancelled, st.State(), "settled at once")
			assert.Equal(t, context.Cause(s.Context()), st.Err())
			require.ErrorIs(t, s.Join(), errA)
			assert.False(t, ran)
		})
	}
	// Ending from outside "(or before a later fork)": a fork after the parent ended, though nothing
	// was running, is Cancelled and Join returns the parent's cause; what completed keeps its result.
	t.Run("after the parent ended", func(t *testing.T) {
		parent, cancel := context.WithCancel(t.Context())
		s := scope.Open(parent)
		defer s.Close()
		first := scope.Fork(s, value(1))
		<-waitDone(first)
		cancel()
		ran := false
		later := scope.Fork(s, func(context.Context) (int, error) { ran = true; return 2, nil })
		assert.Equal(t, scope.Cancelled, later.State())
		require.ErrorIs(t, s.Join(), context.Canceled)
		assert.False(t, ran)
		assert.Equal(t, 1, first.Get())
	})
}

// "Forking is allowed from the owner and from the scope's own subtasks until Join has returned", and
// Join waits for those forks too.
func TestForkFromSubtaskWhileJoinWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := scope.Open(t.Context())
		defer s.Close()
		proceed := make(chan struct{})
		var child *scope.Subtask[int]
		scope.Fork(s, func(context.Context) (int, error) {
			<-proceed
			child = scope.Fork(s, func(context.Context) (int, error) {
				time.Sleep(time.Second) // Join must wait for this grandchild of the owner's fork
				return 42, nil
			})
			return 0, nil
		})
		go func() {
			synctest.Wait() // the owner is blocked in Join
			close(proceed)
		}()
		require.NoError(t, s.Join())
		assert.Equal(t, 42, child.Get())
	})
}

// "func (s *Scope) Go(fn func(ctx context.Context) error) *Subtask[struct{}] — errgroup-shaped fork,
// for migration."
func TestGoIsErrgroupShaped(t *testing.T) {
	t.Parallel()
	s := scope.Open(t.Context())
	defer s.Close()
	ok := s.Go(func(context.Context) error { return nil })
	bad := s.Go(func(context.Context) error { return errA })
	require.ErrorIs(t, s.Join(), errA)
	if ok.State() == scope.Succeeded { // it may have been cancelled by bad's failure
		assert.Equal(t, struct{}{}, ok.Get())
	}
	assert.Equal(t, scope.Failed, bad.State())
	assert.Equal(t, errA, bad.Err())
}

// "func Fork[T any](s *Scope, fn func(ctx context.Context) (T, error)) *Subtask[T] — runs fn in a new
// goroutine with the scope's context."
func TestNameAndContext(t *testing.T) {
	t.Parallel()
	s := scope.Open(t.Context(), scope.WithName("profile"), scope.WithTimeout(time.Hour))
	defer s.Close()
	assert.Equal(t, "profile", s.Name())
	_, ok := s.Context().Deadline()
	assert.True(t, ok, "the timeout shows as the context's deadline")
	owner := goid()
	var seen context.Context
	var ranOn string
	scope.Fork(s, func(ctx context.Context) (int, error) { seen, ranOn = ctx, goid(); return 0, nil })
	require.NoError(t, s.Join())
	assert.Equal(t, s.Context(), seen, "subtasks get the scope's context")
	assert.NotEqual(t, owner, ranOn, "fn runs on a goroutine of its own")
}

type ctxKey string

// "Scoped values: forks see exactly the bindings of the ctx given to Open, whatever the owner binds
// later"; so do the forks of a scope nested in one of them. "func Open(ctx context.Context, opts
// ...Option) *Scope — the scope's context is derived from ctx; cancelling ctx cancels the scope."
func TestForksSeeValuesOfOpenContext(t *testing.T) {
	t.Parallel()
	requestID := scopedvalue.New[string]("request-id")
	user := scopedvalue.New[string]("user")
	ctx := scopedvalue.Where(requestID, "r-42").Context(context.WithValue(t.Context(), ctxKey("peer"), "p"))
	s := scope.Open(ctx)
	defer s.Close()
	_ = context.WithValue(ctx, ctxKey("peer"), "q") // the owner binds later: forks do not see it
	var st *scope.Subtask[string]
	scopedvalue.Where(requestID, "r-43").And(scopedvalue.Where(user, "ada")).Run(ctx, func(context.Context) {
		st = scope.Fork(s, func(ctx context.Context) (string, error) {
			return requestID.Get(ctx) + " " + user.OrElse(ctx, "nobody") + " " + ctx.Value(ctxKey("peer")).(string), nil
		})
	})
	nested := scope.Fork(s, func(ctx context.Context) (string, error) {
		inner := scope.Open(ctx)
		defer inner.Close()
		got := scope.Fork(inner, func(ctx context.Context) (string, error) { return requestID.Get(ctx), nil })
		if err := inner.Join(); err != nil {
			return "", err
		}
		return got.Get(), nil
	})
	require.NoError(t, s.Join())
	assert.Equal(t, "r-42 nobody p", st.Get())
	assert.Equal(t, "r-42", nested.Get())

	parent, cancel := context.WithCancel(ctx)
	c := scope.Open(parent)
	defer c.Close()
	require.NoError(t, c.Context().Err())
	cancel()
	select {
	case <-c.Context().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("cancelling the parent did not cancel the scope")
	}
}

// "Nesting: a scope opened with a subtask's ctx is a child of that scope; cancellation flows down
// through the context."
func TestNestedScopesCancelDown(t *testing.T) {
	t.Parallel()
	outer := scope.Open(t.Context())
	defer outer.Close()
	grandchildStarted := make(chan struct{})
	var grandchild *scope.Subtask[int]
	scope.Fork(outer, func(ctx context.Context) (int, error) {
		inner := scope.Open(ctx)
		defer inner.Close()
		scope.Fork(inner, func(ctx context.Context) (int, error) {
			innermost := scope.Open(ctx)
			defer innermost.Close()
			grandchild = scope.Fork(innermost, func(ctx context.Context) (int, error) {
				close(grandchildStarted)
				return untilDone(ctx)
			})
			return 0, innermost.Join()
		})
		return 0, inner.Join()
	})
	<-grandchildStarted
	scope.Fork(outer, failing(errA))
	require.ErrorIs(t, outer.Join(), errA)
	assert.Equal(t, scope.Cancelled, grandchild.State())
	assert.ErrorIs(t, grandchild.Err(), errA, "the outer cause flows down through the contexts")
}

// afterFuncParent is a long-lived parent context that counts the children registered on it:
// context.WithCancel registers through AfterFunc on such a parent, and unregisters with stop.
type afterFuncParent struct {
	context.Context
	done chan struct{}
	live atomic.Int64
	max  atomic.Int64
}

func (p *afterFuncParent) Done() <-chan struct{} { return p.done }

func (p *afterFuncParent) AfterFunc(func()) (stop func() bool) {
	n := p.live.Add(1)
	for m := p.max.Load(); n > m && !p.max.CompareAndSwap(m, n); m = p.max.Load() {
	}
	var once sync.Once
	return func() bool {
		stopped := false
		once.Do(func() { p.live.Add(-1); stopped = true })
		return stopped
	}
}

func cycles() int {
	if raceEnabled || testing.Short() {
		return 10_000
	}
	return 100_000
}

// "When Join returns … the scope's context is done, so nothing stays registered on a long-lived
// parent (like errgroup's Wait)."
func TestManyScopesLeaveNothingOnParent(t *testing.T) {
	t.Parallel()
	parent := &afterFuncParent{Context: context.Background(), done: make(chan struct{})}
	for i := range cycles() {
		opts := []scope.Option{}
		if i%2 == 1 {
			opts = append(opts, scope.WithTimeout(time.Hour))
		}
		s := scope.Open(parent, opts...)
		scope.Fork(s, value(i))
		require.NoError(t, s.Join())
		require.Equal(t, int64(0), parent.live.Load(), "cycle %d left a registration", i)
	}
	assert.LessOrEqual(t, parent.max.Load(), int64(1))
}

func TestManyScopesKeepMemoryFlat(t *testing.T) {
	if raceEnabled {
		t.Skip("memory figures are meaningless under the race detector")
	}
	parent, cancel := context.WithCancel(context.Background()) // a stdlib parent: children live in its map
	defer cancel()
	run := func(n int) {
		for i := range n {
			s := scope.Open(parent)
			scope.Fork(s, value(i))
			if err := s.Join(); err != nil {
				t.Fatal(err)
			}
		}
	}
	run(1000) // warm up
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	run(cycles())
	runtime.GC()
	runtime.ReadMemStats(&after)
	// A leaked registration costs over a hundred bytes; 100k of them would be >10 MB.
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	assert.Less(t, grown, int64(1<<20), "heap grew by %d bytes over %d cycles", grown, cycles())
}

// "The zero values scope.Scope ... and a nil *Scope are not usable: every method panics with
// PKG: zero TYPE; use Open, never a nil dereference deep inside."
func TestZeroAndNilScopePanic(t *testing.T) {
	const msg = "scope: zero Scope; use Open"
	var zero scope.Scope
	var nilScope *scope.Scope
	for name, s := range map[string]*scope.Scope{"zero": &zero, "nil": nilScope} {
		t.Run(name, func(t *testing.T) {
			assert.PanicsWithValue(t, msg, func() { scope.Fork(s, value(1)) })
			assert.PanicsWithValue(t, msg, func() { s.Go(func(context.Context) error { return nil }) })
			assert.PanicsWithValue(t, msg, func() { _ = s.Join() })
			assert.PanicsWithValue(t, msg, s.Close)
			assert.PanicsWithValue(t, msg, func() { s.Context() })
			assert.PanicsWithValue(t, msg, func() { s.Name() })
		})
	}
}
