package fleet_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/fleet"
	"github.com/goloom/loom/fleet/fleetdriver"
)

func stressTime() time.Duration {
	if testing.Short() {
		return 300 * time.Millisecond
	}
	return time.Second
}

// settled returns what m holds and queues for "x" once sems have given back what they give back
// in the background, waiting seconds at most. What a waiter that left leaves behind (a grant that
// came for it, its place in the queue) and a lease a renewal registered again after its release
// go back through each Semaphore's worker, and a Flush finds nothing pending while the worker's
// own release of them is still on its way: so it flushes and looks again until nothing is held or
// queued. A lease nobody gives back would be held for its minute.
func settled(m *fleet.Memory, sems ...*fleet.Semaphore) (held int64, queued int) {
	held, queued = m.Held("x"), m.Queued("x")
	for deadline := time.Now().Add(5 * time.Second); (held != 0 || queued != 0) && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
		for _, s := range sems {
			fleet.Flush(s)
		}
		held, queued = m.Held("x"), m.Queued("x")
	}
	return held, queued
}

// TestStressBoundAndNoPermitLeaked runs four processes of eight workers doing random Acquire,
// AcquireTimeout (with and without a wait), cancelled Acquire and (double) Release for real, and
// checks that the permits in use never exceed the capacity, and that at rest every permit and
// every place in the queue is back.
func TestStressBoundAndNoPermitLeaked(t *testing.T) {
	t.Parallel()
	m := fleet.NewMemory()
	const capacity = 6
	var inUse, violations, stuck, acquired atomic.Int64
	stop := time.Now().Add(stressTime())
	ctx, cancel := context.WithTimeout(context.Background(), stressTime()+10*time.Second)
	defer cancel()
	var sems []*fleet.Semaphore
	var wg sync.WaitGroup
	for proc := range 4 {
		s := fleet.New(m, "x", capacity, fleet.WithLease(time.Minute), fleet.WithLogger(nil))
		sems = append(sems, s)
		for w := range 8 {
			rng := rand.New(rand.NewPCG(uint64(proc), uint64(w)))
			wg.Go(func() {
				for time.Now().Before(stop) && violations.Load() == 0 { // a violation ends the run at once
					n := 1 + rng.Int64N(3)
					var p *fleet.Permit
					var err error
					switch rng.IntN(4) {
					case 0:
						// With permits coming back every few microseconds, a wait of half a
						// second means a wake-up was lost.
						c, cancelWait := context.WithTimeout(ctx, 500*time.Millisecond)
						p, err = s.Acquire(c, n)
						if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
							stuck.Add(1)
							cancel()
						}
						cancelWait()
					case 1:
						p, err = s.AcquireTimeout(ctx, n, time.Duration(rng.IntN(300))*time.Microsecond)
					case 2:
						p, err = s.AcquireTimeout(ctx, n, 0)
					default:
						c, cancel := context.WithCancel(ctx)
						time.AfterFunc(time.Duration(rng.IntN(200))*time.Microsecond, cancel)
						p, err = s.Acquire(c, n)
						cancel()
					}
					if err != nil {
						continue
					}
					acquired.Add(1)
					if inUse.Add(n) > capacity || m.Held("x") > capacity {
						violations.Add(1)
						cancel() // a violation ends the run at once, waiters included
					}
					if rng.IntN(2) == 0 {
						time.Sleep(time.Duration(rng.IntN(50)) * time.Microsecond)
					}
					inUse.Add(-n)
					p.Release()
					if rng.IntN(8) == 0 {
						p.Release()
					}
				}
			})
		}
	}
	wg.Wait()
	require.Zero(t, violations.Load(), "more than the capacity in use")
	require.Zero(t, stuck.Load(), "a waiter waited half a second while permits came and went")
	require.Greater(t, acquired.Load(), int64(100))
	for _, s := range sems {
		st := s.Stats()
		assert.Zero(t, st.Held)
		assert.Zero(t, st.Waiting)
		assert.Equal(t, st.Acquired, st.Released+st.LeasesLost)
	}
	held, queued := settled(m, sems...)
	require.Zero(t, held, "no permit leaked")
	require.Zero(t, queued, "no place in the queue leaked")
	p, err := sems[0].AcquireTimeout(ctx, capacity, 0)
	require.NoError(t, err, "the whole capacity is free at once")
	p.Release()
	for _, s := range sems {
		require.NoError(t, s.Close())
	}
	t.Logf("%d permits acquired", acquired.Load())
}

