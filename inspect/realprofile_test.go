//go:build unix

package inspect_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"runtime/pprof"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/inspect"
	"github.com/goloom/loom/limiter"
	"github.com/goloom/loom/scope"
)

//go:noinline
func burnReal(stop <-chan struct{}) int {
	x := 0
	for {
		select {
		case <-stop:
			return x
		default:
		}
		for i := range 100_000 {
			x += i * i
		}
	}
}

func cpuUsed(t *testing.T) time.Duration {
	var ru syscall.Rusage
	require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// "a CPU profile of a burning subtask carries it": with Labels on, the samples of a subtask that
// burns CPU carry its scope's label (loom.scope = its name), and those of a limiter task the
// limiter's (loom.limiter = its name), so that go tool pprof -tagfocus splits the profile by them.
func TestRealCPUProfileCarriesTheLabels(t *testing.T) {
	enable(t, inspect.Labels, inspect.Scopes)
	var prof bytes.Buffer
	require.NoError(t, pprof.StartCPUProfile(&prof))
	s := scope.Open(t.Context(), scope.WithName("burner"))
	stop := make(chan struct{})
	s.Go(func(context.Context) error { burnReal(stop); return nil })
	l := limiter.New(1, limiter.WithName("hot-api"))
	s.Go(func(ctx context.Context) error {
		return l.Do(ctx, func(context.Context) error { burnReal(stop); return nil })
	})
	id := "burner" // the label value is the scope's name, never its id
	begin, deadline := cpuUsed(t), time.Now().Add(20*time.Second)
	for cpuUsed(t)-begin < 500*time.Millisecond && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	require.NoError(t, s.Join())
	pprof.StopCPUProfile()
	zr, err := gzip.NewReader(&prof)
	require.NoError(t, err)
	raw, err := io.ReadAll(zr)
	require.NoError(t, err)
	// The profile's string table holds a label's value only if a sample carries it.
	assert.True(t, bytes.Contains(raw, []byte(id)), "no sample of the burning scope %s", id)
	assert.True(t, bytes.Contains(raw, []byte("hot-api")), "no sample of the limiter's task")
}
