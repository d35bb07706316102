// Package semaphore provides a weighted semaphore that admits waiters in strict arrival (FIFO) order.
//
// A request that does not fit blocks every request queued behind it, so a large request is never
// starved by a stream of small ones; when a waiter leaves the queue (its context ends or its
// timeout fires), the requests behind it are re-examined at once. A wait that ends by timeout or
// cancellation leaves the semaphore as it found it: an acquire that returns an error holds
// nothing, one that returns nil holds what it asked for, and no permit is ever lost or duplicated.
//
// The uncontended Acquire and Release are one atomic compare-and-swap each and allocate nothing;
// queued waiters park on a channel and their nodes are reused, so a contended semaphore allocates
// nothing in steady state either.
//
// [Unfair] trades the arrival order for throughput: arrivals may take free permits ahead of the
// queue, while queued waiters are still served in order among themselves.
//
// A [Semaphore] is safe for concurrent use by multiple goroutines. Under testing/synctest, use a
// Semaphore from one bubble only (or from outside every bubble): its waiter nodes hold channels
// and timers, which belong to the bubble that made them.
package semaphore
