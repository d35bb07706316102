// Package sema is the weighted FIFO semaphore behind the public semaphore package, the limiter,
// scope's WithLimit and fleet's local queue.
//
// It adds two things to a plain semaphore, for its callers inside the module:
//
//   - Waiters that cost no goroutine: [Sema.AcquireFunc] queues a callback in the same FIFO order
//     as blocking acquirers.
//   - Hand-off of queued work to the releasing goroutine: a waiter may carry an owner (the task it
//     waits to run), and [Sema.ReleaseAndTake] gives the permits back and returns the owner of the
//     first waiter they serve, so that the goroutine that finished one task runs the next one
//     instead of starting a goroutine for it.
//
// # State word
//
// Free permits live in one atomic int64 so that an uncontended Acquire and Release are a single
// atomic operation each. While the queue is non-empty, the word is offset by -bias: in fair mode
// the fast path then fails on its own (the word is hugely negative), and a Release sees at once
// that it must take the lock to hand its permits to the queue. Every change of the word is an
// atomic operation, so a fast-path racer that loses a compare-and-swap simply retries.
//
// # Invariants
//
//   - free == capacity - held, where free is the decoded word, at every instant observed under mu
//     (outside it, capacity and the word are two reads, see Release).
//   - The offset is in the word exactly while the queue is non-empty, and it is put in before the
//     first waiter is counted in Waiting (fair at every instant).
//   - A queued waiter is served only from the head, strictly in order; a waiter leaves the queue
//     once: served, failed (shrink, Close) or cancelled, decided under mu.
//   - A waiter is signalled (its channel, its fn, or its hand-off to a taker) exactly once, after
//     mu is released.
package sema

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

const (
	// MaxPermits bounds the capacity, so that the waiter offset never overlaps a real count, even
	// for the moment an over-release is counted before it is refused.
	MaxPermits = 1 << 59
	bias       = 1 << 62
	// Words below threshold carry the waiter offset; real counts lie in [-MaxPermits, MaxPermits].
	threshold = -(1 << 61)
)

// ErrTimeout is returned when a timed acquire runs out of time. The public packages translate it
// into their own errors.
var ErrTimeout = errors.New("sema: timed out")

// ErrFull is returned for a request that would have to queue while as many wait as
// [Sema.SetMaxWaiting] allows.
var ErrFull = errors.New("sema: too many waiting")

// A WeightError is returned for a request that can never be served: n < 0 or n above the
// capacity, at the call or after a shrink while it waited.
type WeightError struct {
	N, Capacity int64
	Shrunk      bool // the capacity shrank below N while the request waited
}

func (e *WeightError) Error() string {
	if e.Shrunk {
		return fmt.Sprintf("%d permits requested, capacity shrank to %d", e.N, e.Capacity)
	}
	return fmt.Sprintf("%d permits requested, capacity %d", e.N, e.Capacity)
}

// Waiter is a queued request. Nodes for blocking waiters are recycled per semaphore, through a
// spare slot and a free list under its mutex (never a global pool: a node's channel and timer
// belong to the synctest bubble, if any, that made them, and a semaphore is used from one
// bubble).
type Waiter struct {
	n          int64
	prev, next *Waiter
	err        error                // set before the waiter is signalled; nil means granted
	owner      any                  // the task this waiter holds a place for, for ReleaseAndTake; nil: none
	blk        *blocking            // a blocking waiter's own parts; nil for a callback waiter
	fn         func(*Waiter, error) // callback waiters: called once when signalled (not when taken)
	since      time.Duration        // when it was queued, after Sema.epoch, if the semaphore stamps its waiters; guarded by Sema.mu
	mark       int64                // with a gate: the mark of the pass it was granted with (see Gate)
	queued     bool                 // on the queue; guarded by Sema.mu
	taken      bool                 // served by ReleaseAndTake: the taker runs owner; set before signalling
	// The fields are ordered so that the node packs into 96 bytes: a Submitted task embeds it,
	// and a million queued tasks pay for every word (BenchmarkLimiterWaitingMemory).
}

// blocking is what only a blocking waiter needs, apart so that a callback waiter (embedded in
// every queued Submit of the limiter) is smaller. A node keeps it for its lifetime.
type blocking struct {
	ready chan struct{} // one token when signalled
	timer *time.Timer   // with a timeout; reused with the node
}

