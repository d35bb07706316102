package contract_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/scope"
	"github.com/goloom/loom/scopedvalue"
)

// ---------------------------------------------------------------------------
// Open, Fork, Go, Context
// ---------------------------------------------------------------------------

// DESIGN: "Open — the scope's context is derived from ctx; cancelling ctx cancels the scope."
func TestScopeOpenContextDerivedFromParent(t *testing.T) {
	type key struct{}
	parent, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
	defer cancel()
	s := scope.Open(parent)
	defer s.Close()
	assert.Equal(t, "v", s.Context().Value(key{}), "scope context carries the parent's values")
	require.NoError(t, s.Context().Err())
	cancel()
	select {
	case <-s.Context().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("cancelling the parent did not cancel the scope")
	}
}

// DESIGN: "Fork … runs fn in a new goroutine with the scope's context."
func TestScopeForkRunsOnNewGoroutineWithScopeContext(t *testing.T) {
	s := scope.Open(context.Background())
	defer s.Close()
	owner := goid()
	var (
		gotCtx context.Context
		gotID  uint64
	)
	st := scope.Fork(s, func(ctx context.Context) (int, error) {
		gotCtx, gotID = ctx, goid()
		return 1, nil
	})
	require.NoError(t, s.Join())
	assert.NotEqual(t, owner, gotID, "fn must run on a new goroutine")
	assert.True(t, gotCtx == s.Context(), "fn must receive the scope's context (Context())")
	assert.Equal(t, 1, st.Get())
}

// DESIGN: "(s *Scope) Go(fn func(ctx) error) *Subtask[struct{}] — errgroup-shaped fork."
func TestScopeGoErrgroupShaped(t *testing.T) {
	s := scope.Open(context.Background(), scope.AwaitAll())
	defer s.Close()
	boom := errors.New("boom")
	var ok *scope.Subtask[struct{}] = s.Go(func(ctx context.Context) error { return nil })
	bad := s.Go(func(ctx context.Context) error { return boom })
	err := s.Join()
	require.ErrorIs(t, err, boom)
	assert.Equal(t, scope.Succeeded, ok.State())
	assert.Equal(t, struct{}{}, ok.Get())
	assert.Equal(t, scope.Failed, bad.State())
	assert.True(t, isSame(boom, bad.Err()), "Err() is the fn's error")
}

// ---------------------------------------------------------------------------
// Join
// ---------------------------------------------------------------------------

// DESIGN: "Join … When Join returns, no goroutine of the scope is running."
func TestScopeJoinWaitsForEverySubtaskEvenCancelledOnes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := scope.Open(context.Background())
		defer s.Close()
		var finished atomic.Int32
		for range 3 {
			scope.Fork(s, func(ctx context.Context) (int, error) {
				<-ctx.Done()
				time.Sleep(time.Hour) // ignores cancellation for a while
				finished.Add(1)
				return 0, ctx.Err()
			})
		}
		scope.Fork(s, func(ctx context.Context) (int, error) { return 0, errors.New("fail") })
		require.Error(t, s.Join())
		assert.Equal(t, int32(3), finished.Load(), "Join returned while subtasks were still running")
	})
}

// DESIGN: "When Join returns … the scope's context is done." (also on success)
func TestScopeJoinLeavesContextDoneOnSuccess(t *testing.T) {
	s := scope.Open(context.Background())
	defer s.Close()
	scope.Fork(s, func(ctx context.Context) (int, error) { return 1, nil })
	require.NoError(t, s.Join())
	assert.Error(t, s.Context().Err(), "scope context must be done after Join")
}

func TestScopeJoinLeavesContextDoneWithNoSubtasks(t *testing.T) {
	s := scope.Open(context.Background())
	defer s.Close()
	require.NoError(t, s.Join())
	assert.Error(t, s.Context().Err(), "scope context must be done after Join")
}

// DESIGN: "Calling it again returns the same error."
func TestScopeJoinTwiceReturnsSameError(t *testing.T) {
	s := scope.Open(context.Background(), scope.AwaitAll())
	defer s.Close()
	e1, e2 := errors.New("e1"), errors.New("e2")
	scope.Fork(s, func(ctx context.Context) (int, error) { return 0, e1 })
	scope.Fork(s, func(ctx context.Context) (int, error) { return 0, e2 })
	err1 := s.Join()
	err2 := s.Join()
	require.Error(t, err1)
	assert.Equal(t, err1, err2)
	assert.True(t, isSame(err1, err2), "second Join should return the identical error value")
}

func TestScopeJoinTwiceNil(t *testing.T) {
	s := scope.Open(context.Background())
	defer s.Close()
	scope.Fork(s, func(ctx context.Context) (int, error) { return 1, nil })
	require.NoError(t, s.Join())
	require.NoError(t, s.Join())
}

func TestScopeJoinTwiceFailFast(t *testing.T) {
	s := scope.Open(context.Background())
	defer s.Close()
	boom := errors.New("boom")
	scope.Fork(s, func(ctx context.Context) (int, error) { return 0, boom })
	err1 := s.Join()
	err2 := s.Join()
	require.ErrorIs(t, err1, boom)
	assert.True(t, isSame(err1, err2))
}

// ---------------------------------------------------------------------------
// Close
// ---------------------------------------------------------------------------

// DESIGN: "Close — cancels the scope if Join has not completed and waits for every subtask;
// idempotent; … Never panics for a missing Join."
func TestScopeCloseCancelsAndWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := scope.Open(context.Background())
		var returned atomic.Bool
		st := scope.Fork(s, func(ctx context.Context) (int, error) {
			<-ctx.Done()
			time.Sleep(time.Minute)
			returned.Store(true)
			return 0, ctx.Err()
		})
		synctest.Wait()
		require.NotPanics(t, s.Close)
		assert.True(t, returned.Load(), "Close must wait for every subtask")
		assert.Equal(t, scope.Cancelled, st.State())
		assert.Error(t, s.Context().Err())
		require.NotPanics(t, s.Close, "Close is idempotent")
	})
}

func TestScopeCloseAfterJoinKeepsResults(t *testing.T) {
	s := scope.Open(context.Background())
	st := scope.Fork(s, func(ctx context.Context) (int, error) { return 5, nil })
	require.NoError(t, s.Join())
	s.Close()
	s.Close()
	assert.Equal(t, scope.Succeeded, st.State())
	assert.Equal(t, 5, st.Get())
}

func TestScopeCloseSafeInDeferAfterEarlyReturn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ran atomic.Bool
		func() {
			s := scope.Open(context.Background())
			defer s.Close()
			scope.Fork(s, func(ctx context.Context) (int, error) {
				<-ctx.Done()
				ran.Store(true)
				return 0, nil
			})
			// early return without Join
		}()
		assert.True(t, ran.Load())
	})
}

func panickingHelper() (int, error) { panic("boom-value") }

// DESIGN: "it does re-panic a subtask's panic that no Join has surfaced yet … once: a later Close
// returns quietly."
func TestScopeCloseRepanicsUnsurfacedPanicOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := scope.Open(context.Background())
		scope.Fork(s, func(ctx context.Context) (int, error) { return panickingHelper() })
		synctest.Wait()
		r := catch(s.Close)
		require.NotNil(t, r, "Close must re-panic a panic no Join surfaced")
		pe, ok := r.(*scope.PanicError)
		require.True(t, ok, "re-panic value should be *scope.PanicError, got %T", r)
		assert.Equal(t, "boom-value", pe.Value)
		assert.NotPanics(t, s.Close, "a later Close returns quietly")
	})
}

func TestScopeCloseQuietAfterJoinSurfacedPanic(t *testing.T) {
	s := scope.Open(context.Background())
	scope.Fork(s, func(ctx context.Context) (int, error) { return panickingHelper() })
	r := catch(func() { _ = s.Join() })
	require.NotNil(t, r, "Join must re-panic")
	assert.NotPanics(t, s.Close, "Close must not re-panic a panic Join surfaced")
}

// DESIGN: "With PanicsAsErrors() … Close never re-panics."
func TestScopeCloseNeverRepanicsWithPanicsAsErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := scope.Open(context.Background(), scope.PanicsAsErrors())
		st := scope.Fork(s, func(ctx context.Context) (int, error) { return panickingHelper() })
		synctest.Wait()
		assert.NotPanics(t, s.Close)
		assert.Equal(t, scope.Failed, st.State())
		var pe *scope.PanicError
		assert.ErrorAs(t, st.Err(), &pe)
	})
}

// ---------------------------------------------------------------------------
// Subtask states
// ---------------------------------------------------------------------------

