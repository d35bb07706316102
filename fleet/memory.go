package fleet

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// errDown is what every call into a [Memory] returns while it is down.
var errDown = errors.New("fleet: memory backend is down")

// Memory is an in-process [Backend]: several Semaphores (and Rates) of one process share it and
// behave as the processes of a fleet sharing a Redis would, so that tests and examples need no
// server. It keeps the same state and makes the same decisions as the Redis backend, counts a
// round trip for every call into it, and can fail on purpose: [Memory.SetDown] makes every call
// fail at once, like a refused connection, and [Memory.Restart] loses all data, like a Redis
// restarted without persistence.
//
// Its clock is the process's (the fake clock under testing/synctest), shifted by
// [Memory.Advance], which stands for a backend whose clock runs ahead of the clients'. A Memory
// made by [NewMemory] knows it holds no earlier data, so the first use of a name admits at once;
// after a Restart, the first use of a name admits nothing new for one lease TTL, as on Redis.
//
// The zero value is not usable; call NewMemory. A Memory is safe for concurrent use.
type Memory struct {
	made  bool // by NewMemory; never changes
	calls atomic.Int64

	mu      sync.Mutex
	down    bool
	frozen  chan struct{} // non-nil while frozen: closed by Freeze(false)
	latency time.Duration // every reply waits this long after the call took effect
	inc     int64         // the incarnation: bumped by Restart and Restore, as a server restart changes its run ID
	skew    time.Duration
	lost    bool  // Restart was called: state created from now on waits one TTL before admitting
	born    int64 // the last epoch handed out: epochs differ even if the clock stands still
	names   map[string]*memState
	rates   map[string]*gcra
	subs    map[string]map[*memSub]struct{} // subscriptions outlive a Restart, as a client reconnects
}

type memState struct {
	inc      int64  // the incarnation of the Memory that last confirmed this state
	born, qt int64  // epoch, and the end of the admission pause after a loss, in µs
	tok      uint64 // last fencing token
	held     int64  // summed weight of leases; kept equal to the sum over leases
	leases   map[string]*memLease
	queue    []*memEntry // in arrival order
}

type memLease struct {
	n, capacity int64
	token       uint64
	exp         int64 // µs; the lease lives while now < exp
}

type memEntry struct {
	id          string
	n, capacity int64
	hb          int64 // µs; the entry is dropped once now >= hb
}

type memSub struct{ wake func(string) }

// NewMemory returns an empty in-memory backend.
func NewMemory() *Memory {
	return &Memory{
		made:  true,
		names: make(map[string]*memState),
		rates: make(map[string]*gcra),
		subs:  make(map[string]map[*memSub]struct{}),
	}
}

func (m *Memory) check(op string) {
	if m == nil || !m.made {
		panic("fleet: " + op + ": zero Memory; use NewMemory")
	}
}

// SetDown makes every call into the backend fail at once (down) or work again (!down). While
// down, nothing is lost: leases still expire on the backend's clock.
func (m *Memory) SetDown(down bool) {
	m.check("SetDown")
	m.mu.Lock()
	m.down = down
	m.mu.Unlock()
}

// Restart loses all data: leases, queues, token counters and rate buckets, as a Redis restarted
// without persistence does. Subscriptions survive, as clients resubscribe after a reconnect.
func (m *Memory) Restart() {
	m.check("Restart")
	m.mu.Lock()
	m.names = make(map[string]*memState)
	m.rates = make(map[string]*gcra)
	m.lost = true
	m.inc++
	m.mu.Unlock()
}

// Advance moves the backend's clock by d (negative d moves it back) relative to the process's,
// so that leases expire on the backend before, or after, the holders' own reckoning.
func (m *Memory) Advance(d time.Duration) {
	m.check("Advance")
	m.mu.Lock()
	m.skew += d
	m.mu.Unlock()
}

// Freeze makes every call block (frozen) until Freeze(false), or until its ctx ends, when it
// returns ctx's error having done nothing — as a Redis stopped with SIGSTOP: its clients wait
// until their own deadlines.
func (m *Memory) Freeze(frozen bool) {
	m.check("Freeze")
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case frozen && m.frozen == nil:
		m.frozen = make(chan struct{})
	case !frozen && m.frozen != nil:
		close(m.frozen)
		m.frozen = nil
	}
}

// SetLatency makes the reply of every call come d after the call took effect (0: at once). A
// call whose ctx ends meanwhile returns ctx's error, its effect done: a grant whose reply the
// caller never reads.
func (m *Memory) SetLatency(d time.Duration) {
	m.check("SetLatency")
	m.mu.Lock()
	m.latency = d
	m.mu.Unlock()
}

