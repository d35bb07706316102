package limiter_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/limiter"
)

// starts records when calls start, safely from many goroutines.
type starts struct {
	mu sync.Mutex
	at []time.Time
}

func (s *starts) add() {
	now := time.Now()
	s.mu.Lock()
	s.at = append(s.at, now)
	s.mu.Unlock()
}

func (s *starts) times() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.at)
}

// checkEnvelope asserts the token bucket's promise over every stretch of starts: k starts within
// d need (k - burst) / perSecond of time between the first and the last.
func checkEnvelope(t *testing.T, at []time.Time, perSecond float64, burst int, slack time.Duration) {
	t.Helper()
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	for i := range at {
		for j := i + burst; j < len(at); j++ {
			need := time.Duration(float64(j-i+1-burst) / perSecond * float64(time.Second))
			if got := at[j].Sub(at[i]); got+slack < need {
				t.Fatalf("%d starts within %v (from start %d), the bucket allows them in no less than %v",
					j-i+1, got, i, need)
			}
		}
	}
}

// "The measured start rate over 60 s of simulated time (synctest) is within 1 % of perSecond with
// bursts never above burst."
func TestRateOverAMinuteOfFakeTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const perSecond, burst = 50.0, 10
		l := limiter.New(100, limiter.WithRate(perSecond, burst))
		var st starts
		ctx := t.Context() // no deadline: nothing is rejected early, every caller waits its turn
		t0 := time.Now()
		end := t0.Add(time.Minute)
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for time.Now().Before(end) {
					task := func(context.Context) error { st.add(); time.Sleep(time.Millisecond); return nil }
					if g%2 == 0 {
						require.NoError(t, l.Do(ctx, task))
					} else {
						_, err := limiter.Submit(ctx, l, func(ctx context.Context) (int, error) { return 0, task(ctx) }).Wait(ctx)
						require.NoError(t, err)
					}
				}
			})
		}
		wg.Wait()
		var at []time.Time
		for _, s := range st.times() {
			if s.Before(end) {
				at = append(at, s)
			}
		}
		rate := float64(len(at)-burst) / time.Minute.Seconds() // the first burst comes at once
		t.Logf("%d starts in 60 s of fake time: %.3f per second after the first burst of %d", len(at), rate, burst)
		assert.InEpsilon(t, perSecond, rate, 0.01)
		checkEnvelope(t, at, perSecond, burst, 0)
		atRest(t, l)
	})
}

// "with 8 goroutines hammering on a real clock": on the real clock the bucket never lets more
// calls start than its numbers allow — counted from before New to after the last start, a bound
// that a late timer or a stalled caller can only loosen, so it holds exactly on any machine —
// and its tokens are used: at least half of them, which two busy loops beside the test leave
// room for many times over. The rate to the percent is the fake clock's to check (above).
func TestRateOnARealClock(t *testing.T) {
	const perSecond, burst = 100.0, 50
	d := 2 * time.Second
	before := time.Now()
	l := limiter.New(1000, limiter.WithRate(perSecond, burst))
	var st starts
	ctx, stop := context.WithTimeout(context.Background(), d)
	defer stop()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for ctx.Err() == nil {
				_ = l.Do(ctx, func(context.Context) error { st.add(); return nil })
			}
		})
	}
	wg.Wait()
	at := st.times()
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	span := at[len(at)-1].Sub(before)
	allowed := burst + int(perSecond*span.Seconds())
	t.Logf("%d starts in %v; the bucket allows %d", len(at), span.Round(time.Millisecond), allowed)
	assert.LessOrEqual(t, len(at), allowed, "never more starts than the bucket allows")
	assert.GreaterOrEqual(t, len(at), allowed/2, "the tokens are used")
	atRest(t, l)
}

// "One FIFO order for slots and tokens: a call waiting for a token holds back the calls behind it,
// Submits included; a task waiting for a token costs no goroutine."
func TestRateOneFIFOForSlotsAndTokens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(10, limiter.WithRate(1, 1))
		var order []string
		var mu sync.Mutex
		t0 := time.Now()
		task := func(name string) func(context.Context) error {
			return func(context.Context) error {
				mu.Lock()
				order = append(order, fmt.Sprintf("%s@%v", name, time.Since(t0).Round(time.Millisecond)))
				mu.Unlock()
				return nil
			}
		}
		require.NoError(t, l.Do(t.Context(), task("first"))) // takes the only token
		a := goDo(t.Context(), l, task("a"))
		before := runtime.NumGoroutine()
		b := limiter.Submit(t.Context(), l, func(ctx context.Context) (int, error) { return 0, task("b")(ctx) })
		synctest.Wait()
		assert.Equal(t, before, runtime.NumGoroutine(), "a Submitted task waiting for a token costs no goroutine")
		c := goDo(t.Context(), l, task("c"))
		s := l.Stats()
		assert.Equal(t, 3, s.Waiting)
		assert.Equal(t, 3, s.RateWaiting, "the rate, not the limit, holds them back")
		assert.Zero(t, s.InFlight)
		require.NoError(t, <-a.err)
		_, err := b.Wait(t.Context())
		require.NoError(t, err)
		require.NoError(t, <-c.err)
		assert.Equal(t, []string{"first@0s", "a@1s", "b@2s", "c@3s"}, order)
		atRest(t, l)
	})
}