// DESIGN: "Get() T (panics with a clear message unless Succeeded)", Err, Result, Value.
func TestSubtaskAccessorsByState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := scope.Open(context.Background(), scope.AwaitAll())
		defer s.Close()
		boom := errors.New("boom")
		release := make(chan struct{})
		running := scope.Fork(s, func(ctx context.Context) (int, error) { <-release; return 3, nil })
		failed := scope.Fork(s, func(ctx context.Context) (int, error) { return 9, boom })
		synctest.Wait()

		assert.Equal(t, scope.Running, running.State())
		assert.NoError(t, running.Err(), "Err is nil while Running")
		assert.Nil(t, running.Value())
		_, ok := panicMsg(func() { running.Get() })
		assert.True(t, ok, "Get must panic while Running")

		assert.Equal(t, scope.Failed, failed.State())
		assert.True(t, isSame(boom, failed.Err()))
		v, err := failed.Result()
		assert.Equal(t, 0, v, "Result returns the zero value on failure")
		assert.True(t, isSame(boom, err))
		assert.Nil(t, failed.Value(), "Value is nil unless Succeeded")
		msg, ok := panicMsg(func() { failed.Get() })
		assert.True(t, ok, "Get must panic when Failed")
		assert.NotEmpty(t, msg)

		close(release)
		require.ErrorIs(t, s.Join(), boom)
		assert.Equal(t, scope.Succeeded, running.State())
		assert.Equal(t, 3, running.Get())
		assert.NoError(t, running.Err())
		v, err = running.Result()
		assert.Equal(t, 3, v)
		assert.NoError(t, err)
		assert.Equal(t, 3, running.Value())

		var task scope.Task = running
		assert.Equal(t, scope.Succeeded, task.State())
	})
}

// DESIGN: "Cancelled … its Err() is the scope's cancellation cause (context.Cause of the scope's
// context) and Result() returns the zero value with that error."
func TestSubtaskCancelledErrIsScopeCause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := scope.Open(context.Background())
		defer s.Close()
		firstErr := errors.New("first")
		sib := scope.Fork(s, func(ctx context.Context) (string, error) {
			<-ctx.Done()
			return "ignored", errors.New("sibling's own error after cancellation")
		})
		scope.Fork(s, func(ctx context.Context) (string, error) { return "", firstErr })
		err := s.Join()
		require.ErrorIs(t, err, firstErr)
		cause := context.Cause(s.Context())
		require.True(t, isSame(firstErr, cause), "scope's cause must be the first failure, got %v", cause)
		assert.Equal(t, scope.Cancelled, sib.State())
		assert.True(t, isSame(cause, sib.Err()), "Cancelled Err() must be context.Cause(scope ctx), got %v", sib.Err())
		v, rerr := sib.Result()
		assert.Equal(t, "", v, "Result returns the zero value when Cancelled")
		assert.True(t, isSame(cause, rerr))
		assert.Nil(t, sib.Value())
		_, ok := panicMsg(func() { sib.Get() })
		assert.True(t, ok, "Get must panic when Cancelled")
	})
}

// DESIGN: "Cancelled … its outcome is discarded and never counts as a failure" —
// a subtask that *succeeds* after cancellation is Cancelled too.
func TestSubtaskSuccessAfterCancellationIsCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := scope.Open(context.Background())
		defer s.Close()
		firstErr := errors.New("first")
		sib := scope.Fork(s, func(ctx context.Context) (int, error) {
			<-ctx.Done()
			return 42, nil
		})
		scope.Fork(s, func(ctx context.Context) (int, error) { return 0, firstErr })
		require.ErrorIs(t, s.Join(), firstErr)
		assert.Equal(t, scope.Cancelled, sib.State())
		v, err := sib.Result()
		assert.Equal(t, 0, v)
		assert.True(t, isSame(context.Cause(s.Context()), err))
	})
}

// DESIGN: "a subtask that panics, even after cancellation, is Failed with a *PanicError."
func TestSubtaskPanicAfterCancellationIsFailed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := scope.Open(context.Background(), scope.PanicsAsErrors())
		defer s.Close()
		firstErr := errors.New("first")
		late := scope.Fork(s, func(ctx context.Context) (int, error) {
			<-ctx.Done()
			panic("late panic")
		})
		scope.Fork(s, func(ctx context.Context) (int, error) { return 0, firstErr })
		err := s.Join()
		require.ErrorIs(t, err, firstErr, "the first failure still wins with PanicsAsErrors")
		assert.Equal(t, scope.Failed, late.State())
		var pe *scope.PanicError
		require.ErrorAs(t, late.Err(), &pe)
		assert.Equal(t, "late panic", pe.Value)
	})
}

// Default mode: the late panic is never lost, so Join re-panics with it.
func TestSubtaskPanicAfterCancellationRepanicsByDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := scope.Open(context.Background())
		defer s.Close()
		late := scope.Fork(s, func(ctx context.Context) (int, error) {
			<-ctx.Done()
			panic("late panic")
		})
		scope.Fork(s, func(ctx context.Context) (int, error) { return 0, errors.New("first") })
		r := catch(func() { _ = s.Join() })
		pe, ok := r.(*scope.PanicError)
		require.True(t, ok, "Join must re-panic with *PanicError, got %T (%v)", r, r)
		assert.Equal(t, "late panic", pe.Value)
		assert.Equal(t, scope.Failed, late.State())
	})
}

// ---------------------------------------------------------------------------
// Forking rules
// ---------------------------------------------------------------------------

// DESIGN: "after Join has returned or after Close, Fork panics with `scope: fork after join` /
// `scope: fork after close`."
func TestScopeForkAfterJoinPanics(t *testing.T) {
	s := scope.Open(context.Background())
	defer s.Close()
	require.NoError(t, s.Join())
	ran := false
	msg, ok := panicMsg(func() {
		scope.Fork(s, func(ctx context.Context) (int, error) { ran = true; return 0, nil })
	})
	require.True(t, ok, "Fork after Join must panic")
	assert.Equal(t, "scope: fork after join", msg)
	msg, ok = panicMsg(func() { s.Go(func(ctx context.Context) error { ran = true; return nil }) })
	require.True(t, ok, "Go after Join must panic")
	assert.Equal(t, "scope: fork after join", msg)
	assert.False(t, ran)
}

func TestScopeForkAfterClosePanics(t *testing.T) {
	s := scope.Open(context.Background())
	s.Close()
	ran := false
	msg, ok := panicMsg(func() {
		scope.Fork(s, func(ctx context.Context) (int, error) { ran = true; return 0, nil })
	})
	require.True(t, ok, "Fork after Close must panic")
	assert.Equal(t, "scope: fork after close", msg)
	assert.False(t, ran)
}

func TestScopeForkAfterJoinWithErrorPanics(t *testing.T) {
	s := scope.Open(context.Background())
	defer s.Close()
	scope.Fork(s, func(ctx context.Context) (int, error) { return 0, errors.New("x") })
	require.Error(t, s.Join())
	msg, ok := panicMsg(func() { scope.Fork(s, func(ctx context.Context) (int, error) { return 0, nil }) })
	require.True(t, ok)
	assert.Equal(t, "scope: fork after join", msg)
}

// DESIGN: "Forking is allowed from the owner and from the scope's own subtasks until Join has returned."
func TestScopeForkFromSubtask(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := scope.Open(context.Background())
		defer s.Close()
		var inner *scope.Subtask[int]
		var done atomic.Bool
		scope.Fork(s, func(ctx context.Context) (int, error) {
			inner = scope.Fork(s, func(ctx context.Context) (int, error) {
				time.Sleep(time.Minute)
				done.Store(true)
				return 7, nil
			})
			return 1, nil
		})
		require.NoError(t, s.Join())
		assert.True(t, done.Load(), "Join must wait for subtasks forked by subtasks")
		require.NotNil(t, inner)
		assert.Equal(t, 7, inner.Get())
	})
}

// DESIGN: "Fork on a cancelled (not yet joined) scope does not run fn and returns a Cancelled subtask."
func TestScopeForkOnCancelledScopeDoesNotRun(t *testing.T) {
	t.Run("after failure", func(t *testing.T) {
		s := scope.Open(context.Background())
		defer s.Close()
		firstErr := errors.New("first")
		scope.Fork(s, func(ctx context.Context) (int, error) { return 0, firstErr })
		<-s.Context().Done()
		var ran atomic.Bool
		st := scope.Fork(s, func(ctx context.Context) (int, error) { ran.Store(true); return 1, nil })
		assert.Equal(t, scope.Cancelled, st.State(), "must be Cancelled at once")
		assert.True(t, isSame(context.Cause(s.Context()), st.Err()))
		require.ErrorIs(t, s.Join(), firstErr)
		assert.False(t, ran.Load(), "fn must not run")
	})
	t.Run("after parent cancel", func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		s := scope.Open(parent)
		defer s.Close()
		cancel()
		var ran atomic.Bool
		st := scope.Fork(s, func(ctx context.Context) (int, error) { ran.Store(true); return 1, nil })
		assert.Equal(t, scope.Cancelled, st.State())
		err := s.Join()
		assert.ErrorIs(t, err, context.Canceled, "a fork after the parent ended: Join returns that cause")
		assert.False(t, ran.Load(), "fn must not run")
	})
}

