package fleet

import (
	"context"
	"time"

	"github.com/goloom/loom/fleet/fleetdriver"
)

// A ride is a request of the head, waiting (at most rideWait) to go to the backend with this
// process's next release: under contention a permit then costs one round trip, its release,
// which also queues the waiters that arrived since, instead of two. It never passes anyone: the
// release grants the heads queued before it first, and the ride's new entries join the queue's
// tail after them. The release builds the request when it takes it (see releaseNow), so it names
// every waiter that arrived meanwhile.
type ride struct {
	me   *waiter
	w    *wait
	done chan rideResult // one answer, from the release that took it
}

type rideResult struct {
	named []*entry
	rep   fleetdriver.AcquireReply
	err   error
	sent  time.Time
}

// rideWait bounds how long a head waits for a release to ride on before it asks by itself.
const rideWait = 2 * time.Millisecond

// ask is the head's conversation with the backend. It asks for its lease (and names the waiters
// behind it, see request), and while the lease is queued waits for its grant (pushed by the call
// that frees the permits, or handed over from a waiter behind it: see assignLocked), for new
// waiters to name, for the time the backend said to look again (the next expiry, and at least
// every askEvery, which keeps the queue entries alive), or for the end of the wait. A head whose
// entry the backend knows already (named by an earlier head) asks only when one of those is due.
func (s *Semaphore) ask(w *wait, me *waiter) (*Permit, error) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	all := false // name every waiter: grants may have been missed
	for first := true; ; first = false {
		need, report := s.due(me)
		if need || all || first && w.tryOnce {
			var named []*entry
			var rep fleetdriver.AcquireReply
			var sent time.Time
			var err error
			rode, skip := false, false
			if report && !all && s.mayRide(w) {
				rode, skip, named, rep, sent, err = s.rideOut(w, me)
				if rode && err != nil { // the release failed: whether the request got there or not, ask
					rode = false
				}
			}
			if skip { // its grant came while it waited to ride: take it (below)
				goto wait
			}
			if !rode {
				var req fleetdriver.AcquireRequest
				req, named = s.request(me, w, all)
				bctx, cancel := w.wctx, context.CancelFunc(func() {})
				if w.tryOnce { // no wait of its own: bounded like a background call
					bctx, cancel = context.WithTimeout(w.ctx, s.health.probe)
				}
				sent = time.Now()
				s.count.roundTrips.Add(1)
				rep, err = s.b.Acquire(bctx, req)
				cancel()
				if err == nil && len(rep.Behind) != len(req.Behind) {
					err = errBehind(len(rep.Behind), len(req.Behind))
				}
				if err != nil {
					s.unlist(named)
				}
			}
			all = false
			if err != nil {
				// Its entry may have reached the backend: leave gives it back.
				if w.ctx.Err() != nil || w.wctx.Err() != nil {
					return nil, w.err(nil)
				}
				s.failed(err)
				return s.fallback(w, err)
			}
			s.ok()
			s.see(rep.Epoch, rep.Paused, rep.Pause, rep.LongestTTL, rep.Token, true)
			s.contended.Store(!rep.Granted || rep.Queued > 0 || rep.Free <= 0)
			s.apply(named, rep, sent)
			select {
			case g := <-me.got: // granted in this call
				p, again, err := s.granted(w, me, g)
				if !again {
					return p, err
				}
				continue
			default:
			}
			if w.tryOnce {
				s.forget(me) // it was not queued: nothing to give back
				return nil, ErrTimeout
			}
			if s.subscribe(w.wctx) {
				all = true // from now on grants are pushed to us: say so, and look again
				continue
			}
		}
	wait:
		d := max(time.Until(s.nextLook(me)), 100*time.Microsecond)
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		select {
		case g := <-me.got:
			p, again, err := s.granted(w, me, g)
			if !again {
				return p, err
			}
		case <-s.nudge:
			all = s.takeMissed()
		case <-timer.C:
		case <-w.wctx.Done():
			return nil, w.err(nil)
		case <-s.closing:
			return nil, ErrClosed
		}
	}
}

// unlist marks the entries of a request that failed as due, so that the next request names them
// again (it may or may not have reached the backend: they stay sent).
func (s *Semaphore) unlist(named []*entry) {
	s.mu.Lock()
	for _, e := range named {
		e.listed = time.Time{}
	}
	s.mu.Unlock()
}

// forget marks the head's entry as unknown to the backend: a request that could not wait was
// answered "not granted", so nothing of it is left there to give back.
func (s *Semaphore) forget(me *waiter) {
	s.mu.Lock()
	me.e.sent = false
	s.mu.Unlock()
}

// takeMissed reports, and clears, that grants may have been missed (the subscription was made
// again).
func (s *Semaphore) takeMissed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.missed
	s.missed = false
	return m
}

