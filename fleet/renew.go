package fleet

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/goloom/loom/fleet/fleetdriver"
)

// work is the Semaphore's one goroutine: it renews all leases together, one round trip every
// TTL/3, registers degraded permits once the backend answers again, and gives back, in batches
// and with backoff, what could not be released at once. It returns when Close begins; Close
// makes the last release itself, so no retry outlives it.
func (s *Semaphore) work() {
	defer close(s.stopped)
	t := time.NewTimer(time.Hour)
	t.Stop()
	defer t.Stop()
	for {
		select {
		case <-s.closing:
			return
		case <-s.kick:
		case <-t.C:
		}
		next := s.flush()
		if d := s.renew(); d > 0 && (next <= 0 || d < next) {
			next = d
		}
		if next > 0 {
			t.Reset(next)
		} else {
			t.Stop()
		}
	}
}

// maxBackoff bounds the delay between two tries of a failed release.
const maxBackoff = time.Second

// flush releases the pending leases on the backend, in one round trip, if their retry is due. It
// drops those that are moot (the backend has expired them by now). On failure it keeps them for
// a retry after a backoff that doubles from 20 ms to a second. It returns how long until the
// next retry (0: nothing pending).
func (s *Semaphore) flush() time.Duration {
	now := time.Now()
	s.mu.Lock()
	if len(s.pending) == 0 {
		s.retryAt, s.backoff = time.Time{}, 0
		s.mu.Unlock()
		return 0
	}
	if !s.retryAt.IsZero() && now.Before(s.retryAt) {
		d := s.retryAt.Sub(now)
		s.mu.Unlock()
		return d
	}
	batch := s.pending
	s.pending = nil
	s.mu.Unlock()

	leases := make([]fleetdriver.Lease, 0, len(batch))
	for _, r := range batch {
		leases = append(leases, r.lease)
	}
	err := s.releaseNow(leases)

	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		s.backoff = 0
	} else {
		for _, r := range batch {
			if now.Before(r.until) {
				s.pending = append(s.pending, r)
			}
		}
		s.backoff = min(max(2*s.backoff, 20*time.Millisecond), maxBackoff)
	}
	if len(s.pending) == 0 { // released, or more arrived meanwhile: send those now
		s.retryAt = time.Time{}
		return 0
	}
	if err == nil {
		s.retryAt = time.Time{}
		return time.Millisecond
	}
	s.retryAt = time.Now().Add(s.backoff)
	return s.backoff
}

// retryEvery is how soon a failed renewal is tried again.
func (s *Semaphore) retryEvery() time.Duration {
	return min(max(s.cfg.ttl/20, 50*time.Millisecond), s.cfg.ttl/3)
}

// renew renews every live lease, and registers every degraded permit, if it is time, and returns
// how long until the next renewal (0: no lease, nothing scheduled). It is one round trip for all
// of them: the request lists the leases, then the degraded permits, and the reply's statuses
// follow that order.
func (s *Semaphore) renew() time.Duration {
	permits, req, wait := s.renewal()
	if permits == nil {
		return wait
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ttl/3)
	sent := time.Now()
	s.count.roundTrips.Add(1)
	rep, err := s.b.Renew(ctx, req)
	cancel()
	if err == nil && len(rep.Status) != len(permits) {
		err = fmt.Errorf("fleet: backend answered %d renewals for %d leases", len(rep.Status), len(permits))
	}
	if err != nil {
		// The leases keep their deadlines: the watch loses them when those pass. Degraded permits
		// register on a later successful call (ok sets renewNow again).
		s.failed(err)
		retry := s.retryEvery()
		s.mu.Lock()
		s.nextRenew = time.Now().Add(retry)
		s.mu.Unlock()
		return retry
	}
	s.ok()
	s.see(rep.Epoch, rep.Paused, rep.Pause, rep.LongestTTL, 0, false)
	next, again := s.renewed(permits, len(req.Leases), rep, sent)
	if again {
		// Leases released while the renewal registered them: release them now, and if that
		// fails, come back at its backoff rather than at the next renewal.
		if d := s.flush(); d > 0 && (next <= 0 || d < next) {
			next = d
		}
	}
	return next
}

