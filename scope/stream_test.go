package scope_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/scope"
)

// counting is an input of n integers that counts how many have been read.
func counting(n int, read *atomic.Int64) iter.Seq[int] {
	return func(yield func(int) bool) {
		for i := range n {
			read.Add(1)
			if !yield(i) {
				return
			}
		}
	}
}

// "yields results in input order as soon as each one and all before it are ready ... It reads
// ahead at most n items beyond the one it waits to yield": calls end in random order, and the
// test checks the order, the calls running at once and the read-ahead at every pair.
func TestStreamOrderAndBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n, items = 4, 300
		var read atomic.Int64
		var running, peak atomic.Int32
		rng := rand.New(rand.NewPCG(1, 2))
		delays := make([]time.Duration, items)
		for i := range delays {
			delays[i] = time.Duration(rng.IntN(1000)) * time.Microsecond
		}
		got := 0
		for v, err := range scope.Stream(t.Context(), counting(items, &read), func(_ context.Context, i int) (string, error) {
			if r := running.Add(1); r > peak.Load() {
				peak.Store(r)
			}
			time.Sleep(delays[i])
			running.Add(-1)
			return fmt.Sprint(i), nil
		}, scope.WithLimit(n)) {
			require.NoError(t, err)
			require.Equal(t, fmt.Sprint(got), v, "input order")
			// The element yielded and at most n beyond it have been read.
			assert.LessOrEqual(t, read.Load(), int64(got+1+n), "read-ahead at pair %d", got)
			got++
		}
		assert.Equal(t, items, got)
		assert.LessOrEqual(t, peak.Load(), int32(n))
		assert.Equal(t, int32(n), peak.Load(), "and the window is used")
	})
}

func TestStreamDefaultLimitIsGOMAXPROCS(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var running, peak atomic.Int32
		var read atomic.Int64
		for _, err := range scope.Stream(t.Context(), counting(100, &read), func(context.Context, int) (int, error) {
			if r := running.Add(1); r > peak.Load() {
				peak.Store(r)
			}
			time.Sleep(time.Millisecond)
			running.Add(-1)
			return 0, nil
		}) {
			require.NoError(t, err)
		}
		assert.Equal(t, int32(runtime.GOMAXPROCS(0)), peak.Load())
	})
}

// "The first failure (FailFast) is yielded as the last pair" — also when it cancels an element
// before it in input order, which then carries the failure.
func TestStreamFailFast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errBad := errors.New("bad element")
		var read atomic.Int64
		var pairs []string
		for v, err := range scope.Stream(t.Context(), counting(1000, &read), func(ctx context.Context, i int) (int, error) {
			switch i {
			case 5:
				time.Sleep(time.Millisecond)
				return 0, errBad
			case 3: // still running when 5 fails: cancelled
				<-ctx.Done()
				return 0, ctx.Err()
			}
			return i, nil
		}, scope.WithLimit(4)) {
			if err != nil {
				pairs = append(pairs, "error: "+err.Error())
			} else {
				pairs = append(pairs, fmt.Sprint(v))
			}
		}
		assert.Equal(t, []string{"0", "1", "2", "error: bad element"}, pairs)
		assert.Less(t, read.Load(), int64(20), "reading stopped")
	})
	t.Run("a failure at the head", func(t *testing.T) {
		errBad := errors.New("bad")
		var pairs []error
		for _, err := range scope.Stream(t.Context(), slices.Values([]int{0, 1, 2}), func(_ context.Context, i int) (int, error) {
			if i == 1 {
				return 0, errBad
			}
			return i, nil
		}, scope.WithLimit(1)) {
			pairs = append(pairs, err)
		}
		assert.Equal(t, []error{nil, errBad}, pairs)
	})
}

// "AwaitAll yields every pair."
func TestStreamAwaitAll(t *testing.T) {
	var pairs []string
	for v, err := range scope.Stream(t.Context(), slices.Values([]int{1, 2, 3, 4}), func(_ context.Context, i int) (int, error) {
		if i%2 == 0 {
			return 0, fmt.Errorf("even %d", i)
		}
		return i * 10, nil
	}, scope.AwaitAll()) {
		if err != nil {
			pairs = append(pairs, err.Error())
		} else {
			pairs = append(pairs, fmt.Sprint(v))
		}
	}
	assert.Equal(t, []string{"10", "even 2", "30", "even 4"}, pairs)
}

