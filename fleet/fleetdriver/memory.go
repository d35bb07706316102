package fleetdriver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goloom/loom/internal/gcra"
)

// errDown is what every call into a [Memory] returns while it is down.
var errDown = errors.New("fleet: memory backend is down")

// Memory is an in-process [Backend]: several fleet.Semaphores (and Rates) of one process share it and
// behave as the processes of a fleet sharing a Redis would, so that tests and examples need no
// server. It keeps the same state and makes the same decisions as the Redis backend, counts a
// round trip for every call into it, and can fail on purpose, as a real server does:
// [Memory.SetDown] makes every call fail at once, like a refused connection; [Memory.Freeze]
// makes every call wait, like a server stopped with SIGSTOP; [Memory.SetLatency] delays every
// reply; [Memory.Restart] loses all data, like a Redis restarted without persistence; and
// [Memory.Snapshot] and [Memory.Restore] take the state back in time, like a Redis restarted
// from an older RDB snapshot.
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
	// inc is the incarnation, as a server's run ID: Restart and Restore start a new one. A state
	// last confirmed in an older incarnation may have gone back in time (see [memState.inc]).
	inc   int64
	skew  time.Duration
	lost  bool  // Restart was called: state created from now on waits one TTL before admitting
	born  int64 // the last epoch handed out: epochs differ even if the clock stands still
	names map[string]*memState
	rates map[string]*gcra.Bucket
	// subs are the subscriptions by name and instance; they outlive a Restart, as clients
	// reconnect. A queued request that listens for pushes is alive while its instance has one.
	subs map[subKey]map[*memSub]struct{}
}

type subKey struct{ name, inst string }

// unheardRetry is how soon a queued request whose asker hears no pushes asks again.
const unheardRetry = 10 * time.Millisecond

// minPause is the shortest pause after a loss, in µs: the shortest lease fleet allows.
const minPause = int64(time.Second / time.Microsecond)

// memState is the state of one name. Its invariants, kept by every call under Memory.mu:
//   - held is the summed weight of leases (expired ones included until purge drops them both).
//   - queue is in arrival order, one entry per ID, none of them a lease.
//   - tok only grows, within an incarnation; across one it grows too, as grants draw tokens
//     from the clock and never below what askers have seen.
//   - inc is the Memory's incarnation when this state was last looked at; an older one means
//     the state may have gone back in time, and the first call to see it starts a new epoch.
type memState struct {
	inc      int64
	born, qt int64  // epoch, and the end of the admission pause after a loss, in µs
	tok      uint64 // last fencing token
	held     int64
	// mttl is the longest TTL of a request seen, in µs, while it may still be in use (until
	// mttlUntil): a pause after a loss lasts at least that long.
	mttl, mttlUntil int64
	reason          PauseReason // why the current pause (until qt) is there
	leases          map[string]*memLease
	queue           []*memEntry
}

type memLease struct {
	n, capacity int64
	token       uint64
	exp         int64 // µs; the lease lives while now < exp
}

type memEntry struct {
	lease Lease // ID, N, Capacity
	ttl   int64 // µs: the TTL of the lease it asks for
	hb    int64 // µs; the entry is dropped once now >= hb
	push  bool  // its asker listens for pushes: it is dead once nobody listens
}

type memSub struct{ deliver func(Lease) }

