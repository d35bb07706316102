package fleet

import (
	"context"
	"slices"
	"time"

	"github.com/goloom/loom/fleet/fleetdriver"
)

// The line is this process's queue of Acquires, in arrival order. Its first waiter, the head, is
// the only one that talks to the backend: for itself, and, through Behind, for the waiters after
// it, so that each of them takes its place in the fleet's queue when it arrives (at the head's
// next request, or the next release it rides on) rather than when it becomes the head. The
// backend then grants them as they reach the head of the fleet's queue, and a grant that comes
// for a waiter behind the head is held for it, as a Permit, until it heads the line. The line's
// invariants, kept under s.mu:
//   - Grants are handed out in the line's order: a grant goes to the first waiter of the line
//     that waits for one of the same weight (see assignLocked), whatever order the backend made
//     them in. So no waiter returns before one that arrived earlier in its process (FIFO within a
//     process), and a grant held for a later waiter never waits for an earlier one that could use
//     it.
//   - Every waiter has its own entry (a lease ID) until its grant is handed to it; byID maps each
//     entry's ID to its waiter. An entry a request has named may live on the backend (queued, or
//     granted): when its waiter leaves without it, it is given back.
//   - A Permit held for a waiter (waiter.permit, forWaiter set) is a live lease of this process,
//     renewed with the others; it is given back if its waiter leaves without it.

// A waiter is one Acquire in its Semaphore's line, from its arrival until it returns.
type waiter struct {
	n    int64
	head chan struct{}     // closed when the waiter heads the line
	got  chan grantMessage // its grant, once, while it heads the line and asks (see assignLocked)
	// Guarded by s.mu:
	e       *entry  // its request as the backend knows it; nil once its grant is handed to it
	asking  bool    // it heads the line and listens on got
	granted bool    // a grant was assigned to it: held in permit, or sent on got
	permit  *Permit // granted while it waited behind the head, held for it
}

// An entry is one request for a lease as the backend knows it: an ID (made by the Semaphore,
// unique across the fleet), and, once a request has named it, its place in the fleet's queue.
type entry struct {
	lease fleetdriver.Lease
	sent  bool // a request named it: the backend may know it (queued, or granted)
	// listed is when a request last named it; zero: never, or that request failed, so that the
	// next names it again.
	listed time.Time
	// safe is a time before any grant of it, on this process's clock: the time of the first
	// request that named it (the backend cannot grant it before it hears of it), then of the
	// latest request whose reply said it was still queued. A grant's lease expires on the backend
	// a TTL after the grant, so a deadline counted from safe is never later than the backend's.
	safe time.Time
}

// A grantMessage is a grant assigned to the head: the lease (of its entry) and the time before
// it that its deadline counts from.
type grantMessage struct {
	lease fleetdriver.Lease
	safe  time.Time
}

// newEntry returns an entry with a new lease ID for n permits.
func (s *Semaphore) newEntry(n int64) *entry {
	return &entry{lease: fleetdriver.Lease{ID: s.inst + "." + s.nextSeq(), N: n, Capacity: s.capacity}}
}