// "breaking out of the loop cancels and waits for the running calls, so nothing outlives the
// loop."
func TestStreamBreakCancelsAndWaits(t *testing.T) {
	var started, returned atomic.Int32
	var read atomic.Int64
	for v, err := range scope.Stream(t.Context(), counting(1_000_000, &read), func(ctx context.Context, i int) (int, error) {
		started.Add(1)
		defer returned.Add(1)
		if i > 0 {
			<-ctx.Done() // only the break's cancellation ends these
			return 0, ctx.Err()
		}
		return i, nil
	}, scope.WithLimit(8)) {
		require.NoError(t, err)
		require.Equal(t, 0, v)
		break
	}
	assert.Equal(t, started.Load(), returned.Load(), "every call had returned when range did")
	assert.LessOrEqual(t, read.Load(), int64(9))
}

// "a panic in fn re-panics in the consumer's goroutine with the child's stack."
func TestStreamPanic(t *testing.T) {
	consumer := goid()
	var pe *scope.PanicError
	var where string
	func() {
		defer func() {
			pe, _ = recover().(*scope.PanicError)
			where = goid()
		}()
		for range scope.Stream(t.Context(), slices.Values([]int{0, 1, 2}), func(_ context.Context, i int) (int, error) {
			if i == 1 {
				childPanicsHere()
			}
			return i, nil
		}) {
		}
	}()
	require.NotNil(t, pe, "the range re-panicked with the *PanicError")
	assert.Equal(t, consumer, where, "on the consumer's goroutine")
	assert.Equal(t, "deep in the child", pe.Value)
	assert.Contains(t, pe.Error(), "scope_test.childPanicsHere", "with the child's stack")

	t.Run("PanicsAsErrors yields it", func(t *testing.T) {
		var errs []error
		for _, err := range scope.Stream(t.Context(), slices.Values([]int{0, 1}), func(_ context.Context, i int) (int, error) {
			if i == 1 {
				panic("boom")
			}
			return i, nil
		}, scope.PanicsAsErrors(), scope.WithLimit(1)) {
			errs = append(errs, err)
		}
		require.Len(t, errs, 2)
		var got *scope.PanicError
		require.ErrorAs(t, errs[1], &got)
		assert.Equal(t, "boom", got.Value)
	})
}

// An end from outside is the last pair, with its cause.
func TestStreamParentCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		parent, cancel := context.WithCancelCause(t.Context())
		errGone := errors.New("client went away")
		var last error
		count := 0
		for _, err := range scope.Stream(parent, counting(100, new(atomic.Int64)), func(ctx context.Context, i int) (int, error) {
			if i == 10 {
				cancel(errGone)
			}
			select {
			case <-ctx.Done():
				return 0, ctx.Err()
			case <-time.After(time.Millisecond):
				return i, nil
			}
		}, scope.WithLimit(2)) {
			count++
			last = err
		}
		require.ErrorIs(t, last, errGone)
		assert.Less(t, count, 20)
	})
}

// "so a 10-million-item input runs in constant memory (test it: heap stays flat)"
func TestStreamConstantMemory(t *testing.T) {
	items := 10_000_000
	if raceEnabled || testing.Short() {
		items = 200_000
	}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	var at10, atEnd uint64
	sum := 0
	for v, err := range scope.Stream(t.Context(), counting(items, new(atomic.Int64)), func(_ context.Context, i int) (int, error) {
		return i & 1, nil
	}, scope.WithLimit(16)) {
		require.NoError(t, err)
		sum += v
		switch sum {
		case items / 20:
			at10 = heap()
		case items/2 - 1:
			atEnd = heap()
		}
	}
	require.Equal(t, items/2, sum)
	t.Logf("heap after 10%%: %d KiB, near the end: %d KiB (%d items)", at10>>10, atEnd>>10, items)
	assert.Less(t, atEnd, at10+4<<20, "the heap stays flat")
}

