package sema_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/goloom/loom/internal/sema"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// record returns a callback for AcquireFunc that appends its id and error to log.
func record(log *[]string, id string) func(*sema.Waiter, error) {
	return func(_ *sema.Waiter, err error) {
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
	acquired, err := s.AcquireFunc(&w, 2, func(*sema.Waiter, error) { t.Fatal("fn must not run") })
	require.NoError(t, err)
	assert.True(t, acquired)
	assert.Equal(t, int64(0), s.Available())
	acquired, err = s.AcquireFunc(&w, 3, func(*sema.Waiter, error) { t.Fatal("fn must not run") })
	var we *sema.WeightError
	require.ErrorAs(t, err, &we)
	assert.Equal(t, sema.WeightError{N: 3, Capacity: 2}, *we)
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
	assert.Equal(t, "w:3 permits requested, capacity shrank to 2", log[0])
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
		acquired, err := s.AcquireFunc(&w2, 1, func(*sema.Waiter, error) { t.Fatal("fn must not run") })
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

// ReleaseAndTake hands the first waiter with an owner to the releasing goroutine: the taker holds
// its permits and runs its owner; a callback waiter's fn is not called, and a blocking one's
// AcquireFor reports taken.
func TestReleaseAndTake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := sema.New(1, true)
		require.True(t, s.TryAcquire(1))
		var log []string
		var plain, owned sema.Waiter
		_, _ = s.AcquireFunc(&plain, 1, record(&log, "plain"))
		_, _ = s.AcquireFuncFor(&owned, 1, "owned task", record(&log, "owned"))
		blocked := make(chan bool, 1)
		go func() {
			taken, err := s.AcquireFor(context.Background(), 1, "blocked task")
			assert.NoError(t, err)
			blocked <- taken
		}()
		synctest.Wait()
		assert.Equal(t, 3, s.Waiting())

		assert.Nil(t, s.ReleaseAndTake(1), "plain has no owner: signalled as usual")
		assert.Equal(t, []string{"plain"}, log)
		assert.Equal(t, "owned task", s.ReleaseAndTake(1), "taken: its fn is not called")
		assert.Equal(t, []string{"plain"}, log)
		assert.False(t, s.Cancel(&owned), "a taken waiter is off the queue")
		assert.Equal(t, "blocked task", s.ReleaseAndTake(1))
		assert.True(t, <-blocked, "AcquireFor reports taken")
		assert.Nil(t, s.ReleaseAndTake(1), "nobody waits")
		assert.Equal(t, int64(1), s.Available())
		assert.Equal(t, 0, s.Waiting())
	})
}

// Release (without take) signals owned waiters as usual.
func TestReleaseSignalsOwnedWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := sema.New(1, true)
		require.True(t, s.TryAcquire(1))
		blocked := make(chan bool, 1)
		go func() {
			taken, err := s.AcquireFor(context.Background(), 1, "task")
			assert.NoError(t, err)
			blocked <- taken
		}()
		synctest.Wait()
		s.Release(1)
		assert.False(t, <-blocked, "granted, not taken: the acquirer runs its task itself")
		s.Release(1)
	})
}

// An AcquireFor whose ctx ends just as it is taken reports taken: the taker runs its owner. Run
// many times with the release and the cancel at once: whichever wins, the permit is held exactly
// once — by the taker (taken), by the acquirer (granted), or by nobody (cancelled).
func TestAcquireForCancelRacingTake(t *testing.T) {
	s := sema.New(1, true)
	for range 3000 {
		require.True(t, s.TryAcquire(1))
		ctx, cancel := context.WithCancel(context.Background())
		type result struct {
			taken bool
			err   error
		}
		res := make(chan result, 1)
		go func() {
			taken, err := s.AcquireFor(ctx, 1, "task")
			res <- result{taken, err}
		}()
		for s.Waiting() == 0 && len(res) == 0 {
			time.Sleep(time.Microsecond)
		}
		start := make(chan struct{})
		owners := make(chan any, 1)
		go func() { <-start; owners <- s.ReleaseAndTake(1) }()
		go func() { <-start; cancel() }()
		close(start)
		r, owner := <-res, <-owners
		switch {
		case r.taken:
			require.NoError(t, r.err)
			require.Equal(t, "task", owner, "the taker got the task")
			s.Release(1) // the taker's
		case r.err == nil:
			require.Nil(t, owner)
			s.Release(1) // the acquirer's
		default:
			require.ErrorIs(t, r.err, context.Canceled)
			require.Nil(t, owner)
		}
		require.Equal(t, int64(1), s.Available())
		require.Equal(t, 0, s.Waiting())
	}
}

func TestZeroSemaIsNotReady(t *testing.T) {
	var s sema.Sema
	assert.False(t, s.Ready())
	assert.True(t, sema.New(0, true).Ready())
}

