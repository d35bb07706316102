package scope_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/goloom/loom/scope"
	"github.com/goloom/loom/semaphore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sleeper returns a subtask function that sleeps d (ignoring its context) and then returns v.
func sleeper(d time.Duration, v int, err error) func(context.Context) (int, error) {
	return func(context.Context) (int, error) {
		time.Sleep(d)
		return v, err
	}
}

// WithTimeout: "the clock starts at Open; … if the deadline passes while any subtask is still
// running, … the scope is cancelled and Join returns an error matching both scope.ErrTimeout and
// context.DeadlineExceeded; … subtasks that succeeded before the deadline keep their results";
// ending from outside, the timeout's cause is "joined with any failures that happened before".
func TestTimeoutCancelsRunningWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := scope.Open(t.Context(), scope.WithTimeout(2*time.Second), scope.AwaitAll())
		defer s.Close()
		early := scope.Fork(s, sleeper(time.Second, 1, nil))
		bad := scope.Fork(s, sleeper(time.Second, 0, errA))
		slow := scope.Fork(s, untilDone)
		err := s.Join()
		require.ErrorIs(t, err, scope.ErrTimeout)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.ErrorIs(t, err, errA, "joined with the failures before the deadline")
		assert.Equal(t, 2*time.Second, time.Since(synctestStart(t)))
		assert.Equal(t, 1, early.Get(), "results from before the deadline are kept")
		assert.Equal(t, scope.Failed, bad.State())
		assert.Equal(t, scope.Cancelled, slow.State())
		assert.ErrorIs(t, slow.Err(), scope.ErrTimeout)
		assert.ErrorIs(t, context.Cause(s.Context()), scope.ErrTimeout)
		assert.ErrorIs(t, s.Context().Err(), context.DeadlineExceeded)
	})
}

// "if every subtask had completed before the deadline, the deadline changes nothing"; "An outside
// end after every subtask had completed changes nothing (also with no subtasks at all), though the
// scope's context is done either way."
func TestTimeoutAfterEverySubtaskChangesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := scope.Open(t.Context(), scope.WithTimeout(2*time.Second))
		defer s.Close()
		st := scope.Fork(s, sleeper(time.Second, 1, nil))
		time.Sleep(3 * time.Second) // the owner is late to Join: the deadline passes with nothing running
		assert.ErrorIs(t, s.Context().Err(), context.DeadlineExceeded, "the context is done either way")
		require.NoError(t, s.Join())
		assert.Equal(t, 1, st.Get())

		empty := scope.Open(t.Context(), scope.WithTimeout(time.Second))
		defer empty.Close()
		time.Sleep(2 * time.Second)
		assert.ErrorIs(t, empty.Context().Err(), context.DeadlineExceeded)
		require.NoError(t, empty.Join(), "no subtasks at all")
	})
}

// WithTimeout: "if the deadline passes while any subtask is still running, or a subtask is forked
// after it, the scope is cancelled and Join returns" ErrTimeout.
func TestTimeoutThenForkIsCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := scope.Open(t.Context(), scope.WithTimeout(time.Second))
		defer s.Close()
		done := scope.Fork(s, value(1))
		time.Sleep(2 * time.Second)
		ran := false
		late := scope.Fork(s, func(context.Context) (int, error) { ran = true; return 2, nil })
		err := s.Join()
		require.ErrorIs(t, err, scope.ErrTimeout)
		assert.Equal(t, scope.Cancelled, late.State())
		assert.False(t, ran)
		assert.Equal(t, 1, done.Get())
	})
}

// WithTimeout: "d ≤ 0 is already expired, like context.WithTimeout".
func TestTimeoutNotPositiveIsExpired(t *testing.T) {
	t.Parallel()
	for _, d := range []time.Duration{0, -time.Second} {
		s := scope.Open(t.Context(), scope.WithTimeout(d))
		assert.ErrorIs(t, s.Context().Err(), context.DeadlineExceeded)
		ran := false
		st := scope.Fork(s, func(context.Context) (int, error) { ran = true; return 1, nil })
		assert.Equal(t, scope.Cancelled, st.State())
		require.ErrorIs(t, s.Join(), scope.ErrTimeout)
		assert.False(t, ran)
		s.Close()

		empty := scope.Open(t.Context(), scope.WithTimeout(d))
		require.NoError(t, empty.Join())
		empty.Close()
	}
}