// join puts a new waiter for w's permits at the end of the line; it heads the line at once if the
// line was empty. A wait that may not queue (tryOnce) joins only an empty line: nil otherwise.
func (s *Semaphore) join(w *wait) *waiter {
	me := &waiter{n: w.n, head: make(chan struct{}), got: make(chan grantMessage, 1), e: s.newEntry(w.n)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if w.tryOnce && len(s.line) > 0 {
		return nil
	}
	s.line = append(s.line, me)
	s.byID[me.e.lease.ID] = me
	if len(s.line) == 1 {
		close(me.head)
	} else {
		s.nudgeLocked() // the head may name it in its next request (or the next release's ride)
	}
	return me
}

// nudgeLocked tells the head to look again: new waiters to name, or grants that may have been
// missed. s.mu is held.
func (s *Semaphore) nudgeLocked() {
	select {
	case s.nudge <- struct{}{}:
	default:
	}
}

// leave takes me out of the line, whatever its wait came to, and lets the next waiter head the
// line. What me leaves behind is given back, in the background: a grant held for it, a grant sent
// to it that it did not take, and its entry if a request named it (queued on the backend, or
// granted with the reply or push still on its way).
func (s *Semaphore) leave(me *waiter) {
	var back []fleetdriver.Lease
	s.mu.Lock()
	if i := slices.Index(s.line, me); i >= 0 {
		s.line = slices.Delete(s.line, i, i+1)
		if i == 0 && len(s.line) > 0 {
			close(s.line[0].head)
		}
	}
	me.asking = false
	if p := me.permit; p != nil {
		me.permit = nil
		if s.leases[p.lease.ID] == p {
			s.dropLeaseLocked(p, context.Canceled) // held for a waiter that left without it
			back = append(back, p.lease)
		}
	}
	select {
	case g := <-me.got:
		back = append(back, g.lease)
	default:
	}
	if e := me.e; e != nil && e.sent {
		back = append(back, e.lease)
	}
	s.dropEntryLocked(me)
	s.mu.Unlock()
	if len(back) > 0 {
		s.retry(back, time.Now().Add(s.cfg.ttl))
	}
}

// takeOrAsk, once me heads the line, hands it the permit held for it if there is one (reporting
// true); else me becomes the asking head, to which grants now go on me.got.
func (s *Semaphore) takeOrAsk(me *waiter) (*Permit, bool) {
	var lost *Permit
	s.mu.Lock()
	defer func() {
		s.mu.Unlock()
		if lost != nil {
			lost.giveDegr()
		}
	}()
	if p := me.permit; p != nil {
		me.permit = nil
		live := s.leases[p.lease.ID] == p
		if live && time.Now().Before(p.deadline) {
			p.forWaiter = false
			s.dropEntryLocked(me)
			s.count.acquired.Add(1)
			return p, true
		}
		// Lost while it was held (not renewed in time): ask anew, with a new entry.
		if live {
			s.loseLocked(p)
			lost = p
		}
		me.granted = false
		s.renameLocked(me, s.newEntry(me.n))
	}
	me.asking = true
	return nil, false
}

// renameLocked gives me the entry e in place of its own. s.mu is held.
func (s *Semaphore) renameLocked(me *waiter, e *entry) {
	s.dropEntryLocked(me)
	me.e = e
	s.byID[e.lease.ID] = me
}

// dropEntryLocked ends me's entry: byID forgets it (if it still maps to me), and me has none.
// Every way a waiter's entry ends comes here, so that byID holds only live entries. s.mu is held.
func (s *Semaphore) dropEntryLocked(me *waiter) {
	if me.e != nil && s.byID[me.e.lease.ID] == me {
		delete(s.byID, me.e.lease.ID)
	}
	me.e = nil
}

// request builds the head's next request: its own entry, and, when grants are pushed to this
// Semaphore, the entries of the waiters behind it that the backend has not heard of, or whose
// queue entries are due to be kept alive (all of them with all set: grants may have been missed).
// It returns the entries it names, in order (the head's first), each marked as named now.
func (s *Semaphore) request(me *waiter, w *wait, all bool) (fleetdriver.AcquireRequest, []*entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	req := fleetdriver.AcquireRequest{Name: s.name, Lease: me.e.lease, TTL: s.cfg.ttl, Wait: !w.tryOnce,
		Heartbeat: queueHeartbeat, Push: s.unsub != nil, Seen: s.seen.Load(), LongestTTL: time.Duration(s.longest.Load())}
	named := []*entry{me.e}
	if req.Wait && req.Push {
		for _, b := range s.line {
			if len(req.Behind) == fleetdriver.MaxBehind {
				break
			}
			if b == me || b.granted || b.e == nil {
				continue
			}
			if all || b.e.listed.IsZero() || now.Sub(b.e.listed) >= askEvery {
				req.Behind = append(req.Behind, b.e.lease)
				named = append(named, b.e)
			}
		}
	}
	for _, e := range named {
		if e.safe.IsZero() {
			e.safe = now
		}
		e.listed, e.sent = now, true
	}
	return req, named
}

// due reports whether the head must ask: its entry or a waiter behind it is new to the backend,
// an entry is due to be kept alive, or the backend said to look again by now.
func (s *Semaphore) due(me *waiter) (ask, report bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if me.e.listed.IsZero() {
		return true, true
	}
	if now.Sub(me.e.listed) >= askEvery || !now.Before(s.lookAt) {
		return true, false
	}
	for i, b := range s.line {
		if i == fleetdriver.MaxBehind+1 {
			break
		}
		if b != me && !b.granted && b.e != nil && b.e.listed.IsZero() && s.unsub != nil {
			return true, true
		}
	}
	return false, false
}

// nextLook returns when the head must ask at the latest, without news: when its entry is due to
// be kept alive, or when the backend said to look again.
func (s *Semaphore) nextLook(me *waiter) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	at := me.e.listed.Add(askEvery)
	if s.lookAt.Before(at) {
		at = s.lookAt
	}
	return at
}

