// Package fleetdriver is what a backend of package fleet implements: the [Backend] interface and
// its requests and replies, as database/sql/driver is to database/sql. Users of fleet never need
// it: they pass a backend to fleet.New. A backend author implements Backend, keeps the invariants
// listed on it, and runs the conformance kit, fleettest.TestBackend, which checks the fleet's
// guarantees on the backend, its faults included.
//
// [Memory] is the in-process backend (fleet.NewMemory returns one), with fault injection; it is
// the reference the Redis backend (fleet/redisfleet) is tested against.
package fleetdriver

import (
	"context"
	"strings"
	"time"
)

// A Backend is the shared engine that the fleet.Semaphores (and fleet.Rates) of every process of
// a fleet talk to: [NewMemory] for one process and for tests, and package fleet/redisfleet for
// Redis.
// Each method is one round trip, atomic on the backend, decided on the backend's clock; its
// methods are safe for concurrent use. A method that fails returns an error (any error: the
// Semaphore treats them all as "the backend is unreachable"), and never blocks for longer than
// its ctx or its own client timeout allow. A method whose reply is lost may be retried with the
// same arguments and must then have the same effect as one call (a repeated Acquire of a lease
// it granted answers that it is granted).
//
// The state of one name: the leases that hold its permits (each with an expiry on the backend's
// clock), the queue of requests waiting for them in arrival order (each entry alive only while its
// process keeps asking about it), a fencing-token counter and an epoch (the backend time at which
// this state was created, or found to have gone back in time). Implementations must keep these
// invariants, which the Semaphore relies on:
//
//   - A lease lives until its expiry; a request is granted only if, with the live leases, the
//     summed weight stays within the request's own capacity ([Lease].Capacity).
//   - Requests are granted in queue order: only the head of the queue may be granted, and only
//     once it fits (head-of-line blocking, as in a FIFO semaphore). A request that cannot wait
//     ([AcquireRequest].Wait false) is granted only if the queue is empty and it fits, and is never
//     queued.
//   - A queue entry lives for [AcquireRequest].Heartbeat after the last Acquire that named it, and
//     an entry whose asker listens for pushes ([AcquireRequest].Push) is dropped as soon as nobody
//     listens on the asker's channel any more (its process died): a dead process holds up the
//     queue for a heartbeat at most, whatever the lease TTL.
//   - Whenever the head of the queue fits — after a release, an expiry, a renewal or an acquire —
//     the backend grants it in the same call and pushes the grant to the asker's instance
//     ([Backend.Subscribe]); the asker needs no round trip of its own to learn it. A grant to a
//     request of the call itself (its Lease or one of its Behind) is in the reply instead.
//   - A request may carry the waiters queued behind its asker in its process
//     ([AcquireRequest].Behind): each one joins the queue, in that order, when the backend first
//     hears of it, and is granted as it reaches the head and fits, like any other entry — so a
//     process's waiters take their places in the fleet's FIFO order when they arrive, not one at
//     a time as each becomes the asker, and one release can grant the next of them while the
//     asker still waits for its own reply.
//   - Tokens grow strictly with every grant, across a loss of data too (they are drawn from the
//     backend's clock in microseconds when the counter is behind it, and never fall below
//     [AcquireRequest].Seen).
//   - When the backend finds no state for a name (new, or lost in a restart) or finds that the
//     state went back in time (restored from an older snapshot, an AOF that lost its last second,
//     a promoted replica that lagged), it starts a new epoch and grants nothing new until the
//     longest lease TTL that may be in use has passed (the request's TTL, the TTLs it has seen,
//     and [AcquireRequest].LongestTTL), so that leases granted before the loss re-register first
//     ([Backend.Renew]).
type Backend interface {
	// Acquire asks for the lease req.Lease: it is granted at once, or queued (if req.Wait) at
	// the tail of the name's queue, or — asked again with the same ID — it keeps its place,
	// which refreshes its queue entry, and is granted once it heads the queue and fits.
	Acquire(ctx context.Context, req AcquireRequest) (AcquireReply, error)
	// Renew extends every lease of req.Leases that the backend holds by req.TTL from now. A lease
	// it does not hold but that was granted in an earlier epoch (before a loss of data) is
	// registered again if it fits; any other is reported lost. Every lease of req.Register (granted
	// without the backend, while it was unreachable) is registered whatever the capacity, so that
	// new admissions wait for it.
	Renew(ctx context.Context, req RenewRequest) (RenewReply, error)
	// Release removes the leases and queue entries with the IDs of req.Leases, and grants the
	// queue's heads that fit now; unknown IDs are ignored, so a repeated Release changes nothing.
	// Then, in the same call, it makes the Acquire of req.Then, if any, and answers it.
	Release(ctx context.Context, req ReleaseRequest) (ReleaseReply, error)
	// Subscribe calls deliver, until stop is called, with each grant the backend makes to a
	// request of instance inst (the part of a lease ID before its first "."), and with a zero
	// Lease when grants may have been missed (after a reconnect): then the waiter should ask
	// again. deliver must not block. While a subscription lives, the backend knows that inst's
	// process is alive.
	Subscribe(ctx context.Context, name, inst string, deliver func(Lease)) (stop func(), err error)
	// Reserve takes the next token of the rate bucket of req.Name (GCRA on the backend's clock)
	// unless it would come later than req.MaxWait from now; see [RateReply].
	Reserve(ctx context.Context, req RateRequest) (RateReply, error)
	// CancelReservation gives back the token of a reservation that has not come due, as far as
	// no later reservation has been made on its strength (like x/time/rate's Reservation.Cancel).
	CancelReservation(ctx context.Context, req RateCancel) error
}

