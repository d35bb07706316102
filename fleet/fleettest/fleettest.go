// Package fleettest is the conformance kit of package fleet's backends: [TestBackend] runs the
// fleet's guarantees — the bound, crashes, FIFO order, release by lease, wake-ups, round trips, a
// backend restarted without its data, restored from an older snapshot, or frozen, and the rate
// bucket — against one backend, through fleet's Semaphores and Rates, on the real clock, as
// testing/fstest.TestFS does for a file system. Every backend runs the same kit: the in-memory
// one (fleet.NewMemory) and the Redis one (fleet/redisfleet).
//
//	func TestConformance(t *testing.T) {
//		fleettest.TestBackend(t, fleettest.Harness{
//			Process: func(t *testing.T) fleetdriver.Backend { return myBackend(t) },
//			Restart: func(t *testing.T) { restartMyServer(t) },
//		})
//	}
//
// Each case runs in parallel with the others, on a name of its own, with a lease of one second.
package fleettest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goloom/loom/fleet"
	"github.com/goloom/loom/fleet/fleetdriver"
)

// A Harness gives the kit the processes of a fleet on one backend, and the backend's faults.
type Harness struct {
	// Process returns the backend as one more process of the fleet sees it: for a remote
	// backend, a client with connections of its own. Required.
	Process func(t *testing.T) fleetdriver.Backend
	// Restart restarts the backend losing all its data, as a server without persistence.
	// Optional: without it, the cases that need it are skipped.
	Restart func(t *testing.T)
	// Rewind takes a copy of the backend's state now and returns a function that restarts the
	// backend with that copy: a state that went back in time (an older RDB snapshot). Optional.
	Rewind func(t *testing.T) (restore func())
	// Freeze stops the backend from answering (its connections stay open, as under SIGSTOP) and
	// returns a function that lets it go on. Optional.
	Freeze func(t *testing.T) (thaw func())
}

// TTL is the lease every case uses: the shortest fleet allows, so that expiries come soon.
const TTL = fleet.MinLease

// TestBackend runs every case of the kit against the backend of h.
func TestBackend(t *testing.T, h Harness) {
	if h.Process == nil {
		t.Fatal("fleettest: Harness.Process is required")
	}
	k := &kit{h: h}
	for _, c := range []struct {
		name string
		run  func(*testing.T)
		need any
	}{
		{"AcquireRelease", k.acquireRelease, nil},
		{"Bound", k.bound, nil},
		{"Crash", k.crash, nil},
		{"DeadWaiter", k.deadWaiter, nil},
		{"FIFO", k.fifo, nil},
		{"Behind", k.behind, nil},
		{"TokensUnique", k.tokensUnique, nil},
		{"ReleaseByLease", k.releaseByLease, nil},
		{"WakeUp", k.wakeUp, nil},
		{"RoundTrips", k.roundTrips, nil},
		{"Rate", k.rate, nil},
		{"Restart", k.restart, h.Restart},
		{"RestartMixedTTLs", k.restartMixedTTLs, h.Restart},
		{"Rewind", k.rewind, h.Rewind},
		{"Freeze", k.freeze, h.Freeze},
	} {
		t.Run(c.name, func(t *testing.T) {
			switch f := c.need.(type) {
			case func(*testing.T):
				if f == nil {
					t.Skip("the harness has no Restart")
				}
			case func(*testing.T) func():
				if f == nil {
					t.Skip("the harness has no such fault")
				}
			}
			// A fault of the whole backend runs alone: these cases run one after the other, and
			// the rest, in parallel, only once they are done (parallel subtests wait for the
			// loop to end).
			if c.need == nil {
				t.Parallel()
			}
			c.run(t)
		})
	}
}

type kit struct {
	h     Harness
	names atomic.Int64
}

// name returns a name no other case uses.
func (k *kit) name(t *testing.T) string {
	n := fmt.Sprintf("fleettest-%d-%s", k.names.Add(1), t.Name())
	return n[:min(len(n), fleet.MaxName)]
}

// process returns a Semaphore of one more process, closed when the test ends; kill ends that
// process as a crash would: its calls fail and its subscriptions end, as a dead process's
// connections close.
func (k *kit) process(t *testing.T, name string, capacity int64, opts ...fleet.Option) (s *fleet.Semaphore, kill func()) {
	t.Helper()
	b, kill := Killable(k.h.Process(t))
	s = fleet.New(b, name, capacity, append([]fleet.Option{fleet.WithLease(TTL), fleet.WithLogger(nil)}, opts...)...)
	t.Cleanup(func() { _ = s.Close() })
	return s, kill
}

