package otel_test

import (
	"errors"
	"io/fs"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// docs/metrics.md, in a checkout of the repository (a module downloaded alone has no docs).
const metricsDoc = "../../docs/metrics.md"

// TestDocsListEveryInstrument: the metrics document names every instrument with its unit.
func TestDocsListEveryInstrument(t *testing.T) {
	doc, err := os.ReadFile(metricsDoc)
	if errors.Is(err, fs.ErrNotExist) {
		t.Skip("no ../../docs/metrics.md: not in a checkout of the repository")
	}
	require.NoError(t, err)
	kinds := map[string]string{"counter": "Counter", "updown": "UpDownCounter", "gauge": "Gauge"}
	for name, in := range wantInstruments {
		assert.Contains(t, string(doc), "`"+name+"`, "+kinds[in.kind]+", `"+in.unit+"`", "docs/metrics.md on %s", name)
	}
}