// A Lease names one request for permits of a fleet.Semaphore, and the lease it becomes.
type Lease struct {
	ID       string // "INSTANCE.SEQ": unique for the name across the fleet, made by the Semaphore
	N        int64  // the weight: permits asked for
	Capacity int64  // the capacity of the Semaphore that asks: the bound this request respects
	Token    uint64 // the fencing token the backend granted it (0 before the grant)
	Epoch    int64  // the epoch it was granted or last registered in
}

// Instance returns the part of the lease's ID before its first ".": the Semaphore that made it,
// whose channel its grant is pushed to.
func (l Lease) Instance() string {
	if i := strings.IndexByte(l.ID, '.'); i >= 0 {
		return l.ID[:i]
	}
	return l.ID
}

// An AcquireRequest is the argument of [Backend.Acquire].
type AcquireRequest struct {
	Name       string
	Lease      Lease
	TTL        time.Duration // the lease's TTL
	Wait       bool          // join the queue if the request cannot be granted at once
	Heartbeat  time.Duration // how long the queue entry lives unless asked about again
	Push       bool          // the asker listens on its instance's channel: push its grant there
	Seen       uint64        // the largest token the asker has seen: new tokens are larger
	LongestTTL time.Duration // the longest lease TTL the asker knows to be in use for the name
	// Behind are requests of the asker's process queued behind Lease there, in their order (at
	// most MaxBehind; only with Wait and Push): each one that is neither queued nor granted yet
	// joins the queue's tail, in order, after Lease; one queued keeps its place; one already
	// granted (its push was lost) is granted again, as a repeated Lease is. Every one is kept
	// alive by this call as Lease is (Heartbeat), with the same TTL, and its grant is pushed to
	// the asker's instance, or answered in [AcquireReply].Behind when this call makes it.
	Behind []Lease
}

// MaxBehind is the most requests an [AcquireRequest] may carry in Behind.
const MaxBehind = 64

