// Package sim is a deterministic simulation harness for adaptive limiters: a downstream with a
// hidden capacity, clients that offer load to it through the gate under test, and a recording
// of every window the gate's controller saw, all on the fake clock of testing/synctest, so a
// ten-minute scenario runs in a fraction of a second and repeats exactly.
//
// # The downstream
//
// A [Server] has a hidden capacity C, the number of calls it serves at once without queueing.
// Its latency is flat up to C (Service, with seeded jitter: a lognormal spread and a few lucky
// fast and unlucky slow calls), rises in proportion past it (C+n calls take (C+n)/C as long,
// as a processor-sharing server would), and above C×(1+Queue) it refuses calls: they fail with
// [ErrOverload] after DropLatency, the drops an adaptive limiter must read. Calls slower than
// Timeout fail with context.DeadlineExceeded, as a client's deadline would make them. C follows
// a script of steps over time (C = 0 is an outage: every call is refused).
//
// # The clients
//
// A [Scenario] runs a scripted number of clients, each calling in a closed loop: call, pause
// for Think, call again. A call the gate rejects is retried after a random backoff of one to
// three Service times. Offered load "3×C" is 3×C clients with no think time.
//
// # Determinism
//
// Every client draws from its own seeded random source and every sleep is rounded so that each
// client wakes only at instants of its own (instants ≡ its index modulo 4096 nanoseconds). Under
// synctest the fake clock then moves from one client's event to the next, one goroutine running
// at a time, so the whole run — which calls are sampled, every window, every limit — depends on
// the seed alone. This holds for a gate that never makes a caller wait (it rejects when no slot
// is free), like [NewSemaGate]'s or a limiter with an acquire timeout of 0: a gate with a queue wakes
// several waiters at one instant when its limit grows, and is then repeatable only in
// distribution.
//
// # The gate
//
// What is tested is a [Gate]: anything with Do and Limit, such as the limiter itself. [NewSemaGate]
// is the gate the limiter will be: the FIFO core and the window aggregation, exactly as the
// limiter uses them. A [Recorder] wraps the controller to record each window, whichever gate
// runs it.
package sim
