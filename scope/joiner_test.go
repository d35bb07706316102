package scope_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/goloom/loom/scope"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// "the default is FailFast()"; "FailFast() — the first failure cancels the siblings (the scope's
// context.Cause is that error); Join returns an error for which errors.Is(err, firstErr) holds
// (siblings' cancellation errors never mask it)."
func TestFailFastFirstFailureCancelsSiblings(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		opts []scope.Option
	}{
		{"default", nil},
		{"explicit", []scope.Option{scope.FailFast()}},
		{"last policy wins", []scope.Option{scope.AwaitAll(), scope.FailFast()}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := scope.Open(t.Context(), tt.opts...)
			defer s.Close()
			started := make(chan struct{})
			sibling := scope.Fork(s, func(ctx context.Context) (int, error) {
				close(started)
				return untilDone(ctx) // returns context.Canceled, which must not mask errA
			})
			<-started
			first := scope.Fork(s, failing(errA))
			err := s.Join()
			require.ErrorIs(t, err, errA)
			assert.NotErrorIs(t, err, context.Canceled)
			assert.Equal(t, errA, context.Cause(s.Context()))
			assert.Equal(t, scope.Failed, first.State())
			assert.Equal(t, scope.Cancelled, sibling.State())
			assert.Equal(t, errA, sibling.Err())
		})
	}
}

// "Cancelled means the subtask had not completed when the scope was cancelled …: its outcome is
// discarded and never counts as a failure; its Err() is the scope's cancellation cause … and
// Result() returns the zero value with that error" — a failure or a success alike. Join still
// waits for a subtask that outlives the cancellation.
func TestFailFastLaterFailuresDoNotCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := scope.Open(t.Context())
		defer s.Close()
		var lateReturned atomic.Bool
		late := scope.Fork(s, func(ctx context.Context) (int, error) {
			<-ctx.Done()
			time.Sleep(time.Second)
			lateReturned.Store(true)
			return 0, errB
		})
		lateOK := scope.Fork(s, func(ctx context.Context) (int, error) {
			<-ctx.Done()
			return 1, nil // completes after the cancellation: discarded even though it returned normally
		})
		scope.Fork(s, failing(errA))
		err := s.Join()
		require.Equal(t, errA, err)
		assert.True(t, lateReturned.Load(), "Join returned while a subtask was still running")
		assert.Equal(t, scope.Cancelled, late.State())
		assert.Equal(t, errA, late.Err(), "its own error is discarded")
		assert.Equal(t, scope.Cancelled, lateOK.State())
		assert.Nil(t, lateOK.Value())
		v, err := lateOK.Result()
		assert.Zero(t, v, "its own result is discarded")
		assert.Equal(t, errA, err)
	})
}

// "AwaitAll() — never cancels; Join returns errors.Join of every failure, nil if none."
func TestAwaitAllJoinsEveryFailure(t *testing.T) {
	t.Parallel()
	s := scope.Open(t.Context(), scope.AwaitAll())
	defer s.Close()
	a := scope.Fork(s, failing(errA))
	<-waitDone(a)
	ok := scope.Fork(s, value(1))
	b := scope.Fork(s, failing(errB))
	err := s.Join()
	require.ErrorIs(t, err, errA)
	require.ErrorIs(t, err, errB)
	assert.ElementsMatch(t, []error{errA, errB}, unwrapAll(err), "every failure and nothing else")
	assert.Equal(t, 1, ok.Get(), "AwaitAll never cancels")
	assert.Equal(t, scope.Failed, b.State())
	assert.Error(t, s.Context().Err(), "the context is done after Join")

	none := scope.Open(t.Context(), scope.AwaitAll())
	defer none.Close()
	scope.Fork(none, value(1))
	assert.NoError(t, none.Join())
}

// waitDone returns a channel closed once t is no longer Running.
func waitDone(t scope.Task) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		for t.State() == scope.Running {
			time.Sleep(time.Millisecond)
		}
		close(ch)
	}()
	return ch
}

