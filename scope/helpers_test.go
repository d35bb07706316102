package scope_test

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/goloom/loom/scope"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// "All[T](ctx, fns ...func(context.Context) (T, error)) ([]T, error) (results in input order, fail
// fast)"
func TestAllKeepsInputOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		got, err := scope.All(t.Context(),
			sleeper(3*time.Second, 1, nil),
			sleeper(time.Second, 2, nil),
			sleeper(2*time.Second, 3, nil))
		require.NoError(t, err)
		assert.Equal(t, []int{1, 2, 3}, got)
		assert.Equal(t, 3*time.Second, time.Since(synctestStart(t)), "concurrently")

		empty, err := scope.All[int](t.Context())
		require.NoError(t, err)
		assert.Empty(t, empty)
	})
}

func TestAllFailsFast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var cancelled atomic.Bool
		got, err := scope.All(t.Context(),
			func(ctx context.Context) (int, error) {
				<-ctx.Done()
				cancelled.Store(true)
				return 0, ctx.Err()
			},
			sleeper(time.Second, 0, errA))
		require.Equal(t, errA, err)
		assert.Nil(t, got)
		assert.True(t, cancelled.Load())
		assert.Equal(t, time.Second, time.Since(synctestStart(t)))
	})
}

// The helpers are built on a scope: a panic re-panics on the caller's goroutine as a *PanicError.
func TestAllPanics(t *testing.T) {
	t.Parallel()
	require.PanicsWithValue(t, "scope: All: nil function", func() { _, _ = scope.All[int](t.Context(), nil) })
	defer func() {
		pe, ok := recover().(*scope.PanicError)
		require.True(t, ok)
		assert.Equal(t, "in All", pe.Value)
	}()
	_, _ = scope.All(t.Context(), func(context.Context) (int, error) { explode("in All"); return 0, nil })
	t.Fatal("All returned")
}

// "Race[T](ctx, fns...) (T, error) (first success, cancel the rest)"
func TestRace(t *testing.T) {
	t.Run("first success cancels the rest", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var loserCancelled atomic.Bool
			got, err := scope.Race(t.Context(),
				func(ctx context.Context) (string, error) {
					select {
					case <-time.After(time.Hour):
						return "slow", nil
					case <-ctx.Done():
						loserCancelled.Store(true)
						return "", ctx.Err()
					}
				},
				func(context.Context) (string, error) { return "", errA },
				func(context.Context) (string, error) { time.Sleep(time.Second); return "fast", nil })
			require.NoError(t, err)
			assert.Equal(t, "fast", got)
			assert.True(t, loserCancelled.Load())
			assert.Equal(t, time.Second, time.Since(synctestStart(t)))
		})
	})
	t.Run("the first of several successes", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			got, err := scope.Race(t.Context(),
				sleeper(2*time.Second, 2, nil), // ignores its context: its success comes after the win
				sleeper(time.Second, 1, nil))
			require.NoError(t, err)
			assert.Equal(t, 1, got)
		})
	})
	t.Run("all fail", func(t *testing.T) {
		t.Parallel()
		got, err := scope.Race(t.Context(), failing(errA), failing(errB))
		require.ErrorIs(t, err, errA)
		require.ErrorIs(t, err, errB)
		assert.Zero(t, got)
	})
	t.Run("no functions", func(t *testing.T) {
		t.Parallel()
		got, err := scope.Race[int](t.Context())
		require.ErrorIs(t, err, scope.ErrNoSubtasks)
		assert.Zero(t, got)
	})
	t.Run("a panic re-panics", func(t *testing.T) {
		t.Parallel()
		defer func() {
			pe, ok := recover().(*scope.PanicError)
			require.True(t, ok)
			assert.Equal(t, "in Race", pe.Value)
		}()
		_, _ = scope.Race(t.Context(), func(context.Context) (int, error) { explode("in Race"); return 0, nil })
		t.Fatal("Race returned")
	})
}

// "Map[In, Out](ctx context.Context, in []In, fn func(context.Context, In) (Out, error), opts
// ...Option) ([]Out, error)": results in input order, with or without a limit.
func TestMapKeepsInputOrder(t *testing.T) {
	t.Parallel()
	in := make([]int, 100)
	for i := range in {
		in[i] = i
	}
	for _, opts := range [][]scope.Option{nil, {scope.WithLimit(4)}, {scope.WithLimit(1000)}, {scope.WithJoiner(newRecorder())}} {
		got, err := scope.Map(t.Context(), in, func(_ context.Context, v int) (string, error) {
			runtime.Gosched()
			return strconv.Itoa(v), nil
		}, opts...)
		require.NoError(t, err)
		require.Len(t, got, len(in))
		for i, s := range got {
			require.Equal(t, strconv.Itoa(i), s)
		}
	}
	got, err := scope.Map(t.Context(), nil, func(context.Context, int) (int, error) { return 0, nil })
	require.NoError(t, err)
	assert.Empty(t, got)
	require.PanicsWithValue(t, "scope: Map: nil function", func() { _, _ = scope.Map[int, int](t.Context(), nil, nil) })
}

func TestMapLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var running, peak atomic.Int32
		in := make([]int, 40)
		_, err := scope.Map(t.Context(), in, func(context.Context, int) (int, error) {
			n := running.Add(1)
			for m := peak.Load(); n > m && !peak.CompareAndSwap(m, n); m = peak.Load() {
			}
			time.Sleep(time.Second)
			running.Add(-1)
			return 0, nil
		}, scope.WithLimit(8))
		require.NoError(t, err)
		assert.Equal(t, int32(8), peak.Load())
		assert.Equal(t, 5*time.Second, time.Since(synctestStart(t)))
	})
}