// The last subtask completes at the very instant the deadline passes. Either may come first, but
// the outcome must be consistent: a completion before the deadline keeps its result and the
// deadline then changes nothing; a completion after it is Cancelled and Join reports the timeout.
func TestTimeoutAtTheInstantOfCompletionIsConsistent(t *testing.T) {
	seen := map[bool]int{}
	for range 200 {
		synctest.Test(t, func(t *testing.T) {
			for _, policy := range []scope.Option{scope.FailFast(), scope.AwaitAll(), scope.FirstSuccess()} {
				s := scope.Open(t.Context(), scope.WithTimeout(time.Second), policy)
				st := scope.Fork(s, sleeper(time.Second, 1, nil))
				err := s.Join()
				s.Close()
				if err == nil {
					require.Equal(t, scope.Succeeded, st.State())
					assert.Equal(t, 1, st.Get())
				} else {
					require.ErrorIs(t, err, scope.ErrTimeout)
					require.Equal(t, scope.Cancelled, st.State())
					assert.ErrorIs(t, st.Err(), scope.ErrTimeout)
				}
				seen[err == nil]++
			}
		})
	}
	t.Logf("completion first %d times, deadline first %d times", seen[true], seen[false])
}

// "Ending from outside: when the parent context ends … while a subtask is still running …, and the
// policy has not decided yet, Join returns that cause — errors.Is(err, context.Canceled) … — joined
// with any failures that happened before", whatever the policy.
func TestParentCancelEndsScopeFromOutside(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		policy scope.Option
	}{
		{"AwaitAll", scope.AwaitAll()},
		{"FirstSuccess", scope.FirstSuccess()},
		{"CancelWhen", scope.CancelWhen(func(scope.Task) bool { return false })},
	} {
		t.Run(tt.name, func(t *testing.T) {
			parent, cancel := context.WithCancel(t.Context())
			s := scope.Open(parent, tt.policy)
			defer s.Close()
			bad := scope.Fork(s, failing(errA))
			<-waitDone(bad)
			started := make(chan struct{})
			st := scope.Fork(s, func(ctx context.Context) (int, error) { close(started); return untilDone(ctx) })
			<-started
			cancel()
			err := s.Join()
			require.ErrorIs(t, err, context.Canceled)
			require.ErrorIs(t, err, errA, "joined with the failures before")
			assert.Equal(t, scope.Cancelled, st.State())
		})
	}
}

// "An outside end after every subtask had completed changes nothing (also with no subtasks at all),
// though the scope's context is done either way": the policy's result stands — a success, every
// failure, a custom Joiner's Result (it is called), ErrNoSubtasks.
func TestParentCancelAfterEverySubtaskChangesNothing(t *testing.T) {
	t.Parallel()
	verdict := newRecorder()
	verdict.result = errB
	for _, tt := range []struct {
		name string
		opts []scope.Option
		fork func(context.Context) (int, error) // nil: nothing forked
		want error                              // matched by Join's error; nil: no error
	}{
		{"a success", nil, value(1), nil},
		{"AwaitAll's failures", []scope.Option{scope.AwaitAll()}, failing(errA), errA},
		{"FirstSuccess, all failed", []scope.Option{scope.FirstSuccess()}, failing(errA), errA},
		{"a Joiner's Result", []scope.Option{scope.WithJoiner(verdict)}, value(1), errB},
		{"nothing forked", nil, nil, nil},
		{"FirstSuccess, nothing forked", []scope.Option{scope.FirstSuccess()}, nil, scope.ErrNoSubtasks},
	} {
		t.Run(tt.name, func(t *testing.T) {
			parent, cancel := context.WithCancel(t.Context())
			s := scope.Open(parent, tt.opts...)
			defer s.Close()
			var st *scope.Subtask[int]
			if tt.fork != nil {
				st = scope.Fork(s, tt.fork)
				<-waitDone(st)
			}
			cancel()
			assert.Error(t, s.Context().Err(), "the context is done either way")
			err := s.Join()
			if tt.want == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tt.want)
				assert.NotErrorIs(t, err, context.Canceled)
			}
			if st != nil && st.State() == scope.Succeeded {
				assert.Equal(t, 1, st.Get())
			}
		})
	}
	assert.Equal(t, int32(1), verdict.results.Load(), "the Joiner's Result was called")

	parent, cancel := context.WithCancel(t.Context())
	cancel()
	again := scope.Open(parent, scope.FirstSuccess()) // opened on a done parent, nothing forked
	defer again.Close()
	require.ErrorIs(t, again.Join(), scope.ErrNoSubtasks, "the policy decides: nothing ran")
}