// renewal decides whether it is time to renew and, if so, returns the permits to renew (leases
// first, then degraded permits to register) and the request; else nil and how long to wait.
func (s *Semaphore) renewal() ([]*Permit, fleetdriver.RenewRequest, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var req fleetdriver.RenewRequest
	now := time.Now()
	if len(s.leases) == 0 && (len(s.degraded) == 0 || !s.renewNow) {
		s.renewNow = false
		// Nothing to renew. A renewal still due later stays scheduled, and the worker sleeps
		// until it: a lease granted before then is renewed at it, early, and registerLocked need
		// not wake the worker. (Unscheduled at once, every uncontended Acquire after a Release
		// woke the worker, which found the lease gone and unscheduled again: a goroutine wake-up
		// per Acquire.)
		if now.Before(s.nextRenew) {
			return nil, req, s.nextRenew.Sub(now)
		}
		s.nextRenew = time.Time{}
		return nil, req, 0
	}
	if !s.renewNow && now.Before(s.nextRenew) {
		return nil, req, s.nextRenew.Sub(now)
	}
	s.renewNow = false
	permits := make([]*Permit, 0, len(s.leases)+len(s.degraded))
	req = fleetdriver.RenewRequest{Name: s.name, TTL: s.cfg.ttl, Seen: s.seen.Load(), LongestTTL: time.Duration(s.longest.Load())}
	for _, p := range s.leases {
		permits = append(permits, p)
		req.Leases = append(req.Leases, p.lease)
	}
	for p := range s.degraded {
		permits = append(permits, p)
		req.Register = append(req.Register, p.lease)
	}
	return permits, req, 0
}

// renewed applies a renewal's reply to permits (the first leases of them were leases, the rest
// degraded permits to register), sent at sent, and returns how long until the next renewal and
// whether some of them must be released again.
// Each permit ends in one of four ways:
//   - a lease renewed (or registered again after a loss): its deadline moves to sent + TTL,
//     never later than the backend's new expiry;
//   - a lease the backend no longer holds: lost, its context cancelled with ErrLeaseLost;
//   - a lease released while the renewal was on its way, which the renewal registered again
//     (the release found the data lost): released once more;
//   - a degraded permit: now a lease, renewed from here on like any other — or, released
//     meanwhile, given back.
func (s *Semaphore) renewed(permits []*Permit, leases int, rep fleetdriver.RenewReply, sent time.Time) (time.Duration, bool) {
	var lost []*Permit
	again, reregistered, registered := 0, 0, 0
	s.mu.Lock()
	for i, p := range permits {
		st := rep.Status[i]
		if i >= leases {
			if _, live := s.degraded[p]; !live {
				s.pending = append(s.pending, pendingRelease{lease: p.lease, until: sent.Add(s.cfg.ttl)})
				again++
				continue
			}
			delete(s.degraded, p)
			p.lease.Epoch = rep.Epoch
			p.deadline = sent.Add(s.cfg.ttl)
			s.leases[p.lease.ID] = p
			s.leased += p.lease.N
			registered++
			continue
		}
		live := s.leases[p.lease.ID] == p
		switch {
		case st != fleetdriver.LeaseRenewed && st != fleetdriver.LeaseReregistered:
			if live {
				s.loseLocked(p)
				lost = append(lost, p)
			}
		case live:
			p.deadline = sent.Add(s.cfg.ttl)
			if st == fleetdriver.LeaseReregistered {
				p.lease.Epoch = rep.Epoch
				reregistered++
			}
		case st == fleetdriver.LeaseReregistered:
			s.pending = append(s.pending, pendingRelease{lease: p.lease, until: sent.Add(s.cfg.ttl)})
			again++
		}
	}
	s.rearmLocked()
	s.nextRenew = sent.Add(s.cfg.ttl / 3)
	next := max(time.Until(s.nextRenew), time.Millisecond)
	if s.renewNow {
		next = time.Millisecond
	}
	s.mu.Unlock()
	for _, p := range lost {
		p.giveDegr()
	}
	s.lose(lost, "the backend no longer holds them")
	if reregistered > 0 {
		s.logInfo("fleet: leases registered again after the backend lost its data", "leases", reregistered)
	}
	if registered > 0 {
		s.logInfo("fleet: permits granted while the backend was unreachable registered as leases", "permits", registered)
	}
	return next, again > 0
}

