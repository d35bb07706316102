package prometheus_test

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

// TestDocsListEveryMetric: the metrics document names every family the collector exports.
func TestDocsListEveryMetric(t *testing.T) {
	doc, err := os.ReadFile(metricsDoc)
	if errors.Is(err, fs.ErrNotExist) {
		t.Skip("no ../../docs/metrics.md: not in a checkout of the repository")
	}
	require.NoError(t, err)
	for _, name := range exported(t) {
		assert.Contains(t, string(doc), "`"+name, "docs/metrics.md does not list %s", name)
	}
	for _, outcome := range []string{"completed", "failed", "rejected", "timed_out", "cancelled"} {
		assert.Contains(t, string(doc), "| `"+outcome+"` |")
	}
}
