package limiter

import (
	"context"
	"sync/atomic"
	"time"
)

// Stats is a snapshot of a Limiter's gauges and counters, taken by [Limiter.Stats].
//
// Every call (Do, Call or Submit) is counted in Submitted when it begins and, when it ends, in
// exactly one of Completed, Failed, Rejected, TimedOut and Cancelled. So once the limiter is at
// rest (no call waiting or running, no task overrunning):
//
//	Submitted == Completed + Failed + Rejected + TimedOut + Cancelled
//	InFlight == Waiting == Overrunning == RateWaiting == 0
//
// While calls come and go, the fields are read one after another, not at one instant, so these
// sums need not hold in a snapshot; each field is exact for the moment it was read.
type Stats struct {
	Limit       int // the most task bodies that run at once; WithAdaptive moves it
	InFlight    int // slots held: tasks running, overrunning ones included
	Waiting     int // calls waiting for a slot: blocked Do and Call callers and queued Submits
	Overrunning int // tasks still running although their call has ended (timed out or cancelled)
	RateWaiting int // calls waiting for a token of WithRate: the queue, while the rate holds its head

	Submitted int64 // calls begun
	Completed int64 // calls that returned nil
	Failed    int64 // calls that returned any other error: the task's own, a panic, a Goexit
	Rejected  int64 // calls that got no slot: acquire timeout, too many waiting, or closed
	TimedOut  int64 // calls that ended with ErrTaskTimeout
	Cancelled int64 // calls that ended with an error while their ctx (or Future) was cancelled
	Panicked  int64 // panics in tasks, whichever of the above their call was counted in

	LimitChanges int64 // moves of the limit by WithAdaptive
}

// counters are the limiter's event counts. Each only grows, so every sum Stats reads is
// monotonic too. One plain block: spreading them over cache lines by goroutine measured no
// different (benchstat, p > 0.4) and needed unsafe.
type counters struct {
	submitted atomic.Int64
	outcomes  [numOutcomes]atomic.Int64 // by outcome: an index, not a switch
	panicked  atomic.Int64
}

// outcome is how a call ended, for counting.
type outcome uint8

const (
	outCompleted outcome = iota
	outFailed
	outRejected
	outTimedOut
	outCancelled
	numOutcomes
)

// record counts a call out in its one outcome and writes the call's record, if it has one: a
// rejection or a task timeout (panics are recorded by recordPanic). Every call is counted out
// exactly once, here (from finish, through records) or by tally (its caller left while fn ran),
// and only once the call's slot, if it had one, is free — so that a log handler may call back
// into the limiter.
// t0 is when the call began, t1 when its task started (zero times without a logger).
func (l *Limiter) record(ctx context.Context, o outcome, err error, t0, t1 time.Time) {
	l.tally(o)
	if l.cfg.logger == nil {
		return
	}
	switch o {
	case outRejected:
		l.logReject(ctx, err, t0)
	case outTimedOut:
		l.logTimeout(ctx, t0, t1)
	}
}

// tally counts an outcome without writing its record: for a call whose caller left while its task
// still holds the slot (a timeout, a cancellation, a lost lease), whose record waits until the
// slot is free (see recordTimeout).
func (l *Limiter) tally(o outcome) {
	l.count.outcomes[o].Add(1)
}

// recordPanic counts a task's panic and writes its record, once its slot is free.
func (l *Limiter) recordPanic(ctx context.Context, pe *PanicError, t0, t1 time.Time) {
	l.count.panicked.Add(1)
	l.logPanic(ctx, pe, t0, t1)
}

// recordTimeout writes the record of a call that was tallied TimedOut while its task overran,
// once the task has returned and its slot is free.
func (l *Limiter) recordTimeout(ctx context.Context, t0, t1 time.Time) {
	if l.cfg.logger != nil {
		l.logTimeout(ctx, t0, t1)
	}
}

// Stats returns a snapshot of the limiter's gauges and counters. It takes no lock and may be
// called at any time, from any goroutine, also from a task or a log handler.
func (l *Limiter) Stats() Stats {
	if l == nil || !l.slots.Ready() {
		panic("limiter: zero Limiter; use New")
	}
	var s Stats
	s.Limit = int(l.slots.Capacity()) // WithAdaptive moves it
	if l.meter != nil {
		s.LimitChanges = l.meter.Changes()
	}
	// Outcomes before Submitted: a call is counted in Submitted before it can end, so the
	// snapshot never shows more ended calls than begun ones.
	c := &l.count
	s.Completed = c.outcomes[outCompleted].Load()
	s.Failed = c.outcomes[outFailed].Load()
	s.Rejected = c.outcomes[outRejected].Load()
	s.TimedOut = c.outcomes[outTimedOut].Load()
	s.Cancelled = c.outcomes[outCancelled].Load()
	s.Panicked = c.panicked.Load()
	s.Submitted = c.submitted.Load()
	s.Overrunning = int(l.overrunning.Load())
	s.Waiting = l.slots.Waiting()
	if l.rate != nil && l.slots.GateHeld() {
		s.RateWaiting = s.Waiting
	}
	s.InFlight = l.inFlight()
	return s
}

// inFlight is the number of slots held. After an adaptive limit shrank, more may be held than
// the limit allows, until they come back.
func (l *Limiter) inFlight() int {
	return max(int(l.slots.Capacity()-l.slots.Available()), 0)
}