// A MemorySnapshot is the whole state of a [Memory] at one instant, for [Memory.Restore].
type MemorySnapshot struct {
	names map[string]*memState
	rates map[string]*gcra
}

// Snapshot copies the backend's state, as Redis saves an RDB snapshot.
func (m *Memory) Snapshot() *MemorySnapshot {
	m.check("Snapshot")
	m.mu.Lock()
	defer m.mu.Unlock()
	return &MemorySnapshot{names: copyNames(m.names), rates: copyRates(m.rates)}
}

// Restore brings back the state of snap, as a Redis restarted from an older RDB snapshot (or
// from an AOF that lost its last second, or a replica promoted before it caught up): leases,
// queues and token counters go back to that instant, as a restarted server would hold them.
// Subscriptions survive, as clients resubscribe after a reconnect.
func (m *Memory) Restore(snap *MemorySnapshot) {
	m.check("Restore")
	if snap == nil {
		panic("fleet: Restore: nil snapshot")
	}
	m.mu.Lock()
	m.names, m.rates = copyNames(snap.names), copyRates(snap.rates)
	m.inc++
	m.mu.Unlock()
}

func copyNames(src map[string]*memState) map[string]*memState {
	dst := make(map[string]*memState, len(src))
	for name, st := range src {
		c := *st
		c.leases = make(map[string]*memLease, len(st.leases))
		for id, l := range st.leases {
			cl := *l
			c.leases[id] = &cl
		}
		c.queue = make([]*memEntry, len(st.queue))
		for i, e := range st.queue {
			ce := *e
			c.queue[i] = &ce
		}
		dst[name] = &c
	}
	return dst
}

func copyRates(src map[string]*gcra) map[string]*gcra {
	dst := make(map[string]*gcra, len(src))
	for name, g := range src {
		c := *g
		dst[name] = &c
	}
	return dst
}

// Now returns the backend's clock.
func (m *Memory) Now() time.Time {
	m.check("Now")
	m.mu.Lock()
	defer m.mu.Unlock()
	return time.Now().Add(m.skew)
}

// RoundTrips returns the number of calls made into the backend so far (of the methods of
// [Backend]; the inspection methods of Memory are not counted).
func (m *Memory) RoundTrips() int64 {
	m.check("RoundTrips")
	return m.calls.Load()
}

// Held returns the summed weight of the live leases of name, as the backend sees them now.
func (m *Memory) Held(name string) int64 {
	m.check("Held")
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.names[name]
	if st == nil {
		return 0
	}
	now := m.nowLocked()
	var held int64
	for _, l := range st.leases {
		if now < l.exp {
			held += l.n
		}
	}
	return held
}

// Queued returns the number of requests of name in the backend's queue now (at most one per
// waiting Semaphore: the others wait in their own process).
func (m *Memory) Queued(name string) int {
	m.check("Queued")
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.names[name]
	if st == nil {
		return 0
	}
	now := m.nowLocked()
	n := 0
	for _, e := range st.queue {
		if now < e.hb {
			n++
		}
	}
	return n
}

func (m *Memory) nowLocked() int64 { return time.Now().Add(m.skew).UnixMicro() }

// enter counts a round trip and says whether the call may go on; m.mu is held after a nil error.
func (m *Memory) enter(ctx context.Context) error {
	m.calls.Add(1)
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	for m.frozen != nil {
		thaw := m.frozen
		m.mu.Unlock()
		select {
		case <-thaw:
		case <-ctx.Done():
			return ctx.Err()
		}
		m.mu.Lock()
	}
	if m.down {
		m.mu.Unlock()
		return errDown
	}
	return nil
}

