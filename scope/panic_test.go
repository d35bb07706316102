package scope_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/goloom/loom/scope"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// joinPanic calls Join and returns the *PanicError it re-panics with; it fails if Join returns.
func joinPanic(t *testing.T, s *scope.Scope) (pe *scope.PanicError) {
	t.Helper()
	defer func() {
		r := recover()
		require.NotNil(t, r, "Join did not panic")
		var ok bool
		pe, ok = r.(*scope.PanicError)
		require.True(t, ok, "Join panicked with %T, want *scope.PanicError", r)
	}()
	err := s.Join()
	t.Fatalf("Join returned %v instead of panicking", err)
	return nil
}

//go:noinline
func explode(v any) { panic(v) }

// "By default Join re-panics in the owner's goroutine, after all subtasks have returned, with the
// first *scope.PanicError (fields Value any and Stack []byte, the child's stack …)".
func TestPanicRepanicsInJoinAfterEverySubtask(t *testing.T) {
	t.Parallel()
	s := scope.Open(t.Context())
	defer s.Close()
	var siblingReturned atomic.Bool
	started := make(chan struct{})
	scope.Fork(s, func(ctx context.Context) (int, error) {
		close(started)
		<-ctx.Done()
		runtime.Gosched()
		siblingReturned.Store(true)
		return 0, nil
	})
	<-started
	st := scope.Fork(s, func(context.Context) (int, error) { explode("boom"); return 0, nil })
	pe := joinPanic(t, s)
	assert.True(t, siblingReturned.Load(), "re-panicked before every subtask had returned")
	assert.Equal(t, "boom", pe.Value)
	assert.Contains(t, string(pe.Stack), "scope_test.explode", "the child's stack")
	assert.True(t, strings.HasPrefix(pe.Error(), "scope: subtask panicked: boom\n\ngoroutine "), pe.Error())
	assert.Contains(t, pe.Error(), "scope_test.explode", "Error carries the child's stack")
	assert.Equal(t, scope.Failed, st.State())
	assert.Same(t, pe, st.Err())
	assert.Same(t, pe, context.Cause(s.Context()), "the panic cancelled the scope")
	assert.NotPanics(t, s.Close, "Join surfaced it")
	assert.Same(t, pe, s.Join(), "later Joins return it")
}

// "Panics: a panicking subtask is a failure and cancels the scope at once (siblings and blocked
// forks see it immediately, not at Join)", whatever the policy — AwaitAll too.
func TestPanicCancelsAtOnce(t *testing.T) {
	t.Parallel()
	for _, policy := range []scope.Option{scope.FailFast(), scope.AwaitAll()} {
		s := scope.Open(t.Context(), scope.WithLimit(1), policy)
		release := make(chan struct{})
		scope.Fork(s, func(context.Context) (int, error) { <-release; explode("boom"); return 0, nil })
		blocked := make(chan *scope.Subtask[int])
		go func() { blocked <- scope.Fork(s, value(1)) }() // waits for the slot
		close(release)
		<-s.Context().Done() // before any Join: siblings and blocked forks see it now
		st := <-blocked
		assert.Equal(t, scope.Cancelled, st.State())
		joinPanic(t, s)
		s.Close()
	}
}

// "The one exception: a panic is never discarded — a subtask that panics, even after cancellation,
// is Failed with a *PanicError", and Join re-panics with it.
func TestPanicAfterCancellationIsNeverDiscarded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := scope.Open(t.Context())
		defer s.Close()
		late := scope.Fork(s, func(ctx context.Context) (int, error) {
			<-ctx.Done()
			explode(errB)
			return 0, nil
		})
		scope.Fork(s, failing(errA))
		pe := joinPanic(t, s)
		assert.Equal(t, scope.Failed, late.State())
		assert.Same(t, pe, late.Err())
		assert.ErrorIs(t, pe, errB, "Unwrap reaches an error value")
	})
}

// Join re-panics "with the first *scope.PanicError".
func TestFirstPanicWins(t *testing.T) {
	t.Parallel()
	s := scope.Open(t.Context(), scope.AwaitAll())
	defer s.Close()
	first := scope.Fork(s, func(context.Context) (int, error) { explode("first"); return 0, nil })
	<-waitDone(first)
	scope.Fork(s, func(context.Context) (int, error) { explode("second"); return 0, nil })
	assert.Equal(t, "first", joinPanic(t, s).Value)
}

