package scope

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/goloom/loom/internal/registry"
)

// State is where a subtask is in its life. A subtask starts Running and moves exactly once to one
// of the other three states.
type State int32

const (
	// Running: the function has not returned yet (or the fork is still being decided).
	Running State = iota
	// Succeeded: the function returned a nil error before the scope was cancelled.
	Succeeded
	// Failed: the function returned an error before the scope was cancelled, [Joiner.OnFork]
	// rejected the fork, the function called runtime.Goexit ([ErrGoexit]), or it panicked
	// ([*PanicError]) — at any time: a panic is never discarded.
	Failed
	// Cancelled: the subtask had not completed when the scope was cancelled, or was forked after
	// that. Its outcome is discarded and never counts as a failure.
	Cancelled
)

func (s State) String() string {
	switch s {
	case Running:
		return "Running"
	case Succeeded:
		return "Succeeded"
	case Failed:
		return "Failed"
	case Cancelled:
		return "Cancelled"
	}
	return fmt.Sprintf("State(%d)", int32(s))
}

// A Task is the untyped view of a subtask that a [Joiner] and a [CancelWhen] predicate see. Every
// [*Subtask] implements it.
type Task interface {
	// State returns the subtask's current state.
	State() State
	// Err returns the subtask's error: nil while Running or when Succeeded, the failure when
	// Failed, the scope's cancellation cause when Cancelled.
	Err() error
	// Value returns the subtask's result when it Succeeded, nil otherwise.
	Value() any
}

// errRunning is what Result reports for a subtask whose function has not returned.
var errRunning = errors.New("scope: subtask is still running")

// An outcome is a subtask's final state and error. Successes share one outcome, and so do the
// subtasks cancelled in one scope, so that only failures allocate.
type outcome struct {
	state State
	err   error // Failed: the failure; Cancelled: the scope's cancellation cause
}

var succeeded = &outcome{state: Succeeded}

// A Subtask is a function forked into a [Scope] by [Fork] or [Scope.Go], and its outcome.
//
// Its methods may be called from any goroutine at any time; the outcome is final once State is no
// longer Running, which is the case for every subtask when Join returns. The result is written
// before the state, so a caller that saw Succeeded sees the value.
type Subtask[T any] struct {
	val T
	fn  func(context.Context) (T, error) // Fork's; nil for Scope.Go's, which a goTask keeps
	// res is the final outcome; nil while the subtask is Running.
	res atomic.Pointer[outcome]
	s   *Scope
	// rec is the subtask's place in its scope's inspection record, when the scope is recorded:
	// in the subtask's own allocation, so that a recorded fork allocates no more than any fork.
	rec registry.Task
}

// A goTask is a subtask forked by Scope.Go: its function returns only an error, so it is kept
// here, next to the Subtask[struct{}] that Go returns, instead of in a wrapper closure — one
// allocation a fork, as for Fork.
type goTask struct {
	Subtask[struct{}]
	fn func(context.Context) error
}

// state returns the subtask's state and error.
func (st *Subtask[T]) state() (State, error) {
	if o := st.res.Load(); o != nil {
		return o.state, o.err
	}
	return Running, nil
}

// State returns the subtask's current state.
func (st *Subtask[T]) State() State {
	state, _ := st.state()
	return state
}

// Get returns the result of a Succeeded subtask. It panics, naming the state, in any other state:
// call it after Join, and only for subtasks that succeeded (see [Subtask.Result] for the others).
func (st *Subtask[T]) Get() T {
	switch state, err := st.state(); state {
	case Succeeded:
		return st.val
	case Running:
		panic("scope: Get on a subtask in state Running (call Join first)")
	default:
		panic(fmt.Sprintf("scope: Get on a subtask in state %v: %v", state, err))
	}
}

// Err returns nil while the subtask is Running or when it Succeeded, its failure when Failed, and
// the scope's cancellation cause (context.Cause of the scope's context) when Cancelled.
func (st *Subtask[T]) Err() error {
	_, err := st.state()
	return err
}

// Result returns the value and nil when the subtask Succeeded, and the zero value with
// [Subtask.Err] when it Failed or was Cancelled. While it is Running it returns the zero value and
// an error saying so.
func (st *Subtask[T]) Result() (T, error) {
	var zero T
	switch state, err := st.state(); state {
	case Succeeded:
		return st.val, nil
	case Running:
		return zero, errRunning
	default:
		return zero, err
	}
}

// Value returns the result as an any when the subtask Succeeded, nil otherwise. It makes a
// Subtask a [Task].
func (st *Subtask[T]) Value() any {
	if st.State() != Succeeded {
		return nil
	}
	return st.val
}

func (st *Subtask[T]) settle(o *outcome) { st.res.Store(o) }

// after ends a forked subtask's time in its scope: its slot goes on, and it is counted out.
func (st *Subtask[T]) after(s *Scope) subtask {
	if s.slots != nil {
		return s.finish()
	}
	s.done()
	return nil
}

// node is the subtask's place in its scope's inspection record (used only when there is one).
func (st *Subtask[T]) node() *registry.Task { return &st.rec }

// forked is the function the subtask was forked with, for its site in a dump.
func (st *Subtask[T]) forked() any { return st.fn }
func (gt *goTask) forked() any     { return gt.fn }

