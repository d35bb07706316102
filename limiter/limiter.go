package limiter

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goloom/loom/internal/sema"
)

// A Limiter runs tasks with at most a fixed number of task bodies running at once. Create one
// with [New]. The zero value and a nil *Limiter are not usable: every method panics with
// "limiter: zero Limiter; use New". A Limiter is safe for concurrent use by multiple goroutines
// and must not be copied after first use.
type Limiter struct {
	slots sema.Sema // one permit per slot; fair, so Do, Call and Submit share one FIFO queue
	limit int
	cfg   config
	epoch time.Time // with a logger: the base of Futures' timestamps

	closed      atomic.Bool  // Shutdown has begun
	waiting     atomic.Int64 // calls waiting for a slot; reserved before queueing, see reserve
	overrunning atomic.Int64 // tasks holding a slot after their call ended

	mu         sync.Mutex
	idle       chan struct{} // made by the first Shutdown; closed once no slot is held after it
	idleClosed bool

	hmu    sync.Mutex // guards the hand-off of granted tasks to task goroutines
	takers int        // task goroutines inside releaseAndTake
	ready  []runner   // granted tasks handed off to takers

	count counters
}

// New returns a Limiter that runs at most limit task bodies at once, configured by opts. It
// panics if limit is below 1 (or above 1<<60).
func New(limit int, opts ...Option) *Limiter {
	if limit < 1 {
		panic(fmt.Sprintf("limiter: New: limit must be at least 1, got %d", limit))
	}
	if int64(limit) > sema.MaxPermits {
		panic(fmt.Sprintf("limiter: New: limit %d above the maximum %d", limit, int64(sema.MaxPermits)))
	}
	c := config{maxWaiting: -1} // every default, in one place
	for _, opt := range opts {
		opt(&c)
	}
	l := &Limiter{limit: limit, cfg: c}
	if c.logger != nil {
		l.epoch = time.Now()
	}
	l.slots.Init(int64(limit), true)
	return l
}

// Do runs fn with a slot of the limiter and returns fn's error as is.
//
// Do first waits for a slot, in one FIFO queue with every other waiting Do, [Call] and [Submit].
// It waits until a slot frees, or until ctx ends (it returns ctx's error and fn never runs), or
// for as long as [WithAcquireTimeout] allows, and it does not wait at all beyond the bound of
// [WithMaxWaiting]; when it gets no slot it returns an error matching [ErrRejected]. A ctx that is
// already done never gets a slot. After [Limiter.Shutdown] began, Do returns [ErrClosed].
//
// fn gets ctx, or with [WithTaskTimeout] a context derived from ctx that is also cancelled when
// the task times out, so it carries ctx's values and cancellation. Without a task timeout, fn
// runs on the caller's goroutine and Do returns when fn does. With one, fn runs on a goroutine
// of its own and Do returns when fn does, when the timeout fires ([ErrTaskTimeout]) or when ctx
// ends (ctx's error), whichever is first; a task that is still running keeps its slot until fn
// returns.
//
// With a task timeout Do may thus return while fn still runs: fn's effects are then not ordered
// before Do's return. Otherwise everything fn did happens-before Do returns.
//
// A panic in fn is recovered: Do returns a [*PanicError] and the slot is released. If fn calls
// runtime.Goexit on the caller's goroutine, the goroutine ends as it would without the limiter,
// after the slot is released (the call is counted Failed); on a goroutine of its own Do returns
// [ErrGoexit].
//
// Calling Do from a task of the same limiter needs a second slot: with every slot taken it waits
// like any other caller, so give such a limiter an acquire timeout.
func (l *Limiter) Do(ctx context.Context, fn func(context.Context) error) error {
	l.check(ctx, "Do")
	if fn == nil {
		panic("limiter: Do: nil function")
	}
	// Two literals, not one shared: the one callHere gets does not escape and costs nothing.
	if l.cfg.taskTimeout > 0 {
		_, err := callTimed(ctx, l, func(ctx context.Context) (struct{}, error) { return struct{}{}, fn(ctx) })
		return err
	}
	_, err := callHere(ctx, l, func(ctx context.Context) (struct{}, error) { return struct{}{}, fn(ctx) })
	return err
}

// check panics for a Limiter that New did not make (the zero value, or nil) and for a nil ctx.
func (l *Limiter) check(ctx context.Context, op string) {
	if l == nil || l.limit == 0 {
		panic("limiter: zero Limiter; use New")
	}
	if ctx == nil {
		panic("limiter: " + op + ": nil context")
	}
}

