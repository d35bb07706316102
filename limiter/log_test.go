package limiter_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/limiter"
)

func TestLoggerSilentOnHappyPath(t *testing.T) {
	for _, tt := range runPaths {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec := &recorder{}
				l := limiter.New(1, append(tt.opts, limiter.WithLogger(slog.New(rec)), limiter.WithName("api"))...)
				errX := errors.New("x")
				require.NoError(t, l.Do(t.Context(), func(context.Context) error { return nil }))
				assert.Error(t, l.Do(t.Context(), func(context.Context) error { return errX }))
				_, err := limiter.Call(t.Context(), l, func(context.Context) (int, error) { return 1, nil })
				require.NoError(t, err)
				_, err = limiter.Submit(t.Context(), l, func(context.Context) (int, error) { return 1, errX }).Wait(t.Context())
				assert.Error(t, err)
				// Cancellation is the caller's doing, not news.
				ctx, cancel := context.WithCancel(t.Context())
				cancel()
				assert.Error(t, l.Do(ctx, func(context.Context) error { return nil }))
				f := limiter.Submit(t.Context(), l, func(ctx context.Context) (int, error) { <-ctx.Done(); return 0, nil })
				f.Cancel()
				synctest.Wait()
				assert.Empty(t, rec.all())
			})
		})
	}
}

func TestLoggerRecordsRejections(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		l := limiter.New(1, limiter.WithLogger(slog.New(rec)), limiter.WithName("api"),
			limiter.WithAcquireTimeout(time.Second), limiter.WithMaxWaiting(1))
		h := hold(t, l)
		queued := limiter.Submit(t.Context(), l, func(context.Context) (int, error) { return 0, nil })
		assert.ErrorIs(t, l.Do(t.Context(), func(context.Context) error { return nil }), limiter.ErrTooManyWaiting)
		_, err := queued.Wait(t.Context())
		assert.ErrorIs(t, err, limiter.ErrAcquireTimeout)
		h.free(t)

		records := rec.all()
		require.Len(t, records, 2, "one record per rejection")
		for i, want := range []struct {
			err  error
			wait time.Duration
		}{{limiter.ErrTooManyWaiting, 0}, {limiter.ErrAcquireTimeout, time.Second}} {
			r := records[i]
			assert.Equal(t, slog.LevelWarn, r.Level)
			assert.Equal(t, "limiter: call rejected", r.Message)
			a := attrs(r)
			assert.Equal(t, "api", a["limiter"].String())
			assert.Equal(t, want.wait, a["wait"].Duration())
			assert.Equal(t, want.err, a["error"].Any())
		}
	})
}

func TestLoggerRecordsTimeouts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		l := limiter.New(2, limiter.WithLogger(slog.New(rec)), limiter.WithName("api"), limiter.WithTaskTimeout(time.Second))
		exactly(t, limiter.ErrTaskTimeout, l.Do(t.Context(), func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }))
		_, err := limiter.Submit(t.Context(), l, func(ctx context.Context) (int, error) { <-ctx.Done(); return 0, nil }).Wait(t.Context())
		exactly(t, limiter.ErrTaskTimeout, err)
		synctest.Wait()
		records := rec.all()
		require.Len(t, records, 2, "one record per timeout")
		for _, r := range records {
			assert.Equal(t, slog.LevelWarn, r.Level)
			assert.Equal(t, "limiter: task timed out", r.Message)
			a := attrs(r)
			assert.Equal(t, "api", a["limiter"].String())
			assert.Equal(t, time.Second, a["run"].Duration())
			assert.Equal(t, time.Duration(0), a["wait"].Duration())
		}
	})
}

func TestLoggerRecordsPanics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		l := limiter.New(2, limiter.WithLogger(slog.New(rec)), limiter.WithName("api"))
		lt := limiter.New(2, limiter.WithLogger(slog.New(rec)), limiter.WithName("api"), limiter.WithTaskTimeout(time.Hour))
		boom := func(context.Context) error { time.Sleep(time.Second); panic("boom") }
		var pe *limiter.PanicError
		require.ErrorAs(t, l.Do(t.Context(), boom), &pe)
		require.ErrorAs(t, lt.Do(t.Context(), boom), &pe)
		_, err := limiter.Submit(t.Context(), l, func(ctx context.Context) (int, error) { return 0, boom(ctx) }).Wait(t.Context())
		require.ErrorAs(t, err, &pe)
		records := rec.all()
		require.Len(t, records, 3, "one record per panic")
		for _, r := range records {
			assert.Equal(t, slog.LevelError, r.Level)
			assert.Equal(t, "limiter: task panicked", r.Message)
			a := attrs(r)
			assert.Equal(t, "api", a["limiter"].String())
			assert.Equal(t, "boom", a["panic"].Any())
			assert.Equal(t, time.Second, a["run"].Duration())
			assert.Contains(t, a["stack"].String(), "panic")
		}
	})
}

