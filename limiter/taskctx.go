package limiter

import (
	"context"
	"time"
)

// The context of a task that only Future.Cancel can end before it returns — its caller's ctx
// has no Done, and there is no task timeout and no step — is the task itself: it carries the
// caller's values (and deadline, if any) and is done once Cancel has been called. A Submitted
// task then pays for no context.WithCancel, nor for the garbage it leaves: one allocation a task
// fewer, and a third fewer instructions a task (see the commit that brought it).
//
// Its Done channel is made on demand, and it has AfterFunc, so that the contexts the task derives
// from it (context.WithCancel, WithTimeout, AfterFunc) register with it, as they do with the
// standard library's, instead of each starting a goroutine to watch it. Its cause is its Err:
// context.Cause asks the caller's ctx, which can never be done.

// ctxState is what a task's own context keeps once asked: its Done channel and the functions to
// call when it is cancelled. Guarded by task.mu.
type ctxState struct {
	done      chan struct{}
	afters    []*afterFunc
	cancelled bool
}

type afterFunc struct {
	f    func()
	done bool // called, or stopped
}

// Deadline, Value: the caller's ctx's.
func (t *task) Deadline() (deadline time.Time, ok bool) { return t.ctx.Deadline() }
func (t *task) Value(key any) any                       { return t.ctx.Value(key) }

// Done returns a channel that is closed once Cancel has cancelled the task.
func (t *task) Done() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	cs := t.state()
	if cs.done == nil {
		cs.done = make(chan struct{})
		if cs.cancelled {
			close(cs.done)
		}
	}
	return cs.done
}

// Err returns context.Canceled once Cancel has cancelled the task, else nil.
func (t *task) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cx != nil && t.cx.cancelled {
		return context.Canceled
	}
	return nil
}

// AfterFunc arranges for f to be called, on a goroutine of its own, once the task is cancelled
// (at once if it is), as context.AfterFunc would; stop undoes it and reports whether it did.
func (t *task) AfterFunc(f func()) (stop func() bool) {
	a := &afterFunc{f: f}
	t.mu.Lock()
	cs := t.state()
	if cs.cancelled {
		a.done = true
		t.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	cs.afters = append(cs.afters, a)
	t.mu.Unlock()
	return func() bool {
		t.mu.Lock()
		defer t.mu.Unlock()
		if a.done {
			return false
		}
		a.done = true
		return true
	}
}

// String names the context, as the standard library's do.
func (t *task) String() string { return "limiter.task context" }

// state returns the context's state, made now if need be. t.mu is held.
func (t *task) state() *ctxState {
	if t.cx == nil {
		t.cx = &ctxState{}
	}
	return t.cx
}

// cancelOwn cancels the task's own context: Future.Cancel's, for a task that is its context.
func (t *task) cancelOwn() {
	t.mu.Lock()
	cs := t.state()
	if cs.cancelled {
		t.mu.Unlock()
		return
	}
	cs.cancelled = true
	if cs.done != nil {
		close(cs.done)
	}
	var run []func()
	for _, a := range cs.afters {
		if !a.done {
			a.done = true
			run = append(run, a.f)
		}
	}
	cs.afters = nil
	t.mu.Unlock()
	for _, f := range run {
		go f()
	}
}