// "Reject early: a call whose token would arrive after its acquire timeout (or ctx deadline) is
// rejected at once with ErrAcquireTimeout — no pointless wait — and counted Rejected; Stats stay
// conserved."
func TestRateRejectsEarly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(10, limiter.WithRate(1, 1), limiter.WithAcquireTimeout(1500*time.Millisecond))
		noop := func(context.Context) error { return nil }
		require.NoError(t, l.Do(t.Context(), noop)) // the token of t=0
		second := goDo(t.Context(), l, nil)         // its token comes at 1s: within 1.5s, it waits
		start := time.Now()
		err := l.Do(t.Context(), noop) // would come at 2s: later than 1.5s
		require.ErrorIs(t, err, limiter.ErrAcquireTimeout)
		assert.Equal(t, time.Duration(0), time.Since(start), "rejected at once, not after waiting")
		f := limiter.Submit(t.Context(), l, func(context.Context) (int, error) { return 0, nil })
		_, err = f.Wait(t.Context())
		require.ErrorIs(t, err, limiter.ErrAcquireTimeout, "Submits too")
		assert.Equal(t, time.Duration(0), time.Since(start))

		// A ctx deadline counts as well, without an acquire timeout.
		l2 := limiter.New(10, limiter.WithRate(1, 1))
		require.NoError(t, l2.Do(t.Context(), noop))
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		defer cancel()
		require.ErrorIs(t, l2.Do(ctx, noop), limiter.ErrAcquireTimeout)
		assert.Equal(t, time.Duration(0), time.Since(start))

		require.NoError(t, <-second.err)
		s := atRest(t, l)
		assert.Equal(t, int64(2), s.Rejected)
		assert.Equal(t, int64(1), atRest(t, l2).Rejected)
	})
}

// "Exact under cancellation: a waiter that leaves (ctx, Future.Cancel, Shutdown) returns its
// token; 10k random cancels leave the bucket as if they never asked (test against a model under
// synctest)." Calls arrive at random times through Do and Submit, and many leave at a random time
// while they wait — ctx, Future.Cancel, or an acquire timeout. A model of one FIFO queue in front
// of the bucket, through which a leaving call passes without a token, predicts the start of every
// call that stays; every start is checked against it.
func TestRateCancellationIsExact(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n, perSecond, burst = 10_000, 100.0, 3
		interval := time.Second / perSecond
		rng := rand.New(rand.NewPCG(3, 4))
		type call struct {
			arrive, leave time.Duration // leave 0: stays
			how           int           // 0 ctx, 1 Future.Cancel, 2 both through Do's ctx
			start         time.Duration // measured; -1 if it never started
		}
		calls := make([]call, n)
		at := time.Duration(0)
		for i := range calls {
			// Times on odd microseconds for arrivals (3) and leaves (10), never on a token's
			// instant (arrivals' offset): no two events of the run can coincide ambiguously.
			at += time.Duration(rng.IntN(15))*time.Millisecond + 3*time.Microsecond
			c := call{arrive: at, start: -1}
			if rng.IntN(3) > 0 {
				c.leave = at + time.Duration(rng.IntN(200))*time.Millisecond + 7*time.Microsecond
				c.how = rng.IntN(3)
			}
			calls[i] = c
			at -= 3 * time.Microsecond
		}

		// The model: FIFO, a token at start, GCRA with burst tokens of slack.
		want := make([]time.Duration, n)
		var tat, last time.Duration
		tolerance := burst * interval
		for i, c := range calls {
			start := max(c.arrive, last, tat+interval-tolerance)
			if c.leave != 0 && c.leave < start {
				want[i] = -1 // left before its token came: took none
				continue
			}
			want[i], last, tat = start, start, max(tat, start)+interval
		}

		l := limiter.New(n, limiter.WithRate(perSecond, burst))
		t0 := time.Now()
		var wg sync.WaitGroup
		for i := range calls {
			c := &calls[i]
			time.Sleep(time.Until(t0.Add(c.arrive)))
			ctx, cancel := context.WithCancel(t.Context())
			task := func(context.Context) error { c.start = time.Since(t0); return nil }
			if i%2 == 0 {
				wg.Go(func() { _ = l.Do(ctx, task); cancel() })
				if c.leave != 0 {
					time.AfterFunc(c.leave-c.arrive, cancel)
				}
			} else {
				f := limiter.Submit(ctx, l, func(ctx context.Context) (int, error) { return 0, task(ctx) })
				if c.leave != 0 {
					if c.how == 1 {
						time.AfterFunc(c.leave-c.arrive, f.Cancel)
					} else {
						time.AfterFunc(c.leave-c.arrive, cancel)
					}
				}
				wg.Go(func() { _, _ = f.Wait(t.Context()); cancel() })
			}
			synctest.Wait()
		}
		wg.Wait()
		left := 0
		for i := range calls {
			if want[i] < 0 {
				left++
			}
			require.Equal(t, want[i], calls[i].start, "call %d (arrives %v, leaves %v)", i, calls[i].arrive, calls[i].leave)
		}
		t.Logf("%d calls, %d left while waiting: every start as the model says", n, left)
		assert.Greater(t, left, 1000)
		atRest(t, l)
	})
}

