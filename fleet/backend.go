package fleet

import "github.com/goloom/loom/fleet/fleetdriver"

// A Backend is the shared engine that the [Semaphore]s (and [Rate]s) of every process of a fleet
// talk to: [NewMemory] for one process and for tests, and package fleet/redisfleet for Redis.
// Its methods, requests and replies are defined in package fleet/fleetdriver, for backend
// authors; a user only passes one to [New] or [NewRate].
type Backend = fleetdriver.Backend

// Memory is the in-process [Backend]: several Semaphores (and Rates) of one process share it and
// behave as the processes of a fleet sharing a Redis would, with fault injection for tests:
// SetDown, Freeze, SetLatency, Restart, Snapshot and Restore (see [fleetdriver.Memory]).
type Memory = fleetdriver.Memory

// NewMemory returns an empty in-memory backend. It knows it holds no earlier data, so the first
// use of a name admits at once (after a Restart, as on Redis, it pauses one lease TTL).
func NewMemory() *Memory { return fleetdriver.NewMemory() }