// "FirstSuccess() — a failure does not short-circuit; the first success cancels the rest; Join
// returns nil if any succeeded, else errors.Join of the failures; with nothing forked, an error
// matching scope.ErrNoSubtasks (so does Race with no functions)."
func TestFirstSuccess(t *testing.T) {
	t.Run("failure does not short-circuit; first success cancels the rest", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := scope.Open(t.Context(), scope.FirstSuccess())
			defer s.Close()
			bad := scope.Fork(s, failing(errA))
			slow := scope.Fork(s, func(ctx context.Context) (int, error) {
				select {
				case <-time.After(time.Hour):
					return 3, nil
				case <-ctx.Done():
					return 0, ctx.Err()
				}
			})
			win := scope.Fork(s, func(context.Context) (int, error) {
				time.Sleep(time.Second)
				return 2, nil
			})
			require.NoError(t, s.Join())
			assert.Equal(t, scope.Failed, bad.State())
			assert.Equal(t, 2, win.Get())
			assert.Equal(t, scope.Cancelled, slow.State())
			assert.Equal(t, time.Second, time.Since(synctestStart(t)).Round(time.Second))
		})
	})
	t.Run("a success after the win is discarded", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := scope.Open(t.Context(), scope.FirstSuccess())
			defer s.Close()
			first := scope.Fork(s, value(1))
			second := scope.Fork(s, func(ctx context.Context) (int, error) {
				<-ctx.Done()
				return 2, nil
			})
			require.NoError(t, s.Join())
			assert.Equal(t, 1, first.Get())
			assert.Equal(t, scope.Cancelled, second.State())
		})
	})
	t.Run("all fail", func(t *testing.T) {
		t.Parallel()
		s := scope.Open(t.Context(), scope.FirstSuccess())
		defer s.Close()
		scope.Fork(s, failing(errA))
		scope.Fork(s, failing(errB))
		err := s.Join()
		require.ErrorIs(t, err, errA)
		require.ErrorIs(t, err, errB)
		assert.NotErrorIs(t, err, scope.ErrNoSubtasks)
	})
	t.Run("nothing forked", func(t *testing.T) {
		t.Parallel()
		s := scope.Open(t.Context(), scope.FirstSuccess())
		defer s.Close()
		require.ErrorIs(t, s.Join(), scope.ErrNoSubtasks)
	})
}

// synctestStart is the bubble's epoch: synctest starts every bubble at the same fake instant.
func synctestStart(*testing.T) time.Time { return time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC) }

// "CancelWhen(func(Task) bool) — cancels when the predicate holds for a completed subtask; Join
// returns nil unless the scope ended from outside." The predicate sees failures too.
func TestCancelWhen(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	s := scope.Open(t.Context(), scope.CancelWhen(func(t scope.Task) bool {
		calls.Add(1)
		return t.State() == scope.Succeeded && t.Value() == "stop"
	}))
	defer s.Close()
	bad := scope.Fork(s, failing(errA)) // a failure alone does not cancel, nor show in Join's error
	<-waitDone(bad)
	started := make(chan struct{})
	waiting := scope.Fork(s, func(ctx context.Context) (int, error) {
		close(started)
		return untilDone(ctx)
	})
	<-started
	scope.Fork(s, value("stop"))
	require.NoError(t, s.Join())
	assert.Equal(t, scope.Cancelled, waiting.State())
	assert.ErrorIs(t, waiting.Err(), context.Canceled)
	assert.Equal(t, int32(2), calls.Load(), "once per completion before cancellation, never for the Cancelled")

	require.PanicsWithValue(t, "scope: CancelWhen: nil predicate", func() { scope.CancelWhen(nil) })
}

// CancelWhen's "Join returns nil unless the scope ended from outside".
func TestCancelWhenEndedFromOutside(t *testing.T) {
	t.Parallel()
	parent, cancel := context.WithCancel(t.Context())
	s := scope.Open(parent, scope.CancelWhen(func(scope.Task) bool { return false }))
	defer s.Close()
	started := make(chan struct{})
	scope.Fork(s, func(ctx context.Context) (int, error) { close(started); return untilDone(ctx) })
	<-started
	cancel()
	require.ErrorIs(t, s.Join(), context.Canceled)
}

