package fleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goloom/loom/fleet/fleetdriver"
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
	inst     string // this Semaphore's instance: the prefix of its lease IDs, unique across the fleet

	// degr holds the permits of Degrade(n), granted while the backend is unreachable. A degraded
	// grant also needs room beside the leases still held (see fallback).
	degr *sema.Sema

	seq     atomic.Uint64
	waiting atomic.Int64
	nudge   chan struct{} // one token: the head should look again (new waiters, missed grants)
	kick    chan struct{} // one token: the worker has something to do
	closing chan struct{} // closed by Close
	stopped chan struct{} // closed when the worker has returned
	isDone  atomic.Bool   // Close has begun
	epoch   atomic.Int64  // the backend epoch last seen; 0 before the first reply
	seen    atomic.Uint64 // the largest token seen: the backend's new tokens are larger
	longest atomic.Int64  // the longest lease TTL the backend says is in use for the name (ns)
	paused  atomic.Int64  // unix ns until which the backend admits nothing new (after a loss)
	pauseAt atomic.Int64  // the epoch whose pause was logged: one line per pause
	// rider is a head's request waiting to go out with this process's next release (see ride);
	// contended says the last answer found the name full or queued, so a head rides.
	rider     atomic.Pointer[ride]
	contended atomic.Bool

	health health
	count  counters

	mu        sync.Mutex
	closed    bool
	line      []*waiter            // this process's Acquires, in arrival order: see line.go
	byID      map[string]*waiter   // the waiter of each entry of the line, by lease ID
	missed    bool                 // grants may have been missed: the head names every waiter
	lookAt    time.Time            // when the backend said to look again at the latest
	leases    map[string]*Permit   // live leased permits by lease ID; renewed together
	degraded  map[*Permit]struct{} // live permits granted without a lease, not yet registered
	held      int64                // summed weight of the two sets above
	leased    int64                // summed weight of leases (Degrade counts them)
	leaseGone chan struct{}        // closed (and replaced) when a lease ends: Degrade's waiters look again
	pending   []pendingRelease     // to release on the backend, retried until done or moot
	retryAt   time.Time            // zero: no retry of pending scheduled
	backoff   time.Duration        // the delay before the next retry, doubled on each failure
	nextRenew time.Time            // zero: no renewal scheduled (no leases; one may stay scheduled without)
	renewNow  bool                 // renew (re-register, register degraded permits) at once
	watch     *time.Timer          // fires at watchAt, the earliest deadline of a lease
	watchAt   time.Time            // zero: watch is not armed
	unsub     func()               // the grant subscription, once made
	subFailed time.Time            // when the last subscription attempt failed
}

// A pendingRelease is a lease or queue entry to give back to the backend: the caller left it, or
// it was lost, or a Release could not reach the backend. It is retried with backoff until it
// succeeds, until it is moot (the backend has expired it by then: until), or until Close.
type pendingRelease struct {
	lease fleetdriver.Lease
	until time.Time
}

// queueHeartbeat is how long a queue entry lives on the backend unless its head asks again; the
// head asks every fifth of it (askEvery). It bounds how long a dead process's waiter holds up the fleet's
// queue, whatever the lease TTL.
const queueHeartbeat = 800 * time.Millisecond

// askEvery is how often a queued head asks again at the latest: five times a heartbeat, so that
// a process starved for half a second (a loaded machine) does not lose its place.
const askEvery = queueHeartbeat / 5

// New returns a Semaphore of capacity permits shared, through backend b, by every Semaphore of
// the fleet with the same name. The name (1 to [MaxName] bytes) identifies the limit on the
// backend; capacity must be between 1 and [MaxCapacity]. Processes normally agree on the
// capacity; while they do not (a rollout that changes it), each admission respects the capacity
// of the process that asks. New panics on a nil backend, a bad name or capacity, and for the
// misuse its options report. It starts one goroutine, which renews the leases and retries
// releases that failed; [Semaphore.Close] stops it.
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
		b:         b,
		name:      name,
		capacity:  capacity,
		cfg:       c,
		inst:      instanceID(),
		nudge:     make(chan struct{}, 1),
		kick:      make(chan struct{}, 1),
		closing:   make(chan struct{}),
		stopped:   make(chan struct{}),
		byID:      make(map[string]*waiter),
		leases:    make(map[string]*Permit),
		degraded:  make(map[*Permit]struct{}),
		leaseGone: make(chan struct{}),
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
	registry.AddSemaphore(s, name, (*Semaphore).inspectInfo, (*Semaphore).inspectConfig)
	return s
}