// A Gate is an admission condition besides free permits — the limiter's token bucket. With a
// gate, a request is served only when its permits are free and the gate lets it pass, and the
// queue's head waits for both: the requests behind it wait too, so one FIFO order holds for
// permits and passes alike. A request that waits for the gate costs no goroutine: a timer wakes
// the queue when the gate will open.
//
// Each pass has a mark, which the request that got it carries (see [Sema.TryAcquireMark],
// [Sema.AcquireMark], [Waiter.Mark]): a pass that goes unused goes back by its mark, as far as no
// later pass depends on it.
type Gate interface {
	// Pass lets one request through now and returns 0 and the pass's mark, or returns how long
	// until one could pass (> 0), taking nothing. It is called with or without the semaphore's
	// lock held and must not call back into the semaphore.
	Pass() (wait time.Duration, mark int64)
	// Return gives back the pass with this mark, taken for a request that did not use it: a
	// grant that a cancelled wait handed back, or one its caller refused to use.
	Return(mark int64)
}

// Sema is a weighted semaphore with a strict FIFO queue. The zero value is not usable; call [New]
// or [Sema.Init].
type Sema struct {
	// state is written by every acquire and release, on every core; the fields the fast paths
	// only read (capacity, fair, draining, gate) sit on a line of their own, so that a write of
	// state by one core does not also make the next acquire on another miss on them
	// (BenchmarkContended, 2 goroutines on capacity 4: 103 ns without the padding, 69 ns with);
	// and the fields written under mu (the queue, its length) on another, so that a queueing
	// waiter does not either.
	_     [cacheLine]byte
	state atomic.Int64 // free permits, offset by -bias while anyone is queued
	_     [cacheLine - 8]byte
	readMostly
	_ [cacheLine - unsafe.Sizeof(readMostly{})%cacheLine]byte

	mu         sync.Mutex
	head, tail *Waiter
	// waiting is the queue's length, guarded by mu like the queue; Waiting takes the lock to read
	// it. (An atomic count, readable without the lock, cost two locked additions per wait.)
	waiting   int
	gateHeld  atomic.Bool // the head waits for the gate, not for permits
	gateTimer *time.Timer // wakes the queue when the gate opens; armed while gateArmed
	gateArmed bool
	closed    error                  // set by Close: every request that would queue fails with it
	drained   chan struct{}          // made by Close; closed once every permit is back
	isDrained bool                   // drained is closed
	spare     atomic.Pointer[Waiter] // one recycled blocking waiter, given back without mu
	free      *Waiter                // recycled blocking waiters, linked through next
	nfree     int                    // length of free, at most maxFree
}

// readMostly are the fields of a Sema that its fast paths read and almost nothing writes: on a
// cache line of their own.
type readMostly struct {
	capacity   atomic.Int64 // written only by SetCapacity, under mu
	maxWaiting int64        // set by SetMaxWaiting before use; < 0: no bound
	gate       Gate         // set by SetGate before use; nil: permits alone decide
	epoch      time.Time    // with stamp: the base of the waiters' since
	draining   atomic.Bool  // Close has run: every release looks whether all permits are back
	fair       bool
	ready      bool // set by Init: a zero Sema is not usable
	stamp      bool // waiters note when they queued, for OldestWaiting (a clock read per queued wait)
}

// The read-mostly fields fit one cache line.
var _ = [1]struct{}{}[unsafe.Sizeof(readMostly{})/(cacheLine+1)]

// cacheLine is the size of a cache line on the machines loom is measured on (x86-64, arm64).
const cacheLine = 64

// maxFree bounds the recycled nodes a semaphore keeps: enough for every waiter of a busy
// semaphore, without keeping a burst of a million waiters alive for the semaphore's lifetime.
const maxFree = 256

// New returns a semaphore with the given capacity. It panics if permits is negative or above
// MaxPermits.
func New(permits int64, fair bool) *Sema {
	s := new(Sema)
	s.Init(permits, fair)
	return s
}

// Init readies a zero Sema in place, for embedding; see [New].
func (s *Sema) Init(permits int64, fair bool) {
	if permits < 0 {
		panic(fmt.Sprintf("semaphore: New: negative capacity %d", permits))
	}
	if permits > MaxPermits {
		panic(fmt.Sprintf("semaphore: New: capacity %d above the maximum %d", permits, int64(MaxPermits)))
	}
	s.fair, s.ready, s.maxWaiting = fair, true, -1
	s.state.Store(permits)
	s.capacity.Store(permits)
}

// StampWaiters makes every waiter note when it queued, so that [Sema.OldestWaiting] can tell:
// a clock read per wait that queues. Call it before s is used.
func (s *Sema) StampWaiters() { s.stamp, s.epoch = true, time.Now() }