// ---------------------------------------------------------------------------
// Policies
// ---------------------------------------------------------------------------

// DESIGN: "the default is FailFast()" and "FailFast() — the first failure cancels the siblings (the
// scope's context.Cause is that error); Join returns an error for which errors.Is(err, firstErr) holds
// (siblings' cancellation errors never mask it)."
func TestScopeFailFast(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []scope.Option
	}{{"default", nil}, {"explicit", []scope.Option{scope.FailFast()}}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := scope.Open(context.Background(), tc.opts...)
				defer s.Close()
				firstErr := errors.New("first")
				sibErr := errors.New("sibling")
				var sibs []*scope.Subtask[int]
				for range 3 {
					sibs = append(sibs, scope.Fork(s, func(ctx context.Context) (int, error) {
						<-ctx.Done()
						return 0, errors.Join(sibErr, ctx.Err())
					}))
				}
				synctest.Wait()
				require.NoError(t, s.Context().Err())
				bad := scope.Fork(s, func(ctx context.Context) (int, error) {
					time.Sleep(time.Second)
					return 0, firstErr
				})
				err := s.Join()
				require.ErrorIs(t, err, firstErr)
				assert.NotErrorIs(t, err, sibErr, "cancelled siblings' errors must not count as failures")
				assert.True(t, isSame(firstErr, context.Cause(s.Context())), "scope cause is the first failure")
				assert.Equal(t, scope.Failed, bad.State())
				for _, sib := range sibs {
					assert.Equal(t, scope.Cancelled, sib.State())
				}
			})
		})
	}
}

// FailFast: only the first failure decides; a second failure that races it still leaves errors.Is(firstErr).
func TestScopeFailFastFirstOfSeveral(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := scope.Open(context.Background())
		defer s.Close()
		e1, e2 := errors.New("e1"), errors.New("e2")
		scope.Fork(s, func(ctx context.Context) (int, error) { time.Sleep(time.Second); return 0, e1 })
		second := scope.Fork(s, func(ctx context.Context) (int, error) {
			time.Sleep(2 * time.Second) // ignores ctx; fails after the first failure
			return 0, e2
		})
		err := s.Join()
		require.ErrorIs(t, err, e1)
		assert.True(t, isSame(e1, context.Cause(s.Context())))
		assert.Equal(t, scope.Cancelled, second.State(), "a failure after cancellation is discarded")
	})
}

// DESIGN: "AwaitAll() — never cancels; Join returns errors.Join of every failure, nil if none."
func TestScopeAwaitAll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := scope.Open(context.Background(), scope.AwaitAll())
		defer s.Close()
		e1, e2 := errors.New("e1"), errors.New("e2")
		release := make(chan struct{})
		scope.Fork(s, func(ctx context.Context) (int, error) { return 0, e1 })
		scope.Fork(s, func(ctx context.Context) (int, error) { return 0, e2 })
		slow := scope.Fork(s, func(ctx context.Context) (int, error) {
			select {
			case <-release:
				return 1, nil
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		})
		synctest.Wait()
		require.NoError(t, s.Context().Err(), "AwaitAll must not cancel on failure")
		close(release)
		err := s.Join()
		require.ErrorIs(t, err, e1)
		require.ErrorIs(t, err, e2)
		if u, ok := err.(interface{ Unwrap() []error }); assert.True(t, ok, "errors.Join result expected, got %T", err) {
			assert.Len(t, u.Unwrap(), 2)
		}
		assert.Equal(t, scope.Succeeded, slow.State())
		assert.Equal(t, 1, slow.Get())
	})
}

func TestScopeAwaitAllNilIfNone(t *testing.T) {
	s := scope.Open(context.Background(), scope.AwaitAll())
	defer s.Close()
	for i := range 3 {
		scope.Fork(s, func(ctx context.Context) (int, error) { return i, nil })
	}
	require.NoError(t, s.Join())
}

// DESIGN: "FirstSuccess() — a failure does not short-circuit; the first success cancels the rest;
// Join returns nil if any succeeded."
func TestScopeFirstSuccess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := scope.Open(context.Background(), scope.FirstSuccess())
		defer s.Close()
		bad := scope.Fork(s, func(ctx context.Context) (int, error) { return 0, errors.New("bad") })
		synctest.Wait()
		require.NoError(t, s.Context().Err(), "a failure must not short-circuit FirstSuccess")
		loser := scope.Fork(s, func(ctx context.Context) (int, error) { <-ctx.Done(); return 0, ctx.Err() })
		winner := scope.Fork(s, func(ctx context.Context) (int, error) { time.Sleep(time.Second); return 7, nil })
		require.NoError(t, s.Join())
		assert.Equal(t, scope.Failed, bad.State())
		assert.Equal(t, scope.Succeeded, winner.State())
		assert.Equal(t, 7, winner.Get())
		assert.Equal(t, scope.Cancelled, loser.State())
	})
}

// DESIGN: "… else errors.Join of the failures"
func TestScopeFirstSuccessAllFail(t *testing.T) {
	s := scope.Open(context.Background(), scope.FirstSuccess())
	defer s.Close()
	e1, e2 := errors.New("e1"), errors.New("e2")
	scope.Fork(s, func(ctx context.Context) (int, error) { return 0, e1 })
	scope.Fork(s, func(ctx context.Context) (int, error) { return 0, e2 })
	err := s.Join()
	require.ErrorIs(t, err, e1)
	require.ErrorIs(t, err, e2)
	assert.NotErrorIs(t, err, scope.ErrNoSubtasks)
}

// DESIGN: "with nothing forked, an error matching scope.ErrNoSubtasks (so does Race with no functions)."
func TestScopeFirstSuccessNoSubtasks(t *testing.T) {
	s := scope.Open(context.Background(), scope.FirstSuccess())
	defer s.Close()
	require.ErrorIs(t, s.Join(), scope.ErrNoSubtasks)
}

func TestRaceNoFunctions(t *testing.T) {
	v, err := scope.Race[int](context.Background())
	require.ErrorIs(t, err, scope.ErrNoSubtasks)
	assert.Equal(t, 0, v)
}

// DESIGN: "CancelWhen(func(Task) bool) — cancels when the predicate holds for a completed subtask;
// Join returns nil unless the scope ended from outside."
func TestScopeCancelWhen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var seen sync.Map
		s := scope.Open(context.Background(), scope.CancelWhen(func(tk scope.Task) bool {
			seen.Store(tk, true)
			return tk.State() == scope.Succeeded && tk.Value() == 2
		}))
		defer s.Close()
		failing := scope.Fork(s, func(ctx context.Context) (int, error) { return 0, errors.New("bad") })
		one := scope.Fork(s, func(ctx context.Context) (int, error) { return 1, nil })
		synctest.Wait()
		require.NoError(t, s.Context().Err(), "predicate false: no cancellation")
		waiter := scope.Fork(s, func(ctx context.Context) (int, error) { <-ctx.Done(); return 0, ctx.Err() })
		two := scope.Fork(s, func(ctx context.Context) (int, error) { time.Sleep(time.Second); return 2, nil })
		require.NoError(t, s.Join(), "CancelWhen: Join returns nil even with failures")
		assert.Equal(t, scope.Failed, failing.State())
		assert.Equal(t, scope.Succeeded, one.State())
		assert.Equal(t, scope.Succeeded, two.State())
		assert.Equal(t, scope.Cancelled, waiter.State())
		_, sawFailing := seen.Load(scope.Task(failing))
		assert.True(t, sawFailing, "predicate sees failed subtasks too")
	})
}

func TestScopeCancelWhenEndedFromOutside(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		s := scope.Open(parent, scope.CancelWhen(func(scope.Task) bool { return false }))
		defer s.Close()
		scope.Fork(s, func(ctx context.Context) (int, error) { <-ctx.Done(); return 0, ctx.Err() })
		synctest.Wait()
		cancel()
		require.ErrorIs(t, s.Join(), context.Canceled)
	})
}

// ---------------------------------------------------------------------------
// WithJoiner
// ---------------------------------------------------------------------------

type recJoiner struct {
	mu          sync.Mutex
	forks       []scope.Task
	completes   []scope.Task
	resultCalls int
	onFork      func(scope.Task) error
	onComplete  func(scope.Task) bool
	result      error
}

func (j *recJoiner) OnFork(t scope.Task) error {
	j.mu.Lock()
	j.forks = append(j.forks, t)
	f := j.onFork
	j.mu.Unlock()
	if f != nil {
		return f(t)
	}
	return nil
}

