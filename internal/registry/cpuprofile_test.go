//go:build unix

package registry_test

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

	"github.com/goloom/loom/internal/registry"
	"github.com/goloom/loom/internal/registry/regtest"
)

//go:noinline
func burn(stop <-chan struct{}) int {
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

// cpuTime is the process's user and system CPU time so far.
func cpuTime(t *testing.T) time.Duration {
	var ru syscall.Rusage
	require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// A CPU profile of a burning subtask carries its scope's label, so `go tool pprof -tagfocus
// loom.scope=burner` finds it.
func TestCPUProfileCarriesTheScopeLabel(t *testing.T) {
	enable(t, registry.Labels)
	var prof bytes.Buffer
	require.NoError(t, pprof.StartCPUProfile(&prof))
	s := regtest.Open(t.Context(), regtest.Options{Name: "burner"})
	stop := make(chan struct{})
	s.Go(func(context.Context) error { burn(stop); return nil })
	// Burn until the process has used 300ms of CPU (about 30 samples at 100 Hz), or 20s have
	// passed on a machine too busy to give it that.
	begin, deadline := cpuTime(t), time.Now().Add(20*time.Second)
	for cpuTime(t)-begin < 300*time.Millisecond && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	require.NoError(t, s.Join())
	pprof.StopCPUProfile()
	zr, err := gzip.NewReader(&prof)
	require.NoError(t, err)
	raw, err := io.ReadAll(zr)
	require.NoError(t, err)
	// The profile's string table holds a label's key and value only if a sample carries it.
	assert.True(t, bytes.Contains(raw, []byte(registry.ScopeLabel)), "no sample labelled loom.scope")
	assert.True(t, bytes.Contains(raw, []byte("burner")), "no sample of the burning scope")
}
