package scope_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/scope"
)

// These tests run a real interleaving many times over, without synctest: a completion on one core
// racing an outside end (the parent's cancellation, seen by a sibling) on another.

// race runs one round: it opens a scope on a parent it cancels, forks decide (the subtask whose
// completion the policy acts on) and a sibling that ignores its context, and lets all three —
// decide's return, the parent's cancellation and the sibling's return — go at the same instant.
// The sibling returns sibling, chosen so that the policy never decides on it. It returns decide's
// subtask and Join's error.
func race[T any](t *testing.T, opts []scope.Option, sibling error, decide func() (T, error)) (*scope.Subtask[T], error) {
	t.Helper()
	parent, cancel := context.WithCancel(t.Context())
	defer cancel()
	s := scope.Open(parent, opts...)
	defer s.Close()
	start := make(chan struct{})
	st := scope.Fork(s, func(context.Context) (T, error) { <-start; return decide() })
	s.Go(func(context.Context) error { <-start; return sibling }) // ignores ctx: sees the parent's end
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); <-start; cancel() }()
	close(start)
	err := s.Join()
	wg.Wait()
	return st, err
}

// "Once a completion has been linearized before the cancellation (it saw the scope's context not
// done) and the policy decides on it (FailFast's first failure, FirstSuccess's first success,
// CancelWhen's predicate), Join returns the policy's result, even if the parent's cancellation or
// the deadline was recorded by a sibling in between." The sibling used to record the outside end
// before the decision took the lock, and Join then ignored the decision.
func TestPolicyDecisionStandsAgainstARacingOutsideEnd(t *testing.T) {
	rounds := 20_000
	if raceEnabled {
		rounds = 5000 // the detector widens the window: fewer rounds find it as fast
	}
	errA := errors.New("a failed")
	t.Run("FirstSuccess", func(t *testing.T) {
		for i := range rounds {
			st, err := race(t, []scope.Option{scope.FirstSuccess()}, errors.New("sibling failed"), func() (int, error) { return 1, nil })
			if st.State() == scope.Succeeded {
				require.NoError(t, err, "round %d: the success was decided first", i)
			} else {
				require.ErrorIs(t, err, context.Canceled, "round %d", i)
			}
		}
	})
	t.Run("FailFast", func(t *testing.T) {
		for i := range rounds {
			st, err := race(t, nil, nil, func() (int, error) { return 0, errA })
			if st.State() == scope.Failed {
				require.Same(t, errA, err, "round %d: the failure was decided first", i)
			} else {
				require.ErrorIs(t, err, context.Canceled, "round %d", i)
			}
		}
	})
	t.Run("CancelWhen", func(t *testing.T) {
		stop := func(t scope.Task) bool { return t.State() == scope.Succeeded && t.Value() == 7 }
		for i := range rounds {
			st, err := race(t, []scope.Option{scope.CancelWhen(stop)}, nil, func() (int, error) { return 7, nil })
			if st.State() == scope.Succeeded {
				require.NoError(t, err, "round %d: the predicate decided first", i)
			} else {
				require.ErrorIs(t, err, context.Canceled, "round %d", i)
			}
		}
	})
}