func TestStreamMisuse(t *testing.T) {
	var nilCtx context.Context
	fn := func(context.Context, int) (int, error) { return 0, nil }
	in := slices.Values([]int{1})
	assert.PanicsWithValue(t, "scope: Stream: nil context", func() { scope.Stream(nilCtx, in, fn) })
	assert.PanicsWithValue(t, "scope: Stream: nil input", func() { scope.Stream[int, int](t.Context(), nil, fn) })
	assert.PanicsWithValue(t, "scope: Stream: nil function", func() { scope.Stream[int, int](t.Context(), in, nil) })
}

// A Stream may be ranged over again: each range runs every call again.
func TestStreamRangedTwice(t *testing.T) {
	var calls atomic.Int32
	st := scope.Stream(t.Context(), slices.Values([]string{"a", "b"}), func(_ context.Context, s string) (string, error) {
		calls.Add(1)
		return strings.ToUpper(s), nil
	})
	for range 2 {
		var got []string
		for v, err := range st {
			require.NoError(t, err)
			got = append(got, v)
		}
		assert.Equal(t, []string{"A", "B"}, got)
	}
	assert.Equal(t, int32(4), calls.Load())
}

// Real interleavings, many times: calls that yield the processor at random, a consumer that
// breaks out at a random pair, a failure at a random element. Each round checks the order, the
// bound on running calls and read-ahead, the last pair, and that no call runs once range returns.
func TestStreamStress(t *testing.T) {
	rounds := 1000
	if raceEnabled {
		rounds = 200
	}
	errBad := errors.New("bad")
	for round := range rounds {
		rng := rand.New(rand.NewPCG(uint64(round), 7))
		n, items := 1+rng.IntN(6), rng.IntN(60)
		breakAt, failAt := rng.IntN(80), rng.IntN(120)
		var read atomic.Int64
		var running, peak, live atomic.Int32
		next := 0
		for v, err := range scope.Stream(t.Context(), counting(items, &read), func(ctx context.Context, i int) (int, error) {
			live.Add(1)
			defer live.Add(-1)
			r := running.Add(1)
			defer running.Add(-1)
			for p := peak.Load(); r > p && !peak.CompareAndSwap(p, r); p = peak.Load() {
			}
			for range i % 3 {
				runtime.Gosched()
			}
			if i == failAt {
				return 0, errBad
			}
			return i, nil
		}, scope.WithLimit(n)) {
			require.LessOrEqual(t, read.Load(), int64(next+1+n), "round %d: read-ahead", round)
			if err != nil {
				require.ErrorIs(t, err, errBad, "round %d", round)
				require.LessOrEqual(t, next, failAt, "round %d: the failure is the last pair, at or before it", round)
				next = -1 // no pair may follow
				continue
			}
			require.NotEqual(t, -1, next, "round %d: a pair after the failure", round)
			require.Equal(t, next, v, "round %d: input order", round)
			next++
			if next == breakAt {
				break
			}
		}
		require.Zero(t, live.Load(), "round %d: a call outlived the loop", round)
		require.LessOrEqual(t, peak.Load(), int32(n), "round %d: calls running at once", round)
		if next >= 0 && next < breakAt && failAt >= items {
			require.Equal(t, items, next, "round %d: every pair", round)
		}
	}
}

// Regression (issue 21): a call that runs runtime.Goexit ends its worker goroutine, and the
// stream counted that worker as alive until after the call's completion was signalled, so the
// next element could be queued to no live worker and the range hung. Goexit is that element's
// ErrGoexit, yielded in order. In a synctest bubble a hang is a deadlock, reported at once.
func TestStreamGoexitNeverHangs(t *testing.T) {
	rounds := 2000
	if raceEnabled {
		rounds = 500
	}
	for round := range rounds {
		n := 1 + round%3
		synctest.Test(t, func(t *testing.T) {
			var got []string
			for v, err := range scope.Stream(t.Context(), slices.Values([]int{0, 1, 2, 3, 4, 5}), func(_ context.Context, i int) (int, error) {
				if i%2 == 0 {
					runtime.Goexit()
				}
				return i, nil
			}, scope.WithLimit(n), scope.AwaitAll()) {
				if err != nil {
					require.ErrorIs(t, err, scope.ErrGoexit, "round %d", round)
					got = append(got, "goexit")
				} else {
					got = append(got, fmt.Sprint(v))
				}
			}
			require.Equal(t, []string{"goexit", "1", "goexit", "3", "goexit", "5"}, got, "round %d", round)
		})
	}
}
