package registry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"runtime/pprof"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/internal/registry"
	"github.com/goloom/loom/internal/registry/regtest"
)

// labelsOf returns the pprof label line of the goroutines whose stack goes through fn, from the
// goroutine profile: one entry per distinct (labels, stack).
func labelsOf(t *testing.T, fn string) []string {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, pprof.Lookup("goroutine").WriteTo(&buf, 1))
	var out []string
	for rec := range strings.SplitSeq(buf.String(), "\n\n") {
		if !strings.Contains(rec, fn) {
			continue
		}
		labels := "{}"
		for line := range strings.SplitSeq(rec, "\n") {
			if l, ok := strings.CutPrefix(line, "# labels: "); ok {
				labels = l
			}
		}
		out = append(out, labels)
	}
	return out
}

//go:noinline
func parkedInScopeSubtask(started chan<- struct{}, release <-chan struct{}) {
	started <- struct{}{}
	<-release
}

//go:noinline
func parkedInLimiterTask(started chan<- struct{}, release <-chan struct{}) {
	started <- struct{}{}
	<-release
}

func TestSubtaskGoroutinesCarryTheScopeLabel(t *testing.T) {
	enable(t, registry.Labels)
	ctx := pprof.WithLabels(t.Context(), pprof.Labels("handler", "profile"))
	s := regtest.Open(ctx, regtest.Options{Name: "fanout"})
	require.NotNil(t, s.Record(), "Labels alone makes a record")
	started, release := make(chan struct{}), make(chan struct{})
	var inner *regtest.Scope
	s.Go(func(ctx context.Context) error {
		parkedInScopeSubtask(started, release)
		return nil
	})
	<-started
	got := labelsOf(t, "parkedInScopeSubtask")
	require.Len(t, got, 1)
	assert.Contains(t, got[0], `"loom.scope":"fanout"`)
	assert.Contains(t, got[0], `"handler":"profile"`, "the labels of the ctx given to Open are kept")

	// A nested scope, unnamed, overrides loom.scope for its subtasks.
	s.Go(func(ctx context.Context) error {
		inner = regtest.Open(ctx, regtest.Options{})
		inner.Go(func(context.Context) error {
			parkedInLimiterTask(started, release)
			return nil
		})
		return nil
	})
	<-started
	got = labelsOf(t, "parkedInLimiterTask")
	require.Len(t, got, 1)
	assert.Contains(t, got[0], `"loom.scope":"scope"`)
	close(release)
	require.NoError(t, inner.Join())
	require.NoError(t, s.Join())
}

func TestNoLabelsWhenOff(t *testing.T) {
	enable(t, 0)
	s := regtest.Open(t.Context(), regtest.Options{Name: "x"})
	started, release := make(chan struct{}), make(chan struct{})
	s.Go(func(ctx context.Context) error { parkedInScopeSubtask(started, release); return nil })
	<-started
	assert.Equal(t, []string{"{}"}, labelsOf(t, "parkedInScopeSubtask"))
	close(release)
	require.NoError(t, s.Join())
}

func TestLimiterTaskLabelsAndRestore(t *testing.T) {
	enable(t, registry.Labels)
	lim := regtest.NewLimiter(1, "llm-api")
	ctx := pprof.WithLabels(t.Context(), pprof.Labels("handler", "chat"))
	pprof.SetGoroutineLabels(ctx)
	defer pprof.SetGoroutineLabels(context.Background())
	started, release := make(chan struct{}), make(chan struct{})
	done := make(chan error)
	go func() {
		done <- lim.Do(ctx, func(ctx context.Context) error {
			assert.Equal(t, "llm-api", labelValue(ctx, registry.LimiterLabel), "the task's ctx carries the label")
			parkedInLimiterTask(started, release)
			return nil
		})
	}()
	<-started
	got := labelsOf(t, "parkedInLimiterTask")
	require.Len(t, got, 1)
	assert.Contains(t, got[0], `"loom.limiter":"llm-api"`)
	assert.Contains(t, got[0], `"handler":"chat"`)
	close(release)
	require.NoError(t, <-done)
}

func labelValue(ctx context.Context, key string) string {
	v, _ := pprof.Label(ctx, key)
	return v
}

//go:noinline
func parkedInSecondTask(started chan<- struct{}, release <-chan struct{}) {
	started <- struct{}{}
	<-release
}

// A goroutine the limiter reuses for another task must never keep the previous task's labels,
// whether Labels is still on or was turned off between the two.
func TestReusedGoroutineNeverKeepsThePreviousTasksLabels(t *testing.T) {
	for _, offBetween := range []bool{false, true} {
		enable(t, registry.Labels)
		lim := regtest.NewLimiter(1, "pool")
		first := pprof.WithLabels(t.Context(), pprof.Labels("request", "first"))
		second := pprof.WithLabels(t.Context(), pprof.Labels("request", "second"))
		started, release, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			lim.RunReused(
				regtest.Task{Ctx: first, Fn: func(ctx context.Context) {
					pprof.SetGoroutineLabels(pprof.WithLabels(ctx, pprof.Labels("left", "behind"))) // a careless task
					if offBetween {
						registry.Disable(registry.Labels)
					}
				}},
				regtest.Task{Ctx: second, Fn: func(context.Context) { parkedInSecondTask(started, release) }},
			)
		}()
		<-started
		got := labelsOf(t, "parkedInSecondTask")
		require.Len(t, got, 1)
		assert.NotContains(t, got[0], "first")
		assert.NotContains(t, got[0], "left")
		assert.Contains(t, got[0], `"request":"second"`)
		if offBetween {
			assert.NotContains(t, got[0], "loom.limiter")
		} else {
			assert.Contains(t, got[0], `"loom.limiter":"pool"`)
		}
		close(release)
		<-done
	}
}

// Regression (issue 21): the label value carried the scope's id, so a profile of a busy service
// had one value per request (50 in one profile), which no tag filter can use. Label values are
// names: fifty scopes of one name give one value.
func TestLabelValuesAreNames(t *testing.T) {
	enable(t, registry.Labels)
	started, release := make(chan struct{}), make(chan struct{})
	var scopes []*regtest.Scope
	for i := range 50 {
		name := "fanout"
		if i%10 == 0 {
			name = "" // unnamed: "scope"
		}
		s := regtest.Open(t.Context(), regtest.Options{Name: name})
		s.Go(func(context.Context) error { parkedInScopeSubtask(started, release); return nil })
		<-started
		scopes = append(scopes, s)
	}
	values := map[string]bool{} // the profile's distinct label sets: goroutines alike are one entry
	for _, l := range labelsOf(t, "parkedInScopeSubtask") {
		var m map[string]string
		require.NoError(t, json.Unmarshal([]byte(l), &m), l)
		values[m[registry.ScopeLabel]] = true
	}
	assert.Equal(t, map[string]bool{"fanout": true, "scope": true}, values)
	close(release)
	for _, s := range scopes {
		require.NoError(t, s.Join())
	}
}