// Close "does re-panic a subtask's panic that no Join has surfaced yet — a panic is never lost —
// once: a later Close returns quietly."
func TestCloseRepanicsOnce(t *testing.T) {
	t.Parallel()
	s := scope.Open(t.Context())
	scope.Fork(s, func(context.Context) (int, error) { explode("lost?"); return 0, nil })
	func() {
		defer func() {
			pe, ok := recover().(*scope.PanicError)
			require.True(t, ok, "Close did not re-panic the unsurfaced panic")
			assert.Equal(t, "lost?", pe.Value)
		}()
		s.Close() // the owner returned early without Join
	}()
	assert.NotPanics(t, s.Close, "only once")
	var pe *scope.PanicError
	require.ErrorAs(t, s.Join(), &pe, "a Join after Close reports it without panicking again")
}

// "With PanicsAsErrors() Join returns that *PanicError as its error instead", under every policy.
func TestPanicsAsErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		policy scope.Option
	}{
		{"FailFast", scope.FailFast()},
		{"AwaitAll", scope.AwaitAll()},
		{"FirstSuccess", scope.FirstSuccess()},
		{"CancelWhen", scope.CancelWhen(func(scope.Task) bool { return false })},
		{"WithJoiner", scope.WithJoiner(newRecorder())},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := scope.Open(t.Context(), tt.policy, scope.PanicsAsErrors())
			started := make(chan struct{})
			sibling := scope.Fork(s, func(ctx context.Context) (int, error) { close(started); return untilDone(ctx) })
			<-started
			scope.Fork(s, func(context.Context) (int, error) { explode(errA); return 0, nil })
			var err error
			require.NotPanics(t, func() { err = s.Join() })
			var pe *scope.PanicError
			require.ErrorAs(t, err, &pe)
			assert.ErrorIs(t, err, errA)
			assert.Equal(t, scope.Cancelled, sibling.State(), "a panic still cancels at once")
			assert.NotPanics(t, s.Close)
		})
	}
}

// "With PanicsAsErrors() a panic is an ordinary failure (it competes for "first failure" like any
// error)".
func TestPanicsAsErrorsCompetesForFirstFailure(t *testing.T) {
	t.Run("an error first", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := scope.Open(t.Context(), scope.PanicsAsErrors())
			defer s.Close()
			late := scope.Fork(s, func(ctx context.Context) (int, error) {
				<-ctx.Done()
				explode("after the first failure")
				return 0, nil
			})
			scope.Fork(s, failing(errA))
			err := s.Join()
			assert.Equal(t, scope.Failed, late.State(), "the panic is still not discarded")
			// "every *PanicError of the scope (also those of subtasks that panicked after
			// cancellation) is in Join's error (errors.Join of the policy's result and the panics, in
			// completion order)."
			require.Equal(t, []error{errA, late.Err()}, unwrapAll(err), "the first failure, then the late panic")
		})
	})
	t.Run("a panic first", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := scope.Open(t.Context(), scope.PanicsAsErrors())
			defer s.Close()
			later := scope.Fork(s, sleeper(time.Second, 0, errB)) // fails after the panic, ignoring ctx
			bad := scope.Fork(s, func(context.Context) (int, error) { explode("first"); return 0, nil })
			var err error
			require.NotPanics(t, func() { err = s.Join() })
			var pe *scope.PanicError
			require.ErrorAs(t, err, &pe)
			assert.Same(t, bad.Err(), pe)
			assert.Equal(t, []error{pe}, unwrapAll(err), "the panic is the first failure; nothing after it counts")
			assert.Same(t, pe, context.Cause(s.Context()))
			assert.Equal(t, scope.Cancelled, later.State())
		})
	})
	t.Run("AwaitAll keeps the failures before the panic", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := scope.Open(t.Context(), scope.PanicsAsErrors(), scope.AwaitAll())
			defer s.Close()
			scope.Fork(s, failing(errA))
			synctest.Wait() // errA completes before the panic cancels the scope
			bad := scope.Fork(s, func(context.Context) (int, error) { explode("boom"); return 0, nil })
			var err error
			require.NotPanics(t, func() { err = s.Join() })
			require.ErrorIs(t, err, errA)
			var pe *scope.PanicError
			require.ErrorAs(t, err, &pe)
			assert.Same(t, bad.Err(), pe)
		})
	})
}

// "With PanicsAsErrors() … Close never re-panics"; the subtask is Failed with the *PanicError.
func TestPanicsAsErrorsCloseNeverPanics(t *testing.T) {
	t.Parallel()
	s := scope.Open(t.Context(), scope.PanicsAsErrors())
	st := scope.Fork(s, func(context.Context) (int, error) { explode("x"); return 0, nil })
	assert.NotPanics(t, s.Close)
	assert.Equal(t, scope.Failed, st.State())
	var pe *scope.PanicError
	require.ErrorAs(t, st.Err(), &pe)
	assert.Equal(t, "x", pe.Value)
}