// warm takes a new name past the pause its first use may cost (one TTL).
func warm(t *testing.T, s *fleet.Semaphore) {
	t.Helper()
	p, err := s.AcquireTimeout(t.Context(), 1, 10*TTL)
	if err != nil {
		t.Fatalf("warm-up: %v", err)
	}
	p.Release()
}

func acquire(t *testing.T, s *fleet.Semaphore, n int64) *fleet.Permit {
	t.Helper()
	p, err := s.AcquireTimeout(t.Context(), n, 10*TTL)
	if err != nil {
		t.Fatalf("Acquire(%d): %v", n, err)
	}
	return p
}

type result struct {
	p   *fleet.Permit
	err error
}

func acquireAsync(ctx context.Context, s *fleet.Semaphore, n int64) <-chan result {
	ch := make(chan result, 1)
	go func() {
		p, err := s.Acquire(ctx, n)
		ch <- result{p, err}
	}()
	return ch
}

// queued waits until s's head has asked the backend and been told to wait (a request, then the
// subscription, then the request again): it has arrived in the fleet's queue.
func queued(t *testing.T, s *fleet.Semaphore, before int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.Stats().RoundTrips < before+3 {
		if time.Now().After(deadline) {
			t.Fatalf("the waiter never reached the backend's queue: %+v", s.Stats())
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(10 * time.Millisecond) // its second request is answered
}

func (k *kit) acquireRelease(t *testing.T) {
	name := k.name(t)
	s, _ := k.process(t, name, 3)
	warm(t, s)
	p := acquire(t, s, 2)
	if p.N() != 2 || p.Degraded() || p.Token() == 0 || p.Context().Err() != nil {
		t.Errorf("a granted permit: N %d, degraded %v, token %d, ctx %v", p.N(), p.Degraded(), p.Token(), p.Context().Err())
	}
	if _, err := s.AcquireTimeout(t.Context(), 2, 0); !errors.Is(err, fleet.ErrTimeout) {
		t.Errorf("2 more of 3 with 2 held: %v, want ErrTimeout", err)
	}
	q := acquire(t, s, 1)
	if q.Token() <= p.Token() {
		t.Errorf("tokens %d then %d: not increasing", p.Token(), q.Token())
	}
	p.Release()
	p.Release() // idempotent
	if !errors.Is(context.Cause(p.Context()), context.Canceled) {
		t.Errorf("a released permit's cause: %v", context.Cause(p.Context()))
	}
	r := acquire(t, s, 2)
	r.Release()
	q.Release()
	st := s.Stats()
	if st.Held != 0 || st.Acquired != st.Released || !st.PausedUntil.IsZero() {
		t.Errorf("at rest: %+v", st)
	}
}

// bound: three processes of four workers, random weights, never more than the capacity at once.
func (k *kit) bound(t *testing.T) {
	name := k.name(t)
	const capacity = 4
	var sems []*fleet.Semaphore
	for range 3 {
		s, _ := k.process(t, name, capacity)
		sems = append(sems, s)
	}
	warm(t, sems[0])
	var inUse, most, grants atomic.Int64
	stop := time.Now().Add(time.Second)
	var wg sync.WaitGroup
	for i, s := range sems {
		for w := range 4 {
			rng := rand.New(rand.NewPCG(uint64(i), uint64(w)))
			wg.Go(func() {
				for time.Now().Before(stop) {
					n := 1 + rng.Int64N(2)
					p, err := s.AcquireTimeout(t.Context(), n, 10*TTL)
					if err != nil {
						t.Errorf("Acquire: %v", err)
						return
					}
					now := inUse.Add(n)
					for old := most.Load(); now > old && !most.CompareAndSwap(old, now); old = most.Load() {
					}
					grants.Add(1)
					time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
					inUse.Add(-n)
					p.Release()
				}
			})
		}
	}
	wg.Wait()
	t.Logf("%d grants, at most %d of %d in use", grants.Load(), most.Load(), capacity)
	if most.Load() > capacity {
		t.Errorf("%d permits in use at once, capacity %d", most.Load(), capacity)
	}
	if most.Load() < capacity-1 {
		t.Errorf("at most %d of %d permits were ever in use", most.Load(), capacity)
	}
}

// crash: a process killed while it holds a permit frees it within one TTL.
func (k *kit) crash(t *testing.T) {
	name := k.name(t)
	holder, kill := k.process(t, name, 1)
	other, _ := k.process(t, name, 1)
	warm(t, other)
	acquire(t, holder, 1)
	got := acquireAsync(t.Context(), other, 1)
	t0 := time.Now()
	kill()
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	took := time.Since(t0)
	t.Logf("a dead holder's permit came back after %v (lease %v)", took, TTL)
	if took > 10*TTL {
		t.Errorf("a dead holder's permit came back after %v, lease %v", took, TTL)
	}
	r.p.Release()
}

// deadWaiter: a killed process's queued waiter, at the head of the queue, holds up the others
// for a second at most, whatever its lease TTL (here a minute).
func (k *kit) deadWaiter(t *testing.T) {
	name := k.name(t)
	holder, _ := k.process(t, name, 1)
	dead, kill := k.process(t, name, 1, fleet.WithLease(time.Minute))
	live, _ := k.process(t, name, 1)
	warm(t, holder)
	p := acquire(t, holder, 1)
	before := dead.Stats().RoundTrips
	_ = acquireAsync(t.Context(), dead, 1)
	queued(t, dead, before)
	before = live.Stats().RoundTrips
	got := acquireAsync(t.Context(), live, 1)
	queued(t, live, before)
	kill()
	t0 := time.Now()
	p.Release()
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	took := time.Since(t0)
	t.Logf("served %v after the release, behind a dead waiter", took)
	if took > 2*time.Second {
		t.Errorf("a dead waiter held up the queue for %v (at most a second, and slack)", took)
	}
	r.p.Release()
}

// fifo: waiters of four processes, weighted, are served in their order of arrival, and a small
// request behind a large one does not pass it.
func (k *kit) fifo(t *testing.T) {
	name := k.name(t)
	holder, _ := k.process(t, name, 3)
	warm(t, holder)
	p := acquire(t, holder, 3)
	weights := []int64{2, 1, 3, 1}
	var got []<-chan result
	for _, n := range weights {
		s, _ := k.process(t, name, 3)
		before := s.Stats().RoundTrips
		got = append(got, acquireAsync(t.Context(), s, n))
		queued(t, s, before)
	}
	p.Release()
	var tokens []uint64
	for i := range weights {
		r := <-got[i]
		if r.err != nil {
			t.Fatalf("waiter %d: %v", i, r.err)
		}
		tokens = append(tokens, r.p.Token())
		time.Sleep(TTL / 2) // the waiters behind ask again meanwhile: none may pass the head
		r.p.Release()
	}
	if !slices.IsSorted(tokens) {
		t.Errorf("granted out of arrival order: tokens %v", tokens)
	}
}

// behind: a request that names the waiters behind its asker in their process queues them in that
// order, right behind it, before a request that comes later from another process; they are granted
// in that order as permits free (the grants pushed to the asker's instance, each with its own
// token), and asked about again they are answered with their grants.
func (k *kit) behind(t *testing.T) {
	name := k.name(t)
	holder, _ := k.process(t, name, 3)
	warm(t, holder)
	p := acquire(t, holder, 3)
	b := k.h.Process(t)
	pushed := make(chan fleetdriver.Lease, 16)
	stop, err := b.Subscribe(t.Context(), name, "bk", func(l fleetdriver.Lease) {
		if l.ID != "" {
			pushed <- l
		}
	})
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	defer stop()
	lease := func(i int) fleetdriver.Lease {
		return fleetdriver.Lease{ID: fmt.Sprintf("bk.%d", i), N: 1, Capacity: 3}
	}
	req := fleetdriver.AcquireRequest{Name: name, Lease: lease(1), TTL: TTL, Wait: true, Heartbeat: time.Minute,
		Push: true, Behind: []fleetdriver.Lease{lease(2), lease(3)}}
	rep, err := b.Acquire(t.Context(), req)
	if err != nil || rep.Granted || len(rep.Behind) != 2 || rep.Behind[0] != 0 || rep.Behind[1] != 0 || rep.Queued != 3 {
		t.Fatalf("three queued behind a full name: %+v, %v", rep, err)
	}
	late, _ := k.process(t, name, 3)
	before := late.Stats().RoundTrips
	got := acquireAsync(t.Context(), late, 1)
	queued(t, late, before)
	p.Release()
	var tokens []uint64
	for i := 1; i <= 3; i++ {
		select {
		case g := <-pushed:
			if g.ID != lease(i).ID || g.Token == 0 {
				t.Fatalf("grant %d pushed: %+v, want %s first", i, g, lease(i).ID)
			}
			tokens = append(tokens, g.Token)
		case <-time.After(10 * TTL):
			t.Fatalf("grant %d never pushed", i)
		}
	}
	if !slices.IsSorted(tokens) || tokens[0] == tokens[2] {
		t.Errorf("tokens %v: not one each, in order", tokens)
	}
	select {
	case r := <-got:
		t.Fatalf("a later request passed the waiters named before it: %v %v", r.p, r.err)
	case <-time.After(TTL / 4):
	}
	again, err := b.Acquire(t.Context(), req)
	if err != nil || !again.Granted || len(again.Behind) != 2 || again.Behind[0] == 0 || again.Behind[1] == 0 {
		t.Errorf("asked again after their grants: %+v, %v", again, err)
	}
	if _, err := b.Release(t.Context(), fleetdriver.ReleaseRequest{Name: name, Leases: []fleetdriver.Lease{lease(1)}}); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.p.Token() <= tokens[2] {
		t.Errorf("token %d after %v", r.p.Token(), tokens)
	}
	r.p.Release()
	if _, err := b.Release(t.Context(), fleetdriver.ReleaseRequest{Name: name, Leases: []fleetdriver.Lease{lease(2), lease(3)}}); err != nil {
		t.Fatal(err)
	}
}

// tokensUnique: leases granted in one call each get a token of their own — here a queued
// request that asks again once the holder's leases have expired is granted, and the same call
// grants the two requests queued behind it (pushed). (regression: the Redis backend answered
// its asker with the token of the last lease it pushed: two holders with one fencing token.)
func (k *kit) tokensUnique(t *testing.T) {
	name := k.name(t)
	holder, kill := k.process(t, name, 3)
	warm(t, holder)
	for range 3 {
		acquire(t, holder, 1)
	}
	b := k.h.Process(t)
	pushed := make(chan fleetdriver.Lease, 8)
	stop, err := b.Subscribe(t.Context(), name, "tu", func(l fleetdriver.Lease) {
		if l.ID != "" {
			pushed <- l
		}
	})
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	defer stop()
	req := func(i int) fleetdriver.AcquireRequest {
		return fleetdriver.AcquireRequest{Name: name, Lease: fleetdriver.Lease{ID: fmt.Sprintf("tu.%d", i), N: 1, Capacity: 3},
			TTL: TTL, Wait: true, Heartbeat: time.Minute, Push: true}
	}
	for i := 1; i <= 3; i++ {
		if rep, err := b.Acquire(t.Context(), req(i)); err != nil || rep.Granted {
			t.Fatalf("request %d on a full name: %+v, %v", i, rep, err)
		}
	}
	kill() // its leases expire within a TTL, and nothing grants the queue until it is asked
	var rep fleetdriver.AcquireReply
	for deadline := time.Now().Add(10 * TTL); !rep.Granted; time.Sleep(TTL / 20) {
		if time.Now().After(deadline) {
			t.Fatal("the queue's head never granted")
		}
		if rep, err = b.Acquire(t.Context(), req(1)); err != nil {
			t.Fatal(err)
		}
	}
	tokens := map[uint64]string{rep.Token: "tu.1"}
	for range 2 {
		select {
		case g := <-pushed:
			if other, dup := tokens[g.Token]; dup {
				t.Errorf("token %d granted to %s and %s", g.Token, other, g.ID)
			}
			tokens[g.Token] = g.ID
		case <-time.After(10 * TTL):
			t.Fatalf("the requests behind the head were never granted (tokens so far %v)", tokens)
		}
	}
	leases := []fleetdriver.Lease{req(1).Lease, req(2).Lease, req(3).Lease}
	if _, err := b.Release(t.Context(), fleetdriver.ReleaseRequest{Name: name, Leases: leases}); err != nil {
		t.Fatal(err)
	}
}

// releaseByLease: a Release after the lease was lost takes nothing from the next holder.
func (k *kit) releaseByLease(t *testing.T) {
	name := k.name(t)
	holder, kill := k.process(t, name, 2)
	other, _ := k.process(t, name, 2)
	warm(t, other)
	p := acquire(t, holder, 2)
	kill() // cannot renew: it expires
	q := acquire(t, other, 2)
	p.Release()
	p.Release()
	if _, err := other.AcquireTimeout(t.Context(), 1, 0); !errors.Is(err, fleet.ErrTimeout) {
		t.Errorf("after a late Release of a lost lease: %v, want ErrTimeout (the new holder keeps its 2)", err)
	}
	q.Release()
}

// wakeUp: a waiter is served within milliseconds of a release in another process.
func (k *kit) wakeUp(t *testing.T) {
	name := k.name(t)
	holder, _ := k.process(t, name, 1)
	waiter, _ := k.process(t, name, 1)
	warm(t, holder)
	var waits []time.Duration
	for range 10 {
		p := acquire(t, holder, 1)
		before := waiter.Stats().RoundTrips
		got := acquireAsync(t.Context(), waiter, 1)
		queued(t, waiter, before)
		t0 := time.Now()
		p.Release()
		r := <-got
		if r.err != nil {
			t.Fatal(r.err)
		}
		waits = append(waits, time.Since(t0))
		r.p.Release()
	}
	slices.Sort(waits)
	t.Logf("wake-up after a release elsewhere: median %v, max %v", waits[len(waits)/2], waits[len(waits)-1])
	if waits[len(waits)/2] > 500*time.Millisecond { // 50 ms promised; slack for a loaded machine
		t.Errorf("median wake-up %v", waits[len(waits)/2])
	}
}

// roundTrips: one per uncontended Acquire and Release; a queued waiter needs none of its own to
// learn of its grant; renewal is one per TTL/3 for all leases.
func (k *kit) roundTrips(t *testing.T) {
	name := k.name(t)
	s, _ := k.process(t, name, 100)
	warm(t, s)
	before := s.Stats().RoundTrips
	p := acquire(t, s, 1)
	p.Release()
	if d := s.Stats().RoundTrips - before; d != 2 {
		t.Errorf("uncontended Acquire and Release: %d round trips, want 2", d)
	}
	var held []*fleet.Permit
	for range 20 {
		held = append(held, acquire(t, s, 1))
	}
	before = s.Stats().RoundTrips
	time.Sleep(TTL)
	if d := s.Stats().RoundTrips - before; d < 2 || d > 4 {
		t.Errorf("%d renewals in one TTL for 20 leases, want about 3", d)
	}
	for _, p := range held {
		p.Release()
	}
}

// rate: a shared bucket gives its burst at once, refuses early without taking, and takes a
// cancelled token back.
func (k *kit) rate(t *testing.T) {
	name := k.name(t)
	r1 := fleet.NewRate(k.h.Process(t), name, 1, 3, fleet.WithLogger(nil))
	r2 := fleet.NewRate(k.h.Process(t), name, 1, 3, fleet.WithLogger(nil))
	for i := range 3 {
		r := []*fleet.Rate{r1, r2}[i%2]
		if ok, err := r.Allow(t.Context()); err != nil || !ok {
			t.Fatalf("token %d of the burst: %v %v", i, ok, err)
		}
	}
	if ok, err := r1.Allow(t.Context()); err != nil || ok {
		t.Fatalf("beyond the burst: %v %v", ok, err)
	}
	res, err := r2.Reserve(t.Context(), time.Millisecond)
	if err != nil || res.OK() || res.Delay() <= 0 || res.Delay() > time.Second {
		t.Fatalf("a token too late: ok %v delay %v err %v", res.OK(), res.Delay(), err)
	}
	res, err = r2.Reserve(t.Context(), -1)
	if err != nil || !res.OK() {
		t.Fatalf("Reserve: %v", err)
	}
	res.Cancel()
	again, err := r1.Reserve(t.Context(), -1)
	if err != nil || !again.OK() || again.Delay() > res.Delay()+500*time.Millisecond {
		t.Errorf("after a cancel the next waits %v (the cancelled one %v): not given back", again.Delay(), res.Delay())
	}
}

// restart: data lost, held leases register again, nothing new for a TTL, tokens grow, the pause
// shows in Stats.
func (k *kit) restart(t *testing.T) {
	name := k.name(t)
	a, _ := k.process(t, name, 3)
	b, _ := k.process(t, name, 3)
	warm(t, a)
	p1, p2 := acquire(t, a, 1), acquire(t, a, 1)
	k.h.Restart(t)
	t0 := time.Now()
	got := acquireAsync(t.Context(), b, 1)
	deadline := time.Now().Add(10 * time.Second)
	for b.Stats().PausedUntil.IsZero() && a.Stats().PausedUntil.IsZero() {
		if time.Now().After(deadline) {
			t.Fatal("no Semaphore shows the pause after the loss")
		}
		time.Sleep(time.Millisecond)
	}
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	waited := time.Since(t0)
	t.Logf("after the restart a new permit came after %v (lease %v)", waited, TTL)
	if waited < TTL-50*time.Millisecond {
		t.Errorf("admitted %v after the loss, before one TTL", waited)
	}
	if r.p.Token() <= max(p1.Token(), p2.Token()) {
		t.Errorf("token %d after %d and %d: not increasing across the loss", r.p.Token(), p1.Token(), p2.Token())
	}
	if p1.Context().Err() != nil || p2.Context().Err() != nil {
		t.Errorf("held leases lost across the restart: %v %v", context.Cause(p1.Context()), context.Cause(p2.Context()))
	}
	if _, err := b.AcquireTimeout(t.Context(), 1, 0); !errors.Is(err, fleet.ErrTimeout) {
		t.Errorf("a fourth permit of 3: %v", err)
	}
	r.p.Release()
	p1.Release()
	p2.Release()
}

// restartMixedTTLs: after a loss, the pause covers the longest lease in use, not the TTL of
// whoever asks first.
func (k *kit) restartMixedTTLs(t *testing.T) {
	name := k.name(t)
	long, _ := k.process(t, name, 1, fleet.WithLease(5*time.Second))
	short, _ := k.process(t, name, 1)
	warm(t, short)
	p := acquire(t, long, 1)
	if _, err := short.AcquireTimeout(t.Context(), 1, 0); !errors.Is(err, fleet.ErrTimeout) {
		t.Fatalf("capacity 1 held: %v", err)
	}
	k.h.Restart(t)
	if _, err := short.AcquireTimeout(t.Context(), 1, 3*time.Second); !errors.Is(err, fleet.ErrTimeout) {
		t.Errorf("admitted beside a live 5 s lease after the loss: %v", err)
	}
	if p.Context().Err() != nil {
		t.Errorf("the long lease was lost: %v", context.Cause(p.Context()))
	}
	p.Release()
}

// rewind: a state from an older snapshot lacks a lease still held; nothing is admitted beside it.
func (k *kit) rewind(t *testing.T) {
	name := k.name(t)
	a, _ := k.process(t, name, 2)
	b, _ := k.process(t, name, 2)
	warm(t, a)
	p1 := acquire(t, a, 1)
	restore := k.h.Rewind(t)
	p2 := acquire(t, a, 1)
	restore()
	if _, err := b.AcquireTimeout(t.Context(), 1, 3*TTL); !errors.Is(err, fleet.ErrTimeout) {
		t.Errorf("admitted beside two live permits of 2 after a restore: %v", err)
	}
	if p1.Context().Err() != nil || p2.Context().Err() != nil || a.Stats().LeasesLost != 0 {
		t.Errorf("held leases lost across the restore: %v %v", context.Cause(p1.Context()), context.Cause(p2.Context()))
	}
	p2.Release()
	q := acquire(t, b, 1)
	if q.Token() <= p2.Token() {
		t.Errorf("token %d after %d: not increasing across the restore", q.Token(), p2.Token())
	}
	q.Release()
	p1.Release()
}

// freeze: a frozen backend costs a timed Acquire its time, and a grant that comes after the
// caller left is given back.
func (k *kit) freeze(t *testing.T) {
	name := k.name(t)
	s, _ := k.process(t, name, 1)
	other, _ := k.process(t, name, 1)
	warm(t, s)
	thaw := k.h.Freeze(t)
	t0 := time.Now()
	_, err := s.AcquireTimeout(t.Context(), 1, 250*time.Millisecond)
	took := time.Since(t0)
	thaw()
	if !errors.Is(err, fleet.ErrTimeout) {
		t.Errorf("AcquireTimeout on a frozen backend: %v, want ErrTimeout", err)
	}
	t.Logf("AcquireTimeout(250ms) on a frozen backend returned after %v", took)
	if took > 2500*time.Millisecond {
		t.Errorf("AcquireTimeout(250ms) on a frozen backend returned after %v", took)
	}
	// Whatever the frozen backend did with the request once it went on, nothing stays held.
	p, err := other.AcquireTimeout(t.Context(), 1, 10*TTL)
	if err != nil {
		t.Fatalf("after the thaw: %v", err)
	}
	p.Release()
}
