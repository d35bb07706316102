package scope_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/goloom/loom/scope"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStateString(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		give scope.State
		want string
	}{
		{scope.Running, "Running"},
		{scope.Succeeded, "Succeeded"},
		{scope.Failed, "Failed"},
		{scope.Cancelled, "Cancelled"},
		{scope.State(9), "State(9)"},
	} {
		assert.Equal(t, tt.want, tt.give.String())
	}
}

// "Subtask[T]: State() State (Running, Succeeded, Failed, Cancelled), Get() T (panics with a clear
// message unless Succeeded), Err() error, Result() (T, error)"; Value() is nil unless Succeeded.
func TestSubtaskAccessorsByState(t *testing.T) {
	t.Parallel()
	s := scope.Open(t.Context(), scope.AwaitAll())
	defer s.Close()
	release := make(chan struct{})
	running := scope.Fork(s, func(context.Context) (int, error) { <-release; return 5, nil })
	ok := scope.Fork(s, value(3))
	bad := scope.Fork(s, failing(errA))

	assert.Equal(t, scope.Running, running.State())
	assert.NoError(t, running.Err())
	assert.Nil(t, running.Value())
	_, err := running.Result()
	assert.ErrorContains(t, err, "scope: subtask is still running")
	require.PanicsWithValue(t, "scope: Get on a subtask in state Running (call Join first)", func() { running.Get() })

	close(release)
	require.ErrorIs(t, s.Join(), errA)
	assert.Equal(t, 5, running.Get())

	assert.Equal(t, 3, ok.Value())
	v, err := ok.Result()
	assert.Equal(t, 3, v)
	assert.NoError(t, err)

	assert.Equal(t, scope.Failed, bad.State())
	assert.Nil(t, bad.Value())
	v, err = bad.Result()
	assert.Equal(t, 0, v)
	assert.Equal(t, errA, err)
	require.PanicsWithValue(t, "scope: Get on a subtask in state Failed: a failed", func() { bad.Get() })
}

// "Cancelled … its Err() is the scope's cancellation cause (context.Cause of the scope's context) and
// Result() returns the zero value with that error." (A subtask cancelled while it ran:
// TestFailFastLaterFailuresDoNotCount.)
func TestCancelledSubtaskAccessors(t *testing.T) {
	t.Parallel()
	s := scope.Open(t.Context())
	defer s.Close()
	scope.Fork(s, failing(errA))
	<-s.Context().Done()
	st := scope.Fork(s, value("unused"))
	require.ErrorIs(t, s.Join(), errA)

	assert.Equal(t, scope.Cancelled, st.State())
	assert.Equal(t, errA, st.Err(), "the scope's cancellation cause")
	v, err := st.Result()
	assert.Equal(t, "", v)
	assert.Equal(t, errA, err)
	assert.Nil(t, st.Value())
	require.PanicsWithValue(t, fmt.Sprintf("scope: Get on a subtask in state Cancelled: %v", errA), func() { st.Get() })
}

func TestSubtaskIsATask(t *testing.T) {
	t.Parallel()
	var _ scope.Task = (*scope.Subtask[int])(nil)
	var _ scope.Task = (*scope.Subtask[struct{}])(nil)
}