// inspectInfo is what a dump and an exporter read of the Semaphore: its stats. inspectConfig is
// what a dump reads besides: how it was made. Method expressions, so that the registry holds
// nothing that keeps s alive.
func (s *Semaphore) inspectInfo() registry.LimiterInfo {
	st := s.Stats()
	var paused int64
	if !st.PausedUntil.IsZero() {
		paused = max(time.Until(st.PausedUntil).Milliseconds(), 1)
	}
	return registry.LimiterInfo{Stats: []registry.Stat{
		{Name: "capacity", Value: st.Capacity},
		{Name: "held", Value: st.Held},
		{Name: "waiting", Value: int64(st.Waiting)},
		{Name: "acquired", Value: st.Acquired},
		{Name: "released", Value: st.Released},
		{Name: "leasesLost", Value: st.LeasesLost},
		{Name: "unavailable", Value: st.Unavailable},
		{Name: "degraded", Value: st.Degraded},
		{Name: "roundTrips", Value: st.RoundTrips},
		{Name: "pausedMillis", Value: paused}, // admission paused after a loss of data: ms left
	}, PausedUntil: st.PausedUntil}
}

func (s *Semaphore) inspectConfig() []registry.Setting {
	return []registry.Setting{
		{Name: "lease", Value: s.cfg.ttl.String()},
		{Name: "whenUnavailable", Value: s.cfg.mode.String()},
	}
}

func checkName(op, name string) {
	if name == "" {
		panic("fleet: " + op + ": empty name")
	}
	if len(name) > MaxName {
		panic(fmt.Sprintf("fleet: %s: name of %d bytes, above the maximum %d", op, len(name), MaxName))
	}
}

// nextSeq returns the next lease sequence number of this Semaphore, as text.
func (s *Semaphore) nextSeq() string { return strconv.FormatUint(s.seq.Add(1), 36) }

// instanceID returns 16 random hex digits: lease IDs start with it, so that they are unique
// across every process of the fleet and every restart of each.
func instanceID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

