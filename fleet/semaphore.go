package fleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goloom/loom/internal/registry"
	"github.com/goloom/loom/internal/sema"
)

// MaxName is the longest name, in bytes, that [New] and [NewRate] accept.
const MaxName = 200

// MaxCapacity is the largest capacity [New] accepts (backends count in 53-bit floating point).
const MaxCapacity = 1 << 50

// A Semaphore is one process's handle on a weighted semaphore shared by every process of a
// fleet that uses the same backend and name: together they never hold more than capacity
// permits. Each permit is a lease with an expiry on the backend's clock, renewed by the
// Semaphore while it is held, so a process that dies frees its permits within one lease TTL.
//
// Waiters are served in one FIFO order across the fleet, by arrival at the backend; within a
// process they wait in a local FIFO queue, and only its head talks to the backend, so the
// backend's work grows with the number of processes, not of waiters.
//
// Create one with [New] and Close it when done; the zero value is not usable. A Semaphore is
// safe for concurrent use by multiple goroutines. Under testing/synctest, use it (and its
// backend, if a [Memory]) from the bubble that made it.
type Semaphore struct {
	b        Backend
	name     string
	capacity int64
	cfg      config
	inst     string // prefix of this Semaphore's lease IDs, unique across the fleet

	// turn has one permit: its holder is the head of this process's queue, the one Acquire
	// that talks to the backend. Everyone else waits in turn's FIFO queue.
	turn *sema.Sema
	// degr holds the permits of Degrade(n), granted while the backend is unreachable.
	degr *sema.Sema

	seq     atomic.Uint64
	waiting atomic.Int64
	asking  atomic.Pointer[string] // the lease ID the head waits on, for wake-ups
	wake    chan struct{}          // one token: the head's request may be granted now
	kick    chan struct{}          // one token: the worker has something to do
	closing chan struct{}          // closed by Close
	stopped chan struct{}          // closed when the worker has returned
	isDone  atomic.Bool            // Close has begun
	epoch   atomic.Int64           // the backend epoch last seen; 0 before the first reply

	health health
	count  counters

	mu        sync.Mutex
	closed    bool
	leases    map[string]*Permit   // live leased permits by lease ID; renewed together
	degraded  map[*Permit]struct{} // live permits granted without a lease
	held      int64                // summed weight of the two sets above
	pending   []Lease              // to release on the backend: abandoned requests, lost leases
	nextRenew time.Time            // zero: no renewal scheduled (no leases)
	renewNow  bool                 // the backend lost its data: renew (re-register) at once
	watch     *time.Timer          // fires at watchAt, the earliest deadline of a lease
	watchAt   time.Time            // zero: watch is not armed
	unsub     func()               // the wake-up subscription, once made
	subFailed time.Time            // when the last subscription attempt failed
}

// New returns a Semaphore of capacity permits shared, through backend b, by every Semaphore of
// the fleet with the same name. The name (1 to [MaxName] bytes) identifies the limit on the
// backend; capacity must be between 1 and [MaxCapacity]. Processes normally agree on the
// capacity; while they do not (a rollout that changes it), each admission respects the capacity
// of the process that asks. New panics on a nil backend, a bad name or capacity, and for the
// misuse its options report. It starts one goroutine, which renews the leases; [Semaphore.Close]
// stops it.
func New(b Backend, name string, capacity int64, opts ...Option) *Semaphore {
	if b == nil {
		panic("fleet: New: nil backend")
	}
	checkName("New", name)
	if capacity < 1 {
		panic(fmt.Sprintf("fleet: New: capacity must be at least 1, got %d", capacity))
	}
	if capacity > MaxCapacity {
		panic(fmt.Sprintf("fleet: New: capacity %d above the maximum %d", capacity, int64(MaxCapacity)))
	}
	c := defaults() // every default, in one place
	for _, opt := range opts {
		if opt == nil {
			panic("fleet: New: nil Option")
		}
		opt(&c)
	}
	s := &Semaphore{
		b:        b,
		name:     name,
		capacity: capacity,
		cfg:      c,
		inst:     instanceID(),
		turn:     sema.New(1, true),
		wake:     make(chan struct{}, 1),
		kick:     make(chan struct{}, 1),
		closing:  make(chan struct{}),
		stopped:  make(chan struct{}),
		leases:   make(map[string]*Permit),
		degraded: make(map[*Permit]struct{}),
	}
	if c.mode.kind == degrade {
		s.degr = sema.New(min(c.mode.limit, capacity), true)
	}
	s.health = health{what: "semaphore", name: name, mode: c.mode, logger: c.logger,
		probe: min(max(c.ttl/10, 100*time.Millisecond), time.Second)}
	s.watch = time.AfterFunc(time.Hour, s.expire)
	s.watch.Stop()
	go s.work()
	// Listed for package inspect's dumps and the metrics exporters, through a weak pointer: the
	// registry never keeps it alive (its worker does, until Close).
	registry.AddSemaphore(s, name, (*Semaphore).inspectInfo)
	return s
}