// NewMemory returns an empty in-memory backend.
func NewMemory() *Memory {
	return &Memory{
		made:  true,
		names: make(map[string]*memState),
		rates: make(map[string]*gcra.Bucket),
		subs:  make(map[subKey]map[*memSub]struct{}),
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
	m.rates = make(map[string]*gcra.Bucket)
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

// A MemorySnapshot is the state of a [Memory]'s semaphores at one instant, for [Memory.Restore].
type MemorySnapshot struct {
	names map[string]*memState
}

// Snapshot copies the backend's state, as Redis saves an RDB snapshot.
func (m *Memory) Snapshot() *MemorySnapshot {
	m.check("Snapshot")
	m.mu.Lock()
	defer m.mu.Unlock()
	return &MemorySnapshot{names: copyNames(m.names)}
}

// Restore brings back the state of snap, as a Redis restarted from an older RDB snapshot (or
// from an AOF that lost its last second, or a replica promoted before it caught up): leases,
// queues and token counters go back to that instant, as a restarted server would hold them;
// rate buckets come back full (a bucket from an older instant is fuller anyway). Subscriptions
// survive, as clients resubscribe after a reconnect.
func (m *Memory) Restore(snap *MemorySnapshot) {
	m.check("Restore")
	if snap == nil {
		panic("fleet: Restore: nil snapshot")
	}
	m.mu.Lock()
	m.names, m.rates = copyNames(snap.names), make(map[string]*gcra.Bucket)
	m.inc++
	m.lost = true // a name the snapshot lacks may have been in use since: its state is lost
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

// Queued returns the number of live requests of name in the backend's queue now (at most one
// per waiting Semaphore: the others wait in their own process).
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
		if now < e.hb && m.listening(name, e) {
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

// leave releases m.mu, pushes the grants made by the call, and waits for the reply's latency
// (see SetLatency).
func (m *Memory) leave(ctx context.Context, name string, pushes []*memEntry, tokens []Lease) error {
	var fns []func(Lease)
	var gs []Lease
	for i, e := range pushes {
		for s := range m.subs[subKey{name, e.lease.Instance()}] {
			fns, gs = append(fns, s.deliver), append(gs, tokens[i])
		}
	}
	d := m.latency
	m.mu.Unlock()
	for i, fn := range fns {
		fn(gs[i])
	}
	if d <= 0 {
		return nil
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

// listening reports whether the asker of e can still be reached: it does not listen for pushes
// (it learns of its grant when it asks again), or its instance has a subscription.
func (m *Memory) listening(name string, e *memEntry) bool {
	return !e.push || len(m.subs[subKey{name, e.lease.Instance()}]) > 0
}

// state returns the state of name, creating it if create is set, and starts a new epoch if it
// was last confirmed in an older incarnation (it may have gone back in time). A Memory that never
// restarted holds no earlier data, so new state admits at once; after a Restart, or on a state
// that may have gone back, admission pauses for the longest TTL that may be in use, as on Redis.
func (m *Memory) state(name string, now, ttl, longest int64, create bool) *memState {
	st := m.names[name]
	switch {
	case st == nil:
		if !create {
			return nil
		}
		m.born = max(now, m.born+1)
		st = &memState{inc: m.inc, born: m.born, qt: now, leases: make(map[string]*memLease)}
		if m.lost {
			st.qt, st.reason = now+max(ttl, longest, minPause), PauseNoState
		}
		m.names[name] = st
	case st.inc != m.inc:
		// From before a restart: whatever happened after this state was saved is lost. Its
		// leases still count (they may be live); those it lacks register again within the pause.
		// The pause covers the longest TTL that may be in use: the call's own (none for a
		// release), the longest its asker has heard of, the longest this state remembers even if
		// it lapsed since (the state is old), and never less than the shortest lease.
		m.born = max(now, m.born+1)
		st.inc, st.born = m.inc, m.born
		st.qt, st.reason = now+max(ttl, longest, st.mttl, minPause), PauseWentBack
	case now < st.qt && st.born+ttl > st.qt:
		st.qt = st.born + ttl // a longer lease seen during the pause: its holders renew later
	}
	st.seeTTL(now, ttl)
	return st
}

// seeTTL notes a request's TTL: the longest one is remembered for as long as a lease of it may live.
func (st *memState) seeTTL(now, ttl int64) {
	switch {
	case ttl <= 0:
	case ttl > st.mttl || now >= st.mttlUntil:
		st.mttl, st.mttlUntil = ttl, now+ttl
	case ttl == st.mttl:
		st.mttlUntil = max(st.mttlUntil, now+ttl)
	}
}

// pause is the reply's view of the admission pause.
func (st *memState) pause(now int64) (time.Duration, PauseReason, time.Duration) {
	var longest time.Duration
	if now < st.mttlUntil {
		longest = time.Duration(st.mttl) * time.Microsecond
	}
	if now >= st.qt {
		return 0, PauseNone, longest
	}
	return time.Duration(st.qt-now) * time.Microsecond, st.reason, longest
}

// purge drops expired leases and dead queue entries (expired, or whose asker nobody hears any
// more), keeping held equal to the sum of the leases.
func (m *Memory) purge(name string, st *memState, now int64) {
	for id, l := range st.leases {
		if l.exp <= now {
			st.held -= l.n
			delete(st.leases, id)
		}
	}
	st.queue = slices.DeleteFunc(st.queue, func(e *memEntry) bool { return e.hb <= now || !m.listening(name, e) })
}

func (st *memState) find(id string) int {
	return slices.IndexFunc(st.queue, func(e *memEntry) bool { return e.lease.ID == id })
}

func (st *memState) grant(l Lease, now, ttl, seen int64) uint64 {
	st.tok = max(st.tok+1, uint64(max(now, 0)), uint64(seen)+1)
	st.held += l.N
	st.leases[l.ID] = &memLease{n: l.N, capacity: l.Capacity, token: st.tok, exp: now + ttl}
	return st.tok
}

// grantHeads grants the head of the queue, and the next, as long as they fit and no pause
// holds. An entry of mine (the IDs the call asks for: ID → index) gets its token in toks, for the
// reply; any other is pushed, and returned with its grant to push.
func (m *Memory) grantHeads(name string, st *memState, now int64, mine map[string]int, toks []uint64) (pushes []*memEntry, grants []Lease) {
	for now >= st.qt && len(st.queue) > 0 {
		h := st.queue[0]
		j, own := mine[h.lease.ID]
		if st.held+h.lease.N > h.lease.Capacity {
			return pushes, grants
		}
		if !own && !h.push {
			// Its asker hears no push: granted now, it would learn of it only when it asks
			// again, and a dead one never would. It is granted when it asks (every 160 ms, or 10 ms while unheard).
			return pushes, grants
		}
		st.queue = st.queue[1:]
		if !own && !m.listening(name, h) {
			continue // its process died: the queue moves on at once
		}
		tok := st.grant(h.lease, now, h.ttl, 0)
		if own {
			toks[j] = tok
			continue
		}
		g := h.lease
		g.Token, g.Epoch = tok, st.born
		pushes, grants = append(pushes, h), append(grants, g)
	}
	return pushes, grants
}

// retryIn is when a waiter should ask again at the latest: the next lease expiry, the next
// queue-entry death, the end of the admission pause, and in any case within a fifth of its
// heartbeat (which keeps its own entry alive, with room for a starved process).
func (st *memState) retryIn(now, hb int64) time.Duration {
	t := now + max(hb/5, 1000)
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

func micros(d time.Duration) int64 { return d.Microseconds() }

// Acquire implements [Backend].
func (m *Memory) Acquire(ctx context.Context, req AcquireRequest) (AcquireReply, error) {
	m.check("Acquire")
	if err := checkBehind(req); err != nil {
		return AcquireReply{}, err
	}
	if err := m.enter(ctx); err != nil {
		return AcquireReply{}, err
	}
	now := m.nowLocked()
	st := m.state(req.Name, now, micros(req.TTL), micros(req.LongestTTL), true)
	m.purge(req.Name, st, now)
	rep, pushes, grants := m.ask(st, now, req)
	if err := m.leave(ctx, req.Name, pushes, grants); err != nil {
		return AcquireReply{}, err
	}
	return rep, nil
}

// ask is an Acquire on a loaded and purged state; it returns the grants to push besides. The
// asker's lease, then those behind it, in order: one granted already (a reply or push was lost)
// is answered with its token; one queued keeps its place, its entry refreshed; a new one is
// granted at once if nobody is queued and it fits, else queued at the tail. Then the queue's heads
// are granted as they fit: the request's own in the reply, others pushed.
func (m *Memory) ask(st *memState, now int64, req AcquireRequest) (AcquireReply, []*memEntry, []Lease) {
	ttl := micros(req.TTL)
	st.tok = max(st.tok, req.Seen)
	rep := AcquireReply{Epoch: st.born}
	list := append([]Lease{req.Lease}, req.Behind...)
	toks := make([]uint64, len(list))
	mine := make(map[string]int, len(list))
	open := len(st.queue) == 0 && now >= st.qt // nobody waits: grant in order while they fit
	for i, l := range list {
		if have := st.leases[l.ID]; have != nil {
			toks[i] = have.token
			continue
		}
		if q := st.find(l.ID); q >= 0 {
			e := st.queue[q]
			e.hb, e.push, e.ttl = now+micros(req.Heartbeat), req.Push, ttl
			mine[l.ID] = i
			continue
		}
		switch {
		case open && st.held+l.N <= l.Capacity:
			toks[i] = st.grant(l, now, ttl, 0)
		case i > 0 || req.Wait:
			open = false // head-of-line: once one waits, those behind it queue after it
			st.queue = append(st.queue, &memEntry{lease: Lease{ID: l.ID, N: l.N, Capacity: l.Capacity}, ttl: ttl,
				hb: now + micros(req.Heartbeat), push: req.Push})
			mine[l.ID] = i
		}
	}
	pushes, grants := m.grantHeads(req.Name, st, now, mine, toks) // the purge may have let others in
	if toks[0] > 0 {
		rep.Granted, rep.Token = true, toks[0]
	} else {
		rep.RetryIn = st.retryIn(now, micros(req.Heartbeat))
		if !req.Push {
			// Nobody grants it but its own ask (see grantHeads): ask soon, as it may hold up
			// the queue behind it.
			rep.RetryIn = min(rep.RetryIn, unheardRetry)
		}
	}
	if len(req.Behind) > 0 {
		rep.Behind = toks[1:]
	}
	rep.Paused, rep.Pause, rep.LongestTTL = st.pause(now)
	rep.Queued, rep.Free = int64(len(st.queue)), req.Lease.Capacity-st.held
	return rep, pushes, grants
}

// checkBehind refuses Behind without a wait that pushes, or longer than MaxBehind.
func checkBehind(req AcquireRequest) error {
	switch {
	case len(req.Behind) == 0:
		return nil
	case !req.Wait || !req.Push:
		return errors.New("fleet: Acquire: Behind needs Wait and Push")
	case len(req.Behind) > MaxBehind:
		return fmt.Errorf("fleet: Acquire: %d requests behind, above the maximum %d", len(req.Behind), MaxBehind)
	}
	return nil
}

// Renew implements [Backend].
func (m *Memory) Renew(ctx context.Context, req RenewRequest) (RenewReply, error) {
	m.check("Renew")
	if err := m.enter(ctx); err != nil {
		return RenewReply{}, err
	}
	now, ttl := m.nowLocked(), micros(req.TTL)
	st := m.state(req.Name, now, ttl, micros(req.LongestTTL), true)
	st.tok = max(st.tok, req.Seen)
	m.purge(req.Name, st, now)
	status := make([]LeaseStatus, 0, len(req.Leases)+len(req.Register))
	for _, l := range req.Leases {
		switch have := st.leases[l.ID]; {
		case have != nil:
			have.exp = now + ttl
			status = append(status, LeaseRenewed)
		case l.Epoch != st.born && st.held+l.N <= l.Capacity:
			// Granted before the data was lost, and still running: take it back in, and keep
			// new tokens above its own.
			st.register(l, now+ttl)
			status = append(status, LeaseReregistered)
		default:
			status = append(status, LeaseLost)
		}
	}
	for _, l := range req.Register {
		if have := st.leases[l.ID]; have != nil {
			have.exp = now + ttl
			status = append(status, LeaseRenewed)
			continue
		}
		st.register(l, now+ttl) // whatever the capacity: new admissions wait for it
		status = append(status, LeaseReregistered)
	}
	rep := RenewReply{Epoch: st.born, Status: status}
	rep.Paused, rep.Pause, rep.LongestTTL = st.pause(now)
	pushes, grants := m.grantHeads(req.Name, st, now, nil, nil)
	if err := m.leave(ctx, req.Name, pushes, grants); err != nil {
		return RenewReply{}, err
	}
	return rep, nil
}

func (st *memState) register(l Lease, exp int64) {
	st.held += l.N
	st.leases[l.ID] = &memLease{n: l.N, capacity: l.Capacity, token: l.Token, exp: exp}
	st.tok = max(st.tok, l.Token)
}

// Release implements [Backend]. It removes both the lease and the queue entry of each ID,
// grants the queue's heads that fit now, and then makes req.Then's Acquire.
func (m *Memory) Release(ctx context.Context, req ReleaseRequest) (ReleaseReply, error) {
	m.check("Release")
	if req.Then != nil {
		if err := checkBehind(*req.Then); err != nil {
			return ReleaseReply{}, err
		}
	}
	if err := m.enter(ctx); err != nil {
		return ReleaseReply{}, err
	}
	now := m.nowLocked()
	var st *memState
	if req.Then != nil {
		st = m.state(req.Name, now, micros(req.Then.TTL), micros(req.Then.LongestTTL), true)
	} else {
		st = m.state(req.Name, now, 0, 0, false)
	}
	var capacity int64
	if len(req.Leases) > 0 {
		capacity = req.Leases[0].Capacity
	}
	if st == nil {
		return ReleaseReply{Free: capacity}, m.leave(ctx, req.Name, nil, nil)
	}
	m.purge(req.Name, st, now)
	for _, l := range req.Leases {
		if have := st.leases[l.ID]; have != nil {
			st.held -= have.n
			delete(st.leases, l.ID)
		}
		if i := st.find(l.ID); i >= 0 {
			st.queue = slices.Delete(st.queue, i, i+1)
		}
	}
	pushes, grants := m.grantHeads(req.Name, st, now, nil, nil)
	var rep ReleaseReply
	if req.Then != nil {
		var p []*memEntry
		var g []Lease
		rep.Then, p, g = m.ask(st, now, *req.Then)
		pushes, grants = append(pushes, p...), append(grants, g...)
		rep.Queued, rep.Free = rep.Then.Queued, rep.Then.Free
	} else {
		rep.Queued, rep.Free = int64(len(st.queue)), capacity-st.held
	}
	if err := m.leave(ctx, req.Name, pushes, grants); err != nil {
		return ReleaseReply{}, err
	}
	return rep, nil
}

// Subscribe implements [Backend]. deliver is called on the goroutine whose call made the grant,
// after the backend's lock is released.
func (m *Memory) Subscribe(ctx context.Context, name, inst string, deliver func(Lease)) (func(), error) {
	m.check("Subscribe")
	if deliver == nil {
		panic("fleet: Subscribe: nil deliver function")
	}
	if err := m.enter(ctx); err != nil {
		return nil, err
	}
	s, k := &memSub{deliver: deliver}, subKey{name, inst}
	if m.subs[k] == nil {
		m.subs[k] = make(map[*memSub]struct{})
	}
	m.subs[k][s] = struct{}{}
	if err := m.leave(ctx, name, nil, nil); err != nil {
		m.unsubscribe(k, s)
		return nil, err
	}
	var once sync.Once
	return func() { once.Do(func() { m.unsubscribe(k, s) }) }, nil
}

func (m *Memory) unsubscribe(k subKey, s *memSub) {
	m.mu.Lock()
	delete(m.subs[k], s)
	if len(m.subs[k]) == 0 {
		delete(m.subs, k)
	}
	m.mu.Unlock()
}

// Reserve implements [Backend], on internal/gcra's bucket, on the backend's clock.
func (m *Memory) Reserve(ctx context.Context, req RateRequest) (RateReply, error) {
	m.check("Reserve")
	if !(req.PerSecond > 0) || req.Burst < 1 {
		return RateReply{}, fmt.Errorf("fleet: Reserve: bad rate %v, burst %d", req.PerSecond, req.Burst)
	}
	if err := m.enter(ctx); err != nil {
		return RateReply{}, err
	}
	defer m.mu.Unlock()
	b := m.rates[req.Name]
	if b == nil {
		b = new(gcra.Bucket)
		m.rates[req.Name] = b
	}
	maxWait := req.MaxWait
	if maxWait < 0 {
		maxWait = -1
	}
	ok, delay, mark := b.Reserve(gcra.NewRate(req.PerSecond, req.Burst), m.clockLocked(), maxWait)
	reply := RateReply{OK: ok, Delay: delay}
	if ok {
		reply.Mark = strconv.FormatInt(mark, 10)
	}
	return reply, nil
}

// clockLocked is the backend's clock as the rate buckets read it: nanoseconds, never below zero.
func (m *Memory) clockLocked() time.Duration {
	return time.Duration(max(time.Now().Add(m.skew).UnixNano(), 0))
}

// CancelReservation implements [Backend].
func (m *Memory) CancelReservation(ctx context.Context, req RateCancel) error {
	m.check("CancelReservation")
	mark, err := strconv.ParseInt(req.Mark, 10, 64)
	if err != nil || !(req.PerSecond > 0) || req.Burst < 1 {
		return fmt.Errorf("fleet: CancelReservation: bad reservation %q (rate %v, burst %d)", req.Mark, req.PerSecond, req.Burst)
	}
	if err := m.enter(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	if b := m.rates[req.Name]; b != nil {
		b.Cancel(gcra.NewRate(req.PerSecond, req.Burst), m.clockLocked(), mark)
	}
	return nil
}
