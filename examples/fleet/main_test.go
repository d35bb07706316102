package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/goloom/loom/internal/fleetdemo/fleetdemotest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestFleet runs the example on the in-memory backend with fewer calls. run fails by itself if
// the fleet let more than 40 calls through at once or the API answered a 429; here we also read
// the printed tables.
func TestFleet(t *testing.T) {
	fleetdemotest.CheckOutput(t, runExample(t, "-calls", "100"), 5, 100)
}

func TestFleetRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-replicas", "0"}, {"-limit", "0"}, {"-calls", "0"}, {"-latency", "-1s"}, {"-lease", "500ms"},
		{"-redis", "localhost:6379"}, {"-nope"},
	} {
		var out bytes.Buffer
		assert.Error(t, run(t.Context(), &out, args), "%v", args)
	}
}

func runExample(t *testing.T, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	require.NoError(t, run(t.Context(), &out, args), out.String())
	return out.String()
}
