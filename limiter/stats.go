package limiter

import (
	"context"
	"sync/atomic"
)

// Stats is a snapshot of a Limiter's gauges and counters, taken by [Limiter.Stats].
//
// Every call (Do, Call or Submit) is counted in Submitted when it begins and, when it ends, in
// exactly one of Completed, Failed, Rejected, TimedOut and Cancelled. So once the limiter is at
// rest (no call waiting or running, no task overrunning):
//
//	Submitted == Completed + Failed + Rejected + TimedOut + Cancelled
//	InFlight == Waiting == Overrunning == 0
//
// While calls come and go, the fields are read one after another, not at one instant, so these
// sums need not hold in a snapshot; each field is exact for the moment it was read.
type Stats struct {
	Limit       int // the most task bodies that run at once
	InFlight    int // slots held: tasks running, overrunning ones included
	Waiting     int // calls waiting for a slot: blocked Do and Call callers and queued Submits
	Overrunning int // tasks still running although their call has ended (timed out or cancelled)

	Submitted int64 // calls begun
	Completed int64 // calls that returned nil
	Failed    int64 // calls that returned any other error: the task's own, a panic, a Goexit
	Rejected  int64 // calls that got no slot: acquire timeout, too many waiting, or closed
	TimedOut  int64 // calls that ended with ErrTaskTimeout
	Cancelled int64 // calls that ended with an error while their ctx (or Future) was cancelled
	Panicked  int64 // panics in tasks, whichever of the above their call was counted in
}

// counters are the limiter's event counts. The two that every call touches sit on cache lines
// of their own, so that busy limiters do not make the rest of the Limiter's fields bounce.
type counters struct {
	_         [64]byte
	submitted atomic.Int64
	_         [56]byte
	completed atomic.Int64
	_         [56]byte
	failed    atomic.Int64
	rejected  atomic.Int64
	timedOut  atomic.Int64
	cancelled atomic.Int64
	panicked  atomic.Int64
	_         [24]byte
}

// outcome is how a call ended, for counting.
type outcome uint8

const (
	outCompleted outcome = iota
	outFailed
	outRejected
	outTimedOut
	outCancelled
)

func (c *counters) add(o outcome) {
	switch o {
	case outCompleted:
		c.completed.Add(1)
	case outFailed:
		c.failed.Add(1)
	case outRejected:
		c.rejected.Add(1)
	case outTimedOut:
		c.timedOut.Add(1)
	case outCancelled:
		c.cancelled.Add(1)
	}
}

// failure is the outcome of a call that ended with a task's error (not a rejection or a
// timeout): Cancelled if the caller's ctx (or the Future) was already cancelled, else Failed.
func failure(ctx context.Context, cancelled bool) outcome {
	if cancelled || ctx.Err() != nil {
		return outCancelled
	}
	return outFailed
}

// Stats returns a snapshot of the limiter's gauges and counters. It takes no lock and may be
// called at any time, from any goroutine, also from a task or a log handler.
func (l *Limiter) Stats() Stats {
	var s Stats
	s.Limit = l.limit
	// Outcomes before Submitted: a call is counted in Submitted before it can end, so the
	// snapshot never shows more ended calls than begun ones.
	s.Completed = l.count.completed.Load()
	s.Failed = l.count.failed.Load()
	s.Rejected = l.count.rejected.Load()
	s.TimedOut = l.count.timedOut.Load()
	s.Cancelled = l.count.cancelled.Load()
	s.Panicked = l.count.panicked.Load()
	s.Submitted = l.count.submitted.Load()
	s.Overrunning = int(l.overrunning.Load())
	s.Waiting = int(l.waiting.Load())
	s.InFlight = l.inFlight()
	return s
}

// inFlight is the number of slots held.
func (l *Limiter) inFlight() int {
	return min(max(l.limit-int(l.slots.Available()), 0), l.limit)
}