// apply hands out the grants a reply made to the entries of named (sent at sent): each goes to
// the first waiter of the line that waits for one of its weight (see assignLocked); and an entry
// still queued has its safe time moved to sent. A grant nobody waits for any more is given back.
func (s *Semaphore) apply(named []*entry, rep fleetdriver.AcquireReply, sent time.Time) {
	var back []fleetdriver.Lease
	s.mu.Lock()
	for i, e := range named {
		var tok uint64
		switch {
		case i == 0 && rep.Granted:
			tok = rep.Token
		case i > 0:
			tok = rep.Behind[i-1]
		}
		if tok == 0 {
			e.safe = sent
			continue
		}
		g := e.lease
		g.Token, g.Epoch = tok, rep.Epoch
		if s.assignLocked(g, sent) {
			back = append(back, g)
		}
	}
	if !rep.Granted && rep.RetryIn > 0 {
		s.lookAt = sent.Add(min(max(rep.RetryIn, 100*time.Microsecond), askEvery))
	}
	s.mu.Unlock()
	if len(back) > 0 {
		s.retry(back, time.Now().Add(s.cfg.ttl))
	}
}

// assignLocked hands out the grant g of the entry g.ID (safe: a time before the grant; zero: the
// entry's own). It goes to the first waiter of the line that waits for a grant of the same weight
// — the entry's owner, or one ahead of it, which then swaps entries with the owner (both IDs are
// this process's and the weights equal, so the backend sees no difference) — as a message on got
// if that waiter is the asking head, else as a Permit held for it. It reports whether the grant
// is a stray: nobody waits for it, and it must be given back. s.mu is held.
func (s *Semaphore) assignLocked(g fleetdriver.Lease, safe time.Time) (stray bool) {
	owner := s.byID[g.ID]
	if owner == nil {
		_, held := s.leases[g.ID] // a grant the head took from a reply, pushed as well
		return !held
	}
	if owner.granted {
		return false // already assigned (the reply and the push both tell it)
	}
	if safe.IsZero() {
		safe = owner.e.safe
	}
	to := owner
	for _, w := range s.line {
		if w == owner {
			break
		}
		if !w.granted && w.e != nil && w.n == owner.n {
			to = w
			break
		}
	}
	if to != owner {
		mine, theirs := to.e, owner.e
		s.renameLocked(to, theirs)
		s.renameLocked(owner, mine)
	}
	to.granted = true
	if to.asking {
		to.got <- grantMessage{lease: g, safe: safe} // (buffered for one, and granted guards it)
		return false
	}
	p := s.holdLocked(g, safe)
	if p == nil { // expired before it came: given back; the waiter asks anew when it heads the line
		to.granted = false
		s.renameLocked(to, s.newEntry(to.n))
		return true
	}
	to.permit = p
	return false
}

// holdLocked makes the lease g (granted at or after safe) a live Permit of this process, held for
// a waiter behind the head; nil if its deadline has passed already. s.mu is held.
func (s *Semaphore) holdLocked(g fleetdriver.Lease, safe time.Time) *Permit {
	deadline := safe.Add(s.cfg.ttl)
	if s.closed || !time.Now().Before(deadline) {
		return nil
	}
	p := newPermit(s, g, false)
	p.forWaiter = true
	s.registerLocked(p, safe)
	return p
}

// registerLocked makes p (a lease granted at or after safe) live: counted, renewed, watched.
// s.mu is held.
func (s *Semaphore) registerLocked(p *Permit, safe time.Time) {
	p.deadline = safe.Add(s.cfg.ttl)
	s.leases[p.lease.ID] = p
	s.held += p.lease.N
	s.leased += p.lease.N
	// Renew no later than a third of the TTL after safe: a pushed grant's deadline may be
	// nearer than a fresh one's.
	if at := safe.Add(s.cfg.ttl / 3); s.nextRenew.IsZero() || at.Before(s.nextRenew) {
		s.nextRenew = at
		s.kickLocked()
	}
	if s.watchAt.IsZero() || p.deadline.Before(s.watchAt) {
		s.watchAt = p.deadline
		s.watch.Reset(time.Until(p.deadline))
	}
}
