package inspect_test

import (
	"bytes"
	"context"
	"encoding/json"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/fleet"
	"github.com/goloom/loom/inspect"
	"github.com/goloom/loom/limiter"
)

// A limiter's configuration is what an operator asks first: the dump shows its rate and burst,
// its timeouts, its bound on waiting, its fleet and the fleet's capacity — in JSON, in the text,
// with the calls the rate holds back — and the fleet semaphore itself, with its stats.
func TestDumpShowsLimiterConfigAndSemaphores(t *testing.T) {
	mem := fleet.NewMemory()
	sem := fleet.New(mem, "config-fleet", 40, fleet.WithLease(15*time.Second))
	defer sem.Close()
	l := limiter.New(4, limiter.WithName("config-api"), limiter.WithRate(10, 20),
		limiter.WithAcquireTimeout(30*time.Second), limiter.WithTaskTimeout(5*time.Minute),
		limiter.WithMaxWaiting(100), limiter.WithFleet(sem))
	require.NoError(t, l.Do(t.Context(), func(context.Context) error { return nil }))
	plain := limiter.New(2, limiter.WithName("plain"))

	d := inspect.Snapshot()
	lim := limiterNamed(d, "config-api")
	require.NotNil(t, lim)
	assert.Equal(t, inspect.Config{
		{Name: "rate", Value: "10/s"}, {Name: "burst", Value: "20"},
		{Name: "acquireTimeout", Value: "30s"}, {Name: "taskTimeout", Value: "5m0s"},
		{Name: "maxWaiting", Value: "100"},
		{Name: "fleet", Value: "config-fleet"}, {Name: "fleetCapacity", Value: "40"},
	}, lim.Config)
	_, ok := lim.Stats.Get("rateWaiting")
	assert.True(t, ok, "the calls the rate holds back are a stat")
	assert.Empty(t, limiterNamed(d, "plain").Config, "a plain limiter has nothing to show")

	var fs *inspect.Semaphore
	for _, s := range d.Semaphores {
		if s.Name == "config-fleet" {
			fs = s
		}
	}
	require.NotNil(t, fs, "fleet semaphores are in the dump")
	for name, want := range map[string]int64{"capacity": 40, "acquired": 1, "released": 1} {
		got, _ := fs.Stats.Get(name)
		assert.Equal(t, want, got, name)
	}
	assert.Equal(t, inspect.Config{{Name: "lease", Value: "15s"}, {Name: "whenUnavailable", Value: "FailClosed"}}, fs.Config)

	raw, err := json.Marshal(d)
	require.NoError(t, err)
	assert.Contains(t, string(raw), `"config":{"rate":"10/s","burst":"20","acquireTimeout":"30s","taskTimeout":"5m0s","maxWaiting":"100","fleet":"config-fleet","fleetCapacity":"40"}`)
	assert.Contains(t, string(raw), `{"name":"config-fleet","stats":{"capacity":40,`)
	var back inspect.Dump
	require.NoError(t, json.Unmarshal(raw, &back))
	assert.Equal(t, lim.Config, limiterNamed(&back, "config-api").Config)

	var b bytes.Buffer
	require.NoError(t, d.WriteText(&b))
	text := b.String()
	assert.Contains(t, text, `limiter "config-api" limit 4  in flight 0  waiting 0  overrunning 0`+"\n"+
		`  rate 10/s, burst 20 (0 held back by the rate)  acquire timeout 30s  task timeout 5m0s  max waiting 100  fleet "config-fleet"  fleet capacity 40`+"\n")
	assert.Contains(t, text, `semaphore "config-fleet" capacity 40  held 0  waiting 0  lease 15s  when unavailable FailClosed`+"\n")
	assert.False(t, strings.Contains(text, "limiter \"plain\" limit 2  in flight 0  waiting 0  overrunning 0\n  "), "no config line without config")
	runtime.KeepAlive(plain)
}

// "The pause after data loss is visible": a fleet semaphore whose backend lost its data admits
// nothing new for one lease TTL, and the dump says until when — in JSON, in the text, on the page.
func TestDumpShowsAFleetPause(t *testing.T) {
	backend := fleet.NewMemory()
	sem := fleet.New(backend, "paused-fleet", 2, fleet.WithLease(time.Minute), fleet.WithLogger(nil))
	defer sem.Close()
	p, err := sem.Acquire(t.Context(), 1)
	require.NoError(t, err)
	defer p.Release()
	backend.Restart()
	_, err = sem.AcquireTimeout(t.Context(), 1, 0) // sees the loss
	require.ErrorIs(t, err, fleet.ErrTimeout)
	require.False(t, sem.Stats().PausedUntil.IsZero())

	d := inspect.Snapshot()
	var fs *inspect.Semaphore
	for _, s := range d.Semaphores {
		if s.Name == "paused-fleet" {
			fs = s
		}
	}
	require.NotNil(t, fs)
	assert.WithinDuration(t, time.Now().Add(time.Minute), fs.PausedUntil, 10*time.Second)
	raw, err := json.Marshal(fs)
	require.NoError(t, err)
	assert.Contains(t, string(raw), `"pausedUntil":"`)
	var b bytes.Buffer
	require.NoError(t, (&inspect.Dump{Time: d.Time, Semaphores: []*inspect.Semaphore{fs}}).WriteText(&b))
	assert.Regexp(t, `semaphore "paused-fleet" capacity 2  held 1  waiting 0  lease 1m0s  when unavailable FailClosed  paused: admits again in \S+`, b.String())
	var page bytes.Buffer
	require.NoError(t, inspect.WriteHTML(&page, &inspect.Dump{Time: d.Time, Semaphores: []*inspect.Semaphore{fs}}))
	assert.Contains(t, page.String(), `<div class="paused">paused after the backend lost its data: admits again in `)
	assert.NotContains(t, page.String(), "pausedMillis")
}