// inspectInfo is what a dump reads of the Semaphore: its stats and how it was made. A method
// expression, so that the registry holds nothing that keeps s alive.
func (s *Semaphore) inspectInfo() registry.LimiterInfo {
	return registry.LimiterInfo{Stats: s.Stats(), Config: []registry.Setting{
		{Name: "lease", Value: s.cfg.ttl.String()},
		{Name: "whenUnavailable", Value: s.cfg.mode.String()},
	}}
}

func checkName(op, name string) {
	if name == "" {
		panic("fleet: " + op + ": empty name")
	}
	if len(name) > MaxName {
		panic(fmt.Sprintf("fleet: %s: name of %d bytes, above the maximum %d", op, len(name), MaxName))
	}
}

// instanceID returns 16 random hex digits: lease IDs start with it, so that they are unique
// across every process of the fleet and every restart of each.
func instanceID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

func (s *Semaphore) check(op string) {
	if s == nil || s.turn == nil {
		panic("fleet: " + op + ": zero Semaphore; use New")
	}
}

// Name returns the name the Semaphore was made with.
func (s *Semaphore) Name() string { s.check("Name"); return s.name }

// Capacity returns the capacity the Semaphore admits within.
func (s *Semaphore) Capacity() int64 { s.check("Capacity"); return s.capacity }

// Lease returns the lease TTL (see [WithLease]).
func (s *Semaphore) Lease() time.Duration { s.check("Lease"); return s.cfg.ttl }

// Acquire waits for n permits and returns them as a [Permit], which must be released.
//
// Acquire waits in this process's FIFO queue, then, at its head, in the fleet's FIFO queue on
// the backend, until n permits fit within the capacity. It returns ctx's error if ctx ends first
// (a ctx that is already done never acquires), [ErrClosed] once the Semaphore is closed, and an
// error matching [ErrInvalidWeight] at once for n < 1 or n > capacity. If the backend cannot be
// reached, it does what [WhenUnavailable] says: by default it fails with an error matching
// [ErrUnavailable], within ctx's deadline or the backend client's own timeout. An Acquire that
// returns an error holds nothing (whatever it may have asked of the backend is given back).
//
// Uncontended, Acquire is one round trip to the backend. In the same process, a Release
// happens-before the Acquire it lets through.
func (s *Semaphore) Acquire(ctx context.Context, n int64) (*Permit, error) {
	return s.acquire(ctx, "Acquire", n, false, 0)
}

// AcquireTimeout is [Semaphore.Acquire] that gives up after d with [ErrTimeout] (which matches
// context.DeadlineExceeded), counting both the wait in the process and on the backend. With
// d <= 0 it does not wait: it takes the permits if this process has no other waiter and the
// backend can grant them at once (one round trip), else it returns ErrTimeout.
func (s *Semaphore) AcquireTimeout(ctx context.Context, n int64, d time.Duration) (*Permit, error) {
	return s.acquire(ctx, "AcquireTimeout", n, true, d)
}

