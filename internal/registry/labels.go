package registry

import (
	"context"
	"runtime/pprof"
)

// LimiterLabels is a limiter's pprof label set: loom.limiter = its name. Make it once, in
// limiter.New; the zero value labels tasks "limiter".
type LimiterLabels struct {
	set pprof.LabelSet
	ok  bool // set was made
}

// NewLimiterLabels returns the label set of a limiter named name ("" for an unnamed one).
func NewLimiterLabels(name string) LimiterLabels {
	if name == "" {
		name = "limiter"
	}
	return LimiterLabels{pprof.Labels(LimiterLabel, name), true}
}

func (ll *LimiterLabels) labels() pprof.LabelSet {
	if !ll.ok {
		return NewLimiterLabels("").set
	}
	return ll.set
}

// Enter labels a task about to run on the caller's goroutine (Do and Call without a task
// timeout), if Labels is on: the goroutine's labels become ctx's plus loom.limiter, and the
// returned context carries them, so that pprof.Do in the task keeps them. It reports whether it
// did; if so, call [RestoreLabels] with the caller's ctx once the task has returned (also when it
// panicked). With Labels off it is one atomic load.
func (ll *LimiterLabels) Enter(ctx context.Context) (context.Context, bool) {
	if !LabelsOn() {
		return ctx, false
	}
	lctx := pprof.WithLabels(ctx, ll.labels())
	pprof.SetGoroutineLabels(lctx)
	return lctx, true
}

// Task labels a task about to run on a goroutine of the limiter's own (a task timeout's goroutine,
// a Submit's): with Labels on, ctx's labels plus loom.limiter, and it returns the context that
// carries them for the task. foreign says that the goroutine may carry another task's labels:
// it ran a task before, or was started from another task's goroutine (a hand-off); then, with
// Labels off, its labels are reset to ctx's, so that no task ever runs with another's labels.
func (ll *LimiterLabels) Task(ctx context.Context, foreign bool) context.Context {
	if LabelsOn() {
		lctx := pprof.WithLabels(ctx, ll.labels())
		pprof.SetGoroutineLabels(lctx)
		return lctx
	}
	if foreign {
		pprof.SetGoroutineLabels(ctx)
	}
	return ctx
}

// RestoreLabels sets the calling goroutine's labels to those of ctx, as pprof.Do does when its
// function returns.
func RestoreLabels(ctx context.Context) { pprof.SetGoroutineLabels(ctx) }
