package scope

import (
	"context"

	"github.com/goloom/loom/internal/registry"
)

// A policy decides when a scope is done and what Join returns. The built-in policies and a custom
// Joiner are all one of these, and the scope asks every one of them the same things at the same
// points: before a fork runs (onFork, when its traits say it wants to hear of forks), when a
// subtask completes before the scope was cancelled (decide), when Join computes its result
// (result), and when the scope's own deadline ended it (onTimeout). Nothing in the scope looks
// at which policy it has.
type policy interface {
	// onFork is told of a fork before its function runs, on the forking goroutine; an error
	// refuses the fork (the subtask is Failed with it). Called only if traits().forks.
	onFork(t Task) error
	// decide is told of a subtask that completed before the scope was cancelled — a failure
	// (err != nil; a panic included) or, if the policy hears successes, a success — and reports
	// whether that ends the scope. It runs on the subtask's goroutine with no lock held, possibly
	// concurrently with other calls. t is the subtask; a policy that does not look at subtasks
	// (traits().looks false) may be given one that is reused afterwards, and must not keep it.
	decide(s *Scope, t Task, err error) (end bool)
	// result is what Join returns when the scope did not end from outside. It runs once, on the
	// owner's goroutine, after every subtask has returned.
	result(s *Scope) error
	// onTimeout, when it is not nil, is what Join returns instead of ErrTimeout when the scope's
	// own deadline ended it (a Joiner's OnTimeout).
	onTimeout() func() error
	// traits say what the scope must tell the policy; fixed for the policy's life.
	traits() traits
}

// traits say what a policy needs to hear, so that the common fork and completion cost it nothing,
// and what a dump calls it.
type traits struct {
	hears bool            // decide is told of successes too, not only failures
	looks bool            // decide looks at the subtask (and may keep it): each call needs a Task of its own
	forks bool            // onFork is asked about every fork
	name  registry.Policy // as package inspect names it
}

// noForks and noTimeout are the built-in policies' onFork and onTimeout: they never refuse a fork
// and never decide a timeout.
type (
	noForks   struct{}
	noTimeout struct{}
)

func (noForks) onFork(Task) error         { return nil }
func (noTimeout) onTimeout() func() error { return nil }

// failFast: the first failure ends the scope and is Join's error.
type failFast struct {
	noForks
	noTimeout
}

func (failFast) decide(_ *Scope, _ Task, err error) bool { return err != nil }
func (failFast) traits() traits                          { return traits{name: registry.FailFast} }

func (failFast) result(s *Scope) error {
	if rec := s.rec; rec != nil && rec.reason.decides() {
		return rec.cause // the first failure (or panic), which ended the scope
	}
	return nil
}

// awaitAll never ends the scope; Join's error joins every failure.
type awaitAll struct {
	noForks
	noTimeout
}

func (awaitAll) decide(*Scope, Task, error) bool { return false }
func (awaitAll) traits() traits                  { return traits{name: registry.AwaitAll} }

func (awaitAll) result(s *Scope) error {
	if s.rec == nil {
		return nil
	}
	return joinAll(s.rec.failures)
}

// firstSuccess: the first success ends the scope (and is Race's winner); failures only count
// when nothing succeeds.
type firstSuccess struct {
	noForks
	noTimeout
}

func (firstSuccess) traits() traits { return traits{hears: true, name: registry.FirstSuccess} }

func (firstSuccess) decide(s *Scope, t Task, err error) bool {
	if err != nil {
		return false
	}
	s.mu.Lock()
	if rec := s.recLocked(); !rec.won {
		rec.won, rec.winner = true, t
	}
	s.mu.Unlock()
	return true
}

func (firstSuccess) result(s *Scope) error {
	switch rec := s.rec; {
	case rec != nil && rec.won:
		return nil
	case rec != nil && len(rec.failures) > 0:
		return joinAll(rec.failures)
	}
	return ErrNoSubtasks
}

// cancelWhen ends the scope when pred holds for a completed subtask; Join returns nil.
type cancelWhen struct {
	noForks
	noTimeout
	pred func(Task) bool
}

func (p cancelWhen) decide(_ *Scope, t Task, _ error) bool { return p.pred(t) }
func (cancelWhen) result(*Scope) error                     { return nil }

func (cancelWhen) traits() traits {
	return traits{hears: true, looks: true, name: registry.CancelWhen}
}

// custom is a Joiner: every one of its methods is one of the policy's.
type custom struct{ j Joiner }

func (p custom) onFork(t Task) error                   { return p.j.OnFork(t) }
func (p custom) decide(_ *Scope, t Task, _ error) bool { return p.j.OnComplete(t) }
func (p custom) result(*Scope) error                   { return p.j.Result() }

func (p custom) onTimeout() func() error {
	if tj, ok := p.j.(timeoutJoiner); ok {
		return tj.OnTimeout
	}
	return nil
}

func (custom) traits() traits {
	return traits{hears: true, looks: true, forks: true, name: registry.Joiner}
}

// endCause is the cancellation cause of a decision on a completion that returned err: the
// failure itself, or context.Canceled for a success.
func endCause(err error) error {
	if err != nil {
		return err
	}
	return context.Canceled
}