// OldestWaiting returns how long the waiter at the head of the queue — the one that has waited
// longest — has waited; 0 when nobody waits or s does not stamp its waiters. It takes the lock
// for a moment: for dumps, not for hot paths.
func (s *Sema) OldestWaiting() time.Duration {
	if !s.stamp {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.head == nil {
		return 0
	}
	return time.Since(s.epoch) - s.head.since
}

// SetMaxWaiting bounds the queue: a request that would have to queue while n wait fails with
// ErrFull at once (n == 0: nothing ever waits); n < 0, the default, bounds nothing. The bound is
// checked under the queue's lock, so it holds exactly however many requests race for the last
// place. Call it before s is used.
func (s *Sema) SetMaxWaiting(n int) { s.maxWaiting = int64(n) }

// SetGate makes g a second condition for every grant; see [Gate]. Call it before s is used.
func (s *Sema) SetGate(g Gate) { s.gate = g }

// GateHeld reports whether the queue's head waits for the gate rather than for permits: every
// request queued then waits for a pass.
func (s *Sema) GateHeld() bool { return s.gateHeld.Load() }

// Ready reports whether s was made by [New] or [Sema.Init]; a zero Sema is not usable.
func (s *Sema) Ready() bool { return s.ready }

func decode(word int64) (avail int64, queued bool) {
	if word < threshold {
		return word + bias, true
	}
	return word, false
}

// Available returns capacity minus held permits; negative after a shrink.
func (s *Sema) Available() int64 {
	avail, _ := decode(s.state.Load())
	return avail
}

// Capacity returns the current capacity.
func (s *Sema) Capacity() int64 { return s.capacity.Load() }

// Waiting returns the number of queued waiters. It takes the lock for a moment.
func (s *Sema) Waiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiting
}

// take is the lock-free fast path: it takes n permits if they are free and, in fair mode, nobody
// is queued.
func (s *Sema) take(n int64) bool {
	for {
		word := s.state.Load()
		avail := word
		if word < threshold {
			if s.fair {
				return false
			}
			avail += bias
		}
		if avail < n {
			return false
		}
		if s.state.CompareAndSwap(word, word-n) {
			return true
		}
	}
}

// admit is take and, with a gate, a pass: the fast path of every acquire. It returns the pass's
// mark (0 without a gate). A pass refused gives the permits back — under s.mu (locked) plainly,
// since the caller serves the queue next; else as a release, which serves anyone who queued
// meanwhile.
func (s *Sema) admit(n int64, locked bool) (ok bool, mark int64) {
	if !s.take(n) {
		return false, 0
	}
	if s.gate == nil {
		return true, 0
	}
	wait, mark := s.gate.Pass()
	if wait == 0 {
		return true, mark
	}
	if locked {
		s.state.Add(n)
	} else {
		s.release(n, false)
	}
	return false, 0
}

func (s *Sema) invalid(n int64) error { return &WeightError{N: n, Capacity: s.capacity.Load()} }

// Acquire blocks until n permits are held, or ctx ends (ctx.Err(), holding nothing). n < 0 or
// n > Capacity() fails at once with a *WeightError; n == 0 succeeds unless ctx is done.
func (s *Sema) Acquire(ctx context.Context, n int64) error {
	// The fast path, in this one call: ctx.Err rather than a select on ctx.Done is one atomic
	// load for the standard library's contexts, and it comes first: a done ctx never acquires.
	// Anything else — a lost race included — takes the full path, which checks in the contract's
	// order.
	if n > 0 && ctx.Err() == nil && s.TakeFast(n) {
		return nil
	}
	_, err := s.AcquireMark(ctx, n, false, 0)
	return err
}

// TakeFast is the fast path of every acquire, small enough to inline into its callers: one load,
// one compare-and-swap. It takes n permits if they are free, nobody is queued, there is no gate
// and 0 < n <= Capacity, and reports whether it did; false says nothing (a lost race included),
// and the caller takes its full path, which checks everything in the contract's order. word >= n
// > 0 means nobody is queued: the offset makes a queued word hugely negative.
func (s *Sema) TakeFast(n int64) bool {
	word := s.state.Load()
	return n > 0 && word >= n && s.gate == nil && n <= s.capacity.Load() &&
		s.state.CompareAndSwap(word, word-n)
}

// AcquireTimeout is Acquire that gives up with ErrTimeout after d. With d <= 0 it never waits.
func (s *Sema) AcquireTimeout(ctx context.Context, n int64, d time.Duration) error {
	_, err := s.AcquireMark(ctx, n, true, d)
	return err
}

// AcquireMark is Acquire (timed false) or AcquireTimeout (timed true) that also returns the mark
// of the gate's pass the permits came with (0 without a gate), so that a caller that will not
// use them can give the pass back.
func (s *Sema) AcquireMark(ctx context.Context, n int64, timed bool, d time.Duration) (mark int64, err error) {
	_, mark, err = s.acquire(ctx, n, nil, timed, d)
	return mark, err
}