// Shutdown fails the calls waiting for a token; they took none.
func TestRateShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limiter.New(10, limiter.WithRate(1, 1))
		require.NoError(t, l.Do(t.Context(), func(context.Context) error { return nil }))
		w := goDo(t.Context(), l, nil)
		require.NoError(t, l.Shutdown(t.Context()))
		require.ErrorIs(t, <-w.err, limiter.ErrClosed)
		assert.False(t, w.ran)
		atRest(t, l)
	})
}

func TestWithRateBadInput(t *testing.T) {
	for _, give := range []float64{0, -1, math.NaN(), math.Inf(-1)} {
		assert.Panics(t, func() { limiter.WithRate(give, 1) }, "%v", give)
	}
	for _, give := range []float64{math.SmallestNonzeroFloat64, 1e-10, 2e9, math.MaxFloat64, math.Inf(1)} {
		assert.NotPanics(t, func() { limiter.WithRate(give, 1) }, "%v: any rate above zero", give)
	}
	assert.PanicsWithValue(t, "limiter: WithRate: burst must be at least 1, got 0", func() { limiter.WithRate(1, 0) })
	assert.PanicsWithValue(t, "limiter: WithRate: perSecond must be above zero, got 0", func() { limiter.WithRate(0, 1) })
}

// Many goroutines through a rate and a limit at once, with cancels and acquire timeouts: the
// limit and the bucket both hold, exactly, and Stats add up. On the fake clock (the bubble's
// goroutines still run side by side), so that a start is stamped at the instant it was
// admitted: the envelope holds with no slack at all. Regression: on the real clock this checked
// the envelope with 1 ms of slack, and failed on a loaded machine.
func TestRateStress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const limit, perSecond, burst = 4, 2000.0, 20
		l := limiter.New(limit, limiter.WithRate(perSecond, burst), limiter.WithAcquireTimeout(2*time.Millisecond))
		var running, peak atomic.Int32
		var st starts
		var wg sync.WaitGroup
		deadline := time.Now().Add(500 * time.Millisecond)
		for g := range 16 {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(g), 9))
				for time.Now().Before(deadline) {
					ctx, cancel := context.WithCancel(context.Background())
					if rng.IntN(4) == 0 {
						time.AfterFunc(time.Duration(rng.IntN(2000))*time.Microsecond, cancel)
					}
					pause := time.Duration(rng.IntN(300)) * time.Microsecond // drawn here: a Submitted task may outlive its caller's wait
					task := func(context.Context) error {
						st.add()
						r := running.Add(1)
						for p := peak.Load(); r > p && !peak.CompareAndSwap(p, r); p = peak.Load() {
						}
						time.Sleep(pause)
						running.Add(-1)
						return nil
					}
					if g%2 == 0 {
						_ = l.Do(ctx, task)
					} else {
						_, _ = limiter.Submit(ctx, l, func(ctx context.Context) (int, error) { return 0, task(ctx) }).Wait(context.Background())
					}
					cancel()
					// Between calls, a moment of fake time: a caller rejected at once would
					// otherwise spin, and the bubble's clock never move.
					time.Sleep(time.Duration(1+rng.IntN(50)) * time.Microsecond)
				}
			})
		}
		wg.Wait()
		at := st.times()
		t.Logf("%d starts in 500 ms of fake time", len(at))
		assert.LessOrEqual(t, peak.Load(), int32(limit))
		assert.Equal(t, int32(limit), peak.Load(), "and the limit is reached")
		checkEnvelope(t, at, perSecond, burst, 0)
		s := atRest(t, l)
		assert.Positive(t, s.Rejected, "some tokens came too late")
		assert.Positive(t, s.Cancelled, "some callers left")
	})
}