func (j *recJoiner) OnComplete(t scope.Task) bool {
	j.mu.Lock()
	j.completes = append(j.completes, t)
	f := j.onComplete
	j.mu.Unlock()
	if f != nil {
		return f(t)
	}
	return false
}

func (j *recJoiner) Result() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.resultCalls++
	return j.result
}

func (j *recJoiner) completed(t scope.Task) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	n := 0
	for _, c := range j.completes {
		if c == t {
			n++
		}
	}
	return n
}

func (j *recJoiner) forked(t scope.Task) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	n := 0
	for _, c := range j.forks {
		if c == t {
			n++
		}
	}
	return n
}

// DESIGN: "Result is called once, by the first Join, and is what Join returns."
func TestJoinerResultIsWhatJoinReturnsCalledOnce(t *testing.T) {
	want := errors.New("joiner says no")
	j := &recJoiner{result: want}
	s := scope.Open(context.Background(), scope.WithJoiner(j))
	defer s.Close()
	a := scope.Fork(s, func(ctx context.Context) (int, error) { return 1, nil })
	b := scope.Fork(s, func(ctx context.Context) (int, error) { return 0, errors.New("ignored by joiner") })
	err := s.Join()
	assert.True(t, isSame(want, err), "Join returns Result(), got %v", err)
	assert.True(t, isSame(want, s.Join()))
	assert.Equal(t, 1, j.resultCalls, "Result must be called once")
	assert.Equal(t, 1, j.forked(a))
	assert.Equal(t, 1, j.forked(b))
	assert.Equal(t, 1, j.completed(a), "OnComplete exactly once per completed subtask")
	assert.Equal(t, 1, j.completed(b))
}

func TestJoinerResultNil(t *testing.T) {
	j := &recJoiner{}
	s := scope.Open(context.Background(), scope.WithJoiner(j))
	defer s.Close()
	scope.Fork(s, func(ctx context.Context) (int, error) { return 0, errors.New("x") })
	require.NoError(t, s.Join(), "a custom joiner's nil Result is what Join returns")
}

// DESIGN: "When OnFork returns an error, fn never runs and the subtask is Failed with that error (and
// handed to OnComplete)."
func TestJoinerOnForkError(t *testing.T) {
	refuse := errors.New("refused")
	j := &recJoiner{onFork: func(scope.Task) error { return refuse }}
	s := scope.Open(context.Background(), scope.WithJoiner(j))
	defer s.Close()
	var ran atomic.Bool
	st := scope.Fork(s, func(ctx context.Context) (int, error) { ran.Store(true); return 1, nil })
	require.NoError(t, s.Join())
	assert.False(t, ran.Load(), "fn must never run when OnFork fails")
	assert.Equal(t, scope.Failed, st.State())
	assert.True(t, isSame(refuse, st.Err()), "Err() is OnFork's error, got %v", st.Err())
	assert.Equal(t, 1, j.completed(st), "the refused subtask is handed to OnComplete")
}

// DESIGN: "OnComplete … returning true cancels the scope"; "never for Cancelled ones";
// "A fork after cancellation still calls OnFork, then is Cancelled"; "A fork on a cancelled scope is
// Cancelled whatever OnFork returns."
func TestJoinerOnCompleteCancelsAndForkAfterCancellation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		refuse := errors.New("refused")
		j := &recJoiner{}
		j.onComplete = func(tk scope.Task) bool { return tk.Value() == "stop" }
		s := scope.Open(context.Background(), scope.WithJoiner(j))
		defer s.Close()
		waiter := scope.Fork(s, func(ctx context.Context) (string, error) { <-ctx.Done(); return "late", nil })
		stopper := scope.Fork(s, func(ctx context.Context) (string, error) { return "stop", nil })
		synctest.Wait()
		require.Error(t, s.Context().Err(), "OnComplete returning true cancels the scope")

		var ran atomic.Bool
		after := scope.Fork(s, func(ctx context.Context) (string, error) { ran.Store(true); return "x", nil })
		j.mu.Lock()
		j.onFork = func(scope.Task) error { return refuse }
		j.mu.Unlock()
		afterRefused := scope.Fork(s, func(ctx context.Context) (string, error) { ran.Store(true); return "x", nil })

		require.NoError(t, s.Join())
		assert.False(t, ran.Load())
		assert.Equal(t, scope.Cancelled, waiter.State())
		assert.Equal(t, scope.Succeeded, stopper.State())
		assert.Equal(t, scope.Cancelled, after.State())
		assert.Equal(t, scope.Cancelled, afterRefused.State(), "Cancelled whatever OnFork returns")
		assert.True(t, isSame(context.Cause(s.Context()), afterRefused.Err()))
		assert.Equal(t, 1, j.forked(after), "a fork after cancellation still calls OnFork")
		assert.Equal(t, 1, j.forked(afterRefused))
		assert.Equal(t, 0, j.completed(waiter), "OnComplete never for Cancelled")
		assert.Equal(t, 0, j.completed(after))
		assert.Equal(t, 0, j.completed(afterRefused))
		assert.Equal(t, 1, j.completed(stopper))
		assert.Equal(t, 1, j.resultCalls)
	})
}

// DESIGN: "Result … is what Join returns (unless the scope ended from outside)" and "Result is not called".
func TestJoinerResultNotCalledWhenEndedFromOutside(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		j := &recJoiner{result: errors.New("from result")}
		s := scope.Open(parent, scope.WithJoiner(j))
		defer s.Close()
		st := scope.Fork(s, func(ctx context.Context) (int, error) { <-ctx.Done(); return 0, ctx.Err() })
		synctest.Wait()
		cancel()
		err := s.Join()
		require.ErrorIs(t, err, context.Canceled)
		assert.NotErrorIs(t, err, j.result)
		assert.Equal(t, 0, j.resultCalls, "Result must not be called when the scope ended from outside")
		assert.Equal(t, 0, j.completed(st))
		assert.Equal(t, scope.Cancelled, st.State())
	})
}

// ---------------------------------------------------------------------------
// Ending from outside
// ---------------------------------------------------------------------------

// DESIGN: "when the parent context ends … while a subtask is still running … Join returns that cause —
// errors.Is(err, context.Canceled) (or the parent's own cause)".
func TestScopeParentCancelWhileRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		s := scope.Open(parent)
		defer s.Close()
		st := scope.Fork(s, func(ctx context.Context) (int, error) { <-ctx.Done(); return 0, ctx.Err() })
		synctest.Wait()
		cancel()
		err := s.Join()
		require.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, scope.Cancelled, st.State())
	})
}

func TestScopeParentCancelCause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		parent, cancel := context.WithCancelCause(context.Background())
		s := scope.Open(parent)
		defer s.Close()
		st := scope.Fork(s, func(ctx context.Context) (int, error) { <-ctx.Done(); return 0, ctx.Err() })
		synctest.Wait()
		myCause := errors.New("client went away")
		cancel(myCause)
		err := s.Join()
		require.ErrorIs(t, err, myCause, "Join returns the parent's own cause")
		assert.Equal(t, scope.Cancelled, st.State())
		assert.True(t, isSame(context.Cause(s.Context()), st.Err()))
	})
}

// DESIGN: "… joined with any failures that happened before"
func TestScopeParentCancelJoinedWithEarlierFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		s := scope.Open(parent, scope.AwaitAll())
		defer s.Close()
		e1 := errors.New("e1")
		scope.Fork(s, func(ctx context.Context) (int, error) { return 0, e1 })
		scope.Fork(s, func(ctx context.Context) (int, error) { <-ctx.Done(); return 0, ctx.Err() })
		synctest.Wait()
		cancel()
		err := s.Join()
		require.ErrorIs(t, err, context.Canceled)
		require.ErrorIs(t, err, e1)
	})
}

func TestScopeTimeoutJoinedWithEarlierFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := scope.Open(context.Background(), scope.AwaitAll(), scope.WithTimeout(time.Minute))
		defer s.Close()
		e1 := errors.New("e1")
		scope.Fork(s, func(ctx context.Context) (int, error) { return 0, e1 })
		scope.Fork(s, func(ctx context.Context) (int, error) { <-ctx.Done(); return 0, ctx.Err() })
		err := s.Join()
		require.ErrorIs(t, err, scope.ErrTimeout)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.ErrorIs(t, err, e1)
	})
}