// rearmLocked sets the watch to the earliest deadline of a live lease. s.mu is held.
func (s *Semaphore) rearmLocked() {
	var at time.Time
	for _, p := range s.leases {
		if at.IsZero() || p.deadline.Before(at) {
			at = p.deadline
		}
	}
	s.watchAt = at
	if at.IsZero() {
		s.watch.Stop()
	} else {
		s.watch.Reset(time.Until(at))
	}
}

// expire is the watch's callback: every lease whose deadline has passed is lost, even while a
// renewal is still on its way (a renewal that comes back too late cannot save it: the backend
// may have let another holder in).
func (s *Semaphore) expire() {
	now := time.Now()
	var lost []*Permit
	s.mu.Lock()
	if s.closed && len(s.leases) == 0 {
		s.mu.Unlock()
		return
	}
	for _, p := range s.leases {
		if !now.Before(p.deadline) {
			s.loseLocked(p)
			// The backend may still hold it (its expiry is later than our deadline): give it back.
			s.pending = append(s.pending, pendingRelease{lease: p.lease, until: now.Add(s.cfg.ttl)})
			lost = append(lost, p)
		}
	}
	s.rearmLocked()
	if len(lost) > 0 {
		s.kickLocked()
	}
	s.mu.Unlock()
	for _, p := range lost {
		p.giveDegr()
	}
	s.lose(lost, "not renewed in time")
}

// loseLocked ends a live leased permit as lost. Its context is cancelled under the lock, so that
// a Release that finds the permit gone also finds its context done. (Cancelling runs no code of
// ours or of the caller's on this goroutine: context.AfterFunc callbacks run on their own.)
// s.mu is held.
func (s *Semaphore) loseLocked(p *Permit) {
	s.dropLeaseLocked(p, ErrLeaseLost)
	s.count.lost.Add(1)
}

// dropLeaseLocked ends p's live lease in this process: no longer held, renewed or counted by
// Degrade, its context done with cause. Giving the lease back to the backend, if it is to be, is
// the caller's. s.mu is held.
func (s *Semaphore) dropLeaseLocked(p *Permit, cause error) {
	delete(s.leases, p.lease.ID)
	s.held -= p.lease.N
	s.leased -= p.lease.N
	s.leaseEndedLocked()
	p.cancel(cause)
}

// leaseEndedLocked tells the Degrade waiters that a lease ended (they count the leases still
// held). s.mu is held.
func (s *Semaphore) leaseEndedLocked() {
	if s.degr != nil {
		close(s.leaseGone)
		s.leaseGone = make(chan struct{})
	}
}

// lose logs leases lost while held, after loseLocked.
func (s *Semaphore) lose(lost []*Permit, why string) {
	if len(lost) > 0 {
		s.logWarn("fleet: leases lost", "leases", len(lost), "reason", why)
	}
}

func (s *Semaphore) logWarn(msg string, args ...any) { s.log(slog.LevelWarn, msg, args...) }
func (s *Semaphore) logInfo(msg string, args ...any) { s.log(slog.LevelInfo, msg, args...) }

func (s *Semaphore) log(level slog.Level, msg string, args ...any) {
	if l := s.cfg.logger; l != nil {
		l.Log(context.Background(), level, msg, append([]any{slog.String("semaphore", s.name)}, args...)...)
	}
}