// AcquireFor is Acquire for a request that holds a place for owner, the task it wants to run. If
// a [Sema.ReleaseAndTake] serves it, the releasing goroutine takes owner over and runs it, and
// AcquireFor reports taken (with a nil error): the permits are the taker's now. Otherwise it
// behaves as Acquire, taken false. A wait whose ctx ends just as it is taken reports taken: what
// a taker has started is not undone.
func (s *Sema) AcquireFor(ctx context.Context, n int64, owner any) (taken bool, err error) {
	taken, _, err = s.acquire(ctx, n, owner, false, 0)
	return taken, err
}

// acquireOdd answers an acquire of n <= 0 or above the capacity, in the contract's order:
// invalid weight, then a done ctx, then n == 0 succeeds.
func (s *Sema) acquireOdd(ctx context.Context, n int64) error {
	if n != 0 {
		return s.invalid(n)
	}
	return ctx.Err()
}

// TryAcquire takes n permits if it can without waiting.
func (s *Sema) TryAcquire(n int64) bool {
	if s.TakeFast(n) {
		return true
	}
	ok, _ := s.tryAcquire(n)
	return ok
}

// TryAcquireMark is TryAcquire that also returns the mark of the gate's pass (see AcquireMark).
func (s *Sema) TryAcquireMark(n int64) (ok bool, mark int64) {
	if s.TakeFast(n) {
		return true, 0
	}
	return s.tryAcquire(n)
}

// tryAcquire is TryAcquireMark's full path.
func (s *Sema) tryAcquire(n int64) (ok bool, mark int64) {
	if n < 0 || n > s.capacity.Load() {
		return false, 0
	}
	if n == 0 {
		return true, 0
	}
	return s.admit(n, false)
}

// acquire is every blocking acquire after the inlined fast path: the checks of AcquireMark and
// AcquireFor in the contract's order, then the queue and the wait. It is one function, with the
// exported ones small enough to inline into their callers, because each call level the wake-up
// returns through costs: the processor's predictions of where returns go belong to the goroutine
// that ran before (BenchmarkSemaphoreContended, 64 goroutines on capacity 1).
func (s *Sema) acquire(ctx context.Context, n int64, owner any, timed bool, d time.Duration) (taken bool, mark int64, err error) {
	if n <= 0 || n > s.capacity.Load() {
		return false, 0, s.acquireOdd(ctx, n)
	}
	if err := ctx.Err(); err != nil {
		return false, 0, err
	}
	if ok, mark := s.admit(n, false); ok {
		return false, mark, nil
	}
	if timed && d <= 0 {
		return false, 0, ErrTimeout
	}
	w, mark, settled := s.queue(n, nil, owner, nil)
	if w == nil {
		return false, mark, settled
	}

	var expired <-chan time.Time
	if timed {
		if w.blk.timer == nil {
			w.blk.timer = time.NewTimer(d)
		} else {
			w.blk.timer.Reset(d)
		}
		expired = w.blk.timer.C
	}
	done := ctx.Done()
	switch {
	case done == nil && expired == nil: // a plain receive is cheaper than a select
		<-w.blk.ready
		err = w.err
	case expired == nil:
		select {
		case <-w.blk.ready:
			err = w.err
		case <-done:
			err = s.abandon(w, ctx.Err())
		}
	default:
		select {
		case <-w.blk.ready:
			err = w.err
		case <-done:
			err = s.abandon(w, ctx.Err())
		case <-expired:
			err = s.expire(w)
		}
	}
	if timed {
		w.blk.timer.Stop()
	}
	taken, mark = w.taken, w.mark
	s.recycle(w)
	return taken, mark, err
}

// abandon takes w off the queue after its wait ended with cause. If w had been served already,
// its signal is consumed and what it was given is handed back, so an error always means nothing
// is held — unless w was taken: then its owner runs on the taker, and the grant stands.
func (s *Sema) abandon(w *Waiter, cause error) error {
	if s.Cancel(w) {
		return cause
	}
	<-w.blk.ready // the signal is on its way, sent after the granter unlocked
	switch {
	case w.taken:
		return nil
	case w.err == nil:
		// The pass goes back before the permits: the waiter that the release serves asks the
		// gate, and must find it (else it would wait for the gate's timer with a pass free).
		if s.gate != nil {
			s.gate.Return(w.mark)
		}
		s.Release(w.n)
	}
	return cause
}

// expire ends the wait of a blocking waiter whose timeout fired: with one last try (see Expire),
// and nil if it was served, now or as the timer fired — a grant at the deadline stands.
func (s *Sema) expire(w *Waiter) error {
	if s.Expire(w) {
		return ErrTimeout
	}
	<-w.blk.ready // the signal is on its way, sent after the granter unlocked
	if w.taken {
		return nil
	}
	return w.err
}