// DESIGN: "An outside end after every subtask had completed changes nothing (also with no subtasks at
// all), though the scope's context is done either way."
func TestScopeOutsideEndAfterAllCompletedChangesNothing(t *testing.T) {
	t.Run("parent cancel", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			parent, cancel := context.WithCancel(context.Background())
			s := scope.Open(parent)
			defer s.Close()
			st := scope.Fork(s, func(ctx context.Context) (int, error) { return 4, nil })
			synctest.Wait()
			cancel()
			synctest.Wait()
			assert.Error(t, s.Context().Err(), "scope context is done either way")
			require.NoError(t, s.Join())
			assert.Equal(t, scope.Succeeded, st.State())
			assert.Equal(t, 4, st.Get())
		})
	})
	t.Run("parent cancel with AwaitAll failure", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			parent, cancel := context.WithCancel(context.Background())
			s := scope.Open(parent, scope.AwaitAll())
			defer s.Close()
			e1 := errors.New("e1")
			scope.Fork(s, func(ctx context.Context) (int, error) { return 0, e1 })
			synctest.Wait()
			cancel()
			err := s.Join()
			require.ErrorIs(t, err, e1)
			assert.NotErrorIs(t, err, context.Canceled)
		})
	})
	t.Run("parent cancel no subtasks", func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		s := scope.Open(parent)
		defer s.Close()
		cancel()
		require.NoError(t, s.Join())
		assert.Error(t, s.Context().Err())
	})
	t.Run("parent cancel no subtasks FirstSuccess", func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		s := scope.Open(parent, scope.FirstSuccess())
		defer s.Close()
		cancel()
		err := s.Join()
		require.ErrorIs(t, err, scope.ErrNoSubtasks, "nothing was running: the policy's result stands")
		assert.NotErrorIs(t, err, context.Canceled)
	})
	t.Run("timeout", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := scope.Open(context.Background(), scope.WithTimeout(time.Second))
			defer s.Close()
			st := scope.Fork(s, func(ctx context.Context) (int, error) { return 4, nil })
			time.Sleep(time.Minute)
			assert.Error(t, s.Context().Err(), "scope context is done after the deadline")
			require.NoError(t, s.Join())
			assert.Equal(t, 4, st.Get())
		})
	})
	t.Run("timeout no subtasks", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := scope.Open(context.Background(), scope.WithTimeout(time.Second))
			defer s.Close()
			time.Sleep(time.Minute)
			require.NoError(t, s.Join())
			assert.Error(t, s.Context().Err())
		})
	})
}

// DESIGN: "(or before a later fork)": outside end with nothing running, then a Fork.
func TestScopeOutsideEndThenLaterFork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		s := scope.Open(parent)
		defer s.Close()
		first := scope.Fork(s, func(ctx context.Context) (int, error) { return 1, nil })
		synctest.Wait()
		cancel()
		synctest.Wait()
		var ran atomic.Bool
		later := scope.Fork(s, func(ctx context.Context) (int, error) { ran.Store(true); return 2, nil })
		err := s.Join()
		require.ErrorIs(t, err, context.Canceled)
		assert.False(t, ran.Load())
		assert.Equal(t, scope.Cancelled, later.State())
		assert.Equal(t, scope.Succeeded, first.State())
	})
}

// DESIGN: "A decision the policy made first (FailFast's first failure, FirstSuccess's success) stands."
func TestScopePolicyDecisionStands(t *testing.T) {
	t.Run("FailFast then parent cancel", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			parent, cancel := context.WithCancel(context.Background())
			s := scope.Open(parent)
			defer s.Close()
			firstErr := errors.New("first")
			scope.Fork(s, func(ctx context.Context) (int, error) { time.Sleep(time.Hour); return 0, nil })
			scope.Fork(s, func(ctx context.Context) (int, error) { return 0, firstErr })
			synctest.Wait()
			cancel()
			err := s.Join()
			require.ErrorIs(t, err, firstErr)
			assert.NotErrorIs(t, err, context.Canceled)
		})
	})
	t.Run("FailFast then timeout", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := scope.Open(context.Background(), scope.WithTimeout(time.Second))
			defer s.Close()
			firstErr := errors.New("first")
			scope.Fork(s, func(ctx context.Context) (int, error) { time.Sleep(time.Hour); return 0, nil })
			scope.Fork(s, func(ctx context.Context) (int, error) { return 0, firstErr })
			err := s.Join()
			require.ErrorIs(t, err, firstErr)
			assert.NotErrorIs(t, err, scope.ErrTimeout)
		})
	})
	t.Run("FirstSuccess then parent cancel", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			parent, cancel := context.WithCancel(context.Background())
			s := scope.Open(parent, scope.FirstSuccess())
			defer s.Close()
			scope.Fork(s, func(ctx context.Context) (int, error) { time.Sleep(time.Hour); return 0, nil })
			win := scope.Fork(s, func(ctx context.Context) (int, error) { return 1, nil })
			synctest.Wait()
			cancel()
			require.NoError(t, s.Join())
			assert.Equal(t, 1, win.Get())
		})
	})
}

// ---------------------------------------------------------------------------
// WithTimeout
// ---------------------------------------------------------------------------

// DESIGN: "if the deadline passes while any subtask is still running … Join returns an error matching
// both scope.ErrTimeout and context.DeadlineExceeded; … subtasks that succeeded before the deadline
// keep their results."
func TestScopeTimeoutWhileRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		s := scope.Open(context.Background(), scope.WithTimeout(2*time.Second))
		defer s.Close()
		fast := scope.Fork(s, func(ctx context.Context) (int, error) { time.Sleep(time.Second); return 9, nil })
		var cancelledAt time.Time
		slow := scope.Fork(s, func(ctx context.Context) (int, error) {
			<-ctx.Done()
			cancelledAt = time.Now()
			return 0, ctx.Err()
		})
		err := s.Join()
		require.ErrorIs(t, err, scope.ErrTimeout)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, 2*time.Second, cancelledAt.Sub(start), "the clock starts at Open")
		assert.Equal(t, scope.Succeeded, fast.State(), "results before the deadline are kept")
		assert.Equal(t, 9, fast.Get())
		assert.Equal(t, scope.Cancelled, slow.State())
		assert.True(t, isSame(context.Cause(s.Context()), slow.Err()))
	})
}

// DESIGN: "or a subtask is forked after it"
func TestScopeTimeoutForkAfterDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := scope.Open(context.Background(), scope.WithTimeout(time.Second))
		defer s.Close()
		time.Sleep(2 * time.Second)
		var ran atomic.Bool
		st := scope.Fork(s, func(ctx context.Context) (int, error) { ran.Store(true); return 1, nil })
		err := s.Join()
		require.ErrorIs(t, err, scope.ErrTimeout)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, scope.Cancelled, st.State())
		assert.False(t, ran.Load())
	})
}

// DESIGN: "d ≤ 0 is already expired, like context.WithTimeout".
func TestScopeTimeoutNonPositiveAlreadyExpired(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		t.Run(d.String(), func(t *testing.T) {
			s := scope.Open(context.Background(), scope.WithTimeout(d))
			defer s.Close()
			require.Error(t, s.Context().Err(), "scope context is done at once")
			var ran atomic.Bool
			st := scope.Fork(s, func(ctx context.Context) (int, error) { ran.Store(true); return 1, nil })
			err := s.Join()
			require.ErrorIs(t, err, scope.ErrTimeout)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			assert.Equal(t, scope.Cancelled, st.State())
			assert.False(t, ran.Load())
		})
		t.Run(d.String()+"/no subtasks", func(t *testing.T) {
			s := scope.Open(context.Background(), scope.WithTimeout(d))
			defer s.Close()
			require.NoError(t, s.Join(), "no subtask was running or forked after the deadline")
		})
	}
}

// ---------------------------------------------------------------------------
// WithLimit
// ---------------------------------------------------------------------------

// DESIGN: "WithLimit(n int) (n ≥ 1, else panic …)"
func TestScopeWithLimitBelowOnePanics(t *testing.T) {
	for _, n := range []int{0, -1} {
		_, ok := panicMsg(func() {
			s := scope.Open(context.Background(), scope.WithLimit(n))
			s.Close()
		})
		assert.True(t, ok, "WithLimit(%d) must panic", n)
	}
	msg, _ := panicMsg(func() { scope.Open(context.Background(), scope.WithLimit(0)).Close() })
	assert.True(t, strings.HasPrefix(msg, "scope:"), "panic message should be prefixed with the package: %q", msg)
}

// DESIGN: "at most n subtasks running; Fork blocks until a slot frees"
func TestScopeWithLimitBoundsRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := scope.Open(context.Background(), scope.WithLimit(2))
		defer s.Close()
		var cur, peak atomic.Int32
		var sts []*scope.Subtask[int]
		for i := range 7 {
			sts = append(sts, scope.Fork(s, func(ctx context.Context) (int, error) {
				n := cur.Add(1)
				for {
					p := peak.Load()
					if n <= p || peak.CompareAndSwap(p, n) {
						break
					}
				}
				time.Sleep(time.Second)
				cur.Add(-1)
				return i, nil
			}))
		}
		require.NoError(t, s.Join())
		assert.Equal(t, int32(2), peak.Load())
		for i, st := range sts {
			assert.Equal(t, i, st.Get())
		}
	})
}

func TestScopeWithLimitForkBlocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := scope.Open(context.Background(), scope.WithLimit(1))
		defer s.Close()
		release := make(chan struct{})
		scope.Fork(s, func(ctx context.Context) (int, error) { <-release; return 1, nil })
		var released atomic.Bool
		go func() {
			time.Sleep(time.Second)
			released.Store(true)
			close(release)
		}()
		start := time.Now()
		st := scope.Fork(s, func(ctx context.Context) (int, error) { return 2, nil })
		assert.True(t, released.Load(), "Fork must block until a slot frees")
		assert.Equal(t, time.Second, time.Since(start))
		require.NoError(t, s.Join())
		assert.Equal(t, 2, st.Get())
	})
}

// DESIGN: "returns a Cancelled subtask without running fn if the scope is cancelled while it waits"
func TestScopeWithLimitBlockedForkCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		s := scope.Open(parent, scope.WithLimit(1))
		defer s.Close()
		scope.Fork(s, func(ctx context.Context) (int, error) { <-ctx.Done(); return 0, ctx.Err() })
		go func() {
			time.Sleep(time.Second)
			cancel()
		}()
		var ran atomic.Bool
		st := scope.Fork(s, func(ctx context.Context) (int, error) { ran.Store(true); return 2, nil })
		assert.Equal(t, scope.Cancelled, st.State())
		require.ErrorIs(t, s.Join(), context.Canceled)
		assert.False(t, ran.Load())
	})
}

// DESIGN: "a panicking subtask … cancels the scope at once (siblings and blocked forks see it
// immediately, not at Join)."
func TestScopeWithLimitBlockedForkSeesPanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := scope.Open(context.Background(), scope.WithLimit(1))
		defer s.Close()
		scope.Fork(s, func(ctx context.Context) (int, error) {
			time.Sleep(time.Second)
			panic("boom")
		})
		var ran atomic.Bool
		st := scope.Fork(s, func(ctx context.Context) (int, error) { ran.Store(true); return 2, nil })
		assert.Equal(t, scope.Cancelled, st.State())
		assert.False(t, ran.Load())
		r := catch(func() { _ = s.Join() })
		_, ok := r.(*scope.PanicError)
		assert.True(t, ok, "Join re-panics with *PanicError, got %T", r)
	})
}

// ---------------------------------------------------------------------------
// Panics and Goexit
// ---------------------------------------------------------------------------

func TestScopePanicCancelsSiblingsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := scope.Open(context.Background())
		defer s.Close()
		saw := make(chan struct{})
		scope.Fork(s, func(ctx context.Context) (int, error) {
			<-ctx.Done()
			close(saw)
			return 0, nil
		})
		scope.Fork(s, func(ctx context.Context) (int, error) { panic("boom") })
		select {
		case <-saw:
		case <-time.After(time.Hour):
			t.Fatal("sibling did not see the panic before Join")
		}
		r := catch(func() { _ = s.Join() })
		require.NotNil(t, r)
	})
}

// DESIGN: "By default Join re-panics in the owner's goroutine, after all subtasks have returned, with
// the first *scope.PanicError (fields Value any and Stack []byte, the child's stack)".
func TestScopeJoinRepanicsWithPanicError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := scope.Open(context.Background())
		defer s.Close()
		var finished atomic.Bool
		scope.Fork(s, func(ctx context.Context) (int, error) {
			<-ctx.Done()
			time.Sleep(time.Hour)
			finished.Store(true)
			return 0, nil
		})
		st := scope.Fork(s, func(ctx context.Context) (int, error) { return panickingHelper() })
		r := catch(func() { _ = s.Join() })
		require.NotNil(t, r, "Join must re-panic")
		assert.True(t, finished.Load(), "re-panic only after all subtasks returned")
		pe, ok := r.(*scope.PanicError)
		require.True(t, ok, "panic value should be *scope.PanicError, got %T", r)
		assert.Equal(t, "boom-value", pe.Value)
		assert.NotEmpty(t, pe.Stack)
		assert.Contains(t, string(pe.Stack), "panickingHelper", "Stack is the child's stack")
		assert.NotEmpty(t, pe.Error())
		assert.NoError(t, pe.Unwrap(), "Unwrap is nil when Value is not an error")
		assert.Equal(t, scope.Failed, st.State())
		var stPE *scope.PanicError
		require.ErrorAs(t, st.Err(), &stPE)
	})
}

type customErr struct{ msg string }

func (e *customErr) Error() string { return e.msg }

// DESIGN: "Unwrap returns Value when it is an error, so errors.Is/As reach it"
func TestScopePanicErrorUnwrap(t *testing.T) {
	sentinel := &customErr{"sentinel"}
	s := scope.Open(context.Background(), scope.PanicsAsErrors())
	defer s.Close()
	scope.Fork(s, func(ctx context.Context) (int, error) { panic(sentinel) })
	err := s.Join()
	var pe *scope.PanicError
	require.ErrorAs(t, err, &pe, "with PanicsAsErrors Join returns the *PanicError")
	assert.True(t, pe.Value == error(sentinel))
	assert.True(t, pe.Unwrap() == error(sentinel))
	assert.ErrorIs(t, err, sentinel)
	var ce *customErr
	require.ErrorAs(t, err, &ce)
	assert.Same(t, sentinel, ce)
}

// DESIGN: "With PanicsAsErrors() a panic is an ordinary failure (it competes for "first failure" like
// any error)" and "Join returns that *PanicError as its error instead."
func TestScopePanicsAsErrorsCompetes(t *testing.T) {
	t.Run("panic first", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := scope.Open(context.Background(), scope.PanicsAsErrors())
			defer s.Close()
			later := errors.New("later")
			scope.Fork(s, func(ctx context.Context) (int, error) { panic("boom") })
			scope.Fork(s, func(ctx context.Context) (int, error) { time.Sleep(time.Hour); return 0, later })
			var err error
			require.NotPanics(t, func() { err = s.Join() })
			var pe *scope.PanicError
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, "boom", pe.Value)
			assert.NotErrorIs(t, err, later)
			assert.True(t, isSame(err, context.Cause(s.Context())) || errors.Is(context.Cause(s.Context()), pe))
		})
	})
	t.Run("error first", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := scope.Open(context.Background(), scope.PanicsAsErrors())
			defer s.Close()
			first := errors.New("first")
			scope.Fork(s, func(ctx context.Context) (int, error) { return 0, first })
			scope.Fork(s, func(ctx context.Context) (int, error) { time.Sleep(time.Hour); panic("boom") })
			var err error
			require.NotPanics(t, func() { err = s.Join() })
			require.ErrorIs(t, err, first)
			// Round 2 ruling: "every *PanicError of the scope (also those of subtasks that
			// panicked after cancellation) is in Join's error (errors.Join of the policy's result
			// and the panics, in completion order)."
			var pe *scope.PanicError
			require.ErrorAs(t, err, &pe, "the later panic is never lost")
			joined, ok := err.(interface{ Unwrap() []error })
			require.True(t, ok)
			assert.Same(t, first, joined.Unwrap()[0], "the policy's result comes first")
		})
	})
	t.Run("AwaitAll", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := scope.Open(context.Background(), scope.PanicsAsErrors(), scope.AwaitAll())
			defer s.Close()
			e1 := errors.New("e1")
			scope.Fork(s, func(ctx context.Context) (int, error) { return 0, e1 })
			synctest.Wait() // e1 completes before the panic cancels the scope
			scope.Fork(s, func(ctx context.Context) (int, error) { panic("boom") })
			var err error
			require.NotPanics(t, func() { err = s.Join() })
			require.ErrorIs(t, err, e1)
			var pe *scope.PanicError
			require.ErrorAs(t, err, &pe)
		})
	})
}

// DESIGN: "A panicking subtask is a failure and cancels the scope at once" — also with AwaitAll, and
// Join re-panics.
func TestScopePanicCancelsEvenAwaitAll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := scope.Open(context.Background(), scope.AwaitAll())
		defer s.Close()
		sib := scope.Fork(s, func(ctx context.Context) (int, error) { <-ctx.Done(); return 0, ctx.Err() })
		scope.Fork(s, func(ctx context.Context) (int, error) { panic("boom") })
		r := catch(func() { _ = s.Join() })
		_, ok := r.(*scope.PanicError)
		require.True(t, ok, "got %T", r)
		assert.Equal(t, scope.Cancelled, sib.State())
	})
}

