package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestTour runs the tour with a smaller benchmark and checks the tables it prints. run itself
// fails when what a table shows does not hold, so this also checks the states, the scoped values,
// the semaphore orders and the limiter's counts.
func TestTour(t *testing.T) {
	var out bytes.Buffer
	err := run(t.Context(), &out, []string{"-tasks", "400", "-workers", "40", "-block", "20ms"})
	require.NoError(t, err, out.String())
	got := out.String()
	for _, want := range []string{
		"1. scope", "2. scopedvalue", "3. semaphore", "4. limiter", "5. blocking tasks in miniature", "6. inspect",
		// inspect: the fan-out as a tree, the nested scope under it, the limiter's queue
		`scope #`, `"checkout" FailFast running`, `scope #`, `"pricing" FailFast joining`, `limiter "tour-db" limit 2  in flight 2  waiting 1 (oldest`,
		// scope: a row per subtask with its state under each policy
		"payments         fails after 100ms     Failed     Failed",
		"recommendations  succeeds after 3s     Cancelled  Cancelled",
		"AwaitAll Join: scope: timed out; payments: upstream answered 503",
		// scopedvalue
		"fork of a scope nested in a fork          r-42        alice",
		"caller, after Run returned                (unbound)   (unbound)",
		// semaphore
		"semaphore.New(4)                      -                  s1 s2 s3 s4 s5 s6  false",
		"semaphore.New(4, semaphore.Unfair())  s1 s2 s3 s4 s5 s6  -                  true",
		// limiter
		"Limit  InFlight  Waiting  Overrunning  Submitted  Completed  Failed  Rejected  TimedOut  Cancelled  Panicked",
		// benchmark
		"pool of 40 workers", "scope.Open(ctx, scope.WithLimit(40))", "scope.Open(ctx), one subtask per task",
	} {
		assert.Contains(t, got, want)
	}
	assert.Regexp(t, `through the limiter\s+\d+\s+0\s+\d+\s+0\s+[1-8]\s`, got, "no refusal, at most 8 queries at once")
	assert.NotContains(t, got, "level=", "no log noise")
}

func TestTourRejectsBadFlags(t *testing.T) {
	var out bytes.Buffer
	require.Error(t, run(t.Context(), &out, []string{"-tasks", "0"}))
	require.Error(t, run(t.Context(), &out, []string{"-nope"}))
	assert.True(t, strings.Contains(out.String(), "-tasks"), "usage is printed")
}
