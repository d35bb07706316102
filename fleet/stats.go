package fleet

import (
	"sync/atomic"
	"time"
)

// Stats is a snapshot of a Semaphore's gauges (this process) and counters (since New), taken by
// [Semaphore.Stats].
//
// Every permit Acquire returns is counted in Acquired and, when it ends, in exactly one of
// Released (by [Permit.Release] or [Semaphore.Close]) and LeasesLost. So at rest, when no permit is
// held and nobody waits:
//
//	Acquired == Released + LeasesLost
//	Held == Waiting == 0
//
// The fields are read one after another, not at one instant, so while permits come and go these
// sums need not hold in a snapshot.
type Stats struct {
	Capacity int64 // the bound this Semaphore admits within, across the fleet
	Held     int64 // permits (summed weight) this Semaphore holds now, leased or degraded
	Waiting  int   // Acquire calls of this Semaphore that have not returned yet

	Acquired    int64 // permits granted: leased ones and, while the backend was down, degraded ones
	Released    int64 // permits given back by Release or Close
	LeasesLost  int64 // permits whose lease was lost while held (see ErrLeaseLost)
	Unavailable int64 // Acquire calls that met an unreachable backend, whatever WhenUnavailable did then
	Degraded    int64 // permits granted without a lease (FailOpen or Degrade), also counted in Acquired
	RoundTrips  int64 // calls into the backend: acquires, renewals, releases, subscriptions

	// PausedUntil is, while the backend admits no new permits of this name after it lost its
	// state (its first use there, a restart, a restore from an older snapshot, a failover), when
	// that pause ends; zero otherwise. The pause is also logged once, with its reason and end.
	PausedUntil time.Time
}

type counters struct {
	acquired    atomic.Int64
	released    atomic.Int64
	lost        atomic.Int64
	unavailable atomic.Int64
	degraded    atomic.Int64
	roundTrips  atomic.Int64
}
