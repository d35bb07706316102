package semaphore

import (
	"context"
	"time"

	"github.com/goloom/loom/internal/sema"
)

// MaxPermits is the largest capacity a Semaphore accepts.
const MaxPermits int64 = sema.MaxPermits

// A Semaphore hands out up to Capacity permits, in strict FIFO order unless made [Unfair].
// Create one with [New]; the zero value is not usable. A Semaphore must not be copied after
// first use.
type Semaphore struct {
	s sema.Sema
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
func (s *Semaphore) Acquire(ctx context.Context, n int64) error { return s.s.Acquire(ctx, n) }

// AcquireTimeout is [Semaphore.Acquire] that gives up after d with [ErrTimeout], holding
// nothing. If ctx ends first it returns ctx.Err(). With d <= 0 it does not wait: after the usual
// checks (invalid weight, done ctx) it acquires at once if [Semaphore.TryAcquire] would, else
// returns ErrTimeout.
func (s *Semaphore) AcquireTimeout(ctx context.Context, n int64, d time.Duration) error {
	return s.s.AcquireTimeout(ctx, n, d)
}

// TryAcquire takes n permits if it can without waiting and reports whether it did. In fair mode
// it fails while anyone is queued, even if n permits are free. It returns false for n < 0 or
// n > Capacity, and true for n == 0.
func (s *Semaphore) TryAcquire(n int64) bool { return s.s.TryAcquire(n) }

// Release returns n permits and serves queued requests in order. It panics with
// "semaphore: released more than held" if that would make more permits free than the capacity,
// and on n < 0.
func (s *Semaphore) Release(n int64) { s.s.Release(n) }

// Available returns the capacity minus the permits held. It is negative after a shrink until
// enough permits come back. Like every gauge, it may be stale by the time the caller looks.
func (s *Semaphore) Available() int64 { return s.s.Available() }

// Waiting returns the number of requests queued.
func (s *Semaphore) Waiting() int { return s.s.Waiting() }

// Capacity returns the current number of permits, held or free.
func (s *Semaphore) Capacity() int64 { return s.s.Capacity() }

// SetCapacity changes the number of permits to n; it never blocks. Growing serves queued
// requests in order. Shrinking takes effect as permits come back: held permits are not revoked,
// [Semaphore.Available] goes negative meanwhile, and queued requests for more than n fail with
// [ErrInvalidWeight] at once. It panics if n is negative or above [MaxPermits].
func (s *Semaphore) SetCapacity(n int64) { s.s.SetCapacity(n) }