// TestStressReleaseRacingRenewal races Release against a renewal, many times, with and without a
// loss of the backend's data in between: whichever reaches the backend first, the permits end up
// released (a renewal that registers again a lease released meanwhile is undone).
func TestStressReleaseRacingRenewal(t *testing.T) {
	t.Parallel()
	m := fleet.NewMemory()
	s := fleet.New(m, "x", 3, fleet.WithLease(time.Minute), fleet.WithLogger(nil))
	defer s.Close()
	stop := time.Now().Add(stressTime())
	rounds := 0
	for ; time.Now().Before(stop); rounds++ {
		var ps []*fleet.Permit
		for range 3 {
			p, err := s.Acquire(context.Background(), 1)
			require.NoError(t, err)
			ps = append(ps, p)
		}
		restart := rounds%2 == 0
		if restart {
			m.Restart()
		}
		var wg sync.WaitGroup
		wg.Go(func() { fleet.RenewNow(s) })
		for _, p := range ps {
			wg.Go(p.Release)
		}
		wg.Wait()
		held, _ := settled(m, s)
		require.Zero(t, held, "round %d (restart %v): a released lease is still held", rounds, restart)
		require.Zero(t, s.Stats().Held)
		if restart {
			// Past the pause after the loss, on the backend's clock (a renewal that found every
			// lease released did not ask the backend: make sure the new state exists first).
			_, err := m.Renew(context.Background(), fleetdriver.RenewRequest{Name: "x", TTL: time.Minute})
			require.NoError(t, err)
			m.Advance(time.Minute)
		}
	}
	st := s.Stats()
	assert.Equal(t, st.Acquired, st.Released+st.LeasesLost)
	t.Logf("%d rounds", rounds)
}

// TestStressReleaseRacingExpiry releases permits at the very instant their lease expires (a
// partition stopped the renewals): each permit ends exactly once, as released or as lost, and the
// counts add up.
func TestStressReleaseRacingExpiry(t *testing.T) {
	rounds := 20000
	if testing.Short() {
		rounds = 3000
	}
	synctest.Test(t, func(t *testing.T) {
		m := fleet.NewMemory()
		for range rounds / 100 {
			cut := &partition{b: m}
			s := fleet.New(cut, "x", 100, fleet.WithLease(time.Second), fleet.WithLogger(nil))
			var ps []*fleet.Permit
			for range 100 {
				p, err := s.Acquire(t.Context(), 1)
				require.NoError(t, err)
				ps = append(ps, p)
			}
			cut.cut.Store(true) // no renewal gets through: every lease dies at its deadline
			var wg sync.WaitGroup
			var released atomic.Int64
			for _, p := range ps {
				wg.Go(func() {
					time.Sleep(time.Second) // exactly the deadline
					p.Release()
					switch cause := context.Cause(p.Context()); {
					case errors.Is(cause, fleet.ErrLeaseLost), cause == context.Canceled:
						if cause == context.Canceled {
							released.Add(1)
						}
					default:
						t.Errorf("permit ended with cause %v", cause)
					}
				})
			}
			wg.Wait()
			st := s.Stats()
			require.Equal(t, int64(100), st.Released+st.LeasesLost, "every permit ended exactly once: %+v", st)
			require.Equal(t, released.Load(), st.Released)
			require.Zero(t, st.Held)
			cut.cut.Store(false)
			require.NoError(t, s.Close())
			time.Sleep(time.Second)
			require.Zero(t, m.Held("x"))
		}
	})
}

// TestStressCloseRacingAcquire closes a Semaphore while its workers acquire and release, over a
// backend whose grants take a while to come back (so that some arrive after Close): every call
// returns, every permit any Acquire returned is over once Close has returned (released, or its
// context cancelled by Close), and nothing stays held on the backend.
func TestStressCloseRacingAcquire(t *testing.T) {
	t.Parallel()
	m := fleet.NewMemory()
	slow := &partition{b: m}
	slow.slow.Store(int64(50 * time.Microsecond))
	stop := time.Now().Add(stressTime())
	rounds := 0
	for ; time.Now().Before(stop); rounds++ {
		s := fleet.New(slow, "x", 2, fleet.WithLease(time.Minute), fleet.WithLogger(nil))
		var closing atomic.Bool
		var mu sync.Mutex
		var kept []*fleet.Permit // permits got once Close had begun: Close must end them
		var wg sync.WaitGroup
		for range 6 {
			wg.Go(func() {
				for {
					p, err := s.Acquire(context.Background(), 1)
					if errors.Is(err, fleet.ErrClosed) {
						return
					}
					if !assert.NoError(t, err) {
						return
					}
					if closing.Load() {
						mu.Lock()
						kept = append(kept, p)
						mu.Unlock()
						return
					}
					p.Release()
				}
			})
		}
		time.Sleep(time.Duration(rand.IntN(500)) * time.Microsecond)
		closing.Store(true)
		require.NoError(t, s.Close())
		wg.Wait()
		for _, p := range kept {
			require.Error(t, p.Context().Err(), "round %d: a permit outlived Close", rounds)
		}
		require.Zero(t, m.Held("x"), "round %d: a permit outlived Close", rounds)
		require.Zero(t, m.Queued("x"), "round %d: a place in the queue outlived Close", rounds)
	}
	t.Logf("%d rounds", rounds)
}
