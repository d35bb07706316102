package fleetdriver_test

import (
	"testing"

	"github.com/goloom/loom/fleet/fleetdriver"
	"github.com/goloom/loom/fleet/fleettest"
)

// The in-memory backend passes the conformance kit, faults included: every process of the fleet
// shares one Memory, which restarts, rewinds to a snapshot and freezes on the kit's demand.
func TestMemoryConformance(t *testing.T) {
	m := fleetdriver.NewMemory()
	fleettest.TestBackend(t, fleettest.Harness{
		Process: func(*testing.T) fleetdriver.Backend { return m },
		Restart: func(*testing.T) { m.Restart() },
		Rewind: func(*testing.T) func() {
			snap := m.Snapshot()
			return func() { m.Restore(snap) }
		},
		Freeze: func(*testing.T) func() {
			m.Freeze(true)
			return func() { m.Freeze(false) }
		},
	})
}