func (s *Semaphore) acquire(ctx context.Context, op string, n int64, timed bool, d time.Duration) (*Permit, error) {
	s.check(op)
	if ctx == nil {
		panic("fleet: " + op + ": nil context")
	}
	if n < 1 || n > s.capacity {
		return nil, fmt.Errorf("%w: %d permits requested, capacity %d", ErrInvalidWeight, n, s.capacity)
	}
	if s.isDone.Load() {
		return nil, ErrClosed
	}
	if ctx.Err() != nil {
		return nil, ctxErr(ctx)
	}
	s.waiting.Add(1)
	defer s.waiting.Add(-1)
	var deadline time.Time
	if timed {
		deadline = time.Now().Add(d)
	}
	wasDown := s.health.down.Load()
	if s.health.skip() {
		return s.fallback(ctx, n, timed, deadline, nil)
	}
	var err error
	if timed {
		err = s.turn.AcquireTimeout(ctx, 1, d)
	} else {
		err = s.turn.Acquire(ctx, 1)
	}
	if err != nil {
		return nil, s.localErr(ctx, err)
	}
	defer s.turn.Release(1)
	// The backend may have gone down while we waited for our turn. (If it was down before, this
	// call won the probe: it must go on and ask.)
	if !wasDown && s.health.skip() {
		return s.fallback(ctx, n, timed, deadline, nil)
	}
	return s.ask(ctx, n, timed, deadline)
}

// localErr maps the error of a wait in a local semaphore (the turn, or Degrade's permits).
func (s *Semaphore) localErr(ctx context.Context, err error) error {
	switch {
	case err == sema.ErrTimeout:
		return ErrTimeout
	case err == ErrClosed:
		return ErrClosed
	case ctx.Err() != nil:
		return ctxErr(ctx)
	default:
		return err
	}
}

// ask is the head's conversation with the backend: it asks for the lease, and while the lease
// is queued, waits for a wake-up (a release elsewhere let it in), for the time the backend said
// to ask again (the next lease expiry, so no lost message delays it for long), or for the end of
// the wait, and asks again with the same ID, which keeps its place in the fleet's queue.
func (s *Semaphore) ask(ctx context.Context, n int64, timed bool, deadline time.Time) (*Permit, error) {
	lease := Lease{ID: s.inst + "." + strconv.FormatUint(s.seq.Add(1), 36), N: n, Capacity: s.capacity}
	req := AcquireRequest{Name: s.name, Lease: lease, TTL: s.cfg.ttl, Wait: !timed || time.Until(deadline) > 0}
	select { // a wake-up left over from an earlier head
	case <-s.wake:
	default:
	}
	// Listen for our ID before the first request goes out: the backend may name us the moment it
	// has queued us, before its reply is back.
	s.asking.Store(&lease.ID)
	defer s.asking.Store(nil)
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	subscribed := false
	for first := true; ; first = false {
		if !first && timed && !time.Now().Before(deadline) {
			s.abandon(lease)
			return nil, ErrTimeout
		}
		sent := time.Now()
		s.count.roundTrips.Add(1)
		rep, err := s.b.Acquire(ctx, req)
		if err != nil {
			s.abandon(lease) // it may have reached the backend: a lease or a queue entry
			if ctx.Err() != nil {
				return nil, ctxErr(ctx)
			}
			s.health.failed(err)
			return s.fallback(ctx, n, timed, deadline, err)
		}
		s.health.ok()
		s.seeEpoch(rep.Epoch, true)
		if rep.Granted {
			lease.Token, lease.Epoch = rep.Token, rep.Epoch
			return s.granted(lease, sent)
		}
		if !req.Wait { // it was not queued
			return nil, ErrTimeout
		}
		if !subscribed {
			subscribed = true
			if s.subscribe(ctx) {
				continue // whatever was published before we listened is lost to us: ask again now
			}
		}
		wait := min(max(rep.RetryIn, 100*time.Microsecond), s.cfg.ttl/3)
		if timed {
			wait = min(wait, time.Until(deadline))
		}
		if timer == nil {
			timer = time.NewTimer(wait)
		} else {
			timer.Reset(wait)
		}
		select {
		case <-s.wake:
		case <-timer.C:
		case <-ctx.Done():
			s.abandon(lease)
			return nil, ctxErr(ctx)
		case <-s.closing:
			s.abandon(lease)
			return nil, ErrClosed
		}
	}
}