// Expire ends the wait of w, queued, at its deadline, with one last try: if w heads the queue
// and what it waits for is there now — its permits, and the gate's pass (a token due at the
// deadline) — it is served instead, since the timer that would have served it may fire after
// w's own. It reports true if w left the queue unserved, as [Sema.Cancel] does; false if it was
// served, now or before (a callback waiter's fn is called, or a taker runs its owner).
func (s *Sema) Expire(w *Waiter) bool {
	s.mu.Lock()
	if !w.queued {
		s.mu.Unlock()
		return false
	}
	var woken *Waiter
	if s.head == w {
		woken = s.grant()
	}
	left := w.queued
	if left {
		wasHead := s.head == w
		s.remove(w)
		if wasHead {
			// Requests behind it may fit now, and no Release will wake them.
			woken = s.grantInto(woken)
		}
	}
	s.mu.Unlock()
	signal(woken, false)
	return left
}

// AcquireFunc requests n permits for w without blocking; w is the caller's, zero or done with.
// It returns acquired if the permits were taken at once (fn is never called), or a *WeightError
// for an impossible request (fn is never called). Otherwise w is queued and fn is later called
// exactly once, without locks held, on the goroutine that served it, with w: its error nil when
// the permits are held, or a *WeightError when a shrink made the request impossible, or Close's
// error. [Sema.Cancel] takes a queued w off the queue. fn gets w, so that one function (no
// closure per request) can serve every request: see [Waiter.Owner].
func (s *Sema) AcquireFunc(w *Waiter, n int64, fn func(w *Waiter, err error)) (acquired bool, err error) {
	return s.AcquireFuncFor(w, n, nil, fn)
}

// AcquireFuncFor is AcquireFunc for a request that holds a place for owner: when a
// [Sema.ReleaseAndTake] serves it, fn is not called — the taker gets owner instead, with the
// permits.
func (s *Sema) AcquireFuncFor(w *Waiter, n int64, owner any, fn func(w *Waiter, err error)) (acquired bool, err error) {
	if n < 0 || n > s.capacity.Load() {
		return false, s.invalid(n)
	}
	if n == 0 {
		return true, nil
	}
	if ok, mark := s.admit(n, false); ok {
		w.mark = mark
		return true, nil
	}
	queued, mark, err := s.queue(n, w, owner, fn)
	if queued == nil && err == nil {
		w.mark = mark
		return true, nil
	}
	return false, err
}

// TryAcquireFor is TryAcquire for the owner of w, a callback waiter not yet queued: the mark of
// the gate's pass is kept in w, as for a grant through the queue.
func (s *Sema) TryAcquireFor(w *Waiter, n int64) bool {
	ok, mark := s.TryAcquireMark(n)
	w.mark = mark
	return ok
}

// Mark returns the mark of the gate's pass w was granted with (see [Gate]): once AcquireFunc
// reported it acquired, or its fn was called with nil.
func (w *Waiter) Mark() int64 { return w.mark }

// Owner returns the owner w holds a place for (AcquireFuncFor), for its fn.
func (w *Waiter) Owner() any { return w.owner }

// queue is the locked step of an acquire that found no free permits. It checks the weight again,
// now that the capacity cannot move; the fast path may only have lost a race, so it tries again
// under the lock, where the queue is stable; it fails with Close's error once closed; else it
// appends w (a recycled blocking waiter when w is nil) and returns it. It returns a nil waiter
// when the request was settled here: taken (err == nil) or refused. A request served while being
// appended — a Release slipped in before the queue's offset was in place — is settled here too,
// and its fn is not called.
func (s *Sema) queue(n int64, w *Waiter, owner any, fn func(*Waiter, error)) (_ *Waiter, mark int64, _ error) {
	s.mu.Lock()
	if n > s.capacity.Load() {
		// A shrink landed after the caller's first check: the request can never be served.
		s.mu.Unlock()
		return nil, 0, s.invalid(n)
	}
	if s.head == nil || !s.fair {
		if ok, mark := s.admit(n, true); ok {
			s.mu.Unlock()
			return nil, mark, nil
		}
	}
	if s.closed != nil {
		err := s.closed
		s.mu.Unlock()
		return nil, 0, err
	}
	if s.maxWaiting >= 0 && int64(s.waiting) >= s.maxWaiting {
		s.mu.Unlock()
		return nil, 0, ErrFull
	}
	if w == nil {
		w = s.node()
	} else {
		*w = Waiter{fn: fn}
	}
	w.n, w.owner = n, owner
	woken := s.enqueue(w)
	if w.queued {
		s.mu.Unlock()
		signal(woken, false)
		return w, 0, nil
	}
	// w is the tail, so it was served last and heads the list.
	woken = woken.next
	w.next = nil
	err, mark := w.err, w.mark
	if w.fn == nil {
		s.pushFree(w) // ours to give back: nobody else has seen it
	}
	s.mu.Unlock()
	signal(woken, false)
	return nil, mark, err
}

