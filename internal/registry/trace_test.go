package registry_test

import (
	"bytes"
	"context"
	"errors"
	"runtime/trace"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/internal/registry"
	"github.com/goloom/loom/internal/registry/regtest"
)

// With a trace recording, each scope is a task named after it, each subtask a region in it, each
// limiter wait a region "loom.limiter.wait", and a scope's cancellation is logged on its task with
// its cause. The standard library has no public trace reader, so the test looks for the strings,
// which the trace format stores once each, in its string table, only when an event uses them.
func TestTraceTasksRegionsAndCancellation(t *testing.T) {
	enable(t, 0) // a recording trace is enough, no feature needed
	var buf bytes.Buffer
	require.NoError(t, trace.Start(&buf))
	stopped := false
	defer func() {
		if !stopped {
			trace.Stop()
		}
	}()

	s := regtest.Open(t.Context(), regtest.Options{Name: "traced-scope"})
	require.NotNil(t, s.Record(), "a recording trace makes a record")
	lim := regtest.NewLimiter(1, "traced-limiter")
	holding, release := make(chan struct{}), make(chan struct{})
	s.Go(func(ctx context.Context) error {
		return lim.Do(ctx, func(context.Context) error { close(holding); <-release; return nil })
	})
	<-holding
	waited := s.Go(func(ctx context.Context) error { return lim.Do(ctx, func(context.Context) error { return nil }) })
	require.Eventually(t, func() bool { return lim.Waiting() == 1 }, testTimeout, pollEvery)
	close(release)
	require.NoError(t, waited.Wait())
	s.Cancel(errors.New("the cause of cancellation"))
	require.NoError(t, s.Join())
	trace.Stop()
	stopped = true

	raw := buf.Bytes()
	for _, want := range []string{"traced-scope", registry.SubtaskRegion, registry.WaitRegion, registry.CancelCategory, "the cause of cancellation"} {
		assert.True(t, bytes.Contains(raw, []byte(want)), "trace lacks %q", want)
	}
}

func TestNoRecordWithoutTraceOrFeature(t *testing.T) {
	enable(t, 0)
	require.False(t, trace.IsEnabled())
	assert.Nil(t, regtest.Open(t.Context(), regtest.Options{}).Record())
}