// task is the subtask as user code sees it — the very pointer Fork or Go returned — for the
// policy and a Joiner, which may keep it as a key.
func (st *Subtask[T]) task() Task { return st }
func (gt *goTask) task() Task     { return &gt.Subtask }

// A subtask is what its scope drives through one life, whatever its kind: a *Subtask[T] forked
// by Fork or Go (plain or recorded), a call of a Stream, a call of Map. Each runs through body,
// and differs only in the function it calls (invoke), where it is recorded (node, forked) and what
// ends its time in the scope (after).
type subtask interface {
	call
	node() *registry.Task
	forked() any
	// invoke calls the subtask's function with ctx and keeps its value.
	invoke(ctx context.Context) error
	// after ends the subtask's time in the scope once its outcome is settled and recorded, and
	// returns what this goroutine runs next: a forked subtask frees its slot — to a blocked fork,
	// which it returns — and is counted out (Scope.finish); a Stream's call tells the stream and
	// returns the next call for its worker; a call of Map returns the worker's next element.
	after(s *Scope) (next subtask)
}

// run is the body of a subtask's goroutine: it runs t and then whatever t hands it next — in a
// limited scope each blocked fork whose subtask its slot goes to, a worker's next call — one
// after the other, through body.
func run(s *Scope, t subtask) {
	for t != nil {
		t = s.body(t)
	}
}

// start is what a forked subtask's goroutine runs (see launch).
func (st *Subtask[T]) start() { run(st.s, st) }
func (gt *goTask) start()     { run(gt.s, gt) }

// invoke calls Fork's function and keeps its value, or Go's.
func (st *Subtask[T]) invoke(ctx context.Context) (err error) {
	st.val, err = st.fn(ctx)
	return err
}

func (gt *goTask) invoke(ctx context.Context) error { return gt.fn(ctx) }

// body runs a subtask's function and ends the subtask's life, and then does the same for each
// subtask that after hands this goroutine: the one place where a forked function runs, whatever
// forked it. The deferred function — one for the whole run, not one a subtask — tells the three
// ways out of a function apart: a normal return (inFn is false again), a panic (recover returns
// non-nil) and runtime.Goexit (recover returns nil). After a panic body returns the subtask to run
// next, for run to call it again; after a Goexit, which ends this goroutine, that subtask goes to
// a new one.
//
// In a recorded scope (s.ins), a subtask enters the record first, on its goroutine — its start
// time, its goroutine's pprof labels, its trace region — and leaves it once its outcome is settled,
// before it is counted out: a dump never shows it running once Join could return.
func (s *Scope) body(t subtask) (next subtask) {
	var r registry.Running
	inFn := false
	defer func() {
		if !inFn {
			return
		}
		if p := recover(); p != nil {
			s.left(s.complete(t, nil, newPanicError(p)), r)
			next = t.after(s)
			return
		}
		s.left(s.complete(t, ErrGoexit, nil), r)
		if next := t.after(s); next != nil {
			go run(s, next)
		}
	}()
	for t != nil {
		if s.ins != nil {
			r = s.ins.Enter(t.node(), t.forked())
		}
		inFn = true
		err := t.invoke(s.ctx)
		inFn = false
		o := s.complete(t, err, nil)
		if s.ins != nil {
			s.ins.Done(r, registry.Outcome(o.state))
		}
		t = t.after(s)
	}
	return nil
}

// left takes a completed subtask off its scope's record (r is what its Enter returned): after
// complete, before after counts it out.
func (s *Scope) left(o *outcome, r registry.Running) {
	if s.ins != nil {
		s.ins.Done(r, registry.Outcome(o.state))
	}
}

// A call is what complete needs of the subtask it ends.
type call interface {
	Task
	settle(o *outcome)
	task() Task
}

// complete ends one call's life in the scope: the one step that every subtask — forked by Fork
// or Go, or one of Map's calls — ends through. fn returned err, or panicked (pe != nil; a
// runtime.Goexit comes as err == ErrGoexit). complete classifies the end, settles it on c, hands
// it to the policy and returns it:
//
//   - a panic is Failed whenever it came, kept for Join, and — if it came before the scope was
//     cancelled — a failure that ends the scope at once;
//   - otherwise, if the scope was cancelled first, Cancelled: this is the linearization point of
//     a completion (see Scope.ended);
//   - else Failed or Succeeded, and the policy decides on it.
//
// The outcome is settled on c before the policy hears of it, so that a Joiner sees it. The
// caller then frees the call's slot and counts it out (Scope.finish), in that order: a blocked
// fork must not start between a failure and the cancellation the policy makes of it.
func (s *Scope) complete(c call, err error, pe *PanicError) (o *outcome) {
	switch {
	case pe != nil:
		o = &outcome{state: Failed, err: pe}
		c.settle(o)
		s.panicked(c, pe)
	case s.ended():
		o = s.cancelledOutcome()
		c.settle(o)
	case err != nil:
		o = &outcome{state: Failed, err: err}
		c.settle(o)
		s.failed(c, err)
	default:
		o = succeeded
		c.settle(o)
		if s.tr.hears {
			s.succeeded(c)
		}
	}
	return o
}