// Cancel takes a queued waiter off the queue. It reports true if it did, in which case its fn
// is never called (or, for a blocking waiter, no signal comes); false means it was served, taken
// or failed already, and its fn has been or is being called (or its taker runs its owner).
func (s *Sema) Cancel(w *Waiter) bool {
	s.mu.Lock()
	if !w.queued {
		s.mu.Unlock()
		return false
	}
	wasHead := s.head == w
	s.remove(w)
	var woken *Waiter
	if wasHead {
		// It was at the head of the queue: requests behind it may fit now, and no Release will
		// wake them.
		woken = s.grant()
	}
	s.mu.Unlock()
	signal(woken, false)
	return true
}

// Release returns n permits and serves the queue in order. It panics if that would leave more
// permits free than the capacity: more were released than held.
func (s *Sema) Release(n int64) {
	// The fast path: one addition, and nobody to serve, nothing to check. (Not small enough to
	// inline; semaphore's Release is, so a Release costs one call.)
	if n > 0 && n <= MaxPermits && s.state.Load() >= threshold {
		word := s.state.Add(n)
		if word >= threshold && word <= s.capacity.Load() && !s.draining.Load() {
			return
		}
		s.released(word, n, false)
		return
	}
	s.release(n, false)
}

// ReleaseAndTake is Release that hands work over: if the permits serve a waiter that holds a
// place for an owner (AcquireFor, AcquireFuncFor), the first such waiter in queue order is not
// signalled as usual but taken, and its owner returned: the caller now holds that waiter's
// permits and runs owner itself. A blocking waiter learns that it was taken (AcquireFor reports
// taken); a callback waiter's fn is not called. Any other waiter served is signalled as usual.
// It returns nil when nothing was taken.
func (s *Sema) ReleaseAndTake(n int64) (owner any) { return s.release(n, true) }

// release returns n permits; with take, see ReleaseAndTake.
//
// The over-release check is exact, also while SetCapacity runs: the permits are added first (one
// atomic addition, the common path), and only when the sum looks above the capacity is it
// checked again under s.mu, where the capacity cannot move. Outside the lock the word and the
// capacity are read at two instants, so a whole shrink may land between them and make a
// legitimate release look like an over-release; under the lock, free == capacity - held holds
// exactly, so free > capacity means that more was released than is held.
func (s *Sema) release(n int64, take bool) (owner any) {
	if n <= 0 {
		if n < 0 {
			panic(fmt.Sprintf("semaphore: Release of a negative count %d", n))
		}
		return nil
	}
	if n > MaxPermits {
		panic("semaphore: released more than held")
	}
	if s.state.Load() < threshold {
		return s.handOver(n, take)
	}
	return s.released(s.state.Add(n), n, take)
}

// handOver is release while the queue looked non-empty: under s.mu, the permits go straight to
// the head of the queue when its request fits in them, without passing through the word — two
// atomic operations fewer than adding them and taking them back out (BenchmarkContended, 64
// goroutines on capacity 1). Anything else (the queue emptied meanwhile, a gate, a deficit left
// by a shrink, a head that wants more) adds them to the word and serves the queue as released
// does. The over-release check is the exact one of released: under s.mu, free == capacity - held,
// so free + n > capacity means more was released than held.
func (s *Sema) handOver(n int64, take bool) (owner any) {
	s.mu.Lock()
	avail, queued := decode(s.state.Load())
	if avail+n > s.capacity.Load() {
		s.mu.Unlock()
		panic("semaphore: released more than held")
	}
	var woken *Waiter
	// avail >= 0 stays so under s.mu (only a shrink lowers it below 0, and an acquire takes only
	// what is free), so the permits owe nothing to a deficit; without a gate, fitting is all the
	// head needs.
	if w := s.head; queued && w != nil && s.gate == nil && avail >= 0 && w.n <= n {
		s.remove(w)
		woken = w
		if rest := n - w.n; rest > 0 {
			s.state.Add(rest)
		}
	} else {
		s.state.Add(n)
	}
	return s.serveUnlock(woken, take)
}

