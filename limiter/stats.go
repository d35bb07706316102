package limiter

import (
	"context"
	"sync/atomic"
	"unsafe"
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

// counters are the limiter's event counts, spread over shards so that callers on different
// cores do not all increment one cache line: a call counts in the shard its goroutine's stack
// address picks (see pick) and Stats adds the shards up. Each counter stays exact and, since every
// shard only grows, so does every sum Stats reads.
type counters struct {
	_      [64]byte
	shards [counterShards]counterShard
}

const counterShards = 8

// A counterShard is one cache line of counters.
type counterShard struct {
	submitted atomic.Int64
	completed atomic.Int64
	failed    atomic.Int64
	rejected  atomic.Int64
	timedOut  atomic.Int64
	cancelled atomic.Int64
	panicked  atomic.Int64
	_         [8]byte
}

// pick returns a shard to count in: the one the address of the caller's stack falls on, so
// that a goroutine keeps to one shard and goroutines on different stacks spread out.
func (c *counters) pick() *counterShard {
	var here byte
	return &c.shards[(uintptr(unsafe.Pointer(&here))>>12)%counterShards]
}

// sum adds up one counter over the shards.
func (c *counters) sum(field func(*counterShard) *atomic.Int64) int64 {
	var n int64
	for i := range c.shards {
		n += field(&c.shards[i]).Load()
	}
	return n
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

func (c *counterShard) add(o outcome) {
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
	if l == nil || l.limit == 0 {
		panic("limiter: zero Limiter; use New")
	}
	var s Stats
	s.Limit = l.limit
	// Outcomes before Submitted: a call is counted in Submitted before it can end, so the
	// snapshot never shows more ended calls than begun ones.
	c := &l.count
	s.Completed = c.sum(func(c *counterShard) *atomic.Int64 { return &c.completed })
	s.Failed = c.sum(func(c *counterShard) *atomic.Int64 { return &c.failed })
	s.Rejected = c.sum(func(c *counterShard) *atomic.Int64 { return &c.rejected })
	s.TimedOut = c.sum(func(c *counterShard) *atomic.Int64 { return &c.timedOut })
	s.Cancelled = c.sum(func(c *counterShard) *atomic.Int64 { return &c.cancelled })
	s.Panicked = c.sum(func(c *counterShard) *atomic.Int64 { return &c.panicked })
	s.Submitted = c.sum(func(c *counterShard) *atomic.Int64 { return &c.submitted })
	s.Overrunning = int(l.overrunning.Load())
	s.Waiting = int(l.waiting.Load())
	s.InFlight = l.inFlight()
	return s
}

// inFlight is the number of slots held.
func (l *Limiter) inFlight() int {
	return min(max(l.limit-int(l.slots.Available()), 0), l.limit)
}
