package otel_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/goloom/loom/exporters/internal/exporttest"
)

// TestDocsListEveryInstrument: the metrics document names every instrument with its unit.
func TestDocsListEveryInstrument(t *testing.T) {
	doc := exporttest.MetricsDoc(t)
	kinds := map[string]string{"counter": "Counter", "updown": "UpDownCounter", "gauge": "Gauge"}
	for name, in := range wantInstruments {
		assert.Contains(t, doc, "`"+name+"`, "+kinds[in.kind]+", `"+in.unit+"`", "docs/metrics.md on %s", name)
	}
}