// "A decision the policy made first (FailFast's first failure, FirstSuccess's success) stands"
// against a later timeout or parent cancellation. (Racing: TestPolicyDecisionStandsAgainstARacingOutsideEnd.)
func TestPolicyDecisionFirstStands(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := scope.Open(t.Context(), scope.WithTimeout(2*time.Second))
		defer s.Close()
		scope.Fork(s, sleeper(time.Second, 0, errA))
		stubborn := scope.Fork(s, sleeper(3*time.Second, 1, nil)) // ignores its context past the deadline
		require.Equal(t, errA, s.Join(), "FailFast decided at 1s; the deadline at 2s changes nothing")
		assert.Equal(t, scope.Cancelled, stubborn.State())
		assert.Equal(t, errA, context.Cause(s.Context()))

		ffParent, ffCancel := context.WithCancel(t.Context())
		ff := scope.Open(ffParent)
		defer ff.Close()
		scope.Fork(ff, sleeper(time.Hour, 1, nil)) // still running, ignoring its context
		scope.Fork(ff, failing(errA))
		synctest.Wait()
		ffCancel()
		require.Equal(t, errA, ff.Join(), "FailFast had decided before the parent ended")

		parent, cancel := context.WithCancel(t.Context())
		fs := scope.Open(parent, scope.FirstSuccess())
		defer fs.Close()
		win := scope.Fork(fs, value(7))
		scope.Fork(fs, sleeper(time.Second, 0, nil))
		synctest.Wait()
		cancel()
		require.NoError(t, fs.Join(), "FirstSuccess had decided")
		assert.Equal(t, 7, win.Get())
	})
}

// WithLimit: "at most n subtasks running; Fork blocks until a slot frees".
func TestLimitBoundsRunningSubtasks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := scope.Open(t.Context(), scope.WithLimit(3))
		defer s.Close()
		var running, peak atomic.Int32
		for range 20 {
			scope.Fork(s, func(context.Context) (int, error) {
				n := running.Add(1)
				for m := peak.Load(); n > m && !peak.CompareAndSwap(m, n); m = peak.Load() {
				}
				time.Sleep(time.Second)
				running.Add(-1)
				return 0, nil
			})
		}
		assert.Equal(t, 6*time.Second, time.Since(synctestStart(t)), "the 20th Fork returned when its slot freed")
		require.NoError(t, s.Join())
		assert.Equal(t, int32(3), peak.Load())
		assert.Equal(t, 7*time.Second, time.Since(synctestStart(t)), "20 one-second tasks, 3 at a time")
	})
}

// WithLimit: a blocked Fork "returns a Cancelled subtask without running fn if the scope is cancelled
// while it waits". The shape of conc#88: the running subtasks wait for cancellation and the one that fails is
// queued behind them. The blocked Fork must give up when the scope is cancelled.
func TestLimitBlockedForkGivesUpOnCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := scope.Open(t.Context(), scope.WithLimit(2), scope.WithTimeout(time.Minute))
		defer s.Close()
		a := scope.Fork(s, untilDone)
		b := scope.Fork(s, untilDone)
		ran := false
		queued := scope.Fork(s, func(context.Context) (int, error) { ran = true; return 0, errA })
		require.ErrorIs(t, s.Join(), scope.ErrTimeout)
		assert.False(t, ran)
		assert.Equal(t, scope.Cancelled, queued.State())
		assert.Equal(t, scope.Cancelled, a.State())
		assert.Equal(t, scope.Cancelled, b.State())
		assert.Equal(t, time.Minute, time.Since(synctestStart(t)))
	})
}

func TestLimitBlockedForkGivesUpOnFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := scope.Open(t.Context(), scope.WithLimit(1))
		defer s.Close()
		scope.Fork(s, sleeper(time.Second, 0, errA))
		ran := false
		queued := scope.Fork(s, func(context.Context) (int, error) { ran = true; return 1, nil })
		assert.Equal(t, scope.Cancelled, queued.State())
		assert.Equal(t, errA, queued.Err())
		require.Equal(t, errA, s.Join())
		assert.False(t, ran)
	})
}

// "WithLimit(n int) (n ≥ 1, else panic; …)"
func TestWithLimitRejectsLessThanOne(t *testing.T) {
	t.Parallel()
	require.PanicsWithValue(t, "scope: WithLimit: n must be at least 1", func() { scope.WithLimit(0) })
	require.PanicsWithValue(t, "scope: WithLimit: n must be at least 1", func() { scope.WithLimit(-3) })
}

// Ending from outside, Join returns "errors.Is(err, context.Canceled) (or the parent's own cause)";
// the Cancelled subtask's Err is that cause too.
func TestParentCauseIsReported(t *testing.T) {
	t.Parallel()
	errGone := errors.New("client went away")
	parent, cancel := context.WithCancelCause(t.Context())
	s := scope.Open(parent)
	defer s.Close()
	started := make(chan struct{})
	st := scope.Fork(s, func(ctx context.Context) (int, error) { close(started); return untilDone(ctx) })
	<-started
	cancel(errGone)
	assert.Equal(t, errGone, s.Join())
	assert.Equal(t, scope.Cancelled, st.State())
	assert.Equal(t, errGone, st.Err())
	assert.Equal(t, errGone, context.Cause(s.Context()))
}

// Ending from outside: "ErrTimeout for the timeout", the parent's own cause for the parent — a
// parent's deadline is the parent's end, not the scope's timeout, whichever of the two is sooner.
func TestParentDeadlineIsNotTheScopeTimeout(t *testing.T) {
	t.Run("the parent's deadline first", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			parent, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			s := scope.Open(parent, scope.WithTimeout(time.Hour))
			defer s.Close()
			scope.Fork(s, untilDone)
			err := s.Join()
			require.ErrorIs(t, err, context.DeadlineExceeded)
			assert.NotErrorIs(t, err, scope.ErrTimeout)
		})
	})
	t.Run("the scope's timeout first", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			parent, cancel := context.WithTimeout(t.Context(), time.Hour)
			defer cancel()
			s := scope.Open(parent, scope.WithTimeout(time.Second))
			defer s.Close()
			scope.Fork(s, untilDone)
			err := s.Join()
			require.ErrorIs(t, err, scope.ErrTimeout)
			require.ErrorIs(t, err, context.DeadlineExceeded)
		})
	})
}

// A failing subtask's slot is handed over only after the policy has decided: a blocked Fork must
// not start in between, even when the policy takes its time.
func TestLimitSlotReleasedAfterPolicyDecides(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := scope.Open(t.Context(), scope.WithLimit(1), scope.CancelWhen(func(task scope.Task) bool {
			time.Sleep(time.Second) // a slow decision
			return task.State() == scope.Failed
		}))
		defer s.Close()
		scope.Fork(s, failing(errA))
		ran := false
		queued := scope.Fork(s, func(context.Context) (int, error) { ran = true; return 1, nil })
		require.NoError(t, s.Join())
		assert.False(t, ran)
		assert.Equal(t, scope.Cancelled, queued.State())
	})
}

// "scope.WithLimit(n) panics in WithLimit itself, with a scope: message, for n < 1 and for n above
// semaphore.MaxPermits."
func TestWithLimitBounds(t *testing.T) {
	assert.PanicsWithValue(t, "scope: WithLimit: n must be at least 1", func() { scope.WithLimit(0) })
	assert.PanicsWithValue(t, "scope: WithLimit: n must be at least 1", func() { scope.WithLimit(-1) })
	above := int(semaphore.MaxPermits) + 1
	assert.PanicsWithValue(t, fmt.Sprintf("scope: WithLimit: n %d above the maximum %d", above, semaphore.MaxPermits),
		func() { scope.WithLimit(above) })
	assert.NotPanics(t, func() {
		s := scope.Open(t.Context(), scope.WithLimit(int(semaphore.MaxPermits)))
		require.NoError(t, s.Join())
	})
}
