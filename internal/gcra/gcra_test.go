package gcra_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/goloom/loom/internal/gcra"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestNewRate(t *testing.T) {
	tests := []struct {
		name      string
		perSecond float64
		burst     int64
		interval  time.Duration
		tolerance time.Duration
	}{
		{"ten a second", 10, 1, 100 * time.Millisecond, 0},
		{"a burst of five", 10, 5, 100 * time.Millisecond, 400 * time.Millisecond},
		{"a third: rounded up, never faster", 3, 1, 333_333_334, 0},
		{"a billion a second", 1e9, 1, 1, 0},
		{"above a billion: one a nanosecond", 5e12, 3, 1, 2},
		{"unbounded", math.Inf(1), 7, 0, 0},
		{"one in three centuries: saturated", 1e-10, 1, gcra.Forever, 0},
		{"the smallest float", math.SmallestNonzeroFloat64, 2, gcra.Forever, gcra.Forever},
		{"a burst past the largest Duration: saturated", 1, 1e10, time.Second, gcra.Forever},
		{"the largest burst", 1e9, math.MaxInt64, 1, math.MaxInt64 - 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := gcra.NewRate(tt.perSecond, tt.burst)
			assert.Equal(t, tt.interval, r.Interval())
			assert.Equal(t, tt.tolerance, r.Tolerance())
		})
	}
}

func TestNewRateBadInput(t *testing.T) {
	for _, give := range []float64{0, -1, math.NaN(), math.Inf(-1)} {
		assert.Panics(t, func() { gcra.NewRate(give, 1) }, "%v", give)
	}
	assert.PanicsWithValue(t, "gcra: NewRate: rate must be above zero, got 0", func() { gcra.NewRate(0, 1) })
	assert.PanicsWithValue(t, "gcra: NewRate: burst must be at least 1, got 0", func() { gcra.NewRate(1, 0) })
}

// A new bucket is full: burst tokens at once, then one per interval, each reservation told when
// its token comes.
func TestReserveServesABurstThenOnePerInterval(t *testing.T) {
	r := gcra.NewRate(10, 3)
	var b gcra.Bucket
	now := 5 * time.Second
	var delays []time.Duration
	for range 6 {
		ok, d, _ := b.Reserve(r, now, -1)
		require.True(t, ok)
		delays = append(delays, d)
	}
	ms := time.Millisecond
	assert.Equal(t, []time.Duration{0, 0, 0, 100 * ms, 200 * ms, 300 * ms}, delays)
	ok, d, _ := b.Reserve(r, now, 350*ms)
	assert.False(t, ok, "the 7th comes at 400ms, after the max wait")
	assert.Equal(t, 400*ms, d)
	ok, d, _ = b.Reserve(r, now, 400*ms)
	assert.True(t, ok, "a token exactly at the max wait is taken")
	assert.Equal(t, 400*ms, d)

	// 2 s later the bucket is full again, and no fuller.
	now += 2 * time.Second
	for range 3 {
		wait, _ := b.Take(r, now)
		require.Zero(t, wait)
	}
	wait, _ := b.Take(r, now)
	assert.Equal(t, 100*ms, wait)
	assert.Equal(t, 100*ms, b.Due(r, now, 1))
	assert.Equal(t, 300*ms, b.Due(r, now, 3))
}