func TestMapFailFastSkipsTheRest(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	got, err := scope.Map(t.Context(), []int{0, 1, 2, 3, 4, 5}, func(_ context.Context, v int) (int, error) {
		calls.Add(1)
		if v == 0 {
			return 0, errA
		}
		return v, nil
	}, scope.WithLimit(1))
	require.Equal(t, errA, err)
	assert.Nil(t, got)
	assert.Equal(t, int32(1), calls.Load(), "after the failure no further call starts")
}

func TestMapOptionsApply(t *testing.T) {
	t.Run("AwaitAll", func(t *testing.T) {
		t.Parallel()
		var calls atomic.Int32
		_, err := scope.Map(t.Context(), []error{errA, nil, errB, nil}, func(_ context.Context, e error) (int, error) {
			calls.Add(1)
			return 0, e
		}, scope.AwaitAll(), scope.WithLimit(2))
		require.ErrorIs(t, err, errA)
		require.ErrorIs(t, err, errB)
		assert.Equal(t, int32(4), calls.Load())
	})
	t.Run("FirstSuccess", func(t *testing.T) {
		t.Parallel()
		got, err := scope.Map(t.Context(), []int{1, 2, 3}, func(_ context.Context, v int) (int, error) {
			if v != 2 {
				return 0, errA
			}
			return 20, nil
		}, scope.FirstSuccess(), scope.WithLimit(1))
		require.NoError(t, err)
		assert.Equal(t, []int{0, 20, 0}, got)
	})
	t.Run("CancelWhen", func(t *testing.T) {
		t.Parallel()
		var seen atomic.Int32
		got, err := scope.Map(t.Context(), []int{1, 2, 3, 4}, func(_ context.Context, v int) (int, error) {
			return v * 10, nil
		}, scope.CancelWhen(func(task scope.Task) bool {
			seen.Add(1)
			return task.Value() == 20
		}), scope.WithLimit(1))
		require.NoError(t, err)
		assert.Equal(t, []int{10, 20, 0, 0}, got)
		assert.Equal(t, int32(2), seen.Load())
	})
	t.Run("WithTimeout", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			_, err := scope.Map(t.Context(), []time.Duration{time.Second, time.Hour}, func(ctx context.Context, d time.Duration) (int, error) {
				select {
				case <-time.After(d):
					return 1, nil
				case <-ctx.Done():
					return 0, ctx.Err()
				}
			}, scope.WithTimeout(time.Minute))
			require.ErrorIs(t, err, scope.ErrTimeout)
			assert.Equal(t, time.Minute, time.Since(synctestStart(t)))
		})
	})
	t.Run("PanicsAsErrors", func(t *testing.T) {
		t.Parallel()
		_, err := scope.Map(t.Context(), []int{1}, func(context.Context, int) (int, error) {
			explode("in Map")
			return 0, nil
		}, scope.PanicsAsErrors())
		var pe *scope.PanicError
		require.ErrorAs(t, err, &pe)
		assert.Equal(t, "in Map", pe.Value)
	})
}

func TestMapPanicRepanics(t *testing.T) {
	t.Parallel()
	defer func() {
		pe, ok := recover().(*scope.PanicError)
		require.True(t, ok)
		assert.Equal(t, 3, pe.Value)
	}()
	_, _ = scope.Map(t.Context(), []int{1, 2, 3, 4}, func(_ context.Context, v int) (int, error) {
		if v == 3 {
			explode(v)
		}
		return v, nil
	}, scope.WithLimit(2))
	t.Fatal("Map returned")
}

func TestMapGoexitKeepsGoing(t *testing.T) {
	t.Parallel()
	in := make([]int, 20)
	for i := range in {
		in[i] = i
	}
	var calls atomic.Int32
	_, err := scope.Map(t.Context(), in, func(_ context.Context, v int) (int, error) {
		calls.Add(1)
		if v%2 == 0 {
			runtime.Goexit() // ends a worker goroutine: another must take over
		}
		return v, nil
	}, scope.AwaitAll(), scope.WithLimit(2))
	require.ErrorIs(t, err, scope.ErrGoexit)
	assert.Equal(t, int32(20), calls.Load())
	assert.Len(t, unwrapAll(err), 10)
}

// unwrapAll flattens an errors.Join tree.
func unwrapAll(err error) []error {
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	var out []error
	for _, e := range j.Unwrap() {
		out = append(out, unwrapAll(e)...)
	}
	return out
}

// All, Race and Map on a parent that has already ended run nothing and return the parent's cause.
func TestHelpersParentCancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var calls atomic.Int32
	_, err := scope.Map(ctx, []int{1, 2, 3}, func(context.Context, int) (int, error) {
		calls.Add(1)
		return 0, nil
	})
	require.ErrorIs(t, err, context.Canceled)
	assert.True(t, errors.Is(err, context.Canceled))
	fn := func(context.Context) (int, error) { calls.Add(1); return 1, nil }
	_, err = scope.All(ctx, fn, fn)
	require.ErrorIs(t, err, context.Canceled)
	_, err = scope.Race(ctx, fn, fn)
	require.ErrorIs(t, err, context.Canceled)
	assert.Zero(t, calls.Load())
}
