package scope_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/scope"
)

// "TryGo and TryFork: like Go/Fork, but with WithLimit they never block: false (and no subtask)
// when no slot is free. Without a limit they always fork; on a cancelled scope they return a
// Cancelled subtask and true, like Fork; after Join or Close they panic like Fork."
func TestTryForkAndTryGo(t *testing.T) {
	t.Run("without a limit they always fork", func(t *testing.T) {
		s := scope.Open(t.Context())
		defer s.Close()
		st, ok := scope.TryFork(s, value(7))
		require.True(t, ok)
		var ran atomic.Bool
		require.True(t, s.TryGo(func(context.Context) error { ran.Store(true); return nil }))
		require.NoError(t, s.Join())
		assert.Equal(t, 7, st.Get())
		assert.True(t, ran.Load())
	})
	t.Run("a full limit refuses without blocking, running or counting", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRecorder()
			s := scope.Open(t.Context(), scope.WithLimit(1), scope.WithJoiner(r))
			defer s.Close()
			release := make(chan struct{})
			held := scope.Fork(s, func(context.Context) (int, error) { <-release; return 1, nil })
			synctest.Wait()
			var ran atomic.Bool
			st, ok := scope.TryFork(s, func(context.Context) (int, error) { ran.Store(true); return 2, nil })
			assert.False(t, ok)
			assert.Nil(t, st, "no subtask")
			assert.False(t, s.TryGo(func(context.Context) error { ran.Store(true); return nil }))
			close(release)
			require.NoError(t, s.Join())
			assert.False(t, ran.Load(), "fn never ran")
			assert.Equal(t, []scope.Task{held}, r.forks, "OnFork never saw the refused forks")
			assert.Equal(t, 1, held.Get())
		})
	})
	t.Run("a free slot forks", func(t *testing.T) {
		s := scope.Open(t.Context(), scope.WithLimit(1))
		defer s.Close()
		st, ok := scope.TryFork(s, value(3))
		require.True(t, ok)
		require.NoError(t, s.Join())
		assert.Equal(t, 3, st.Get())
	})
	t.Run("a cancelled scope gives a Cancelled subtask", func(t *testing.T) {
		for _, opts := range [][]scope.Option{nil, {scope.WithLimit(1)}} {
			parent, cancel := context.WithCancel(t.Context())
			s := scope.Open(parent, opts...)
			release := make(chan struct{})
			scope.Fork(s, func(ctx context.Context) (int, error) { <-release; return 0, nil }) // takes the slot
			cancel()
			var ran atomic.Bool
			st, ok := scope.TryFork(s, func(context.Context) (int, error) { ran.Store(true); return 0, nil })
			require.True(t, ok, "true, like Fork, even with no slot free")
			assert.Equal(t, scope.Cancelled, st.State())
			assert.True(t, s.TryGo(func(context.Context) error { ran.Store(true); return nil }))
			close(release)
			require.ErrorIs(t, s.Join(), context.Canceled)
			assert.False(t, ran.Load())
		}
	})
	t.Run("after Join or Close they panic", func(t *testing.T) {
		for _, opts := range [][]scope.Option{nil, {scope.WithLimit(1)}} {
			s := scope.Open(t.Context(), opts...)
			require.NoError(t, s.Join())
			assert.PanicsWithValue(t, "scope: fork after join", func() { scope.TryFork(s, value(1)) })
			assert.PanicsWithValue(t, "scope: fork after join", func() { s.TryGo(func(context.Context) error { return nil }) })
			c := scope.Open(t.Context(), opts...)
			c.Close()
			assert.PanicsWithValue(t, "scope: fork after close", func() { scope.TryFork(c, value(1)) })
			assert.PanicsWithValue(t, "scope: fork after close", func() { c.TryGo(func(context.Context) error { return nil }) })
		}
	})
	t.Run("nil functions", func(t *testing.T) {
		s := scope.Open(t.Context())
		defer s.Close()
		assert.PanicsWithValue(t, "scope: TryFork: nil function", func() { scope.TryFork[int](s, nil) })
		assert.PanicsWithValue(t, "scope: TryGo: nil function", func() { s.TryGo(nil) })
	})
}

// goid returns the current goroutine's id, to tell where a subtask ran.
func goid() string {
	var buf [64]byte
	n := runtime.Stack(buf[:], false)
	return strings.Fields(string(buf[:n]))[1]
}

// "WithLimit reuses the goroutines of finished subtasks for blocked forks where it can (like
// Map), so a limited scope of 100k short subtasks costs no more than conc's pool." Every fork
// beyond the limit blocks, and the subtask that frees its slot runs it on its own goroutine: the
// subtasks end one at a time here (no two at the same instant), so each blocked fork is taken
// over, and 200 subtasks run on the limit's 4 goroutines.
func TestLimitReusesGoroutinesForBlockedForks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const limit, n = 4, 200
		s := scope.Open(t.Context(), scope.WithLimit(limit))
		defer s.Close()
		var mu sync.Mutex
		goroutines := map[string]bool{}
		var running, peak atomic.Int32
		for i := range n {
			scope.Fork(s, func(context.Context) (int, error) {
				if r := running.Add(1); r > peak.Load() {
					peak.Store(r)
				}
				mu.Lock()
				goroutines[goid()] = true
				mu.Unlock()
				time.Sleep(time.Millisecond + time.Duration(i)*time.Microsecond)
				running.Add(-1)
				return i, nil
			})
		}
		require.NoError(t, s.Join())
		assert.LessOrEqual(t, peak.Load(), int32(limit), "the limit holds")
		assert.Len(t, goroutines, limit, "%d subtasks ran on the limit's %d goroutines", n, limit)
	})
}

// A limited scope under load, cancelled at a random moment while its forks block, many times:
// the limit holds, every subtask ends in a final state — Cancelled ones never ran — Join returns,
// and nothing leaks (goleak, in TestMain). Forks come from the owner and from subtasks.
func TestLimitStress(t *testing.T) {
	rounds := 2000
	if raceEnabled {
		rounds = 300
	}
	errBoom := errors.New("boom")
	for round := range rounds {
		parent, cancel := context.WithCancel(t.Context())
		s := scope.Open(parent, scope.WithLimit(3))
		var running, peak atomic.Int32
		var mu sync.Mutex
		sts := map[int]*scope.Subtask[int]{}
		ran := map[int]bool{}
		var fork func(i int)
		fork = func(i int) {
			st := scope.Fork(s, func(ctx context.Context) (int, error) {
				r := running.Add(1)
				defer running.Add(-1)
				for p := peak.Load(); r > p && !peak.CompareAndSwap(p, r); p = peak.Load() {
				}
				mu.Lock()
				ran[i] = true
				mu.Unlock()
				if i%7 == 0 && i < 40 {
					fork(i + 100) // a subtask forks too
				}
				runtime.Gosched()
				if i == round%50 {
					return 0, errBoom
				}
				return i, ctx.Err()
			})
			mu.Lock()
			sts[i] = st
			mu.Unlock()
		}
		go func() {
			for range round % 5 {
				runtime.Gosched()
			}
			cancel()
		}()
		for i := range 50 {
			fork(i)
		}
		_ = s.Join()
		cancel()
		require.LessOrEqual(t, peak.Load(), int32(3), "round %d: the limit holds", round)
		mu.Lock()
		for i, st := range sts {
			require.NotEqual(t, scope.Running, st.State(), "round %d: final when Join returns", round)
			if st.State() != scope.Cancelled {
				require.True(t, ran[i], "round %d: a %v subtask that never ran", round, st.State())
			}
		}
		mu.Unlock()
	}
}
