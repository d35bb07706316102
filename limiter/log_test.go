package limiter_test

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/limiter"
)

func TestLoggerSilentOnHappyPath(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts []limiter.Option
	}{
		{"caller goroutine", nil},
		{"task timeout", []limiter.Option{limiter.WithTaskTimeout(time.Hour)}},
	} {
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