// "Rates saturate. Every interval and sum computed from a rate (limiter and fleet) saturates at
// the largest Duration; any rate > 0 and burst ≥ 1 behaves as its numbers say." Regression: a
// rate of 1e-10 let every call through (its interval overflowed), a burst of 1e10 refused the
// first call (its tolerance did), and rates above 1e9 a second panicked.
func TestRateExtremesBehaveAsTheirNumbersSay(t *testing.T) {
	noop := func(context.Context) error { return nil }
	t.Run("a token in three centuries", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := limiter.New(10, limiter.WithRate(1e-10, 3), limiter.WithAcquireTimeout(0))
			for i := range 3 {
				require.NoError(t, l.Do(t.Context(), noop), "call %d: within the burst", i)
			}
			require.ErrorIs(t, l.Do(t.Context(), noop), limiter.ErrAcquireTimeout)
			time.Sleep(200 * 365 * 24 * time.Hour) // two centuries of fake time
			require.ErrorIs(t, l.Do(t.Context(), noop), limiter.ErrAcquireTimeout, "still no token")
			f := limiter.Submit(t.Context(), l, func(context.Context) (int, error) { return 0, nil })
			_, err := f.Wait(t.Context())
			require.ErrorIs(t, err, limiter.ErrAcquireTimeout)
			assert.Equal(t, int64(3), atRest(t, l).Rejected)
		})
	})
	t.Run("a burst of ten billion", func(t *testing.T) {
		l := limiter.New(10, limiter.WithRate(1, 1e10), limiter.WithAcquireTimeout(0))
		for i := range 1000 {
			require.NoError(t, l.Do(t.Context(), noop), "call %d: within the burst", i)
		}
		assert.Equal(t, int64(1000), atRest(t, l).Completed)
	})
	t.Run("a trillion a second", func(t *testing.T) {
		l := limiter.New(10, limiter.WithRate(1e12, 1), limiter.WithAcquireTimeout(time.Minute))
		for range 1000 {
			require.NoError(t, l.Do(t.Context(), noop))
		}
		atRest(t, l)
	})
	t.Run("a second of waiting, at a tiny rate, is rejected at once", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := limiter.New(10, limiter.WithRate(1e-10, 1), limiter.WithAcquireTimeout(time.Second))
			require.NoError(t, l.Do(t.Context(), noop))
			start := time.Now()
			require.ErrorIs(t, l.Do(t.Context(), noop), limiter.ErrAcquireTimeout)
			assert.Zero(t, time.Since(start), "the token would come in centuries: rejected at once")
			atRest(t, l)
		})
	})
}

// "A token at or before the deadline is admitted (x/time/rate's ReserveN with a max wait): the
// wait's expiry makes one last try at the gate." Regression: the wait for a token that came
// exactly at the acquire deadline (or up to ~200 µs before it, on a real clock) ended in
// ErrAcquireTimeout whenever the waiter's own timer beat the gate's.
func TestRateTokenAtTheDeadlineIsAdmitted(t *testing.T) {
	noop := func(context.Context) error { return nil }
	t.Run("fake clock, exactly at the deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			for i := range 50 {
				l := limiter.New(10, limiter.WithRate(1, 1), limiter.WithAcquireTimeout(time.Second))
				require.NoError(t, l.Do(t.Context(), noop)) // the token of now; the next comes in 1 s
				if i%2 == 0 {
					require.NoError(t, l.Do(t.Context(), noop), "round %d: Do", i)
				} else {
					_, err := limiter.Submit(t.Context(), l, func(context.Context) (int, error) { return 0, nil }).Wait(t.Context())
					require.NoError(t, err, "round %d: Submit", i)
				}
				atRest(t, l)
			}
		})
	})
	t.Run("real clock, the token just before the deadline", func(t *testing.T) {
		// A token every millisecond and an acquire timeout of one: the second call's token comes
		// no later than its deadline, however late the machine runs its timers.
		for i := range 200 {
			l := limiter.New(10, limiter.WithRate(1000, 1), limiter.WithAcquireTimeout(time.Millisecond))
			require.NoError(t, l.Do(t.Context(), noop))
			if i%2 == 0 {
				require.NoError(t, l.Do(t.Context(), noop), "round %d: Do", i)
			} else {
				_, err := limiter.Submit(t.Context(), l, func(context.Context) (int, error) { return 0, nil }).Wait(t.Context())
				require.NoError(t, err, "round %d: Submit", i)
			}
			atRest(t, l)
		}
	})
}