// recorder is a Joiner that records every call.
type recorder struct {
	rejectFork  error                 // OnFork's answer
	cancelOn    func(scope.Task) bool // OnComplete's answer
	result      error                 // Result's answer
	mu          sync.Mutex
	forks       []scope.Task
	completions map[scope.Task]int
	inComplete  atomic.Int32 // concurrent OnComplete calls right now
	maxParallel atomic.Int32
	results     atomic.Int32
}

func newRecorder() *recorder { return &recorder{completions: map[scope.Task]int{}} }

func (r *recorder) OnFork(t scope.Task) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forks = append(r.forks, t)
	return r.rejectFork
}

func (r *recorder) OnComplete(t scope.Task) bool {
	n := r.inComplete.Add(1)
	defer r.inComplete.Add(-1)
	for m := r.maxParallel.Load(); n > m && !r.maxParallel.CompareAndSwap(m, n); m = r.maxParallel.Load() {
	}
	r.mu.Lock()
	r.completions[t]++
	r.mu.Unlock()
	return r.cancelOn != nil && r.cancelOn(t)
}

func (r *recorder) Result() error {
	r.results.Add(1)
	return r.result
}

// "When OnFork returns an error, fn never runs and the subtask is Failed with that error (and handed
// to OnComplete)."
func TestWithJoinerOnForkRejects(t *testing.T) {
	t.Parallel()
	errNo := errors.New("no more forks")
	r := newRecorder()
	r.rejectFork = errNo
	s := scope.Open(t.Context(), scope.WithJoiner(r))
	defer s.Close()
	ran := false
	st := scope.Fork(s, func(context.Context) (int, error) { ran = true; return 1, nil })
	assert.Equal(t, scope.Failed, st.State())
	assert.Equal(t, errNo, st.Err())
	require.NoError(t, s.Join())
	assert.False(t, ran, "fn never runs")
	assert.Equal(t, 1, r.completions[st], "handed to OnComplete")
	assert.Equal(t, int32(1), r.results.Load())
}

// "returning true cancels the scope"; "A fork after cancellation still calls OnFork, then is
// Cancelled"; OnComplete runs "never for Cancelled ones"; "A fork on a cancelled scope is Cancelled
// whatever OnFork returns"; "Result is called once, by the first Join, and is what Join returns".
func TestWithJoinerForkAfterCancellation(t *testing.T) {
	t.Parallel()
	r := newRecorder()
	r.cancelOn = func(t scope.Task) bool { return t.State() == scope.Failed }
	r.result = errB
	s := scope.Open(t.Context(), scope.WithJoiner(r))
	defer s.Close()
	bad := scope.Fork(s, failing(errA))
	<-s.Context().Done()
	late := scope.Fork(s, value(1))
	r.rejectFork = errors.New("ignored on a cancelled scope")
	rejected := scope.Fork(s, value(2))
	assert.Equal(t, scope.Cancelled, late.State())
	assert.Equal(t, scope.Cancelled, rejected.State(), "Cancelled whatever OnFork returns")
	assert.Equal(t, errA, late.Err(), "the cause is the failure OnComplete cancelled for")
	require.Equal(t, errB, s.Join(), "Join returns Result")
	assert.Same(t, errB, s.Join())
	assert.Equal(t, int32(1), r.results.Load(), "Result is called once")
	assert.Equal(t, []scope.Task{bad, late, rejected}, r.forks, "OnFork is called for every fork")
	assert.Equal(t, map[scope.Task]int{bad: 1}, r.completions, "never for Cancelled subtasks")
}

