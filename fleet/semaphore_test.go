package fleet_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/fleet"
)

func TestNewPanicsOnBadInput(t *testing.T) {
	m := fleet.NewMemory()
	long := strings.Repeat("n", fleet.MaxName+1)
	tests := []struct {
		name string
		give func()
		want string
	}{
		{"nil backend", func() { fleet.New(nil, "x", 1) }, "fleet: New: nil backend"},
		{"empty name", func() { fleet.New(m, "", 1) }, "fleet: New: empty name"},
		{"long name", func() { fleet.New(m, long, 1) }, "fleet: New: name of 201 bytes, above the maximum 200"},
		{"zero capacity", func() { fleet.New(m, "x", 0) }, "fleet: New: capacity must be at least 1, got 0"},
		{"negative capacity", func() { fleet.New(m, "x", -3) }, "fleet: New: capacity must be at least 1, got -3"},
		{"huge capacity", func() { fleet.New(m, "x", fleet.MaxCapacity+1) }, "fleet: New: capacity 1125899906842625 above the maximum 1125899906842624"},
		{"short lease", func() { fleet.WithLease(999 * time.Millisecond) }, "fleet: WithLease: lease 999ms below the minimum 1s"},
		{"zero lease", func() { fleet.WithLease(0) }, "fleet: WithLease: lease 0s below the minimum 1s"},
		{"negative degrade", func() { fleet.Degrade(-1) }, "fleet: Degrade: negative permits -1"},
		{"nil option", func() { fleet.New(m, "x", 1, nil) }, "fleet: New: nil Option"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.PanicsWithValue(t, tt.want, tt.give)
		})
	}
}

func TestNameOfMaxLengthIsAccepted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		name := strings.Repeat("n", fleet.MaxName)
		s := newSem(t, fleet.NewMemory(), name, 1)
		p, err := s.Acquire(t.Context(), 1)
		require.NoError(t, err)
		p.Release()
		assert.Equal(t, name, s.Name())
	})
}

func TestMisusePanics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSem(t, fleet.NewMemory(), "x", 1)
		var nilCtx context.Context
		require.PanicsWithValue(t, "fleet: Acquire: nil context", func() { _, _ = s.Acquire(nilCtx, 1) })
		require.PanicsWithValue(t, "fleet: AcquireTimeout: nil context", func() { _, _ = s.AcquireTimeout(nilCtx, 1, time.Second) })
		var zero fleet.Semaphore
		require.PanicsWithValue(t, "fleet: Acquire: zero Semaphore; use New", func() { _, _ = zero.Acquire(t.Context(), 1) })
		var none *fleet.Semaphore
		require.PanicsWithValue(t, "fleet: Close: zero Semaphore; use New", func() { _ = none.Close() })
		require.PanicsWithValue(t, "fleet: Stats: zero Semaphore; use New", func() { _ = none.Stats() })
		var p fleet.Permit
		require.PanicsWithValue(t, "fleet: Release: zero Permit; use Semaphore.Acquire", p.Release)
		var np *fleet.Permit
		require.PanicsWithValue(t, "fleet: Token: zero Permit; use Semaphore.Acquire", func() { np.Token() })
		var m fleet.Memory
		require.PanicsWithValue(t, "fleet: SetDown: zero Memory; use NewMemory", func() { m.SetDown(true) })
	})
}

func TestInvalidWeightFailsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := fleet.NewMemory()
		s := newSem(t, m, "x", 3)
		for _, n := range []int64{0, -1, 4} {
			p, err := s.Acquire(t.Context(), n)
			require.ErrorIs(t, err, fleet.ErrInvalidWeight, "n=%d", n)
			require.Nil(t, p)
		}
		assert.Zero(t, m.RoundTrips(), "refused without asking the backend")
	})
}

func TestAcquireAndRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := fleet.NewMemory()
		s := newSem(t, m, "x", 3)
		p, err := s.Acquire(t.Context(), 2)
		require.NoError(t, err)
		assert.Equal(t, int64(2), p.N())
		assert.False(t, p.Degraded())
		assert.NotZero(t, p.Token())
		require.NoError(t, p.Context().Err())
		assert.Equal(t, int64(2), m.Held("x"))
		st := s.Stats()
		assert.Equal(t, fleet.Stats{Capacity: 3, Held: 2, Acquired: 1, RoundTrips: 1}, st)

		p.Release()
		assert.ErrorIs(t, p.Context().Err(), context.Canceled)
		assert.Equal(t, context.Canceled, context.Cause(p.Context()))
		assert.Zero(t, m.Held("x"))
		p.Release() // idempotent
		assert.Equal(t, fleet.Stats{Capacity: 3, Acquired: 1, Released: 1, RoundTrips: 2}, s.Stats())
	})
}

func TestAlreadyDoneContextNeverAcquires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := fleet.NewMemory()
		s := newSem(t, m, "x", 3)
		ctx, cancel := context.WithCancelCause(t.Context())
		cause := errors.New("gone")
		cancel(cause)
		p, err := s.Acquire(ctx, 1)
		require.ErrorIs(t, err, context.Canceled)
		require.ErrorIs(t, err, cause)
		require.Nil(t, p)
		assert.Zero(t, m.RoundTrips())
	})
}

func TestAcquireTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := fleet.NewMemory()
		a, b := newSem(t, m, "x", 1), newSem(t, m, "x", 1)
		p, err := a.Acquire(t.Context(), 1)
		require.NoError(t, err)
		t0 := time.Now()
		_, err = b.AcquireTimeout(t.Context(), 1, 3*time.Second)
		require.ErrorIs(t, err, fleet.ErrTimeout)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		var te interface{ Timeout() bool }
		require.ErrorAs(t, err, &te)
		assert.True(t, te.Timeout())
		assert.Equal(t, 3*time.Second, time.Since(t0))
		synctest.Wait() // the worker gives the queue entry back
		assert.Zero(t, m.Queued("x"))
		assert.Equal(t, 0, b.Stats().Waiting)
		p.Release()
	})
}

func TestAcquireTimeoutZeroNeverWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := fleet.NewMemory()
		a, b := newSem(t, m, "x", 2), newSem(t, m, "x", 2)
		p, err := b.AcquireTimeout(t.Context(), 1, 0)
		require.NoError(t, err, "free: granted at once")
		q, err := a.Acquire(t.Context(), 1)
		require.NoError(t, err)
		trips := m.RoundTrips()
		_, err = b.AcquireTimeout(t.Context(), 1, 0)
		require.ErrorIs(t, err, fleet.ErrTimeout)
		assert.Equal(t, trips+1, m.RoundTrips(), "one round trip")
		assert.Zero(t, m.Queued("x"), "never queued")
		p.Release()
		q.Release()
	})
}

func TestCancelWhileQueuedHoldsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := fleet.NewMemory()
		a, b := newSem(t, m, "x", 1), newSem(t, m, "x", 1)
		p, err := a.Acquire(t.Context(), 1)
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(t.Context())
		ch := acquireAsync(ctx, b, 1)
		synctest.Wait()
		require.Equal(t, 1, m.Queued("x"))
		cancel()
		r := <-ch
		require.ErrorIs(t, r.err, context.Canceled)
		synctest.Wait()
		assert.Zero(t, m.Queued("x"), "its place in the queue is given back")
		p.Release()
		assert.Zero(t, m.Held("x"))
		assert.Equal(t, fleet.Stats{Capacity: 1, RoundTrips: b.Stats().RoundTrips}, b.Stats())
	})
}

func TestCloseReleasesPermitsAndFailsWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := fleet.NewMemory()
		s := fleet.New(m, "x", 2, fleet.WithLease(ttl), fleet.WithLogger(nil))
		other := newSem(t, m, "x", 2)
		p, err := s.Acquire(t.Context(), 2)
		require.NoError(t, err)
		head := acquireAsync(t.Context(), s, 1)  // waits on the backend
		local := acquireAsync(t.Context(), s, 1) // waits in the process
		synctest.Wait()
		require.Equal(t, 2, s.Stats().Waiting)

		require.NoError(t, s.Close())
		for _, ch := range []<-chan result{head, local} {
			r := <-ch
			require.ErrorIs(t, r.err, fleet.ErrClosed)
		}
		assert.ErrorIs(t, context.Cause(p.Context()), fleet.ErrLeaseLost)
		assert.ErrorIs(t, context.Cause(p.Context()), fleet.ErrClosed)
		assert.Zero(t, m.Held("x"))
		synctest.Wait()
		assert.Zero(t, m.Queued("x"))
		p.Release() // after Close: nothing
		st := s.Stats()
		assert.Equal(t, int64(1), st.Acquired)
		assert.Equal(t, int64(1), st.Released)
		assert.Zero(t, st.Held)

		require.NoError(t, s.Close(), "idempotent")
		_, err = s.Acquire(t.Context(), 1)
		require.ErrorIs(t, err, fleet.ErrClosed)
		q, err := other.Acquire(t.Context(), 2)
		require.NoError(t, err, "the fleet got the permits back")
		q.Release()
	})
}

func TestCloseWithBackendDownReportsIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := fleet.NewMemory()
		s := fleet.New(m, "x", 1, fleet.WithLease(ttl), fleet.WithLogger(nil))
		_, err := s.Acquire(t.Context(), 1)
		require.NoError(t, err)
		m.SetDown(true)
		err = s.Close()
		require.ErrorIs(t, err, fleet.ErrUnavailable)
		m.SetDown(false)
		time.Sleep(ttl)
		assert.Zero(t, m.Held("x"), "the lease expired on its own")
	})
}

func TestWithContextStopsWhenTheLeaseIsLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := fleet.NewMemory()
		cut := &partition{b: m}
		s := newSem(t, cut, "x", 1)
		p, err := s.Acquire(t.Context(), 1)
		require.NoError(t, err)
		ctx, stop := p.WithContext(t.Context())
		defer stop()
		cut.cut.Store(true)
		<-ctx.Done()
		assert.ErrorIs(t, context.Cause(ctx), fleet.ErrLeaseLost)
		p.Release() // after the loss: nothing
		assert.Equal(t, int64(1), s.Stats().LeasesLost)
		assert.Zero(t, s.Stats().Released)
	})
}

// A lease granted while no other is held, but a renewal is still scheduled from one released
// since, is renewed at that renewal's time: the Semaphore's goroutine is not woken for it (that
// cost a wake-up per uncontended Acquire), so its timer must still be set.
func TestLeaseGrantedAfterAReleaseIsRenewed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := fleet.NewMemory()
		s := newSem(t, m, "api", 1)
		p, err := s.Acquire(t.Context(), 1)
		require.NoError(t, err)
		p.Release()
		synctest.Wait() // the goroutine has looked: no lease, a renewal still scheduled
		time.Sleep(ttl / 6)
		p, err = s.Acquire(t.Context(), 1)
		require.NoError(t, err)
		time.Sleep(3 * ttl)
		synctest.Wait()
		require.NoError(t, p.Context().Err(), "renewed while held")
		assert.Equal(t, int64(1), m.Held("api"))
		assert.Zero(t, s.Stats().LeasesLost)
		p.Release()
	})
}
