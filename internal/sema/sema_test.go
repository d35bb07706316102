package sema_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/goloom/loom/internal/sema"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// record returns a callback for AcquireFunc that appends its id and error to log.
func record(log *[]string, id string) func(error) {
	return func(err error) {
		if err != nil {
			*log = append(*log, id+":"+err.Error())
			return
		}
		*log = append(*log, id)
	}
}

func TestAcquireFuncImmediate(t *testing.T) {
	s := sema.New(2, true)
	var w sema.Waiter
	acquired, err := s.AcquireFunc(&w, 2, func(error) { t.Fatal("fn must not run") })
	require.NoError(t, err)
	assert.True(t, acquired)
	assert.Equal(t, int64(0), s.Available())
	acquired, err = s.AcquireFunc(&w, 3, func(error) { t.Fatal("fn must not run") })
	require.ErrorIs(t, err, sema.ErrInvalidWeight)
	assert.False(t, acquired)
	assert.Equal(t, 0, s.Waiting())
	s.Release(2)
}

func TestAcquireFuncSharesTheFIFOWithBlockingWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := sema.New(1, true)
		require.True(t, s.TryAcquire(1))
		var log []string
		var a, c sema.Waiter
		acquired, err := s.AcquireFunc(&a, 1, record(&log, "a"))
		require.NoError(t, err)
		require.False(t, acquired)
		blocked := make(chan error, 1)
		go func() {
			err := s.Acquire(context.Background(), 1)
			log = append(log, "b") // ordered by the semaphore: b runs after a released
			blocked <- err
		}()
		synctest.Wait()
		_, err = s.AcquireFunc(&c, 1, record(&log, "c"))
		require.NoError(t, err)
		assert.Equal(t, 3, s.Waiting())

		s.Release(1) // to a
		assert.Equal(t, []string{"a"}, log)
		s.Release(1) // to b
		require.NoError(t, <-blocked)
		s.Release(1) // to c
		assert.Equal(t, []string{"a", "b", "c"}, log)
		s.Release(1)
		assert.Equal(t, int64(1), s.Available())
	})
}

func TestCancel(t *testing.T) {
	s := sema.New(1, true)
	require.True(t, s.TryAcquire(1))
	var log []string
	var a, b sema.Waiter
	_, err := s.AcquireFunc(&a, 1, record(&log, "a"))
	require.NoError(t, err)
	_, err = s.AcquireFunc(&b, 1, record(&log, "b"))
	require.NoError(t, err)
	assert.True(t, s.Cancel(&a), "a was queued")
	assert.False(t, s.Cancel(&a), "a is gone already")
	assert.Equal(t, 1, s.Waiting())
	s.Release(1)
	assert.Equal(t, []string{"b"}, log, "a's fn never runs")
	assert.False(t, s.Cancel(&b), "b was served")
	s.Release(1)
	assert.Equal(t, int64(1), s.Available())
}

func TestCancelOfHeadServesThoseBehind(t *testing.T) {
	s := sema.New(2, true)
	require.True(t, s.TryAcquire(1))
	var log []string
	var big, small sema.Waiter
	_, _ = s.AcquireFunc(&big, 2, record(&log, "big"))
	_, _ = s.AcquireFunc(&small, 1, record(&log, "small"))
	assert.Empty(t, log)
	require.True(t, s.Cancel(&big))
	assert.Equal(t, []string{"small"}, log)
	s.Release(2)
}

func TestShrinkFailsAsyncWaiter(t *testing.T) {
	s := sema.New(3, true)
	require.True(t, s.TryAcquire(3))
	var log []string
	var w sema.Waiter
	_, _ = s.AcquireFunc(&w, 3, record(&log, "w"))
	s.SetCapacity(2)
	require.Len(t, log, 1)
	assert.Contains(t, log[0], "semaphore: invalid weight")
	assert.False(t, s.Cancel(&w))
	s.Release(3)
	assert.Equal(t, int64(2), s.Available())
}

func TestClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errClosed := errors.New("closed")
		s := sema.New(2, true)
		require.True(t, s.TryAcquire(2))
		var log []string
		var w sema.Waiter
		_, _ = s.AcquireFunc(&w, 1, record(&log, "async"))
		blocked := make(chan error, 1)
		go func() { blocked <- s.Acquire(context.Background(), 1) }()
		synctest.Wait()

		assert.Equal(t, 2, s.Close(errClosed))
		require.ErrorIs(t, <-blocked, errClosed)
		assert.Equal(t, []string{"async:closed"}, log)
		assert.Equal(t, 0, s.Waiting())

		// Would have to queue: fails at once.
		require.ErrorIs(t, s.Acquire(context.Background(), 1), errClosed)
		var w2 sema.Waiter
		acquired, err := s.AcquireFunc(&w2, 1, func(error) { t.Fatal("fn must not run") })
		require.ErrorIs(t, err, errClosed)
		assert.False(t, acquired)
		assert.Equal(t, 0, s.Close(errors.New("again")), "a second Close changes nothing")

		// Free permits are still taken: the caller decides what closed means for those.
		s.Release(2)
		require.NoError(t, s.Acquire(context.Background(), 1))
		s.Release(1)
		assert.Panics(t, func() { s.Close(nil) })
	})
}