// abortHere ends a call whose fn, running on the caller's goroutine, panicked (r != nil) or
// called runtime.Goexit (r == nil; the goroutine goes on ending after us).
func (l *Limiter) abortHere(ctx context.Context, r any, t0, t1 time.Time) error {
	if r == nil {
		l.release()
		l.count.pick().failed.Add(1)
		return ErrGoexit
	}
	pe := &PanicError{Value: r, Stack: debug.Stack()}
	l.release()
	l.count.pick().panicked.Add(1)
	l.count.pick().add(failure(ctx, false))
	l.logPanic(ctx, pe, t0, t1)
	return pe
}

// enter takes a slot for a call, or returns why it got none, counted and logged. t0 is when the
// call began, when there is a logger.
func (l *Limiter) enter(ctx context.Context, t0 time.Time) error {
	if done := ctx.Done(); done != nil {
		select {
		case <-done:
			l.count.pick().cancelled.Add(1)
			return ctxErr(ctx)
		default:
		}
	}
	if l.slots.TryAcquire(1) {
		if !l.closed.Load() {
			return nil
		}
		l.release()
		return l.reject(ctx, ErrClosed, t0)
	}
	return l.enterSlow(ctx, t0)
}

// enterSlow is enter for a caller that has to wait.
func (l *Limiter) enterSlow(ctx context.Context, t0 time.Time) error {
	if l.closed.Load() {
		return l.reject(ctx, ErrClosed, t0)
	}
	d := l.cfg.acquireTimeout
	if l.cfg.acquireTimed && d <= 0 {
		return l.reject(ctx, ErrAcquireTimeout, t0)
	}
	if !l.reserve() {
		return l.reject(ctx, ErrTooManyWaiting, t0)
	}
	var err error
	if l.cfg.acquireTimed {
		err = l.slots.AcquireTimeout(ctx, 1, d)
	} else {
		err = l.slots.Acquire(ctx, 1)
	}
	l.waiting.Add(-1)
	if err != nil && l.closed.Load() {
		// A wait that ends as its slot is granted gives the slot back inside the semaphore,
		// past release: Shutdown must still hear of it.
		l.checkIdle()
	}
	switch {
	case err == nil:
		if !l.closed.Load() {
			return nil
		}
		l.release()
		return l.reject(ctx, ErrClosed, t0)
	case err == sema.ErrTimeout:
		return l.reject(ctx, ErrAcquireTimeout, t0)
	case err == ErrClosed:
		return l.reject(ctx, ErrClosed, t0)
	default: // ctx ended while we waited
		l.count.pick().cancelled.Add(1)
		return ctxErr(ctx)
	}
}

// reserve takes a place among the waiting calls, if WithMaxWaiting leaves one. The place is
// taken before the caller queues, so the bound holds however many callers race for it.
func (l *Limiter) reserve() bool {
	limit := int64(l.cfg.maxWaiting)
	if limit < 0 {
		l.waiting.Add(1)
		return true
	}
	for {
		n := l.waiting.Load()
		if n >= limit {
			return false
		}
		if l.waiting.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// reject counts, logs and returns a rejection.
func (l *Limiter) reject(ctx context.Context, err error, t0 time.Time) error {
	l.count.pick().rejected.Add(1)
	l.logReject(ctx, err, t0)
	return err
}

// release gives a slot back and, once Shutdown has begun, lets it know when the last one is in.
func (l *Limiter) release() {
	l.slots.Release(1)
	// Shutdown stores closed before it looks at the slots, and we look at closed after giving
	// ours back: one of the two sees the other.
	if l.closed.Load() {
		l.checkIdle()
	}
}

func (l *Limiter) checkIdle() {
	if l.slots.Available() < int64(l.limit) {
		return
	}
	l.mu.Lock()
	if l.idle != nil && !l.idleClosed {
		l.idleClosed = true
		close(l.idle)
	}
	l.mu.Unlock()
}

// Shutdown closes the limiter and waits for its tasks. From the moment it is called, every new
// call and every call still waiting for a slot fails with [ErrClosed] (counted Rejected). It then
// waits until no task holds a slot, overrunning ones included, and returns nil; or, if ctx ends
// first, it returns ctx's error, wrapped with the number of tasks still running. Shutdown may be
// called again, concurrently too, to wait some more. It must not be called from a task of the
// limiter, which would wait for itself.
func (l *Limiter) Shutdown(ctx context.Context) error {
	l.check(ctx, "Shutdown")
	l.mu.Lock()
	first := l.idle == nil
	if first {
		l.idle = make(chan struct{})
		l.closed.Store(true)
	}
	idle := l.idle
	l.mu.Unlock()
	if first {
		l.slots.Close(ErrClosed)
		l.checkIdle()
	}
	select {
	case <-idle:
		return nil
	default:
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("limiter: shutdown: %d tasks still running: %w", l.inFlight(), ctxErr(ctx))
	}
}