// "Rates saturate ... any rate > 0 and burst ≥ 1 behaves as its numbers say."
func TestExtremeRatesSaturate(t *testing.T) {
	t.Run("a tiny rate admits one, then none for centuries", func(t *testing.T) {
		r := gcra.NewRate(1e-10, 1)
		var b gcra.Bucket
		now := time.Hour
		wait, _ := b.Take(r, now)
		require.Zero(t, wait, "the first token is there")
		wait, _ = b.Take(r, now)
		assert.Greater(t, wait, 290*365*24*time.Hour, "the second comes in about 292 years")
		ok, _, _ := b.Reserve(r, now, time.Hour)
		assert.False(t, ok)
		ok, d, _ := b.Reserve(r, now, -1)
		assert.True(t, ok, "whenever it comes")
		assert.Greater(t, d, 290*365*24*time.Hour)
		assert.Greater(t, b.Due(r, now, 1), 290*365*24*time.Hour)
		assert.Equal(t, gcra.Forever, b.Due(r, now, 3), "saturated, not wrapped around")
	})
	t.Run("a huge burst admits at once", func(t *testing.T) {
		r := gcra.NewRate(1, 1e10)
		var b gcra.Bucket
		now := time.Minute
		for range 1000 {
			wait, _ := b.Take(r, now)
			require.Zero(t, wait)
		}
		assert.Zero(t, b.Due(r, now, 1e9))
	})
	t.Run("a rate of one a nanosecond", func(t *testing.T) {
		r := gcra.NewRate(1e9, 1)
		var b gcra.Bucket
		wait, _ := b.Take(r, 0)
		require.Zero(t, wait)
		wait, _ = b.Take(r, 0)
		assert.Equal(t, time.Duration(1), wait)
	})
	t.Run("an unbounded rate never holds back", func(t *testing.T) {
		r := gcra.NewRate(math.Inf(1), 1)
		var b gcra.Bucket
		for range 100 {
			wait, _ := b.Take(r, time.Second)
			require.Zero(t, wait)
		}
		assert.Zero(t, b.Due(r, time.Second, math.MaxInt64))
	})
	t.Run("a clock near the end of time", func(t *testing.T) {
		r := gcra.NewRate(1, 2)
		var b gcra.Bucket
		now := gcra.Forever - time.Second/2
		wait, _ := b.Take(r, now)
		require.Zero(t, wait)
		wait, _ = b.Take(r, now)
		assert.Equal(t, gcra.Forever, wait, "tat saturated: it lost count, and errs on the side of fewer tokens")
	})
	t.Run("a tiny rate with a burst never gives more than its burst", func(t *testing.T) {
		r := gcra.NewRate(math.SmallestNonzeroFloat64, 2)
		var b gcra.Bucket
		wait, _ := b.Take(r, time.Second)
		require.Zero(t, wait)
		wait, _ = b.Take(r, time.Second)
		require.Zero(t, wait, "the whole burst")
		assert.Zero(t, b.Due(r, time.Second, 0))
		assert.Equal(t, gcra.Forever, b.Due(r, time.Second, 1))
		wait, _ = b.Take(r, gcra.Forever)
		assert.Equal(t, gcra.Forever, wait, "and none after, whenever asked")
		ok, d, mark := b.Reserve(r, time.Second, -1)
		require.True(t, ok, "whenever it comes")
		require.Equal(t, gcra.Forever, d)
		assert.True(t, b.Cancel(r, time.Hour, mark), "not due: it goes back")
		_, _, mark = b.Reserve(r, time.Second, -1)
		_, _, later := b.Reserve(r, time.Second, -1)
		assert.False(t, b.Return(r, mark), "a later one depends on it")
		assert.True(t, b.Return(r, later))
	})
	t.Run("a tiny rate's burst: cancelled when due, nothing", func(t *testing.T) {
		r := gcra.NewRate(1e-12, 3)
		var b gcra.Bucket
		_, _, mark := b.Reserve(r, 0, -1)
		assert.False(t, b.Cancel(r, 0, mark))
		assert.True(t, b.Return(r, mark), "but a token never used comes back")
		for range 3 {
			wait, _ := b.Take(r, 0)
			require.Zero(t, wait)
		}
		wait, _ := b.Take(r, 0)
		assert.Equal(t, gcra.Forever, wait)
	})
}