// DESIGN: "runtime.Goexit in a subtask (e.g. t.FailNow) is a failure with scope.ErrGoexit; Join never
// hangs on it."
func TestScopeGoexit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := scope.Open(context.Background())
		defer s.Close()
		sib := scope.Fork(s, func(ctx context.Context) (int, error) { <-ctx.Done(); return 0, ctx.Err() })
		st := scope.Fork(s, func(ctx context.Context) (int, error) { runtime.Goexit(); return 0, nil })
		err := s.Join()
		require.ErrorIs(t, err, scope.ErrGoexit)
		assert.Equal(t, scope.Failed, st.State())
		assert.ErrorIs(t, st.Err(), scope.ErrGoexit)
		assert.Equal(t, scope.Cancelled, sib.State(), "Goexit is a failure: FailFast cancels siblings")
	})
}

func TestScopeGoexitAwaitAll(t *testing.T) {
	s := scope.Open(context.Background(), scope.AwaitAll())
	defer s.Close()
	ok := scope.Fork(s, func(ctx context.Context) (int, error) { return 1, nil })
	scope.Fork(s, func(ctx context.Context) (int, error) { runtime.Goexit(); return 0, nil })
	err := s.Join()
	require.ErrorIs(t, err, scope.ErrGoexit)
	assert.Equal(t, 1, ok.Get())
}

// ---------------------------------------------------------------------------
// Scoped values and nesting
// ---------------------------------------------------------------------------

// DESIGN: "forks see exactly the bindings of the ctx given to Open, whatever the owner binds later".
func TestScopeForksSeeOpenBindings(t *testing.T) {
	reqID := scopedvalue.New[string]("request-id")
	other := scopedvalue.New[int]("other")
	scopedvalue.Where(reqID, "a").Run(context.Background(), func(ctx context.Context) {
		s := scope.Open(ctx)
		defer s.Close()
		scopedvalue.Where(reqID, "b").And(scopedvalue.Where(other, 1)).Run(ctx, func(ctx2 context.Context) {
			st := scope.Fork(s, func(ctx context.Context) (string, error) {
				return reqID.Get(ctx), nil
			})
			bound := scope.Fork(s, func(ctx context.Context) (bool, error) { return other.IsBound(ctx), nil })
			require.NoError(t, s.Join())
			assert.Equal(t, "a", st.Get())
			assert.False(t, bound.Get())
		})
	})
}

// DESIGN: "a scope opened with a subtask's ctx is a child of that scope; cancellation flows down".
func TestScopeNested(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		outer := scope.Open(context.Background())
		defer outer.Close()
		firstErr := errors.New("outer failure")
		var innerErr error
		var innerSt *scope.Subtask[int]
		scope.Fork(outer, func(ctx context.Context) (int, error) {
			inner := scope.Open(ctx)
			defer inner.Close()
			innerSt = scope.Fork(inner, func(ctx context.Context) (int, error) { <-ctx.Done(); return 0, ctx.Err() })
			innerErr = inner.Join()
			return 0, innerErr
		})
		synctest.Wait()
		scope.Fork(outer, func(ctx context.Context) (int, error) { return 0, firstErr })
		require.ErrorIs(t, outer.Join(), firstErr)
		require.Error(t, innerErr)
		assert.True(t, errors.Is(innerErr, firstErr) || errors.Is(innerErr, context.Canceled),
			"inner Join returns the parent's cause: %v", innerErr)
		assert.Equal(t, scope.Cancelled, innerSt.State())
	})
}

// ---------------------------------------------------------------------------
// All, Race, Map
// ---------------------------------------------------------------------------

// DESIGN: "All[T](ctx, fns...) ([]T, error) (results in input order, fail fast)"
func TestAllInputOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var fns []func(context.Context) (int, error)
		for i := range 5 {
			fns = append(fns, func(ctx context.Context) (int, error) {
				time.Sleep(time.Duration(5-i) * time.Second) // finish in reverse order
				return i * 10, nil
			})
		}
		got, err := scope.All(context.Background(), fns...)
		require.NoError(t, err)
		assert.Equal(t, []int{0, 10, 20, 30, 40}, got)
	})
}

func TestAllFailFast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		boom := errors.New("boom")
		var cancelled atomic.Int32
		start := time.Now()
		_, err := scope.All(context.Background(),
			func(ctx context.Context) (int, error) {
				select {
				case <-ctx.Done():
					cancelled.Add(1)
					return 0, ctx.Err()
				case <-time.After(time.Hour):
					return 1, nil
				}
			},
			func(ctx context.Context) (int, error) { time.Sleep(time.Second); return 0, boom },
		)
		require.ErrorIs(t, err, boom)
		assert.Equal(t, int32(1), cancelled.Load())
		assert.Equal(t, time.Second, time.Since(start))
	})
}

// DESIGN: "Race[T](ctx, fns...) (T, error) (first success, cancel the rest)"
func TestRaceFirstSuccess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var cancelled atomic.Int32
		v, err := scope.Race(context.Background(),
			func(ctx context.Context) (string, error) { return "", errors.New("fast failure") },
			func(ctx context.Context) (string, error) { time.Sleep(time.Second); return "winner", nil },
			func(ctx context.Context) (string, error) {
				<-ctx.Done()
				cancelled.Add(1)
				return "loser", nil
			},
		)
		require.NoError(t, err)
		assert.Equal(t, "winner", v)
		assert.Equal(t, int32(1), cancelled.Load())
	})
}

func TestRaceAllFail(t *testing.T) {
	e1, e2 := errors.New("e1"), errors.New("e2")
	_, err := scope.Race(context.Background(),
		func(ctx context.Context) (int, error) { return 0, e1 },
		func(ctx context.Context) (int, error) { return 0, e2 },
	)
	require.ErrorIs(t, err, e1)
	require.ErrorIs(t, err, e2)
}

// DESIGN: "Map[In, Out](ctx, in, fn, opts...) ([]Out, error)"
func TestMapOrderAndOptions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var cur, peak atomic.Int32
		in := []int{1, 2, 3, 4, 5}
		out, err := scope.Map(context.Background(), in, func(ctx context.Context, x int) (string, error) {
			n := cur.Add(1)
			if n > peak.Load() {
				peak.Store(n)
			}
			time.Sleep(time.Duration(6-x) * time.Second)
			cur.Add(-1)
			return strings.Repeat("x", x), nil
		}, scope.WithLimit(2))
		require.NoError(t, err)
		assert.Equal(t, []string{"x", "xx", "xxx", "xxxx", "xxxxx"}, out)
		assert.LessOrEqual(t, peak.Load(), int32(2), "Map honours WithLimit")
	})
}

func TestMapError(t *testing.T) {
	boom := errors.New("boom")
	_, err := scope.Map(context.Background(), []int{1, 2, 3}, func(ctx context.Context, x int) (int, error) {
		if x == 2 {
			return 0, boom
		}
		return x, nil
	})
	require.ErrorIs(t, err, boom)
}

func TestMapParentCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := scope.Map(ctx, []int{1, 2}, func(ctx context.Context, x int) (int, error) { return x, nil })
	require.ErrorIs(t, err, context.Canceled)
}

// ---------------------------------------------------------------------------
// More edge cases
// ---------------------------------------------------------------------------

// longLived is a parent context that the context package cannot see through, so deriving from it
// costs a goroutine until the child is cancelled: a leak detector for "nothing stays registered".
type longLived struct {
	context.Context
	done chan struct{}
}

func (c longLived) Done() <-chan struct{} { return c.done }

// DESIGN: "When Join returns … the scope's context is done, so nothing stays registered on a long-lived
// parent (like errgroup's Wait)."
func TestScopeJoinUnregistersFromLongLivedParent(t *testing.T) {
	parent := longLived{Context: context.Background(), done: make(chan struct{})}
	defer close(parent.done)
	base := runtime.NumGoroutine()
	s := scope.Open(parent)
	scope.Fork(s, func(ctx context.Context) (int, error) { return 1, nil })
	require.NoError(t, s.Join())
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	assert.LessOrEqual(t, runtime.NumGoroutine(), base, "after Join nothing of the scope stays attached to the parent")
	s.Close()
}

// DESIGN: Close "Never panics for a missing Join" — also when a subtask failed.
func TestScopeCloseWithoutJoinAfterFailureQuiet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := scope.Open(context.Background())
		st := scope.Fork(s, func(ctx context.Context) (int, error) { return 0, errors.New("x") })
		synctest.Wait()
		assert.NotPanics(t, s.Close)
		assert.Equal(t, scope.Failed, st.State())
	})
}

// "joined with any failures that happened before" holds whatever the policy, as long as it has not decided.
func TestScopeOutsideEndJoinedWithFailuresAnyPolicy(t *testing.T) {
	for name, opt := range map[string]func() scope.Option{
		"FirstSuccess": scope.FirstSuccess,
		"CancelWhen":   func() scope.Option { return scope.CancelWhen(func(scope.Task) bool { return false }) },
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				parent, cancel := context.WithCancel(context.Background())
				s := scope.Open(parent, opt())
				defer s.Close()
				e1 := errors.New("e1")
				scope.Fork(s, func(ctx context.Context) (int, error) { return 0, e1 })
				scope.Fork(s, func(ctx context.Context) (int, error) { <-ctx.Done(); return 0, ctx.Err() })
				synctest.Wait()
				cancel()
				err := s.Join()
				require.ErrorIs(t, err, context.Canceled)
				require.ErrorIs(t, err, e1)
			})
		})
	}
}

