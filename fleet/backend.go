package fleet

import (
	"context"
	"time"
)

// A Backend is the shared engine that the [Semaphore]s (and [Rate]s) of every process of a fleet
// talk to: [NewMemory] for one process and for tests, and package fleet/redisfleet for Redis.
// Each method is one round trip, atomic on the backend, decided on the backend's clock; its
// methods are safe for concurrent use. A method that fails returns an error (any error: the
// Semaphore treats them all as "the backend is unreachable"), and never blocks for longer than
// its ctx or its own client timeout allow. A method whose reply is lost may be retried with the
// same arguments and must then have the same effect as one call (a repeated Acquire of a lease
// it granted grants that one lease again, and may answer with a new token: the first answer
// never reached anyone).
//
// The state of one name: the leases that hold its permits (each with an expiry on the backend's
// clock), the queue of requests waiting for them in arrival order, a fencing-token counter and an
// epoch (the backend time at which this state was created). Implementations must keep these
// invariants, which the Semaphore relies on:
//
//   - A lease lives until its expiry; a request is granted only if, with the live leases, the
//     summed weight stays within the request's own capacity ([Lease].Capacity).
//   - Requests are granted in queue order: only the head of the queue may be granted, and only
//     once it fits (head-of-line blocking, as in a FIFO semaphore). A request that cannot wait
//     ([AcquireRequest].Wait false) is granted only if the queue is empty and it fits, and is never
//     queued.
//   - A queued request that is not asked about again within its TTL is dropped from the queue.
//   - Tokens grow strictly with every grant, across a loss of all data too (they are drawn from
//     the backend's clock in microseconds when the counter is behind it).
//   - When the backend finds no state for a name (new, or lost in a restart), it creates it with a
//     new epoch and grants nothing new until one TTL has passed ([AcquireRequest].TTL, or the
//     longest TTL seen during that time), so that leases granted before the loss can re-register
//     first ([Backend.Renew]).
//   - Whenever the head of the queue fits, the backend tells the subscribers of the name
//     ([Backend.Subscribe]); waiters also ask again after [AcquireReply].RetryIn, so no single
//     lost message delays anyone for long.
type Backend interface {
	// Acquire asks for the lease req.Lease: it is granted at once, or queued (if req.Wait) at
	// the tail of the name's queue, or — asked again with the same ID — it keeps its place,
	// which refreshes its queue entry, and is granted once it heads the queue and fits.
	Acquire(ctx context.Context, req AcquireRequest) (AcquireReply, error)
	// Renew extends every lease of req that the backend holds by req.TTL from now. A lease it
	// does not hold but that was granted in an earlier epoch (before a loss of data) is
	// registered again if it fits; any other is reported lost.
	Renew(ctx context.Context, req RenewRequest) (RenewReply, error)
	// Release removes the leases and queue entries with the IDs of leases; unknown IDs are
	// ignored, so a repeated Release changes nothing.
	Release(ctx context.Context, name string, leases []Lease) error
	// Subscribe calls wake, until stop is called, with the ID of a queued request of name that
	// may be granted now, or with "" when messages may have been missed (after a reconnect):
	// then every waiter should ask again. wake must not block. Messages are hints; delivery is
	// not guaranteed.
	Subscribe(ctx context.Context, name string, wake func(id string)) (stop func(), err error)
	// Reserve takes the next token of the rate bucket of req.Name (GCRA on the backend's clock)
	// unless it would come later than req.MaxWait from now; see [RateReply].
	Reserve(ctx context.Context, req RateRequest) (RateReply, error)
	// CancelReservation gives back the token of a reservation that has not come due, as far as
	// no later reservation has been made on its strength (like x/time/rate's Reservation.Cancel).
	CancelReservation(ctx context.Context, req RateCancel) error
}

// A Lease names one request for permits of a [Semaphore], and the lease it becomes.
type Lease struct {
	ID       string // unique for the name across the fleet, made by the Semaphore; never empty
	N        int64  // the weight: permits asked for
	Capacity int64  // the capacity of the Semaphore that asks: the bound this request respects
	Token    uint64 // the fencing token the backend granted it (for Renew; 0 before the grant)
	Epoch    int64  // the epoch it was granted or last registered in (for Renew)
}

// An AcquireRequest is the argument of [Backend.Acquire].
type AcquireRequest struct {
	Name  string
	Lease Lease
	TTL   time.Duration // the lease's TTL, and how long a queue entry lives without being asked about
	Wait  bool          // join the queue if the request cannot be granted at once
}

// An AcquireReply is the answer of [Backend.Acquire].
type AcquireReply struct {
	Granted bool
	Token   uint64        // granted: the lease's fencing token
	Epoch   int64         // the epoch of the name's state on the backend
	RetryIn time.Duration // not granted: ask again after this at the latest (a lease may expire then)
}

// A RenewRequest is the argument of [Backend.Renew].
type RenewRequest struct {
	Name   string
	TTL    time.Duration
	Leases []Lease
}

// A RenewReply is the answer of [Backend.Renew].
type RenewReply struct {
	Epoch  int64         // the epoch of the name's state on the backend
	Status []LeaseStatus // one per lease of the request, in order
}

// A LeaseStatus is the outcome of a lease's renewal.
type LeaseStatus uint8

const (
	LeaseLost         LeaseStatus = iota // the backend does not hold it (expired, released, or did not fit again)
	LeaseRenewed                         // extended by the TTL
	LeaseReregistered                    // the backend had lost it with its data, and holds it again
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
