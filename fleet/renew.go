package fleet

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// work is the Semaphore's one goroutine: it renews all leases together, one round trip every
// TTL/3, and gives back, in batches, requests that their callers abandoned.
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
		s.flush()
		if d := s.renew(); d > 0 {
			t.Reset(d)
		} else {
			t.Stop()
		}
	}
}

// flush releases the pending leases on the backend, in one round trip.
func (s *Semaphore) flush() {
	s.mu.Lock()
	leases := s.pending
	s.pending = nil
	s.mu.Unlock()
	if len(leases) > 0 {
		_ = s.releaseNow(leases) // on failure they expire on their own
	}
}

// retryEvery is how soon a failed renewal is tried again.
func (s *Semaphore) retryEvery() time.Duration {
	return min(max(s.cfg.ttl/20, 50*time.Millisecond), s.cfg.ttl/3)
}

// renew renews every live lease if it is time, and returns how long until the next renewal
// (0: no lease, nothing scheduled).
func (s *Semaphore) renew() time.Duration {
	s.mu.Lock()
	if len(s.leases) == 0 {
		s.nextRenew = time.Time{}
		s.renewNow = false
		s.mu.Unlock()
		return 0
	}
	if now := time.Now(); !s.renewNow && now.Before(s.nextRenew) {
		d := s.nextRenew.Sub(now)
		s.mu.Unlock()
		return d
	}
	s.renewNow = false
	permits := make([]*Permit, 0, len(s.leases))
	leases := make([]Lease, 0, len(s.leases))
	for _, p := range s.leases {
		permits = append(permits, p)
		leases = append(leases, p.lease)
	}
	s.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ttl/3)
	sent := time.Now()
	s.count.roundTrips.Add(1)
	rep, err := s.b.Renew(ctx, RenewRequest{Name: s.name, TTL: s.cfg.ttl, Leases: leases})
	cancel()
	if err == nil && len(rep.Status) != len(leases) {
		err = fmt.Errorf("fleet: backend answered %d renewals for %d leases", len(rep.Status), len(leases))
	}
	if err != nil {
		// The leases keep their deadlines: the watch loses them when those pass.
		s.health.failed(err)
		retry := s.retryEvery()
		s.mu.Lock()
		s.nextRenew = time.Now().Add(retry)
		s.mu.Unlock()
		return retry
	}
	s.health.ok()
	s.seeEpoch(rep.Epoch, false)

	var lost []*Permit
	again, reregistered := 0, 0
	s.mu.Lock()
	for i, p := range permits {
		live := s.leases[p.lease.ID] == p
		switch st := rep.Status[i]; {
		case st != LeaseRenewed && st != LeaseReregistered:
			if live {
				s.loseLocked(p)
				lost = append(lost, p)
			}
		case live:
			p.deadline = sent.Add(s.cfg.ttl)
			if st == LeaseReregistered {
				p.lease.Epoch = rep.Epoch
				reregistered++
			}
		case st == LeaseReregistered:
			// Released while the renewal was on its way: the release found nothing (the data was
			// lost), and the renewal registered it again. Release it once more.
			s.pending = append(s.pending, p.lease)
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
	if again > 0 {
		s.flush()
	}
	s.lose(lost, "the backend no longer holds them")
	if reregistered > 0 {
		s.logInfo("fleet: leases registered again after the backend lost its data", "leases", reregistered)
	}
	return next
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
			s.pending = append(s.pending, p.lease) // the backend may still hold it: give it back
			lost = append(lost, p)
		}
	}
	s.rearmLocked()
	if len(lost) > 0 {
		s.kickLocked()
	}
	s.mu.Unlock()
	s.lose(lost, "not renewed in time")
}

// loseLocked ends a live leased permit as lost. Its context is cancelled under the lock, so that
// a Release that finds the permit gone also finds its context done. (Cancelling runs no code of
// ours or of the caller's on this goroutine: context.AfterFunc callbacks run on their own.)
// s.mu is held.
func (s *Semaphore) loseLocked(p *Permit) {
	delete(s.leases, p.lease.ID)
	s.held -= p.lease.N
	p.cancel(ErrLeaseLost)
	s.count.lost.Add(1)
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