// FirstSuccess: outside end after all had completed (all failed) changes nothing.
func TestScopeFirstSuccessAllFailedThenOutsideEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		s := scope.Open(parent, scope.FirstSuccess())
		defer s.Close()
		e1 := errors.New("e1")
		scope.Fork(s, func(ctx context.Context) (int, error) { return 0, e1 })
		synctest.Wait()
		cancel()
		err := s.Join()
		require.ErrorIs(t, err, e1)
		assert.NotErrorIs(t, err, context.Canceled)
	})
}

// Custom joiner: an outside end after everything completed changes nothing, so Result is called.
func TestJoinerResultCalledWhenOutsideEndAfterCompletion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		want := errors.New("verdict")
		j := &recJoiner{result: want}
		s := scope.Open(parent, scope.WithJoiner(j))
		defer s.Close()
		scope.Fork(s, func(ctx context.Context) (int, error) { return 1, nil })
		synctest.Wait()
		cancel()
		err := s.Join()
		assert.True(t, isSame(want, err), "got %v", err)
		assert.Equal(t, 1, j.resultCalls)
	})
}

// Subtask.Get's panic is "a clear message": prefixed with the package name (STYLE) and naming the state.
func TestSubtaskGetPanicMessage(t *testing.T) {
	s := scope.Open(context.Background(), scope.AwaitAll())
	defer s.Close()
	st := scope.Fork(s, func(ctx context.Context) (int, error) { return 0, errors.New("x") })
	_ = s.Join()
	msg, ok := panicMsg(func() { st.Get() })
	require.True(t, ok)
	assert.True(t, strings.HasPrefix(msg, "scope:"), "Get panic %q should start with scope:", msg)
	assert.Contains(t, strings.ToLower(msg), "failed", "Get panic %q should name the state", msg)
}

// Helpers are built on the scope: a panic re-panics on the caller's goroutine as *PanicError.
func TestAllRacePanic(t *testing.T) {
	r := catch(func() {
		_, _ = scope.All(context.Background(), func(ctx context.Context) (int, error) { panic("all-boom") })
	})
	pe, ok := r.(*scope.PanicError)
	require.True(t, ok, "All: got %T", r)
	assert.Equal(t, "all-boom", pe.Value)
	r = catch(func() {
		_, _ = scope.Race(context.Background(), func(ctx context.Context) (int, error) { panic("race-boom") })
	})
	pe, ok = r.(*scope.PanicError)
	require.True(t, ok, "Race: got %T", r)
	assert.Equal(t, "race-boom", pe.Value)
	r = catch(func() {
		_, _ = scope.Map(context.Background(), []int{1}, func(ctx context.Context, x int) (int, error) { panic("map-boom") })
	})
	pe, ok = r.(*scope.PanicError)
	require.True(t, ok, "Map: got %T", r)
	assert.Equal(t, "map-boom", pe.Value)
}

// Map passes its options to the scope: AwaitAll collects every failure; PanicsAsErrors returns a panic.
func TestMapOptionsPolicy(t *testing.T) {
	e1, e3 := errors.New("e1"), errors.New("e3")
	_, err := scope.Map(context.Background(), []int{1, 2, 3}, func(ctx context.Context, x int) (int, error) {
		switch x {
		case 1:
			return 0, e1
		case 3:
			return 0, e3
		}
		return x, nil
	}, scope.AwaitAll())
	require.ErrorIs(t, err, e1)
	require.ErrorIs(t, err, e3)

	_, err = scope.Map(context.Background(), []int{1}, func(ctx context.Context, x int) (int, error) { panic("p") },
		scope.PanicsAsErrors())
	var pe *scope.PanicError
	require.ErrorAs(t, err, &pe)
}

// Race returns the first success, not a later one.
func TestRaceFirstOfSeveralSuccesses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v, err := scope.Race(context.Background(),
			func(ctx context.Context) (string, error) { time.Sleep(2 * time.Second); return "second", nil },
			func(ctx context.Context) (string, error) { time.Sleep(time.Second); return "first", nil },
		)
		require.NoError(t, err)
		assert.Equal(t, "first", v)
	})
}

// Nested: the inner scope's context carries the outer scope's bindings and values.
func TestScopeNestedValuesFlowDown(t *testing.T) {
	k := scopedvalue.New[string]("k")
	ctx := scopedvalue.Where(k, "outer").Context(context.Background())
	outer := scope.Open(ctx)
	defer outer.Close()
	st := scope.Fork(outer, func(ctx context.Context) (string, error) {
		inner := scope.Open(ctx)
		defer inner.Close()
		got := scope.Fork(inner, func(ctx context.Context) (string, error) { return k.Get(ctx), nil })
		if err := inner.Join(); err != nil {
			return "", err
		}
		return got.Get(), nil
	})
	require.NoError(t, outer.Join())
	assert.Equal(t, "outer", st.Get())
}

// DESIGN: Join re-panics "with the first *scope.PanicError".
func TestScopeRepanicsWithFirstPanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := scope.Open(context.Background())
		defer s.Close()
		scope.Fork(s, func(ctx context.Context) (int, error) { time.Sleep(2 * time.Second); panic("second") })
		scope.Fork(s, func(ctx context.Context) (int, error) { time.Sleep(time.Second); panic("first") })
		r := catch(func() { _ = s.Join() })
		pe, ok := r.(*scope.PanicError)
		require.True(t, ok, "got %T", r)
		assert.Equal(t, "first", pe.Value)
	})
}

// Goexit and panics free their WithLimit slot: the scope goes on (AwaitAll / PanicsAsErrors) and never hangs.
func TestScopeWithLimitGoexitFreesSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := scope.Open(context.Background(), scope.WithLimit(1), scope.AwaitAll())
		defer s.Close()
		scope.Fork(s, func(ctx context.Context) (int, error) { runtime.Goexit(); return 0, nil })
		next := scope.Fork(s, func(ctx context.Context) (int, error) { return 2, nil })
		err := s.Join()
		require.ErrorIs(t, err, scope.ErrGoexit)
		assert.Equal(t, 2, next.Get())
	})
}

// DESIGN: "ErrTimeout for the timeout" vs "the parent's own cause" for the parent — a parent deadline is
// the parent's end, not the scope's timeout.
func TestScopeParentDeadlineIsNotScopeTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		parent, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		s := scope.Open(parent, scope.WithTimeout(time.Hour))
		defer s.Close()
		scope.Fork(s, func(ctx context.Context) (int, error) { <-ctx.Done(); return 0, ctx.Err() })
		err := s.Join()
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.NotErrorIs(t, err, scope.ErrTimeout)
	})
	synctest.Test(t, func(t *testing.T) {
		parent, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		s := scope.Open(parent, scope.WithTimeout(time.Second))
		defer s.Close()
		scope.Fork(s, func(ctx context.Context) (int, error) { <-ctx.Done(); return 0, ctx.Err() })
		err := s.Join()
		require.ErrorIs(t, err, scope.ErrTimeout)
		require.ErrorIs(t, err, context.DeadlineExceeded)
	})
}

// Fork after Join and Close both: one of the two documented messages.
func TestScopeForkAfterJoinAndClose(t *testing.T) {
	s := scope.Open(context.Background())
	require.NoError(t, s.Join())
	s.Close()
	msg, ok := panicMsg(func() { scope.Fork(s, func(ctx context.Context) (int, error) { return 0, nil }) })
	require.True(t, ok)
	assert.Contains(t, []string{"scope: fork after join", "scope: fork after close"}, msg)
}

// Helpers with nothing to run: All and Map have no failure (FailFast with no subtasks), Race has ErrNoSubtasks.
func TestHelpersEmpty(t *testing.T) {
	got, err := scope.All[int](context.Background())
	require.NoError(t, err)
	assert.Empty(t, got)
	out, err := scope.Map(context.Background(), []int(nil), func(ctx context.Context, x int) (int, error) { return x, nil })
	require.NoError(t, err)
	assert.Empty(t, out)
}

// Helpers on a cancelled parent: the parent's cause.
func TestHelpersParentCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ran := false
	_, err := scope.All(ctx, func(ctx context.Context) (int, error) { ran = true; return 1, nil })
	require.ErrorIs(t, err, context.Canceled)
	_, err = scope.Race(ctx, func(ctx context.Context) (int, error) { ran = true; return 1, nil })
	require.ErrorIs(t, err, context.Canceled)
	assert.False(t, ran)
}