// onWake is the subscription's callback: it wakes the head if the backend named its request,
// or if messages may have been missed.
func (s *Semaphore) onWake(id string) {
	if p := s.asking.Load(); id == "" || (p != nil && *p == id) {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// subscribe makes the wake-up subscription if there is none yet, and reports whether it made one
// now. Only the head calls it. A failed attempt is not repeated within a probe interval; the
// head still asks again at the times the backend gives.
func (s *Semaphore) subscribe(ctx context.Context) bool {
	s.mu.Lock()
	if s.unsub != nil || s.closed || (!s.subFailed.IsZero() && time.Since(s.subFailed) < s.health.probe) {
		s.mu.Unlock()
		return false
	}
	s.mu.Unlock()
	sctx, cancel := context.WithTimeout(ctx, s.cfg.ttl/3)
	s.count.roundTrips.Add(1)
	stop, err := s.b.Subscribe(sctx, s.name, s.onWake)
	cancel()
	s.mu.Lock()
	if err != nil {
		s.subFailed = time.Now()
		s.mu.Unlock()
		return false
	}
	if s.closed {
		s.mu.Unlock()
		stop()
		return false
	}
	s.unsub = stop
	s.mu.Unlock()
	return true
}

// granted turns a granted lease into a live Permit, or gives it back if Close came first.
func (s *Semaphore) granted(lease Lease, sent time.Time) (*Permit, error) {
	p := newPermit(s, lease, false)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.releaseNow([]Lease{lease})
		p.cancel(errCloseLost)
		return nil, ErrClosed
	}
	// The backend set the expiry after it got the request, so this deadline is never later
	// than the backend's: the holder stops believing in its lease no later than the backend.
	p.deadline = sent.Add(s.cfg.ttl)
	s.leases[lease.ID] = p
	s.held += lease.N
	if s.nextRenew.IsZero() {
		s.nextRenew = sent.Add(s.cfg.ttl / 3)
		s.kickLocked()
	}
	if s.watchAt.IsZero() || p.deadline.Before(s.watchAt) {
		s.watchAt = p.deadline
		s.watch.Reset(time.Until(p.deadline))
	}
	s.mu.Unlock()
	s.count.acquired.Add(1)
	return p, nil
}

// fallback is what Acquire does when the backend cannot be reached (cause, or the last failure
// when this call did not try).
func (s *Semaphore) fallback(ctx context.Context, n int64, timed bool, deadline time.Time, cause error) (*Permit, error) {
	s.count.unavailable.Add(1)
	if cause == nil {
		cause = s.health.lastErr()
	}
	switch s.cfg.mode.kind {
	case failOpen:
		return s.grantDegraded(n)
	case degrade:
		if limit := s.degr.Capacity(); n > limit {
			return nil, fmt.Errorf("%w (%d permits requested, %d allowed per process while it is)", unavailable(cause), n, limit)
		}
		var err error
		if timed {
			err = s.degr.AcquireTimeout(ctx, n, time.Until(deadline))
		} else {
			err = s.degr.Acquire(ctx, n)
		}
		if err != nil {
			return nil, s.localErr(ctx, err)
		}
		return s.grantDegraded(n)
	default:
		return nil, unavailable(cause)
	}
}

func (s *Semaphore) grantDegraded(n int64) (*Permit, error) {
	p := newPermit(s, Lease{N: n}, true)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		if s.degr != nil {
			s.degr.Release(n)
		}
		p.cancel(errCloseLost)
		return nil, ErrClosed
	}
	s.degraded[p] = struct{}{}
	s.held += n
	s.mu.Unlock()
	s.count.acquired.Add(1)
	s.count.degraded.Add(1)
	return p, nil
}