// mayRide reports whether a head's request should ride on a release: the name was found full or
// queued (so the request would wait anyway), and a release of this process will come: it holds
// leases, or waiters of its line are queued on the backend (their grants will come, and their
// releases after them). (Riding while the name has room would leave that room unused until a
// release came: measured, one process of 40 callers then got 6 % of its capacity's rate instead
// of 48 %.)
func (s *Semaphore) mayRide(w *wait) bool {
	if w.tryOnce || !s.contended.Load() {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if s.leased > 0 {
		return true
	}
	for _, b := range s.line {
		if b.e != nil && b.e.sent && !b.e.listed.IsZero() {
			return true
		}
	}
	return false
}

// rideOut offers the head's next request to this process's next release for up to rideWait, and
// reports whether a release took it, with what it named and the answer; or (skip) that the
// head's own grant came while it waited, and nothing need be sent. Not taken (no release came in
// time, or the wait ended), the head asks by itself.
func (s *Semaphore) rideOut(w *wait, me *waiter) (rode, skip bool, named []*entry, rep fleetdriver.AcquireReply, sent time.Time, err error) {
	r := &ride{me: me, w: w, done: make(chan rideResult, 1)}
	if !s.rider.CompareAndSwap(nil, r) {
		return false, false, nil, rep, sent, nil
	}
	t := time.NewTimer(rideWait)
	defer t.Stop()
	select {
	case res := <-r.done:
		return true, false, res.named, res.rep, res.sent, res.err
	case g := <-me.got: // its own grant came meanwhile (pushed)
		me.got <- g // put back for the caller (buffered for one; nobody else sends now: granted is set)
		skip = true
	case <-t.C:
	case <-w.wctx.Done():
	case <-s.closing:
	}
	if s.rider.CompareAndSwap(r, nil) {
		return false, skip, nil, rep, sent, nil
	}
	res := <-r.done // a release took it a moment ago: its answer is on the way
	return true, false, res.named, res.rep, res.sent, res.err
}

// onGrant is the subscription's callback: it hands a pushed grant to its waiter (see
// assignLocked), or gives back one that nobody waits for any more (its asker left). A zero Lease
// means the subscription was made again and grants may have been missed: the head names every
// waiter in its next request. It never blocks.
func (s *Semaphore) onGrant(g fleetdriver.Lease) {
	s.mu.Lock()
	if g.ID == "" {
		// The backend may have restarted and lost its data, too: held leases renew (and
		// register again) now rather than at their time.
		if len(s.leases) > 0 {
			s.renewNow = true
			s.kickLocked()
		}
		s.missed = true
		s.nudgeLocked()
		s.mu.Unlock()
		return
	}
	stray := s.assignLocked(g, time.Time{})
	s.mu.Unlock()
	if stray {
		s.abandon(g)
	}
}

// subscribe makes the grant subscription if there is none yet, and reports whether it made one
// now. Only the head calls it. A failed attempt is not repeated within a probe interval; the
// head still asks again at the times the backend gives, and learns of its grant then.
func (s *Semaphore) subscribe(ctx context.Context) bool {
	s.mu.Lock()
	if s.unsub != nil || s.closed || (!s.subFailed.IsZero() && time.Since(s.subFailed) < s.health.probe) {
		s.mu.Unlock()
		return false
	}
	s.mu.Unlock()
	sctx, cancel := context.WithTimeout(ctx, s.cfg.ttl/3)
	s.count.roundTrips.Add(1)
	stop, err := s.b.Subscribe(sctx, s.name, s.inst, s.onGrant)
	cancel()
	s.mu.Lock()
	if err != nil {
		if ctx.Err() == nil { // the backend's failure, not the end of this caller's wait
			s.subFailed = time.Now()
		}
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

// granted turns the grant assigned to the head into its live Permit. Its deadline counts the TTL
// from g.safe (see entry); a grant whose lease has expired by then is given back and asked for
// again (again: with a new entry), and one that comes after Close is given back.
func (s *Semaphore) granted(w *wait, me *waiter, g grantMessage) (p *Permit, again bool, err error) {
	s.mu.Lock()
	if !time.Now().Before(g.safe.Add(s.cfg.ttl)) {
		me.granted = false
		s.renameLocked(me, s.newEntry(me.n))
		s.mu.Unlock()
		s.abandon(g.lease)
		if w.wctx.Err() != nil || w.tryOnce {
			return nil, false, w.err(nil)
		}
		return nil, true, nil
	}
	if s.closed {
		s.mu.Unlock()
		s.abandon(g.lease) // (Close's last release has gone: this one retries once, at once)
		return nil, false, ErrClosed
	}
	s.dropEntryLocked(me)
	p = newPermit(s, g.lease, false)
	s.registerLocked(p, g.safe)
	s.mu.Unlock()
	s.count.acquired.Add(1)
	return p, false, nil
}
