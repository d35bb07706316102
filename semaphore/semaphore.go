package semaphore

import (
	"context"
	"time"

	"github.com/goloom/loom/internal/sema"
)

// MaxPermits is the largest capacity a Semaphore accepts.
const MaxPermits int64 = sema.MaxPermits

// A Semaphore hands out up to Capacity permits, in strict FIFO order unless made [Unfair].
// Create one with [New]. The zero value and a nil *Semaphore are not usable: every method panics
// with "semaphore: zero Semaphore; use New". A Semaphore must not be copied after first use.
//
// Memory model: a Release happens-before every Acquire (or TryAcquire) that the released permits
// satisfy, as an unlock does before the lock it lets in.
type Semaphore struct {
	s sema.Sema
}

// core returns the semaphore's core, or panics for a zero or nil Semaphore.
func (s *Semaphore) core() *sema.Sema {
	if s == nil || !s.s.Ready() {
		panic("semaphore: zero Semaphore; use New")
	}
	return &s.s
}

// An Option configures a Semaphore.
type Option func(*config)

type config struct {
	fair bool
}

// Unfair lets an arriving request take free permits even while others are queued, as Java's
// Semaphore(n, false) does. Queued requests are still served in order among themselves, and a
// TryAcquire may then succeed while others wait. Throughput rises; a large request can starve.
func Unfair() Option { return func(c *config) { c.fair = false } }

// New returns a Semaphore with the given number of permits, all free, fair (strict FIFO) unless
// [Unfair] is given. It panics if permits is negative or above [MaxPermits].
func New(permits int64, opts ...Option) *Semaphore {
	c := config{fair: true} // every default, in one place
	for _, opt := range opts {
		opt(&c)
	}
	s := new(Semaphore)
	s.s.Init(permits, c.fair)
	return s
}

// Acquire blocks until it holds n permits, or until ctx ends, in which case it returns ctx.Err()
// and holds nothing — also when the permits were granted at the moment ctx ended. A ctx that is
// already done never acquires, even when permits are free. n == 0 succeeds at once (unless ctx
// is done); n < 0 or n > [Semaphore.Capacity] returns an error matching [ErrInvalidWeight] at
// once, as does a wait whose n a shrink has made impossible. In fair mode the request queues
// behind every earlier one.
//
// It panics if ctx is nil.
func (s *Semaphore) Acquire(ctx context.Context, n int64) error {
	c := s.core()
	if ctx == nil {
		panic("semaphore: Acquire: nil context")
	}
	// The core's fast path, inlined here so that an uncontended Acquire is one call (and ctx.Err):
	// ctx first, since a done ctx never acquires.
	if n > 0 && ctx.Err() == nil && c.TakeFast(n) {
		return nil
	}
	_, err := c.AcquireMark(ctx, n, false, 0)
	return public(err)
}

// AcquireTimeout is [Semaphore.Acquire] that gives up after d with [ErrTimeout], holding
// nothing. If ctx ends first it returns ctx.Err(). With d <= 0 it does not wait: after the usual
// checks (invalid weight, done ctx) it acquires at once if [Semaphore.TryAcquire] would, else
// returns ErrTimeout. It panics if ctx is nil.
func (s *Semaphore) AcquireTimeout(ctx context.Context, n int64, d time.Duration) error {
	c := s.core()
	if ctx == nil {
		panic("semaphore: AcquireTimeout: nil context")
	}
	return public(c.AcquireTimeout(ctx, n, d))
}

// TryAcquire takes n permits if it can without waiting and reports whether it did. In fair mode
// it fails while anyone is queued, even if n permits are free. It returns false for n < 0 or
// n > Capacity, and true for n == 0.
func (s *Semaphore) TryAcquire(n int64) bool { return s.core().TryAcquire(n) }

// Release returns n permits and serves queued requests in order. It panics with
// "semaphore: released more than held" if that would make more permits free than the capacity,
// and on n < 0. A Release of permits that are held never panics and never loses a permit,
// whatever [Semaphore.SetCapacity] does at the same time. A Release happens-before the Acquire it
// satisfies.
func (s *Semaphore) Release(n int64) { s.core().Release(n) }

// Available returns the capacity minus the permits held. It is negative after a shrink until
// enough permits come back. Like every gauge, it may be stale by the time the caller looks.
func (s *Semaphore) Available() int64 { return s.core().Available() }

// Waiting returns the number of requests queued.
func (s *Semaphore) Waiting() int { return s.core().Waiting() }

// Capacity returns the current number of permits, held or free.
func (s *Semaphore) Capacity() int64 { return s.core().Capacity() }

// SetCapacity changes the number of permits to n; it never blocks. Growing serves queued
// requests in order. Shrinking takes effect as permits come back: held permits are not revoked,
// [Semaphore.Available] goes negative meanwhile, and queued requests for more than n fail with
// [ErrInvalidWeight] at once. It panics if n is negative or above [MaxPermits].
func (s *Semaphore) SetCapacity(n int64) { s.core().SetCapacity(n) }