// "Cancelling a token gives back only what no later reservation depends on."
func TestCancelGivesBackOnlyWhatNoLaterReservationDependsOn(t *testing.T) {
	ms := time.Millisecond
	r := gcra.NewRate(10, 1) // a token every 100 ms
	t.Run("the last reservation: all of it", func(t *testing.T) {
		var b gcra.Bucket
		b.Take(r, 0)                      // the token of 0
		_, d, mark := b.Reserve(r, 0, -1) // the token of 100 ms
		require.Equal(t, 100*ms, d)
		assert.True(t, b.Cancel(r, 10*ms, mark))
		_, d, _ = b.Reserve(r, 10*ms, -1)
		assert.Equal(t, 90*ms, d, "as if never asked: the next one gets the token of 100 ms")
	})
	t.Run("one that a later reservation depends on: nothing", func(t *testing.T) {
		var b gcra.Bucket
		b.Take(r, 0)
		_, _, first := b.Reserve(r, 0, -1)  // 100 ms
		_, _, second := b.Reserve(r, 0, -1) // 200 ms, told so assuming the first
		assert.False(t, b.Cancel(r, 10*ms, first), "the second was told 200 ms on the first's strength")
		_, d, _ := b.Reserve(r, 10*ms, -1)
		assert.Equal(t, 290*ms, d)
		_ = second
	})
	t.Run("in reverse order: both", func(t *testing.T) {
		var b gcra.Bucket
		b.Take(r, 0)
		_, _, first := b.Reserve(r, 0, -1)
		_, _, second := b.Reserve(r, 0, -1)
		assert.True(t, b.Cancel(r, 10*ms, second))
		assert.True(t, b.Cancel(r, 10*ms, first))
		_, d, _ := b.Reserve(r, 10*ms, -1)
		assert.Equal(t, 90*ms, d)
	})
	t.Run("a token whose time has come: spent", func(t *testing.T) {
		var b gcra.Bucket
		b.Take(r, 0)
		_, _, mark := b.Reserve(r, 0, -1) // 100 ms
		assert.False(t, b.Cancel(r, 100*ms, mark), "due at 100 ms: its holder may have acted")
		_, d, _ := b.Reserve(r, 100*ms, -1)
		assert.Equal(t, 100*ms, d)
	})
	t.Run("Return: a token never used comes back even when due", func(t *testing.T) {
		var b gcra.Bucket
		wait, mark := b.Take(r, 50*ms)
		require.Zero(t, wait)
		assert.True(t, b.Return(r, mark))
		wait, _ = b.Take(r, 50*ms)
		assert.Zero(t, wait, "as if never asked")
		wait, _ = b.Take(r, 50*ms)
		assert.Equal(t, 100*ms, wait)
	})
	t.Run("Return after a later reservation: nothing", func(t *testing.T) {
		var b gcra.Bucket
		_, mark := b.Take(r, 0)
		b.Reserve(r, 0, -1)
		assert.False(t, b.Return(r, mark))
	})
	t.Run("a saturated mark: nothing", func(t *testing.T) {
		var b gcra.Bucket
		now := gcra.Forever - r.Interval()/2
		_, mark := b.Take(r, now)
		require.Equal(t, int64(gcra.Forever), mark)
		assert.False(t, b.Return(r, mark), "the mark saturated: what it stands for is unknown")
		wait, _ := b.Take(r, now)
		assert.Equal(t, gcra.Forever, wait, "the token stays taken")
	})
}

// model is the bucket's arithmetic as the fleet's Redis script writes it, in plain int64: exact
// for parameters and times that cannot overflow.
type model struct{ tat int64 }

func (m *model) reserve(interval, burst, now, maxWait int64) (bool, int64, int64) {
	next := max(m.tat, now) + interval
	delay := max(0, next-burst*interval-now)
	if maxWait >= 0 && delay > maxWait {
		return false, delay, 0
	}
	m.tat = next
	return true, delay, next
}

func (m *model) cancel(interval, burst, now, mark int64) bool {
	if now >= mark-burst*interval {
		return false
	}
	restore := min(interval, interval-(m.tat-mark))
	if restore <= 0 {
		return false
	}
	m.tat -= restore
	return true
}

// The bucket agrees with the script's arithmetic on every step of random runs.
func TestBucketAgreesWithTheScriptsArithmetic(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for run := range 200 {
		perSecond := []float64{1, 3, 10, 100, 1000, 7, 1e6}[run%7]
		burst := int64(1 + rng.IntN(10))
		r := gcra.NewRate(perSecond, burst)
		interval := int64(r.Interval())
		var b gcra.Bucket
		var m model
		now := int64(rng.IntN(1e9))
		var marks []int64
		for step := range 300 {
			now += int64(rng.IntN(int(2 * interval)))
			switch rng.IntN(3) {
			case 0, 1:
				maxWait := int64(rng.IntN(int(4*interval))) - interval
				ok, d, mark := b.Reserve(r, time.Duration(now), time.Duration(maxWait))
				mok, md, mmark := m.reserve(interval, burst, now, maxWait)
				require.Equal(t, mok, ok, "run %d step %d", run, step)
				require.Equal(t, md, int64(d), "run %d step %d", run, step)
				require.Equal(t, mmark, mark, "run %d step %d", run, step)
				if ok {
					marks = append(marks, mark)
				}
			case 2:
				if len(marks) == 0 {
					continue
				}
				i := rng.IntN(len(marks))
				mark := marks[i]
				marks = slices.Delete(marks, i, i+1)
				require.Equal(t, m.cancel(interval, burst, now, mark), b.Cancel(r, time.Duration(now), mark), "run %d step %d", run, step)
			}
			require.Equal(t, max(0, max(m.tat, now)+interval-burst*interval-now), int64(b.Due(r, time.Duration(now), 1)), "run %d step %d: the next token", run, step)
		}
	}
}