func (s *Semaphore) check(op string) {
	if s == nil || s.byID == nil {
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
// error matching [ErrInvalidWeight] at once for n < 1 or n > capacity. ctx bounds every call to
// the backend, whatever the client's own timeouts. If the backend cannot be reached, it does what
// [WhenUnavailable] says: by default it fails with an error matching [ErrUnavailable]. An Acquire
// that returns an error holds nothing (whatever it may have asked of the backend is given back),
// and a Permit it returns has a live lease.
//
// Uncontended, Acquire is one round trip to the backend; queued, it needs none more: the release
// that frees the permits grants them, and the grant is pushed to the waiting process. In the same
// process, a Release happens-before the Acquire it lets through.
func (s *Semaphore) Acquire(ctx context.Context, n int64) (*Permit, error) {
	return s.acquire(ctx, "Acquire", n, false, 0)
}

// AcquireTimeout is [Semaphore.Acquire] that gives up after d with [ErrTimeout] (which matches
// context.DeadlineExceeded), counting both the wait in the process and on the backend; d bounds
// every call to the backend too. With d <= 0 it does not wait: it takes the permits if this
// process has no other waiter and the backend can grant them at once (one round trip), else it
// returns ErrTimeout.
func (s *Semaphore) AcquireTimeout(ctx context.Context, n int64, d time.Duration) (*Permit, error) {
	return s.acquire(ctx, "AcquireTimeout", n, true, d)
}

// errWaitOver is the cause of the context of a timed Acquire once its time is up.
var errWaitOver = errors.New("fleet: wait over")

// A wait is one Acquire call: its caller's ctx, and the ctx that bounds every step of it (the
// caller's, with the AcquireTimeout deadline if any).
type wait struct {
	ctx, wctx context.Context
	n         int64
	tryOnce   bool // AcquireTimeout with d <= 0: one look, no queueing
}

// err maps the end of a wait to its error: the caller's ctx, our own deadline, or Close.
func (w *wait) err(err error) error {
	switch {
	case w.ctx.Err() != nil:
		return ctxErr(w.ctx)
	case w.wctx.Err() != nil || err == sema.ErrTimeout:
		return ErrTimeout
	case err == nil:
		return ErrClosed
	default:
		return err
	}
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
	w := &wait{ctx: ctx, wctx: ctx, n: n, tryOnce: timed && d <= 0}
	if timed && d > 0 {
		wctx, cancel := context.WithTimeoutCause(ctx, d, errWaitOver)
		defer cancel()
		w.wctx = wctx
	}
	wasDown := s.health.down.Load()
	if s.health.skip() {
		return s.fallback(w, nil)
	}
	me := s.join(w)
	if me == nil { // a wait that may not queue, and the line is not empty
		return nil, ErrTimeout
	}
	defer s.leave(me)
	select {
	case <-me.head:
	case <-w.wctx.Done():
		return nil, w.err(nil)
	case <-s.closing:
		return nil, ErrClosed
	}
	if p, ok := s.takeOrAsk(me); ok { // granted while it waited behind the head
		return p, nil
	}
	// The backend may have gone down while we waited for our turn. (If it was down before, this
	// call won the probe: it must go on and ask.)
	if !wasDown && s.health.skip() {
		return s.fallback(w, nil)
	}
	return s.ask(w, me)
}

// fallback is what Acquire does when the backend cannot be reached (cause, or the last failure
// when this call did not try).
func (s *Semaphore) fallback(w *wait, cause error) (*Permit, error) {
	s.count.unavailable.Add(1)
	if cause == nil {
		cause = s.health.lastErr()
	}
	switch s.cfg.mode.kind {
	case failOpen:
		return s.grantDegraded(w.n, false)
	case degrade:
		limit := s.degr.Capacity()
		if w.n > limit {
			return nil, fmt.Errorf("%w (%d permits requested, %d allowed per process while it is)", unavailable(cause), w.n, limit)
		}
		// Degrade(n) counts what the process still holds: its leases that have not expired take
		// room among the n. A degraded grant needs both one of degr's permits and room beside
		// the leases; when the leases leave no room, wait for one of them to end.
		for {
			var err error
			if w.tryOnce {
				if !s.degr.TryAcquire(w.n) {
					err = sema.ErrTimeout
				}
			} else {
				err = s.degr.Acquire(w.wctx, w.n)
			}
			if err != nil {
				return nil, w.err(err)
			}
			s.mu.Lock()
			if s.leased+(s.held-s.leased)+w.n <= limit || s.closed {
				s.mu.Unlock()
				return s.grantDegraded(w.n, true)
			}
			gone := s.leaseGone
			s.mu.Unlock()
			s.degr.Release(w.n)
			if w.tryOnce {
				return nil, ErrTimeout
			}
			select {
			case <-gone:
			case <-w.wctx.Done():
				return nil, w.err(nil)
			}
		}
	default:
		return nil, unavailable(cause)
	}
}

// grantDegraded returns a permit granted without a lease; fromDegr says it holds n of degr's
// permits. It has a lease ID all the same: once the backend answers again, it registers under it.
func (s *Semaphore) grantDegraded(n int64, fromDegr bool) (*Permit, error) {
	lease := fleetdriver.Lease{ID: s.inst + "." + s.nextSeq(), N: n, Capacity: s.capacity}
	p := newPermit(s, lease, true)
	p.fromDegr = fromDegr
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		p.end(errCloseLost)
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
// it may have been granted, or its place in the queue. A grant made after this expires within a
// TTL on its own, so retrying longer is moot.
func (s *Semaphore) abandon(lease fleetdriver.Lease) {
	s.retry([]fleetdriver.Lease{lease}, time.Now().Add(s.cfg.ttl))
}

// retry queues leases for the worker to release, with backoff, until it succeeds, until until
// (when the backend has dropped them anyway), or until Close.
func (s *Semaphore) retry(leases []fleetdriver.Lease, until time.Time) {
	s.mu.Lock()
	if s.closed { // the worker may be gone: one last try now
		s.mu.Unlock()
		_ = s.releaseNow(leases)
		return
	}
	for _, l := range leases {
		s.pending = append(s.pending, pendingRelease{lease: l, until: until})
	}
	s.kickLocked()
	s.mu.Unlock()
}

// releaseNow releases leases on the backend, within the time of a renewal, taking along the
// head's request that waits to ride, if any (see ride).
func (s *Semaphore) releaseNow(leases []fleetdriver.Lease) error {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ttl/3)
	defer cancel()
	req := fleetdriver.ReleaseRequest{Name: s.name, Leases: leases}
	var named []*entry
	r := s.rider.Swap(nil)
	if r != nil { // built now, so that it names every waiter that arrived while it waited
		then, n := s.request(r.me, r.w, false)
		req.Then, named = &then, n
	}
	sent := time.Now()
	s.count.roundTrips.Add(1)
	rep, err := s.b.Release(ctx, req)
	if err == nil && r != nil && len(rep.Then.Behind) != len(req.Then.Behind) {
		err = errBehind(len(rep.Then.Behind), len(req.Then.Behind))
	}
	if r != nil {
		if err != nil {
			s.unlist(named)
		}
		r.done <- rideResult{named: named, rep: rep.Then, err: err, sent: sent}
	}
	if err != nil {
		s.failed(err)
		return err
	}
	s.ok()
	if r == nil {
		// A release that leaves room lets the next head ask at once rather than ride.
		s.contended.Store(rep.Queued > 0 || rep.Free <= 0)
	}
	return nil
}

func (s *Semaphore) kickLocked() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// failed and ok record a call's outcome in health; once the backend answers again, degraded
// permits still running register as leases, so that the capacity counts them.
func (s *Semaphore) failed(err error) { s.health.failed(err) }

func (s *Semaphore) ok() {
	if !s.health.ok() {
		return
	}
	s.mu.Lock()
	if len(s.degraded) > 0 {
		s.renewNow = true
		s.kickLocked()
	}
	s.mu.Unlock()
}

// see notes what a reply says of the name's state: its epoch (a new one means the backend lost
// this name's state: held leases must re-register before they expire, so an Acquire that sees it
// asks for a renewal at once), an admission pause (logged once, with its reason and end), the
// longest TTL in use, and the largest token.
func (s *Semaphore) see(e int64, paused time.Duration, why fleetdriver.PauseReason, longest time.Duration, token uint64, fromAcquire bool) {
	for old := s.seen.Load(); token > old && !s.seen.CompareAndSwap(old, token); old = s.seen.Load() {
	}
	if longest > 0 {
		s.longest.Store(int64(max(longest, s.cfg.ttl)))
	}
	if paused > 0 {
		until := time.Now().Add(paused)
		s.paused.Store(until.UnixNano())
		if old := s.pauseAt.Load(); old != e && s.pauseAt.CompareAndSwap(old, e) {
			// A name's first use on a backend pauses too (it cannot tell a new name from a lost
			// one): that is expected, not a warning.
			level := slog.LevelWarn
			if why == fleetdriver.PauseNoState {
				level = slog.LevelInfo
			}
			s.log(level, "fleet: the backend admits no new permits of this name until held leases had time to register again",
				"reason", why.String(), "until", until.Format(time.RFC3339Nano), "for", paused.Round(time.Millisecond))
		}
	} else if s.paused.Load() != 0 {
		s.paused.Store(0)
	}
	old := s.epoch.Load()
	if e == 0 || old == e || !s.epoch.CompareAndSwap(old, e) || old == 0 {
		return
	}
	s.mu.Lock()
	held := len(s.leases)
	if fromAcquire && held > 0 {
		s.renewNow = true
		s.kickLocked()
	}
	s.mu.Unlock()
	if held > 0 {
		s.logWarn("fleet: the backend lost the state of this name, or it went back in time (restart or failover): held leases register again",
			"heldLeases", held)
	}
}

// Stats returns the Semaphore's gauges and counters; see [Stats].
func (s *Semaphore) Stats() Stats {
	s.check("Stats")
	s.mu.Lock()
	held := s.held
	s.mu.Unlock()
	st := Stats{
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
	if until := s.paused.Load(); until != 0 && time.Now().UnixNano() < until {
		st.PausedUntil = time.Unix(0, until)
	}
	return st
}

// Close releases every permit the Semaphore holds (in one round trip; their contexts are
// cancelled with a cause matching both [ErrLeaseLost] and [ErrClosed]), fails its waiting
// Acquires with ErrClosed, stops renewing and retrying, and unsubscribes. It returns an error
// matching [ErrUnavailable] if the backend could not be told (the leases then expire within one
// TTL). Close is idempotent: a later call returns nil at once. Acquire after Close returns
// ErrClosed; Release of a permit after Close does nothing.
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
	if s.degr != nil {
		s.degr.Close(ErrClosed)
	}
	<-s.stopped // from here on, nothing adds to pending: late arrivals release on their own

	s.mu.Lock()
	var leases []fleetdriver.Lease
	for _, r := range s.pending {
		leases = append(leases, r.lease)
	}
	s.pending = nil
	released := 0
	var ended []*Permit
	for id, p := range s.leases {
		leases = append(leases, p.lease)
		delete(s.leases, id)
		p.cancel(errCloseLost) // under the lock, as in loseLocked
		ended = append(ended, p)
		if !p.forWaiter { // (one held for a waiter was never acquired)
			released++
		}
	}
	for p := range s.degraded {
		delete(s.degraded, p)
		p.cancel(errCloseLost)
		ended = append(ended, p)
		released++
	}
	s.held, s.leased = 0, 0
	unsub := s.unsub
	s.unsub = nil
	s.count.released.Add(int64(released))
	s.mu.Unlock()
	for _, p := range ended {
		p.giveDegr()
	}

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