// reply waits for the reply's latency (see SetLatency); m.mu must not be held.
func (m *Memory) reply(ctx context.Context) error {
	m.mu.Lock()
	d := m.latency
	m.mu.Unlock()
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// state returns the state of name, creating it if create is set: a Memory that never restarted
// holds no earlier data, so new state admits at once; after a Restart it pauses admission for
// ttl, as Redis does for any state it creates.
func (m *Memory) state(name string, now int64, ttl int64, create bool) *memState {
	st := m.names[name]
	if st == nil {
		if !create {
			return nil
		}
		m.born = max(now, m.born+1)
		st = &memState{inc: m.inc, born: m.born, qt: now, leases: make(map[string]*memLease)}
		if m.lost {
			st.qt = now + ttl
		}
		m.names[name] = st
	} else if now < st.qt && st.born+ttl > st.qt {
		st.qt = st.born + ttl // a longer lease seen during the pause: its holders renew later
	}
	return st
}

// purge drops expired leases and dead queue entries, keeping held equal to the sum of the leases.
func (st *memState) purge(now int64) {
	for id, l := range st.leases {
		if l.exp <= now {
			st.held -= l.n
			delete(st.leases, id)
		}
	}
	st.queue = slices.DeleteFunc(st.queue, func(e *memEntry) bool { return e.hb <= now })
}

func (st *memState) find(id string) int {
	return slices.IndexFunc(st.queue, func(e *memEntry) bool { return e.id == id })
}

func (st *memState) grant(id string, n, capacity int64, now, ttl int64) uint64 {
	st.tok = max(st.tok+1, uint64(max(now, 0)))
	st.held += n
	st.leases[id] = &memLease{n: n, capacity: capacity, token: st.tok, exp: now + ttl}
	return st.tok
}

// wake returns the ID of the queue's head if it fits now (and is not except), else "".
func (st *memState) wake(now int64, except string) string {
	if now < st.qt || len(st.queue) == 0 {
		return ""
	}
	h := st.queue[0]
	if h.id != except && st.held+h.n <= h.capacity {
		return h.id
	}
	return ""
}

// retryIn is when a waiter should ask again at the latest: the next lease expiry, the next
// queue-entry death, the end of the admission pause, and in any case within ttl/3 (which keeps
// its own queue entry alive).
func (st *memState) retryIn(now, ttl int64) time.Duration {
	t := now + ttl/3
	for _, l := range st.leases {
		t = min(t, l.exp)
	}
	for _, e := range st.queue {
		t = min(t, e.hb)
	}
	if now < st.qt {
		t = min(t, st.qt)
	}
	return time.Duration(max(t-now, 100)) * time.Microsecond
}

// publish tells the subscribers of name that id may be granted; m.mu must not be held.
func (m *Memory) publish(name, id string) {
	if id == "" {
		return
	}
	m.mu.Lock()
	var fns []func(string)
	for s := range m.subs[name] {
		fns = append(fns, s.wake)
	}
	m.mu.Unlock()
	for _, fn := range fns {
		fn(id)
	}
}

func micros(d time.Duration) int64 { return d.Microseconds() }

// Acquire implements [Backend].
func (m *Memory) Acquire(ctx context.Context, req AcquireRequest) (AcquireReply, error) {
	m.check("Acquire")
	r, err := m.acquire(ctx, req)
	if err == nil {
		err = m.reply(ctx)
	}
	if err != nil {
		return AcquireReply{}, err
	}
	return r, nil
}

func (m *Memory) acquire(ctx context.Context, req AcquireRequest) (AcquireReply, error) {
	if err := m.enter(ctx); err != nil {
		return AcquireReply{}, err
	}
	now, ttl := m.nowLocked(), micros(req.TTL)
	id, n, capacity := req.Lease.ID, req.Lease.N, req.Lease.Capacity
	st := m.state(req.Name, now, ttl, true)
	st.purge(now)
	if l, ok := st.leases[id]; ok { // asked again after a lost reply: it was granted
		m.mu.Unlock()
		return AcquireReply{Granted: true, Token: l.token, Epoch: st.born}, nil
	}
	i := st.find(id)
	if i < 0 {
		if len(st.queue) == 0 && now >= st.qt && st.held+n <= capacity {
			tok := st.grant(id, n, capacity, now, ttl)
			m.mu.Unlock()
			return AcquireReply{Granted: true, Token: tok, Epoch: st.born}, nil
		}
		if !req.Wait {
			reply := AcquireReply{Epoch: st.born, RetryIn: st.retryIn(now, ttl)}
			wake := st.wake(now, "")
			m.mu.Unlock()
			m.publish(req.Name, wake)
			return reply, nil
		}
		st.queue = append(st.queue, &memEntry{id: id, n: n, capacity: capacity})
		i = len(st.queue) - 1
	}
	st.queue[i].hb = now + ttl
	if i == 0 && now >= st.qt && st.held+n <= capacity {
		st.queue = st.queue[1:]
		tok := st.grant(id, n, capacity, now, ttl)
		wake := st.wake(now, "")
		m.mu.Unlock()
		m.publish(req.Name, wake)
		return AcquireReply{Granted: true, Token: tok, Epoch: st.born}, nil
	}
	reply := AcquireReply{Epoch: st.born, RetryIn: st.retryIn(now, ttl)}
	wake := st.wake(now, id) // the purge may have let another head in
	m.mu.Unlock()
	m.publish(req.Name, wake)
	return reply, nil
}

// Renew implements [Backend].
func (m *Memory) Renew(ctx context.Context, req RenewRequest) (RenewReply, error) {
	m.check("Renew")
	r, err := m.renew(ctx, req)
	if err == nil {
		err = m.reply(ctx)
	}
	if err != nil {
		return RenewReply{}, err
	}
	return r, nil
}

func (m *Memory) renew(ctx context.Context, req RenewRequest) (RenewReply, error) {
	if err := m.enter(ctx); err != nil {
		return RenewReply{}, err
	}
	now, ttl := m.nowLocked(), micros(req.TTL)
	st := m.state(req.Name, now, ttl, true)
	st.purge(now)
	status := make([]LeaseStatus, len(req.Leases))
	for i, l := range req.Leases {
		switch have := st.leases[l.ID]; {
		case have != nil:
			have.exp = now + ttl
			status[i] = LeaseRenewed
		case l.Epoch != st.born && st.held+l.N <= l.Capacity:
			// Granted before the data was lost, and still running: take it back in, and keep
			// new tokens above its own.
			st.held += l.N
			st.leases[l.ID] = &memLease{n: l.N, capacity: l.Capacity, token: l.Token, exp: now + ttl}
			st.tok = max(st.tok, l.Token)
			status[i] = LeaseReregistered
		default:
			status[i] = LeaseLost
		}
	}
	wake := st.wake(now, "")
	m.mu.Unlock()
	m.publish(req.Name, wake)
	return RenewReply{Epoch: st.born, Status: status}, nil
}

// Release implements [Backend]. It removes both the lease and the queue entry of each ID.
func (m *Memory) Release(ctx context.Context, name string, leases []Lease) error {
	m.check("Release")
	err := m.release(ctx, name, leases)
	if err == nil {
		err = m.reply(ctx)
	}
	return err
}

func (m *Memory) release(ctx context.Context, name string, leases []Lease) error {
	if err := m.enter(ctx); err != nil {
		return err
	}
	now := m.nowLocked()
	st := m.state(name, now, 0, false)
	if st == nil {
		m.mu.Unlock()
		return nil
	}
	st.purge(now)
	for _, l := range leases {
		if have := st.leases[l.ID]; have != nil {
			st.held -= have.n
			delete(st.leases, l.ID)
		}
		if i := st.find(l.ID); i >= 0 {
			st.queue = slices.Delete(st.queue, i, i+1)
		}
	}
	wake := st.wake(now, "")
	m.mu.Unlock()
	m.publish(name, wake)
	return nil
}

// Subscribe implements [Backend]. wake is called on the goroutine whose call let the head in,
// after the backend's lock is released.
func (m *Memory) Subscribe(ctx context.Context, name string, wake func(id string)) (func(), error) {
	m.check("Subscribe")
	if wake == nil {
		panic("fleet: Subscribe: nil wake function")
	}
	if err := m.enter(ctx); err != nil {
		return nil, err
	}
	s := &memSub{wake: wake}
	if m.subs[name] == nil {
		m.subs[name] = make(map[*memSub]struct{})
	}
	m.subs[name][s] = struct{}{}
	m.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			m.mu.Lock()
			delete(m.subs[name], s)
			if len(m.subs[name]) == 0 {
				delete(m.subs, name)
			}
			m.mu.Unlock()
		})
	}, nil
}

