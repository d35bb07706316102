package inspect_test

import (
	"bytes"
	"context"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/inspect"
	"github.com/goloom/loom/limiter"
	"github.com/goloom/loom/scope"
)

//go:noinline
func parkedInRealTask(started chan<- struct{}, release <-chan struct{}) {
	started <- struct{}{}
	<-release
}

func TestRealLimiter(t *testing.T) {
	enable(t, inspect.Labels)
	l := limiter.New(1, limiter.WithName("real-api"))
	started, release := make(chan struct{}), make(chan struct{})
	f := limiter.Submit(t.Context(), l, func(ctx context.Context) (int, error) { parkedInRealTask(started, release); return 1, nil })
	<-started
	g := limiter.Submit(t.Context(), l, func(ctx context.Context) (int, error) { return 2, nil })
	require.Eventually(t, func() bool { return l.Stats().Waiting == 1 }, 10*time.Second, time.Millisecond)
	time.Sleep(20 * time.Millisecond) // a lower bound on the wait, never an upper one
	d := inspect.Snapshot()
	lim := limiterNamed(d, "real-api")
	require.NotNil(t, lim)
	w, _ := lim.Stats.Get("waiting")
	assert.Equal(t, int64(1), w)
	_, ok := lim.Stats.Get("rateWaiting")
	assert.True(t, ok, "fields added to Stats show up")
	assert.GreaterOrEqual(t, lim.OldestWaiting, 0.02)
	var b bytes.Buffer
	require.NoError(t, pprof.Lookup("goroutine").WriteTo(&b, 1))
	var rec string
	for r := range strings.SplitSeq(b.String(), "\n\n") {
		if strings.Contains(r, "parkedInRealTask") {
			rec = r
		}
	}
	assert.Contains(t, rec, `"loom.limiter":"real-api"`)
	close(release)
	_, err := f.Wait(t.Context())
	require.NoError(t, err)
	_, err = g.Wait(t.Context())
	require.NoError(t, err)
	runtime.KeepAlive(l)
}

func TestRealTrace(t *testing.T) {
	enable(t)
	var buf bytes.Buffer
	require.NoError(t, trace.Start(&buf))
	l := limiter.New(1)
	s := scope.Open(t.Context(), scope.WithName("traced-real"))
	hold, release := make(chan struct{}), make(chan struct{})
	s.Go(func(ctx context.Context) error {
		return l.Do(ctx, func(context.Context) error { close(hold); <-release; return nil })
	})
	<-hold
	s.Go(func(ctx context.Context) error { return l.Do(ctx, func(context.Context) error { return nil }) })
	require.Eventually(t, func() bool { return l.Stats().Waiting == 1 }, 10*time.Second, time.Millisecond)
	close(release)
	s.Go(func(context.Context) error { return context.DeadlineExceeded })
	_ = s.Join()
	trace.Stop()
	for _, want := range []string{"traced-real", "loom.subtask", "loom.limiter.wait", "loom.cancel", "context deadline exceeded"} {
		assert.True(t, bytes.Contains(buf.Bytes(), []byte(want)), want)
	}
}