// An AcquireReply is the answer of [Backend.Acquire].
type AcquireReply struct {
	Granted    bool
	Token      uint64        // granted: the lease's fencing token
	Epoch      int64         // the epoch of the name's state on the backend
	RetryIn    time.Duration // not granted: ask again after this at the latest
	Paused     time.Duration // admission is paused for this long from now (after a loss of data)
	Pause      PauseReason   // why, while Paused > 0
	LongestTTL time.Duration // the longest lease TTL in use for the name, as far as the backend knows
	// Queued and Free describe the name after the call: the requests in its queue, and the
	// asker's capacity less the permits held (negative after a rollout shrank it). A process
	// whose requests meet a full or queued name lets its next one ride on its next release.
	Queued int64
	Free   int64
	// Behind answers the request's Behind, one per lease, in order: the fencing token of its
	// grant if it was granted in this call or before (its lease then lives a TTL from this call),
	// 0 if it is queued.
	Behind []uint64
}

// A PauseReason says why a backend admits nothing new for a while.
type PauseReason uint8

const (
	PauseNone     PauseReason = iota
	PauseNoState              // the backend had no state for the name: its first use, or all its data was lost
	PauseWentBack             // the state is from before a restart or failover: it may have gone back in time
)

// String describes the reason for a log line.
func (r PauseReason) String() string {
	switch r {
	case PauseNoState:
		return "the backend had no state for this name (its first use there, or the backend lost its data)"
	case PauseWentBack:
		return "the backend's state is from before a restart or failover and may have gone back in time"
	default:
		return "no pause"
	}
}

// A ReleaseRequest is the argument of [Backend.Release].
type ReleaseRequest struct {
	Name   string
	Leases []Lease
	// Then, if not nil, is an Acquire made in the same call, after the release and the grants it
	// makes (so it never passes a request queued before it): the releasing process's next waiter
	// joins the queue, or is granted, without a round trip of its own.
	Then *AcquireRequest
}

// A ReleaseReply is the answer of [Backend.Release].
type ReleaseReply struct {
	Then AcquireReply // the answer to req.Then; zero without one
	// Queued and Free describe the name after the call, as in AcquireReply (Free for the
	// capacity of the first lease released): a process whose release leaves room lets its next
	// request ask at once rather than wait for a release to ride on.
	Queued int64
	Free   int64
}

// A RenewRequest is the argument of [Backend.Renew].
type RenewRequest struct {
	Name       string
	TTL        time.Duration
	Leases     []Lease
	Register   []Lease       // granted without the backend: registered whatever the capacity
	Seen       uint64        // as in AcquireRequest
	LongestTTL time.Duration // as in AcquireRequest
}

// A RenewReply is the answer of [Backend.Renew].
type RenewReply struct {
	Epoch      int64         // the epoch of the name's state on the backend
	Status     []LeaseStatus // one per lease of the request, Leases then Register, in order
	Paused     time.Duration // as in AcquireReply
	Pause      PauseReason
	LongestTTL time.Duration
}

// A LeaseStatus is the outcome of a lease's renewal.
type LeaseStatus uint8

const (
	LeaseLost         LeaseStatus = iota // the backend does not hold it (expired, released, or did not fit again)
	LeaseRenewed                         // extended by the TTL
	LeaseReregistered                    // the backend had lost it with its data (or held it not yet), and holds it now
)

// A RateRequest is the argument of [Backend.Reserve].
type RateRequest struct {
	Name      string
	PerSecond float64       // tokens added per second
	Burst     int64         // bucket size
	MaxWait   time.Duration // reserve only if the token comes within this; negative: whenever it comes
}

// A RateReply is the answer of [Backend.Reserve].
type RateReply struct {
	OK    bool          // the token is reserved
	Delay time.Duration // how long from now until the token comes (when it would, if !OK)
	Mark  string        // the backend's record of the reservation, for CancelReservation
}

// A RateCancel is the argument of [Backend.CancelReservation].
type RateCancel struct {
	Name      string
	PerSecond float64
	Burst     int64
	Mark      string // from the RateReply of the reservation
}