// "OnComplete runs exactly once for each subtask that completes before cancellation, possibly
// concurrently"; "Result is called once, by the first Join, and is what Join returns" — nil here,
// whatever failed.
func TestWithJoinerOnCompleteOncePerCompletion(t *testing.T) {
	t.Parallel()
	r := newRecorder()
	s := scope.Open(t.Context(), scope.WithJoiner(r))
	defer s.Close()
	const n = 200
	gate := make(chan struct{})
	var sts []*scope.Subtask[int]
	for i := range n {
		sts = append(sts, scope.Fork(s, func(context.Context) (int, error) {
			<-gate
			if i%3 == 0 {
				return 0, errA
			}
			return i, nil
		}))
	}
	close(gate)
	require.NoError(t, s.Join())
	require.Len(t, r.completions, n)
	for _, st := range sts {
		assert.Equal(t, 1, r.completions[st])
	}
	assert.Equal(t, int32(1), r.results.Load())
	require.NoError(t, s.Join())
	assert.Equal(t, int32(1), r.results.Load(), "Result is called once, by the first Join")
	t.Logf("at most %d OnComplete calls ran at once", r.maxParallel.Load())
}

// "Result … is what Join returns (unless the scope ended from outside)"; ended from outside, "Result
// is not called".
func TestWithJoinerResultNotCalledWhenEndedFromOutside(t *testing.T) {
	t.Parallel()
	r := newRecorder()
	parent, cancel := context.WithCancelCause(t.Context())
	errParent := errors.New("client went away")
	s := scope.Open(parent, scope.WithJoiner(r))
	defer s.Close()
	started := make(chan struct{})
	st := scope.Fork(s, func(ctx context.Context) (int, error) { close(started); return untilDone(ctx) })
	<-started
	cancel(errParent)
	err := s.Join()
	require.ErrorIs(t, err, errParent, "the parent's own cause")
	assert.Equal(t, int32(0), r.results.Load())
	assert.Equal(t, scope.Cancelled, st.State())
	assert.Empty(t, r.completions)

	require.PanicsWithValue(t, "scope: WithJoiner: nil Joiner", func() { scope.WithJoiner(nil) })
}

func TestJoinerPanicIsKept(t *testing.T) {
	t.Parallel()
	s := scope.Open(t.Context(), scope.CancelWhen(func(scope.Task) bool { panic("bad predicate") }))
	defer s.Close()
	scope.Fork(s, value(1))
	pe := joinPanic(t, s)
	assert.Equal(t, "bad predicate", pe.Value)
}

// panicky is a Joiner whose methods panic on demand.
type panicky struct {
	onFork, onComplete, result any // a non-nil value: that method panics with it
}

func (p *panicky) OnFork(scope.Task) error {
	if p.onFork != nil {
		panic(p.onFork)
	}
	return nil
}

func (p *panicky) OnComplete(scope.Task) bool {
	if p.onComplete != nil {
		panic(p.onComplete)
	}
	return false
}

func (p *panicky) Result() error {
	if p.result != nil {
		panic(p.result)
	}
	return nil
}

// "A panic in a custom Joiner (OnFork, OnComplete, Result) is a *PanicError too: Join re-panics
// with it (or returns it), and a later Join returns it as an error, never nil. (Fork itself does
// not panic when OnFork does: that subtask is Failed with the *PanicError and the scope is
// cancelled, as for a panicking subtask.)" A panic in Result used to escape Join raw, after which
// Join returned nil and Close stayed quiet.
func TestJoinerPanicsAreNeverLost(t *testing.T) {
	for _, tt := range []struct {
		name string
		give *panicky
	}{
		{"OnFork", &panicky{onFork: "bad OnFork"}},
		{"OnComplete", &panicky{onComplete: "bad OnComplete"}},
		{"Result", &panicky{result: "bad Result"}},
	} {
		want := tt.give.onFork
		if want == nil {
			want = tt.give.onComplete
		}
		if want == nil {
			want = tt.give.result
		}
		t.Run(tt.name, func(t *testing.T) {
			s := scope.Open(t.Context(), scope.WithJoiner(tt.give))
			var st *scope.Subtask[int]
			require.NotPanics(t, func() { st = scope.Fork(s, value(1)) }, "Fork never panics for OnFork")
			pe := joinPanic(t, s)
			assert.Equal(t, want, pe.Value)
			assert.Contains(t, string(pe.Stack), "scope_test.(*panicky)", "the Joiner's stack")
			err := s.Join()
			assert.Same(t, pe, err, "a later Join returns it")
			assert.NotPanics(t, s.Close, "surfaced once")
			if tt.name == "OnFork" {
				assert.Equal(t, scope.Failed, st.State())
				assert.Same(t, pe, st.Err())
				assert.Same(t, pe, context.Cause(s.Context()), "cancelled, as for a panicking subtask")
			}
		})
		t.Run(tt.name+"/PanicsAsErrors", func(t *testing.T) {
			s := scope.Open(t.Context(), scope.WithJoiner(tt.give), scope.PanicsAsErrors())
			defer s.Close()
			scope.Fork(s, value(1))
			var err error
			require.NotPanics(t, func() { err = s.Join() })
			var pe *scope.PanicError
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, want, pe.Value)
			assert.Equal(t, err, s.Join(), "the same error again, never nil")
		})
	}
}

