package sim_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/internal/sim"
)

var update = flag.Bool("update", false, "rewrite the committed SVG of the tour scenario")

// svgPath is where the picture of the tour lives, beside the controllers it shows.
var svgPath = filepath.Join("..", "..", "limiter", "adaptive", "testdata", "simulation.svg")

// TestTourSVG draws the tour scenario (capacity 40, then 80, 20 and 40 again, with 6×C of
// offered load) for every built-in and checks it against the committed picture, which the
// README shows: the runs are exactly repeatable, so the bytes must match. Run with -update to
// redraw it after changing a controller.
func TestTourSVG(t *testing.T) {
	var labels []string
	var traces []*sim.Trace
	for _, b := range builtins {
		tr := sim.Simulate(t, tour(), b.c, sim.NewSemaGate)
		t.Logf("%s\n%s", b.name, tr.Table(20))
		labels = append(labels, "adaptive."+b.name+"{Min: 4, Max: 500}")
		traces = append(traces, tr)
	}
	got := sim.SVG("loom limiter/adaptive: the limit finding a hidden capacity that steps 40 → 80 → 20 → 40", labels, traces)
	require.True(t, strings.HasPrefix(string(got), "<svg "), "an SVG document")
	if *update {
		require.NoError(t, os.WriteFile(svgPath, got, 0o644))
	}
	want, err := os.ReadFile(svgPath)
	require.NoError(t, err, "run go test ./internal/sim -run TestTourSVG -update to draw it")
	assert.True(t, bytes.Equal(want, got), "%s is stale: run go test ./internal/sim -run TestTourSVG -update", svgPath)
}

func TestSVGPanicsOnMismatchedLabels(t *testing.T) {
	assert.PanicsWithValue(t, "sim: SVG: one label per trace, at least one trace", func() { sim.SVG("x", []string{"a"}, nil) })
}