// checkEnvelope asserts the bucket's promise over the times at which held tokens come: any k of
// them lie at least (k − burst) intervals apart, first to last.
func checkEnvelope(t *testing.T, at []int64, interval, burst int64) {
	t.Helper()
	slices.Sort(at)
	for i := range at {
		for j := i + int(burst); j < len(at); j++ {
			need := int64(j-i+1) - burst
			if at[j]-at[i] < need*interval {
				t.Fatalf("%d tokens from %d to %d: the bucket allows them in no less than %d", j-i+1, at[i], at[j], need*interval)
			}
		}
	}
}

// Under any mix of reservations, returns and cancels, the tokens kept never come faster than the
// bucket allows: giving back never inflates it.
func TestGivingBackNeverInflates(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 100 {
		burst := int64(1 + rng.IntN(5))
		r := gcra.NewRate(1000, burst) // 1 ms a token
		interval := int64(r.Interval())
		var b gcra.Bucket
		type held struct{ at, mark int64 }
		var kept []held
		now := int64(0)
		for range 400 {
			now += int64(rng.IntN(int(interval)))
			switch rng.IntN(4) {
			case 0, 1:
				if ok, d, mark := b.Reserve(r, time.Duration(now), -1); ok {
					kept = append(kept, held{now + int64(d), mark})
				}
			case 2, 3:
				if len(kept) == 0 {
					continue
				}
				i := rng.IntN(len(kept))
				h := kept[i]
				var back bool
				if rng.IntN(2) == 0 {
					back = b.Return(r, h.mark)
				} else {
					back = b.Cancel(r, time.Duration(now), h.mark)
				}
				if back || h.at > now {
					kept = slices.Delete(kept, i, i+1) // given back, or its holder leaves before its time
				}
			}
		}
		var at []int64
		for _, h := range kept {
			at = append(at, h.at)
		}
		checkEnvelope(t, at, interval, burst)
	}
}

// Many goroutines take and give back tokens of one bucket at one instant: however their
// compare-and-swaps interleave, no more than burst tokens are kept. Each round starts with a full bucket (now moves on by
// more than the burst's refill) and ends when it is empty. Mutation-checked: a plain store
// instead of a compare-and-swap in Reserve fails this at once. (What a Return gives back is
// checked against later reservations' times by TestGivingBackNeverInflates.)
func TestConcurrentTakeAndReturnKeepsTheBound(t *testing.T) {
	const burst, goroutines = 500, 4
	rounds := 400
	if testing.Short() {
		rounds = 40
	}
	r := gcra.NewRate(1000, burst)
	var b gcra.Bucket
	now := time.Second
	for round := range rounds {
		now += (burst + 1) * r.Interval()
		var kept atomic.Int64
		var wg sync.WaitGroup
		start := make(chan struct{})
		for g := range goroutines {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(round), uint64(g)))
				<-start
				for {
					wait, mark := b.Take(r, now)
					if wait > 0 {
						return
					}
					if rng.IntN(2) == 0 && b.Return(r, mark) {
						continue
					}
					kept.Add(1)
				}
			})
		}
		close(start)
		wg.Wait()
		if n := kept.Load(); n > burst {
			t.Fatalf("round %d: %d tokens kept at one instant, burst %d", round, n, burst)
		}
	}
}

// Take is Reserve with a max wait of 0, step for step, for finite and saturated rates alike.
func TestTakeIsReserveWithoutWaiting(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	for _, r := range []gcra.Rate{gcra.NewRate(100, 3), gcra.NewRate(1e9, 1), gcra.NewRate(1e-10, 2), gcra.NewRate(math.Inf(1), 1)} {
		var a, b gcra.Bucket
		now := time.Duration(rng.IntN(1e9))
		for step := range 2000 {
			now += time.Duration(rng.IntN(int(max(r.Interval(), 1)%1e9) + 1))
			wait, mark := a.Take(r, now)
			ok, delay, rmark := b.Reserve(r, now, 0)
			require.Equal(t, ok, wait == 0, "step %d", step)
			if ok {
				require.Equal(t, rmark, mark, "step %d", step)
			} else {
				require.Equal(t, delay, wait, "step %d", step)
			}
			if ok && rng.IntN(3) == 0 {
				require.Equal(t, b.Return(r, rmark), a.Return(r, mark), "step %d", step)
			}
		}
	}
}