// partial is a Joiner that keeps the successes and, at its deadline, returns what it has.
type partial struct {
	mu       sync.Mutex
	got      []int
	timeouts atomic.Int32
	results  atomic.Int32
	panicAt  any // OnTimeout panics with it, when set
}

func (p *partial) OnFork(scope.Task) error { return nil }
func (p *partial) OnComplete(t scope.Task) bool {
	if t.State() == scope.Succeeded {
		p.mu.Lock()
		p.got = append(p.got, t.Value().(int))
		p.mu.Unlock()
	}
	return false
}
func (p *partial) Result() error { p.results.Add(1); return nil }

var errPartial = errors.New("deadline: partial results")

func (p *partial) OnTimeout() error {
	p.timeouts.Add(1)
	if p.panicAt != nil {
		panic(p.panicAt)
	}
	return errPartial
}

// "If a Joiner also has the method OnTimeout() error, a WithTimeout deadline that ends the scope
// before the policy decided calls it once (after every subtask has returned) instead of returning
// ErrTimeout, and Join returns what it returns; subtasks that completed before the deadline keep
// their results."
func TestJoinerOnTimeout(t *testing.T) {
	t.Run("the deadline asks OnTimeout", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := &partial{}
			s := scope.Open(t.Context(), scope.WithJoiner(p), scope.WithTimeout(time.Second))
			defer s.Close()
			fast := scope.Fork(s, sleeper(100*time.Millisecond, 1, nil))
			slow := scope.Fork(s, func(ctx context.Context) (int, error) { <-ctx.Done(); return 0, ctx.Err() })
			require.Same(t, errPartial, s.Join())
			assert.Equal(t, int32(1), p.timeouts.Load(), "once")
			assert.Zero(t, p.results.Load(), "instead of Result")
			assert.Equal(t, []int{1}, p.got)
			assert.Equal(t, 1, fast.Get(), "completed before the deadline: kept")
			assert.Equal(t, scope.Cancelled, slow.State())
			assert.Same(t, errPartial, s.Join(), "a later Join returns the same")
			assert.Equal(t, int32(1), p.timeouts.Load())
		})
	})
	t.Run("a deadline after every subtask changes nothing", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := &partial{}
			s := scope.Open(t.Context(), scope.WithJoiner(p), scope.WithTimeout(time.Second))
			defer s.Close()
			scope.Fork(s, value(1))
			synctest.Wait()
			time.Sleep(2 * time.Second)
			require.NoError(t, s.Join())
			assert.Zero(t, p.timeouts.Load())
			assert.Equal(t, int32(1), p.results.Load())
		})
	})
	t.Run("the parent's end is not our deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := &partial{}
			parent, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
			defer cancel()
			s := scope.Open(parent, scope.WithJoiner(p), scope.WithTimeout(time.Second))
			defer s.Close()
			scope.Fork(s, func(ctx context.Context) (int, error) { <-ctx.Done(); return 0, ctx.Err() })
			err := s.Join()
			require.ErrorIs(t, err, context.DeadlineExceeded)
			assert.NotErrorIs(t, err, scope.ErrTimeout)
			assert.Zero(t, p.timeouts.Load())
		})
	})
	t.Run("a parent scope's timeout is not ours either", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			outer := scope.Open(t.Context(), scope.WithTimeout(100*time.Millisecond))
			defer outer.Close()
			p := &partial{}
			inner := scope.Open(outer.Context(), scope.WithJoiner(p), scope.WithTimeout(time.Hour))
			defer inner.Close()
			scope.Fork(inner, func(ctx context.Context) (int, error) { <-ctx.Done(); return 0, ctx.Err() })
			require.ErrorIs(t, inner.Join(), scope.ErrTimeout, "the outer deadline's cause")
			assert.Zero(t, p.timeouts.Load())
		})
	})
	// Regression (issue 21): the end was told from the parent's state when it was recorded — by
	// the first subtask to return — not from which came first, so a parent cancelled after the
	// deadline, while a subtask ran on, made the timeout the parent's end.
	t.Run("the deadline came first, the parent's end later", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := &partial{}
			parent, cancel := context.WithCancel(t.Context())
			defer cancel()
			s := scope.Open(parent, scope.WithJoiner(p), scope.WithTimeout(time.Second))
			defer s.Close()
			scope.Fork(s, sleeper(3*time.Second, 1, nil)) // ignores its context
			time.AfterFunc(2*time.Second, cancel)
			require.Equal(t, errPartial, s.Join(), "what came first decides: the deadline, so OnTimeout")
			assert.Equal(t, int32(1), p.timeouts.Load())
			assert.Zero(t, p.results.Load())
			assert.ErrorIs(t, context.Cause(s.Context()), scope.ErrTimeout)
		})
	})
	t.Run("the parent's end came first, the deadline later", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := &partial{}
			parent, cancel := context.WithCancel(t.Context())
			defer cancel()
			s := scope.Open(parent, scope.WithJoiner(p), scope.WithTimeout(2*time.Second))
			defer s.Close()
			scope.Fork(s, sleeper(3*time.Second, 1, nil))
			time.AfterFunc(time.Second, cancel)
			err := s.Join()
			require.ErrorIs(t, err, context.Canceled)
			assert.NotErrorIs(t, err, scope.ErrTimeout)
			assert.Zero(t, p.timeouts.Load())
		})
	})
	t.Run("our deadline before a parent scope's timeout", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			outer := scope.Open(t.Context(), scope.WithTimeout(2*time.Second))
			defer outer.Close()
			p := &partial{}
			inner := scope.Open(outer.Context(), scope.WithJoiner(p), scope.WithTimeout(time.Second))
			defer inner.Close()
			scope.Fork(inner, sleeper(3*time.Second, 1, nil))
			require.Equal(t, errPartial, inner.Join(), "both causes are ErrTimeout; ours came first")
			assert.Equal(t, int32(1), p.timeouts.Load())
		})
	})
	t.Run("without OnTimeout Join returns ErrTimeout", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRecorder()
			s := scope.Open(t.Context(), scope.WithJoiner(r), scope.WithTimeout(time.Second))
			defer s.Close()
			scope.Fork(s, func(ctx context.Context) (int, error) { <-ctx.Done(); return 0, ctx.Err() })
			require.ErrorIs(t, s.Join(), scope.ErrTimeout)
			assert.Zero(t, r.results.Load())
		})
	})
	t.Run("a panic in OnTimeout", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := &partial{panicAt: "bad OnTimeout"}
			s := scope.Open(t.Context(), scope.WithJoiner(p), scope.WithTimeout(time.Second))
			scope.Fork(s, func(ctx context.Context) (int, error) { <-ctx.Done(); return 0, ctx.Err() })
			pe := joinPanic(t, s)
			assert.Equal(t, "bad OnTimeout", pe.Value)
			assert.Same(t, pe, s.Join())
			s.Close()
		})
	})
}

// A Joiner sees the very subtasks Fork and Go returned, so it may keep them as keys.
func TestJoinerSeesTheSubtasksForkAndGoReturned(t *testing.T) {
	r := newRecorder()
	s := scope.Open(t.Context(), scope.WithJoiner(r))
	defer s.Close()
	a := scope.Fork(s, value(1))
	b := s.Go(func(context.Context) error { return nil })
	require.NoError(t, s.Join())
	assert.Equal(t, []scope.Task{a, b}, r.forks, "OnFork")
	assert.Equal(t, map[scope.Task]int{a: 1, b: 1}, r.completions, "OnComplete")
}