// rateArgs converts a rate to the bucket's interval and size in the units of gcra.
func rateArgs(perSecond float64, burst int64) (interval, size float64) {
	return 1e6 / perSecond, float64(burst)
}

// Reserve implements [Backend].
func (m *Memory) Reserve(ctx context.Context, req RateRequest) (RateReply, error) {
	m.check("Reserve")
	if err := m.enter(ctx); err != nil {
		return RateReply{}, err
	}
	defer m.mu.Unlock()
	now := float64(m.nowLocked())
	g := m.rates[req.Name]
	if g == nil {
		g = new(gcra)
		m.rates[req.Name] = g
	}
	interval, size := rateArgs(req.PerSecond, req.Burst)
	maxWait := -1.0
	if req.MaxWait >= 0 {
		maxWait = float64(req.MaxWait.Microseconds())
	}
	ok, delay, mark := g.reserve(now, interval, size, maxWait)
	reply := RateReply{OK: ok, Delay: time.Duration(math.Ceil(delay * 1000))}
	if ok {
		reply.Mark = strconv.FormatFloat(mark, 'f', -1, 64)
	}
	return reply, nil
}

// CancelReservation implements [Backend].
func (m *Memory) CancelReservation(ctx context.Context, req RateCancel) error {
	m.check("CancelReservation")
	mark, err := strconv.ParseFloat(req.Mark, 64)
	if err != nil {
		return fmt.Errorf("fleet: CancelReservation: bad mark %q", req.Mark)
	}
	if err := m.enter(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	g := m.rates[req.Name]
	if g == nil {
		return nil
	}
	interval, size := rateArgs(req.PerSecond, req.Burst)
	g.cancel(float64(m.nowLocked()), interval, size, mark)
	return nil
}