// released is release once n permits are back in the word, word being the sum the addition
// returned: it serves the queue, checks an over-release, and tells Drained.
func (s *Sema) released(word, n int64, take bool) (owner any) {
	avail, queued := decode(word)
	suspect := avail > s.capacity.Load()
	if !queued && !suspect {
		if s.draining.Load() {
			s.checkDrained()
		}
		return nil
	}
	s.mu.Lock()
	if suspect {
		if avail, _ := decode(s.state.Load()); avail > s.capacity.Load() {
			// Refused: take them back. Until then an arrival may have used the surplus; that
			// is the misuse being reported, and the count is right again once the panic is
			// raised.
			s.state.Add(-n)
			s.mu.Unlock()
			panic("semaphore: released more than held")
		}
	}
	return s.serveUnlock(nil, take)
}

// serveUnlock is how a change that may let queued requests in ends: it serves the queue in order
// after woken (those already taken off it), releases s.mu, signals everyone served (see signal,
// for take) and tells Drained. s.mu is held.
func (s *Sema) serveUnlock(woken *Waiter, take bool) (owner any) {
	woken = s.grantInto(woken)
	s.mu.Unlock()
	owner = signal(woken, take)
	if s.draining.Load() {
		s.checkDrained()
	}
	return owner
}

// SetCapacity changes the capacity. Growing serves the queue in order; shrinking never blocks
// and takes effect as permits come back; queued requests above the new capacity fail with a
// *WeightError at once.
func (s *Sema) SetCapacity(n int64) {
	if n < 0 {
		panic(fmt.Sprintf("semaphore: SetCapacity: negative capacity %d", n))
	}
	if n > MaxPermits {
		panic(fmt.Sprintf("semaphore: SetCapacity: capacity %d above the maximum %d", n, int64(MaxPermits)))
	}
	s.mu.Lock()
	old := s.capacity.Load()
	// Order the two stores so that a racing Release only ever sees a looser bound outside the
	// lock; it checks again under the lock before it refuses anything (see release).
	if n >= old {
		s.capacity.Store(n)
		s.state.Add(n - old)
	} else {
		s.state.Add(n - old)
		s.capacity.Store(n)
	}
	var woken *Waiter
	if n < old {
		for w := s.head; w != nil; {
			next := w.next
			if w.n > n {
				woken = s.fail(w, &WeightError{N: w.n, Capacity: n, Shrunk: true}, woken)
			}
			w = next
		}
	}
	s.serveUnlock(woken, false)
}

// Close fails every queued request with err, and from then on every request that would have to
// queue fails with err at once (requests that find free permits still take them). It returns how
// many queued requests it failed. err must not be nil; a later Close changes nothing. From Close
// on, [Sema.Drained] tells when every permit is back.
func (s *Sema) Close(err error) int {
	if err == nil {
		panic("semaphore: Close with a nil error")
	}
	s.mu.Lock()
	if s.closed != nil {
		s.mu.Unlock()
		return 0
	}
	s.closed = err
	s.drained = make(chan struct{})
	var woken *Waiter
	count := 0
	for w := s.head; w != nil; w = s.head {
		woken = s.fail(w, err, woken)
		count++
	}
	s.mu.Unlock()
	// Every release from now on looks; this look covers the permits that came back before.
	// A release whose look ran before the flag was set added its permits before it: seen here.
	s.draining.Store(true)
	signal(woken, false)
	s.checkDrained()
	return count
}

// Drained returns a channel that is closed once, after Close, every permit is back
// (Available() >= Capacity()), however it came back: a Release, a grant that a cancelled wait
// handed back, a shrink. Before Close it returns nil.
func (s *Sema) Drained() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.drained
}

// checkDrained closes drained if every permit is back.
func (s *Sema) checkDrained() {
	if s.Available() < s.capacity.Load() {
		return
	}
	s.mu.Lock()
	if !s.isDrained && s.Available() >= s.capacity.Load() {
		s.isDrained = true
		close(s.drained)
	}
	s.mu.Unlock()
}

// enqueue appends w. When w is the first in the queue it also serves the queue: a Release that
// ran after our last look but before the offset was in place took the fast path and will not
// wake anyone, so look again. Behind others, the offset was already in place. s.mu is held.
//
// The offset goes in before the waiter is counted in Waiting: fair means fair at every instant,
// so from the moment anyone can see a waiter, no arrival may take a free permit ahead of it.
func (s *Sema) enqueue(w *Waiter) (woken *Waiter) {
	w.queued = true
	w.err = nil
	if s.stamp {
		w.since = time.Since(s.epoch)
	}
	if s.tail != nil {
		s.waiting++
		w.prev = s.tail
		s.tail.next = w
		s.tail = w
		return nil
	}
	s.state.Add(-bias)
	s.waiting++
	s.head, s.tail = w, w
	return s.grant()
}

// remove unlinks w. s.mu is held.
func (s *Sema) remove(w *Waiter) {
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		s.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		s.tail = w.prev
	}
	w.prev, w.next = nil, nil
	w.queued = false
	s.waiting--
	if s.head == nil {
		s.state.Add(bias)
	}
}

