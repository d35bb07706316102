// Package fleet holds one concurrency limit, and one rate limit, across every process of a
// service: "at most 40 calls in flight to the LLM API" for all replicas together, where each
// replica holding limiter.New(40) would let 40 × replicas through.
//
//	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
//	sem := fleet.New(redisfleet.New(rdb), "llm-api", 40, fleet.WithLease(15*time.Second))
//	defer sem.Close()
//
//	p, err := sem.Acquire(ctx, 1)
//	if err != nil {
//		return err
//	}
//	defer p.Release()
//	ctx, stop := p.WithContext(ctx) // cancelled if the lease is lost
//	defer stop()
//	return callTheAPI(ctx)
//
// With package limiter, limiter.WithFleet(sem) does the same for every Do, Call and Submit.
//
// Every permit is a lease: it has an ID, an expiry on the backend's clock and a fencing token,
// and the [Semaphore] renews the leases it holds, all in one round trip every third of the lease
// TTL. Nothing is a bare counter, so no crash, lost reply or cancelled request can leak a permit.
//
// # Guarantees
//
// On both backends ([NewMemory], and Redis through package fleet/redisfleet):
//
//  1. Bound. The permits held by live leases of a name never add up to more than the capacity of
//     the process that acquires (each process respects its own, so during a rollout that changes
//     the capacity, each admission respects the capacity of whoever asks). Work runs only while
//     its lease lives: a lease that could not be renewed before it expires is lost, and its
//     Permit's context is cancelled with cause [ErrLeaseLost]. The holder gives up its lease no
//     later than the backend would (it counts the TTL from when it sent the request).
//  2. Crash. A process that dies without releasing frees its permits, and its place in the
//     queue, within one lease TTL.
//  3. Fairness. Waiters are served in one FIFO order across the fleet, by arrival at the backend
//     (weighted and head-of-line, as in package semaphore: a large request holds back later small
//     ones), and in FIFO order within each process. Within a process only the head of the local
//     queue talks to the backend, so each process has at most one request in the fleet's queue:
//     a process that keeps arriving cannot starve another.
//  4. Time. Every expiry is decided on the backend's clock (Redis TIME), never a client's.
//  5. Release by lease. Release removes exactly its own lease: a double Release, a Release after
//     the lease expired, or a retried call whose first reply was lost, changes nothing. No permit
//     is ever inflated, none is ever stuck for longer than a TTL.
//  6. Backend down. What Acquire does while the backend cannot be reached is chosen with
//     [WhenUnavailable]: [FailClosed] (the default) fails with an error matching [ErrUnavailable]
//     within ctx's deadline or the client's timeout, never hangs; [FailOpen] admits without a
//     lease and without a bound ([Permit.Degraded]); [Degrade](n) admits at most n permits per
//     process. Each is counted in [Stats] and logged once per transition (down, up again). While
//     the backend is down, one call per probe interval (a tenth of the TTL, between 100 ms and
//     1 s) tries it; the others take the fallback at once. Degraded permits are unknown to the
//     backend: once it is back, they still run beside the leases it grants until released.
//  7. Restart with data loss. When the backend has no state for a name — it lost its data, or
//     the name is new to it — it admits nothing new for one lease TTL, while held leases register
//     again on their next renewal (those that no longer fit are lost). So the bound holds across
//     a restart, at the price of a pause of one TTL at the first use of a name on a backend.
//     (A fresh [NewMemory] knows it holds no earlier data and does not pause.) Tokens stay
//     strictly increasing across the loss: new ones are drawn from the backend's clock.
//  8. Wake-up. A waiter is served within milliseconds of a release in another process (the
//     backend tells the process whose request heads the queue); waiting never depends on a single
//     message: each waiter also asks again at the nearest lease expiry, and at least every third
//     of a TTL.
//  9. Round trips. One per uncontended Acquire and one per Release; renewal is one round trip per
//     Semaphore every TTL/3 for all its leases together. Under contention, a permit costs about
//     three: queue, granted on wake-up, release.
//
// # Redis failover
//
// Redis replicates asynchronously. If the primary fails and a replica that had not yet received
// the latest grants (or renewals) is promoted (Sentinel, Cluster), those are lost while their
// holders keep running: the new primary may admit others in their place, and the fleet may run
// more than the capacity — by at most the permits of those leases — until their holders next
// renew. Their renewal then finds their leases gone in the same epoch and reports them lost, so
// the over-admission lasts at most one renewal interval (TTL/3) plus the failover time, and never
// longer than one TTL. A failover that loses the whole state of a name (a replica that never
// had it) is a restart with data loss, and the bound holds (guarantee 7). Where over-admission
// must never happen, check the fencing token ([Permit.Token]) at the guarded resource: a holder
// whose lease was lost carries a smaller token than the one admitted in its place.
//
// # Rates
//
// [NewRate] makes a token bucket shared by the fleet (GCRA on the backend's clock, one round trip
// per reservation), for "at most 10 call starts per second" across every replica; limiter's
// WithFleetRate holds its tokens in the limiter's FIFO queue.
//
// A [Semaphore] and a [Rate] are safe for concurrent use by multiple goroutines.
package fleet