// Drained is closed once, after Close, every permit is back, however it came back — here also
// through a grant that a cancelled wait handed back inside the semaphore.
func TestDrained(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := sema.New(2, true)
		assert.Nil(t, s.Drained(), "nil before Close")
		require.True(t, s.TryAcquire(2))
		ctx, cancel := context.WithCancel(context.Background())
		res := make(chan error, 1)
		go func() { res <- s.Acquire(ctx, 1) }()
		synctest.Wait()
		s.Close(errors.New("closed"))
		require.Error(t, <-res)
		cancel()
		drained := s.Drained()
		s.Release(1)
		synctest.Wait()
		select {
		case <-drained:
			t.Fatal("drained with a permit still held")
		default:
		}
		s.Release(1)
		<-drained
		assert.Equal(t, drained, s.Drained())
	})
	t.Run("already free at Close", func(t *testing.T) {
		s := sema.New(1, true)
		s.Close(errors.New("closed"))
		<-s.Drained()
	})
}

// clockGate opens at a fixed instant of the bubble's clock, once: a token that comes at open.
type clockGate struct {
	open     time.Time
	passed   int
	returned []int64
}

func (g *clockGate) Pass() (time.Duration, int64) {
	if d := time.Until(g.open); d > 0 {
		return d, 0
	}
	if g.passed > 0 {
		return time.Hour, 0
	}
	g.passed++
	return 0, 42
}

func (g *clockGate) Return(mark int64) { g.returned = append(g.returned, mark); g.passed-- }

// A timed wait whose gate opens exactly at its deadline is served, blocking or callback: the
// wait's expiry makes one last try at the gate, whichever timer fires first. Its mark is the
// pass's.
func TestExpiryMakesOneLastTryAtTheGate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for i := range 20 {
			s := sema.New(1, true)
			g := &clockGate{open: time.Now().Add(time.Second)}
			s.SetGate(g)
			mark, err := s.AcquireMark(t.Context(), 1, true, time.Second)
			require.NoError(t, err, "round %d", i)
			assert.Equal(t, int64(42), mark)
			s.Release(1)
		}
		s := sema.New(1, true)
		g := &clockGate{open: time.Now().Add(time.Second)}
		s.SetGate(g)
		var w sema.Waiter
		served := make(chan error, 1) // the gate's timer or the expiry serves it, on either goroutine
		acquired, err := s.AcquireFunc(&w, 1, func(_ *sema.Waiter, err error) { served <- err })
		require.NoError(t, err)
		require.False(t, acquired)
		expired := make(chan bool, 1)
		time.AfterFunc(time.Second, func() { expired <- s.Expire(&w) })
		require.False(t, <-expired, "served at its deadline, not expired")
		require.NoError(t, <-served)
		assert.Equal(t, int64(42), w.Mark())
		assert.Empty(t, g.returned)
	})
}

// Expire of a waiter behind the head takes it off without serving it, and of the head whose
// permits are not there, serves those behind it that fit.
func TestExpireLeavesTheQueue(t *testing.T) {
	s := sema.New(2, true)
	require.NoError(t, s.Acquire(t.Context(), 2))
	var big, small sema.Waiter
	var got []string
	_, err := s.AcquireFunc(&big, 2, record(&got, "big"))
	require.NoError(t, err)
	_, err = s.AcquireFunc(&small, 1, record(&got, "small"))
	require.NoError(t, err)
	s.Release(1)
	assert.Empty(t, got, "small waits behind big")
	assert.True(t, s.Expire(&big), "big's two permits are not there")
	assert.Equal(t, []string{"small"}, got, "small is served as big leaves")
	assert.False(t, s.Expire(&small), "served already")
	assert.False(t, s.Expire(&big), "gone already")
	s.Release(2)
	assert.Equal(t, int64(2), s.Available())
}

// SetMaxWaiting bounds the queue exactly: a request that would be one more fails with ErrFull at
// once, blocking or callback; one that finds free permits is not a waiter and is served.
func TestSetMaxWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := sema.New(1, true)
		s.SetMaxWaiting(2)
		require.NoError(t, s.Acquire(t.Context(), 1))
		var a, b, c sema.Waiter
		var got []string
		_, err := s.AcquireFunc(&a, 1, record(&got, "a"))
		require.NoError(t, err)
		_, err = s.AcquireFunc(&b, 1, record(&got, "b"))
		require.NoError(t, err)
		_, err = s.AcquireFunc(&c, 1, record(&got, "c"))
		require.ErrorIs(t, err, sema.ErrFull)
		require.ErrorIs(t, s.Acquire(t.Context(), 1), sema.ErrFull)
		assert.Equal(t, 2, s.Waiting())
		require.True(t, s.Cancel(&b))
		_, err = s.AcquireFunc(&c, 1, record(&got, "c"))
		require.NoError(t, err, "a place came free")
		s.Release(1)
		s.Release(1)
		assert.Equal(t, []string{"a", "c"}, got)
		s.Release(1)
		assert.Equal(t, int64(1), s.Available())
		z := sema.New(1, true)
		z.SetMaxWaiting(0)
		require.NoError(t, z.Acquire(t.Context(), 1), "free permits: no waiting")
		require.ErrorIs(t, z.AcquireTimeout(t.Context(), 1, time.Hour), sema.ErrFull, "nothing ever waits")
	})
}
