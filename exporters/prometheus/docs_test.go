package prometheus_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/goloom/loom/exporters/internal/exporttest"
)

// TestDocsListEveryMetric: the metrics document names every family the collector exports.
func TestDocsListEveryMetric(t *testing.T) {
	doc := exporttest.MetricsDoc(t)
	for _, name := range exported(t) {
		assert.Contains(t, doc, "`"+name, "docs/metrics.md does not list %s", name)
	}
	for _, outcome := range []string{"completed", "failed", "rejected", "timed_out", "cancelled"} {
		assert.Contains(t, doc, "| `"+outcome+"` |")
	}
}