// "runtime.Goexit in a subtask (e.g. t.FailNow) is a failure with scope.ErrGoexit; Join never hangs
// on it." A failure: FailFast cancels the siblings.
func TestGoexitIsAFailure(t *testing.T) {
	t.Parallel()
	s := scope.Open(t.Context())
	defer s.Close()
	sibling := scope.Fork(s, untilDone)
	st := scope.Fork(s, func(context.Context) (int, error) { runtime.Goexit(); return 0, nil })
	require.ErrorIs(t, s.Join(), scope.ErrGoexit)
	assert.Equal(t, scope.Failed, st.State())
	assert.ErrorIs(t, st.Err(), scope.ErrGoexit)
	assert.Equal(t, scope.Cancelled, sibling.State())
}

func TestGoexitWithLimitReleasesSlot(t *testing.T) {
	t.Parallel()
	s := scope.Open(t.Context(), scope.WithLimit(1), scope.AwaitAll())
	defer s.Close()
	scope.Fork(s, func(context.Context) (int, error) { runtime.Goexit(); return 0, nil })
	next := scope.Fork(s, value(2)) // would block forever if the slot leaked
	require.ErrorIs(t, s.Join(), scope.ErrGoexit)
	assert.Equal(t, 2, next.Get())
}

// statusError is an error type of a user's, for errors.As to find.
type statusError struct{ code int }

func (e *statusError) Error() string { return "status " + strconv.Itoa(e.code) }

// "Unwrap returns Value when it is an error, so errors.Is/As reach it".
func TestPanicErrorUnwrap(t *testing.T) {
	t.Parallel()
	assert.Nil(t, (&scope.PanicError{Value: "text"}).Unwrap())
	pe := &scope.PanicError{Value: errA}
	assert.True(t, errors.Is(pe, errA))
	assert.Equal(t, "scope: subtask panicked: a failed\n\n", pe.Error(), "no stack: nothing after the blank line")

	s := scope.Open(t.Context(), scope.PanicsAsErrors())
	defer s.Close()
	want := &statusError{503}
	scope.Fork(s, func(context.Context) (int, error) { explode(want); return 0, nil })
	err := s.Join()
	var got *statusError
	require.ErrorAs(t, err, &got, "errors.As reaches the panic's value through Join's error")
	assert.Same(t, want, got)
}

func TestErrTimeoutMatchesDeadlineExceeded(t *testing.T) {
	t.Parallel()
	assert.ErrorIs(t, scope.ErrTimeout, context.DeadlineExceeded)
	assert.NotErrorIs(t, context.DeadlineExceeded, scope.ErrTimeout)
	var te interface{ Timeout() bool }
	require.ErrorAs(t, scope.ErrTimeout, &te)
	assert.True(t, te.Timeout())
}

// "With PanicsAsErrors, every *PanicError of the scope (also those of subtasks that panicked after
// cancellation) is in Join's error." Under AwaitAll the first panic cancels the scope; a second
// one, after that, used to be dropped from Join's error.
func TestPanicsAsErrorsKeepsEveryPanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := scope.Open(t.Context(), scope.AwaitAll(), scope.PanicsAsErrors())
		defer s.Close()
		second := scope.Fork(s, func(ctx context.Context) (int, error) {
			<-ctx.Done() // after the first panic cancelled the scope
			explode("second")
			return 0, nil
		})
		synctest.Wait()
		first := scope.Fork(s, func(context.Context) (int, error) { explode("first"); return 0, nil })
		err := s.Join()
		require.Equal(t, []error{first.Err(), second.Err()}, unwrapAll(err), "both panics, in order")
	})
}

// "When Join or Close re-panics and nothing recovers, the crash output must show the panicking
// subtask's stack." The test binary runs itself with a scope whose subtask panics and nothing
// recovers, and reads what the runtime printed.
func TestUnrecoveredRepanicShowsTheChildsStack(t *testing.T) {
	if os.Getenv("SCOPE_CRASH") != "" {
		s := scope.Open(context.Background())
		scope.Fork(s, func(context.Context) (int, error) { childPanicsHere(); return 0, nil })
		_ = s.Join() // re-panics; nothing recovers
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestUnrecoveredRepanicShowsTheChildsStack$")
	cmd.Env = append(os.Environ(), "SCOPE_CRASH=1")
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "the process must crash")
	assert.Contains(t, string(out), "panic: scope: subtask panicked: deep in the child")
	assert.Contains(t, string(out), "scope_test.childPanicsHere", "the child's stack is in the crash output:\n%s", out)
}

//go:noinline
func childPanicsHere() { panic("deep in the child") }
