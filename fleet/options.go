package fleet

import (
	"fmt"
	"log/slog"
	"time"
)

// DefaultLease is the lease TTL of a [Semaphore] made without [WithLease].
const DefaultLease = 15 * time.Second

// MinLease is the shortest lease [WithLease] accepts.
const MinLease = time.Second

// An Option configures a [Semaphore] (and, where it applies, a [Rate]). Options are applied by
// [New] and [NewRate]; the configuration is fixed once they return.
type Option func(*config)

type config struct {
	ttl    time.Duration
	mode   Unavailable
	logger *slog.Logger
}

func defaults() config {
	return config{ttl: DefaultLease, mode: FailClosed, logger: slog.Default()}
}

// WithLease sets the lease TTL: how long a permit outlives its holder's last renewal, so how long
// a crashed process keeps its permits (and its place in the queue), and how long a backend that
// lost its data admits nothing new. The holder renews every ttl/3. It panics if ttl is below
// [MinLease] (1 s). It has no meaning for a [Rate].
func WithLease(ttl time.Duration) Option {
	if ttl < MinLease {
		panic(fmt.Sprintf("fleet: WithLease: lease %v below the minimum %v", ttl, MinLease))
	}
	return func(c *config) { c.ttl = ttl }
}

// WithLogger sets where the Semaphore (or Rate) logs its transitions: the backend becoming
// unreachable and reachable again (once each per transition), leases lost, and a backend found
// to have lost its data. The default is slog.Default(); nil turns logging off.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) { c.logger = l }
}

// Unavailable is what a [Semaphore] or [Rate] does while its backend cannot be reached; see
// [WhenUnavailable]. The zero value is [FailClosed].
type Unavailable struct {
	kind  unavailableKind
	limit int64 // Degrade: permits per process
}

type unavailableKind uint8

const (
	failClosed unavailableKind = iota
	failOpen
	degrade
)

var (
	// FailClosed makes Acquire fail with an error matching [ErrUnavailable] while the backend
	// cannot be reached: the fleet-wide bound is never broken. It is the default.
	FailClosed = Unavailable{kind: failClosed}
	// FailOpen makes Acquire succeed without a lease and without any bound while the backend
	// cannot be reached ([Permit.Degraded] is true): availability over the limit.
	FailOpen = Unavailable{kind: failOpen}
)

// Degrade returns the choice to admit at most n permits (summed weight) in this process while
// the backend cannot be reached, as if each process had a local semaphore of n: with r replicas
// the downstream sees at most r·n. Acquire waits for one of those n like any semaphore (under its
// ctx and timeout). For a [Rate], it allows this process n starts per second, in bursts of n. It
// panics if n is negative; Degrade(0) is FailClosed.
func Degrade(n int64) Unavailable {
	if n < 0 {
		panic(fmt.Sprintf("fleet: Degrade: negative permits %d", n))
	}
	if n == 0 {
		return FailClosed
	}
	return Unavailable{kind: degrade, limit: n}
}

// String returns "FailClosed", "FailOpen" or "Degrade(n)".
func (u Unavailable) String() string {
	switch u.kind {
	case failOpen:
		return "FailOpen"
	case degrade:
		return fmt.Sprintf("Degrade(%d)", u.limit)
	default:
		return "FailClosed"
	}
}

// WhenUnavailable chooses what Acquire does while the backend cannot be reached: [FailClosed]
// (the default), [FailOpen] or [Degrade](n). Every Acquire that meets an unreachable backend is
// counted in [Stats].Unavailable, and every permit granted without a lease in [Stats].Degraded.
// Leases already held are not kept alive by any choice: one that cannot be renewed before it
// expires is lost.
func WhenUnavailable(u Unavailable) Option {
	return func(c *config) { c.mode = u }
}