func (s *Sema) grant() *Waiter { return s.grantInto(nil) }

// fail takes w off the queue with err and returns it prepended to woken. s.mu is held.
func (s *Sema) fail(w *Waiter, err error, woken *Waiter) *Waiter {
	s.remove(w)
	w.err = err
	w.next = woken
	return w
}

// grantInto serves waiters from the head while their requests fit, strictly in order, and
// returns them, linked through next, prepended to woken. s.mu is held.
func (s *Sema) grantInto(woken *Waiter) *Waiter {
	for w := s.head; w != nil; w = s.head {
		if w.n > s.capacity.Load() {
			woken = s.fail(w, s.invalid(w.n), woken)
			continue
		}
		for {
			word := s.state.Load()
			if word+bias < w.n { // the offset is in place while w is queued
				s.holdForGate(false)
				return woken
			}
			if s.state.CompareAndSwap(word, word-w.n) {
				break
			}
		}
		if s.gate != nil {
			d, mark := s.gate.Pass()
			if d > 0 {
				// The permits are there, the pass is not: the head waits for the gate, and the
				// timer serves the queue when it opens.
				s.state.Add(w.n)
				s.gateHeld.Store(true)
				s.armGate(d)
				return woken
			}
			w.mark = mark
		}
		s.remove(w)
		w.next, woken = woken, w
	}
	s.holdForGate(false)
	return woken
}

// holdForGate notes whether the head waits for the gate rather than for permits; without a gate
// it never does, and the flag is not written.
func (s *Sema) holdForGate(held bool) {
	if s.gate != nil {
		s.gateHeld.Store(held)
	}
}

// armGate makes sure the queue is served again d from now, when the gate opens. s.mu is held.
func (s *Sema) armGate(d time.Duration) {
	if s.gateArmed {
		return // the earliest wake-up is armed already; a later look arms again if need be
	}
	s.gateArmed = true
	if s.gateTimer == nil {
		s.gateTimer = time.AfterFunc(d, s.gateOpen)
	} else {
		s.gateTimer.Reset(d)
	}
}

// gateOpen serves the queue when the gate may have opened.
func (s *Sema) gateOpen() {
	s.mu.Lock()
	s.gateArmed = false
	woken := s.grant()
	s.mu.Unlock()
	signal(woken, false)
}

// signal tells each served waiter, outside the lock. The list is in reverse order of service;
// reverse it so waiters learn in queue order. With take, the first granted waiter that holds a
// place for an owner is taken instead: its owner is returned, and a blocking one is told so.
func signal(woken *Waiter, take bool) (owner any) {
	var ordered *Waiter
	for woken != nil {
		next := woken.next
		woken.next, ordered = ordered, woken
		woken = next
	}
	for w := ordered; w != nil; {
		next := w.next // w may be recycled the moment it is signalled
		w.next = nil
		if take && w.err == nil && w.owner != nil {
			owner, take = w.owner, false
			w.taken = true
			if w.fn == nil {
				w.blk.ready <- struct{}{} // AcquireFor returns, taken
			}
		} else if w.fn != nil {
			w.fn(w, w.err)
		} else {
			w.blk.ready <- struct{}{}
		}
		w = next
	}
	return owner
}

// node returns a blocking waiter from the free list or a new one. s.mu is held.
func (s *Sema) node() *Waiter {
	if w := s.spare.Swap(nil); w != nil {
		return w
	}
	if w := s.free; w != nil {
		s.free, w.next = w.next, nil
		s.nfree--
		return w
	}
	return &Waiter{blk: &blocking{ready: make(chan struct{}, 1)}}
}

// pushFree puts a blocking waiter its acquirer is done with on the free list. s.mu is held.
func (s *Sema) pushFree(w *Waiter) {
	if s.nfree == maxFree {
		return // left to the garbage collector
	}
	w.err, w.owner, w.taken, w.mark = nil, nil, false, 0
	w.next, s.free = s.free, w
	s.nfree++
}

// recycle gives back a blocking waiter whose wait is over: into the spare slot if it is empty,
// without the lock that the releasers serving the queue contend for (2 goroutines on capacity
// 1, BenchmarkContended: 218 ns through the lock, 184 ns through the slot); else onto the free
// list. A waiter in the slot or on the list is reachable from nowhere else.
func (s *Sema) recycle(w *Waiter) {
	w.err, w.owner, w.taken, w.mark = nil, nil, false, 0
	if s.spare.CompareAndSwap(nil, w) {
		return
	}
	s.mu.Lock()
	s.pushFree(w)
	s.mu.Unlock()
}
