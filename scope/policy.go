package scope

import "context"

// A policy decides when a scope is done and what Join returns. The built-in policies and a custom
// Joiner are all one of these; the scope asks it in two places only: when a subtask completes
// before the scope was cancelled (decide) and when Join computes its result (result).
type policy interface {
	// decide is told of a subtask that completed before the scope was cancelled — a failure
	// (err != nil; a panic included) or, if the policy hears successes, a success — and reports
	// whether that ends the scope. It runs on the subtask's goroutine with no lock held, possibly
	// concurrently with other calls. t is nil unless the policy looks at subtasks.
	decide(s *Scope, t Task, err error) (end bool)
	// result is what Join returns when the scope did not end from outside. It runs once, on the
	// owner's goroutine, after every subtask has returned.
	result(s *Scope) error
	// traits say what the scope must tell the policy; fixed for the policy's life.
	traits() traits
	// String names the policy, as inspect shows it.
	String() string
}

// traits say what a policy needs to hear, so that the common completion costs it nothing.
type traits struct {
	hears bool // decide is told of successes too, not only failures
	looks bool // decide looks at the subtask: Map must give it one
}

// failFast: the first failure ends the scope and is Join's error.
type failFast struct{}

func (failFast) decide(_ *Scope, _ Task, err error) bool { return err != nil }
func (failFast) traits() traits                          { return traits{} }
func (failFast) String() string                          { return "FailFast" }

func (failFast) result(s *Scope) error {
	if rec := s.rec; rec != nil && rec.reason.decides() {
		return rec.cause // the first failure (or panic), which ended the scope
	}
	return nil
}

// awaitAll never ends the scope; Join's error joins every failure.
type awaitAll struct{}

func (awaitAll) decide(*Scope, Task, error) bool { return false }
func (awaitAll) traits() traits                  { return traits{} }
func (awaitAll) String() string                  { return "AwaitAll" }

func (awaitAll) result(s *Scope) error {
	if s.rec == nil {
		return nil
	}
	return joinAll(s.rec.failures)
}

// firstSuccess: the first success ends the scope (and is Race's winner); failures only count
// when nothing succeeds.
type firstSuccess struct{}

func (firstSuccess) traits() traits { return traits{hears: true} }
func (firstSuccess) String() string { return "FirstSuccess" }

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
type cancelWhen struct{ pred func(Task) bool }

func (p cancelWhen) decide(_ *Scope, t Task, _ error) bool { return p.pred(t) }
func (cancelWhen) result(*Scope) error                     { return nil }
func (cancelWhen) traits() traits                          { return traits{hears: true, looks: true} }
func (cancelWhen) String() string                          { return "CancelWhen" }

// custom is a Joiner: OnComplete decides, Result is Join's error. OnFork and OnTimeout are asked
// by the scope directly (see admitSlow and outcome).
type custom struct{ j Joiner }

func (p custom) decide(_ *Scope, t Task, _ error) bool { return p.j.OnComplete(t) }
func (p custom) result(*Scope) error                   { return p.j.Result() }
func (custom) traits() traits                          { return traits{hears: true, looks: true} }
func (custom) String() string                          { return "Joiner" }

// endCause is the cancellation cause of a decision on a completion that returned err: the
// failure itself, or context.Canceled for a success.
func endCause(err error) error {
	if err != nil {
		return err
	}
	return context.Canceled
}
