package fleet_test

import (
	"context"
	"math"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/fleet"
)

func TestNewRatePanicsOnBadInput(t *testing.T) {
	m := fleet.NewMemory()
	tests := []struct {
		name string
		give func()
		want string
	}{
		{"nil backend", func() { fleet.NewRate(nil, "x", 1, 1) }, "fleet: NewRate: nil backend"},
		{"empty name", func() { fleet.NewRate(m, "", 1, 1) }, "fleet: NewRate: empty name"},
		{"zero rate", func() { fleet.NewRate(m, "x", 0, 1) }, "fleet: NewRate: rate 0 not in (0, 1e+06] per second"},
		{"NaN rate", func() { fleet.NewRate(m, "x", math.NaN(), 1) }, "fleet: NewRate: rate NaN not in (0, 1e+06] per second"},
		{"huge rate", func() { fleet.NewRate(m, "x", 2e6, 1) }, "fleet: NewRate: rate 2e+06 not in (0, 1e+06] per second"},
		{"zero burst", func() { fleet.NewRate(m, "x", 1, 0) }, "fleet: NewRate: burst must be between 1 and 1125899906842624, got 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.PanicsWithValue(t, tt.want, tt.give)
		})
	}
	var nilCtx context.Context
	r := fleet.NewRate(m, "x", 1, 1)
	require.PanicsWithValue(t, "fleet: Reserve: nil context", func() { _, _ = r.Reserve(nilCtx, 0) })
	require.PanicsWithValue(t, "fleet: Wait: nil context", func() { _ = r.Wait(nilCtx) })
	var zero fleet.Rate
	require.PanicsWithValue(t, "fleet: Allow: zero Rate; use NewRate", func() { _, _ = zero.Allow(context.Background()) })
}

func TestRateBurstThenRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := fleet.NewMemory()
		r := fleet.NewRate(m, "api", 10, 3)
		for range 3 {
			ok, err := r.Allow(t.Context())
			require.NoError(t, err)
			require.True(t, ok, "the burst is there at once")
		}
		ok, err := r.Allow(t.Context())
		require.NoError(t, err)
		require.False(t, ok)
		res, err := r.Reserve(t.Context(), -1)
		require.NoError(t, err)
		require.True(t, res.OK())
		assert.Equal(t, 100*time.Millisecond, res.Delay(), "one token per tenth of a second")
		t0 := time.Now()
		require.NoError(t, r.Wait(t.Context()))
		assert.Equal(t, 200*time.Millisecond, time.Since(t0), "behind the reservation above")
		assert.Equal(t, int64(6), m.RoundTrips(), "one round trip per call, refused ones included")
		st := r.Stats()
		assert.Equal(t, fleet.RateStats{Reserved: 5, Refused: 1, RoundTrips: 6}, st)
	})
}

func TestRateRejectsEarlyAndTakesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := fleet.NewMemory()
		r := fleet.NewRate(m, "api", 1, 1)
		require.NoError(t, r.Wait(t.Context()))
		res, err := r.Reserve(t.Context(), 500*time.Millisecond)
		require.NoError(t, err)
		assert.False(t, res.OK(), "the token comes in 1s, later than 500ms")
		assert.Equal(t, time.Second, res.Delay())
		res.Cancel() // nothing to give back

		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		t0 := time.Now()
		err = r.Wait(ctx)
		require.ErrorIs(t, err, fleet.ErrTimeout)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Zero(t, time.Since(t0), "rejected at once, not after waiting")

		res, err = r.Reserve(t.Context(), -1)
		require.NoError(t, err)
		assert.Equal(t, time.Second, res.Delay(), "the refusals took nothing")
	})
}

func TestRateCancelGivesTheTokenBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := fleet.NewMemory()
		r := fleet.NewRate(m, "api", 2, 1)
		require.NoError(t, r.Wait(t.Context()))
		res, err := r.Reserve(t.Context(), -1)
		require.NoError(t, err)
		require.Equal(t, 500*time.Millisecond, res.Delay())
		res.Cancel()
		res.Cancel() // idempotent
		again, err := r.Reserve(t.Context(), -1)
		require.NoError(t, err)
		assert.Equal(t, 500*time.Millisecond, again.Delay(), "as if the cancelled one had never asked")

		// A waiter that leaves returns its token too.
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- r.Wait(ctx) }()
		time.Sleep(100 * time.Millisecond)
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
		next, err := r.Reserve(t.Context(), -1)
		require.NoError(t, err)
		assert.Equal(t, 900*time.Millisecond, next.Delay(), "right behind `again`, 0.5 s from now")
		assert.Equal(t, int64(2), r.Stats().Cancelled)
	})
}

// Several processes share one bucket: over 60 s of simulated time the total start rate is
// within 1% of the rate, and no window of the bucket's length sees more than a burst beyond it.
func TestRateSharedByProcessesOverAMinute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := fleet.NewMemory()
		const perSecond, burst = 50.0, 5
		var mu sync.Mutex
		var starts []time.Time
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		var wg sync.WaitGroup
		for range 4 {
			r := fleet.NewRate(m, "api", perSecond, burst)
			for range 4 {
				wg.Go(func() {
					for r.Wait(ctx) == nil {
						mu.Lock()
						starts = append(starts, time.Now())
						mu.Unlock()
					}
				})
			}
		}
		wg.Wait()
		got := float64(len(starts)) / 60
		assert.InDelta(t, perSecond, got, perSecond/100, "starts per second")
		// In any span of d, at most burst + d·rate starts.
		for i := range starts {
			for j := i + 1; j < len(starts); j++ {
				d := starts[j].Sub(starts[i]).Seconds()
				if d > 1 {
					break
				}
				require.LessOrEqual(t, float64(j-i+1), burst+d*perSecond+1e-9, "burst exceeded at %v", starts[i])
			}
		}
		t.Logf("4 processes × 4 workers: %.2f starts/s (rate %v), %d starts", got, perSecond, len(starts))
	})
}

func TestRateBackendDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := fleet.NewMemory()
		closed := fleet.NewRate(m, "api", 1, 1, fleet.WithLogger(nil))
		open := fleet.NewRate(m, "api", 1, 1, fleet.WithLogger(nil), fleet.WhenUnavailable(fleet.FailOpen))
		degrade := fleet.NewRate(m, "api", 1, 1, fleet.WithLogger(nil), fleet.WhenUnavailable(fleet.Degrade(5)))
		m.SetDown(true)
		_, err := closed.Reserve(t.Context(), -1)
		require.ErrorIs(t, err, fleet.ErrUnavailable)
		require.ErrorIs(t, closed.Wait(t.Context()), fleet.ErrUnavailable)
		for range 100 {
			res, err := open.Reserve(t.Context(), 0)
			require.NoError(t, err)
			require.True(t, res.OK())
			require.True(t, res.Degraded())
		}
		for range 5 {
			ok, err := degrade.Allow(t.Context())
			require.NoError(t, err)
			require.True(t, ok, "a local burst of 5")
		}
		res, err := degrade.Reserve(t.Context(), -1)
		require.NoError(t, err)
		assert.True(t, res.Degraded())
		assert.Equal(t, 200*time.Millisecond, res.Delay(), "5 per second locally")
		assert.Equal(t, int64(2), closed.Stats().Unavailable)
		assert.Equal(t, int64(100), open.Stats().Degraded)
		assert.Equal(t, int64(6), degrade.Stats().Degraded)

		m.SetDown(false)
		time.Sleep(time.Second)
		res, err = closed.Reserve(t.Context(), -1)
		require.NoError(t, err)
		assert.False(t, res.Degraded())
	})
}