// The handler is called with no lock of the limiter held, so it may call back into it — even
// cancel the very Future whose record it is writing.
func TestLoggerHandlerMayCallBack(t *testing.T) {
	rec := &recorder{}
	l := limiter.New(1, limiter.WithLogger(slog.New(rec)), limiter.WithAcquireTimeout(time.Millisecond),
		limiter.WithTaskTimeout(time.Millisecond))
	var current atomic.Pointer[limiter.Future[int]]
	var inHook atomic.Bool
	rec.hook = func(slog.Record) {
		if !inHook.CompareAndSwap(false, true) {
			return // the hook's own calls may be logged too; do not recurse
		}
		defer inHook.Store(false)
		_ = l.Stats()
		if f := current.Load(); f != nil {
			f.Cancel()
		}
		limiter.Submit(context.Background(), l, func(context.Context) (int, error) { return 0, nil }).Cancel()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		release := make(chan struct{})
		blocker := limiter.Submit(context.Background(), l, func(context.Context) (int, error) { <-release; return 0, nil })
		_, _ = blocker.Wait(context.Background()) // times out: logged
		f := limiter.Submit(context.Background(), l, func(context.Context) (int, error) { return 0, nil })
		current.Store(f)
		_, _ = f.Wait(context.Background()) // rejected: logged
		current.Store(nil)
		close(release)
		_ = l.Shutdown(context.Background())
		_ = l.Do(context.Background(), func(context.Context) error { return nil }) // closed: logged
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("deadlock: a log record was written with a lock held")
	}
	assert.GreaterOrEqual(t, len(rec.all()), 3)
}

// "A slog handler (or any callback) that calls back into the limiter finds the slot of the call
// being logged already free: every record about a call is written after its slot has been
// released, on every path (Do/Call with or without a task timeout, Submit)." With a task timeout
// and with Submit, the panic record used to be written before the slot was released, so a handler
// running Do on a limit of 1 waited for the slot its own call still held — forever.
func TestRecordsAreWrittenAfterTheSlotIsFree(t *testing.T) {
	panics := func(context.Context) error { time.Sleep(time.Second); panic("boom") }
	overruns := func(context.Context) error { time.Sleep(2 * time.Second); return nil } // ignores its ctx
	tests := []struct {
		name   string
		opts   []limiter.Option
		submit bool
		fn     func(context.Context) error
		want   string // the record's message
	}{
		{"Do panics", nil, false, panics, "limiter: task panicked"},
		{"Do with a task timeout panics", []limiter.Option{limiter.WithTaskTimeout(time.Hour)}, false, panics, "limiter: task panicked"},
		{"Do times out", []limiter.Option{limiter.WithTaskTimeout(time.Second)}, false, overruns, "limiter: task timed out"},
		{"Submit panics", nil, true, panics, "limiter: task panicked"},
		{"Submit with a task timeout panics", []limiter.Option{limiter.WithTaskTimeout(time.Hour)}, true, panics, "limiter: task panicked"},
		{"Submit times out", []limiter.Option{limiter.WithTaskTimeout(time.Second)}, true, overruns, "limiter: task timed out"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { // a handler waiting for the slot forever is a deadlock here
				rec := &recorder{}
				l := limiter.New(1, append(tt.opts, limiter.WithLogger(slog.New(rec)))...)
				var mu sync.Mutex // the hook runs on the task's goroutine
				var inFlight []int
				var nested []error
				rec.hook = func(r slog.Record) {
					if r.Message != tt.want {
						return
					}
					n := l.Stats().InFlight
					err := l.Do(context.Background(), func(context.Context) error { return nil })
					mu.Lock()
					defer mu.Unlock()
					inFlight, nested = append(inFlight, n), append(nested, err)
				}
				if tt.submit {
					_, _ = limiter.Submit(t.Context(), l, func(ctx context.Context) (int, error) { return 0, tt.fn(ctx) }).Wait(t.Context())
				} else {
					_ = l.Do(t.Context(), tt.fn)
				}
				synctest.Wait() // an overrunning task writes its record when it returns
				time.Sleep(time.Hour)
				mu.Lock()
				defer mu.Unlock()
				require.Equal(t, []int{0}, inFlight, "one record, written with the slot free")
				require.Equal(t, []error{nil}, nested, "the handler's own call got the slot")
				require.NoError(t, l.Shutdown(t.Context()))
				atRest(t, l)
			})
		})
	}
}

// Shutdown waits for a task whose record's handler calls back in: the handler finds the slot free
// (and the limiter closed), and Shutdown returns.
func TestShutdownWithACallingBackHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		l := limiter.New(1, limiter.WithLogger(slog.New(rec)), limiter.WithTaskTimeout(time.Hour))
		var mu sync.Mutex // the hook runs on the task's goroutine
		var inFlight []int
		var nested []error
		rec.hook = func(r slog.Record) {
			if r.Message == "limiter: task panicked" {
				n := l.Stats().InFlight
				err := l.Do(context.Background(), func(context.Context) error { return nil })
				mu.Lock()
				defer mu.Unlock()
				inFlight, nested = append(inFlight, n), append(nested, err)
			}
		}
		f := limiter.Submit(t.Context(), l, func(context.Context) (int, error) { time.Sleep(time.Second); panic("boom") })
		synctest.Wait()
		require.NoError(t, l.Shutdown(t.Context()))
		_, err := f.Wait(t.Context())
		var pe *limiter.PanicError
		require.ErrorAs(t, err, &pe)
		mu.Lock()
		defer mu.Unlock()
		assert.Equal(t, []int{0}, inFlight)
		require.Len(t, nested, 1)
		assert.ErrorIs(t, nested[0], limiter.ErrClosed)
	})
}
