package registry

import (
	"context"
	"runtime/trace"
)

// A Region is a runtime/trace region, or nothing (the zero Region) when no trace was recording
// where it would have begun. End it on the goroutine that began it.
type Region struct{ r *trace.Region }

// End ends the region; on the zero Region it does nothing.
func (r Region) End() {
	if r.r != nil {
		r.r.End()
	}
}

// StartWait begins the region of a limiter call that waits for a slot on its own goroutine
// (Do, Call): named "loom.limiter.wait", in the trace task of ctx, if any. One check when no trace
// is recording.
func StartWait(ctx context.Context) Region {
	if !trace.IsEnabled() {
		return Region{}
	}
	return Region{trace.StartRegion(ctx, WaitRegion)}
}

// An AsyncWait marks a wait that no goroutine sits in (a queued Submit): a trace task named
// "loom.limiter.wait", since a region must end on the goroutine that began it.
type AsyncWait struct{ t *trace.Task }

// StartAsyncWait begins an AsyncWait, a child of ctx's trace task, while a trace records.
func StartAsyncWait(ctx context.Context) AsyncWait {
	if !trace.IsEnabled() {
		return AsyncWait{}
	}
	_, t := trace.NewTask(ctx, WaitRegion)
	return AsyncWait{t}
}

// End ends the wait, from any goroutine; on the zero AsyncWait it does nothing.
func (w AsyncWait) End() {
	if w.t != nil {
		w.t.End()
	}
}