// abandon gives back, in the background, a request that may have reached the backend: the lease
// it may have been granted, or its place in the queue.
func (s *Semaphore) abandon(lease Lease) {
	s.mu.Lock()
	if s.closed { // the worker may be gone: do it now
		s.mu.Unlock()
		s.releaseNow([]Lease{lease})
		return
	}
	s.pending = append(s.pending, lease)
	s.kickLocked()
	s.mu.Unlock()
}

// releaseNow releases leases on the backend, within the time of a renewal. A failure is only
// noted: the leases expire on their own within one TTL.
func (s *Semaphore) releaseNow(leases []Lease) error {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ttl/3)
	defer cancel()
	s.count.roundTrips.Add(1)
	if err := s.b.Release(ctx, s.name, leases); err != nil {
		s.health.failed(err)
		return err
	}
	s.health.ok()
	return nil
}

func (s *Semaphore) kickLocked() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// seeEpoch notes the epoch of a reply. A new epoch means the backend lost this name's state:
// held leases must re-register before they expire, so an Acquire that sees it asks for a renewal
// at once.
func (s *Semaphore) seeEpoch(e int64, fromAcquire bool) {
	old := s.epoch.Load()
	if old == e || !s.epoch.CompareAndSwap(old, e) || old == 0 {
		return
	}
	s.mu.Lock()
	held := len(s.leases)
	if fromAcquire && held > 0 {
		s.renewNow = true
		s.kickLocked()
	}
	s.mu.Unlock()
	s.logWarn("fleet: the backend lost the state of this name (restart or failover): held leases register again, new permits wait one lease TTL",
		"heldLeases", held)
}

// Stats returns the Semaphore's gauges and counters; see [Stats].
func (s *Semaphore) Stats() Stats {
	s.check("Stats")
	s.mu.Lock()
	held := s.held
	s.mu.Unlock()
	return Stats{
		Capacity:    s.capacity,
		Held:        held,
		Waiting:     int(s.waiting.Load()),
		Acquired:    s.count.acquired.Load(),
		Released:    s.count.released.Load(),
		LeasesLost:  s.count.lost.Load(),
		Unavailable: s.count.unavailable.Load(),
		Degraded:    s.count.degraded.Load(),
		RoundTrips:  s.count.roundTrips.Load(),
	}
}

// Close releases every permit the Semaphore holds (in one round trip; their contexts are
// cancelled with a cause matching both [ErrLeaseLost] and [ErrClosed]), fails its waiting
// Acquires with ErrClosed, stops renewing and unsubscribes. It returns an error matching
// [ErrUnavailable] if the backend could not be told (the leases then expire within one TTL).
// Close is idempotent: a later call returns nil at once. Acquire after Close returns ErrClosed;
// Release of a permit after Close does nothing.
func (s *Semaphore) Close() error {
	s.check("Close")
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.isDone.Store(true)
	s.watch.Stop()
	s.watchAt = time.Time{}
	s.mu.Unlock()
	close(s.closing)
	s.turn.Close(ErrClosed)
	if s.degr != nil {
		s.degr.Close(ErrClosed)
	}
	<-s.stopped // from here on, nothing adds to pending: late arrivals release on their own

	s.mu.Lock()
	leases := s.pending
	s.pending = nil
	released := 0
	for id, p := range s.leases {
		leases = append(leases, p.lease)
		delete(s.leases, id)
		p.cancel(errCloseLost) // under the lock, as in loseLocked
		released++
	}
	for p := range s.degraded {
		delete(s.degraded, p)
		if s.degr != nil {
			s.degr.Release(p.lease.N)
		}
		p.cancel(errCloseLost)
		released++
	}
	s.held = 0
	unsub := s.unsub
	s.unsub = nil
	s.count.released.Add(int64(released))
	s.mu.Unlock()

	var err error
	if len(leases) > 0 {
		if e := s.releaseNow(leases); e != nil {
			err = fmt.Errorf("fleet: Close: %w", unavailable(e))
		}
	}
	if unsub != nil {
		unsub()
	}
	return err
}
