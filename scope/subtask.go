package scope

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"
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

// An outcome is a subtask's state and error. While a subtask runs it points at one of its scope's
// two running outcomes, which also lead to the scope; successes share one outcome, and so do the
// subtasks cancelled in one scope, so that only failures allocate.
type outcome struct {
	state State
	goFn  bool   // Running: the fn slot holds Scope.Go's func(context.Context) error
	err   error  // Failed: the failure; Cancelled: the scope's cancellation cause
	s     *Scope // Running: the scope
}

var succeeded = &outcome{state: Succeeded}

// A Subtask is a function forked into a [Scope] by [Fork] or [Scope.Go], and its outcome.
//
// Its methods may be called from any goroutine at any time; the outcome is final once State is no
// longer Running, which is the case for every subtask when Join returns. The result is written
// before the state, so a caller that saw Succeeded sees the value.
type Subtask[T any] struct {
	// Three words for a word-sized T (two for struct{}, placed first so that it adds no padding):
	// with the goroutine's closure, two small allocations a fork.
	val T
	fn  func(context.Context) (T, error)
	// res is never nil. It is set plainly in the composite literal, before the Subtask is shared,
	// and loaded and stored atomically after that (see load and store).
	res *outcome
}

func (st *Subtask[T]) load() *outcome {
	return (*outcome)(atomic.LoadPointer((*unsafe.Pointer)(unsafe.Pointer(&st.res))))
}

func (st *Subtask[T]) store(o *outcome) {
	atomic.StorePointer((*unsafe.Pointer)(unsafe.Pointer(&st.res)), unsafe.Pointer(o))
}

func (st *Subtask[T]) outcome() (State, error) {
	o := st.load()
	return o.state, o.err
}

// State returns the subtask's current state.
func (st *Subtask[T]) State() State { return st.load().state }

// Get returns the result of a Succeeded subtask. It panics, naming the state, in any other state:
// call it after Join, and only for subtasks that succeeded (see [Subtask.Result] for the others).
func (st *Subtask[T]) Get() T {
	switch state, err := st.outcome(); state {
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
func (st *Subtask[T]) Err() error { return st.load().err }

// Result returns the value and nil when the subtask Succeeded, and the zero value with
// [Subtask.Err] when it Failed or was Cancelled. While it is Running it returns the zero value and
// an error saying so.
func (st *Subtask[T]) Result() (T, error) {
	var zero T
	switch state, err := st.outcome(); state {
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

// settle records a final outcome other than success, decided at fork time.
func (st *Subtask[T]) settle(o *outcome) { st.store(o) }

// goFn returns Scope.Go's function, kept in the fn slot.
func (st *Subtask[T]) goFn() func(context.Context) error {
	// Both hold a func value, a single pointer to a closure: only the static type differs.
	return *(*func(context.Context) error)(unsafe.Pointer(&st.fn))
}

// run is the subtask's goroutine. The deferred function tells the three ways out apart: a normal
// return (completed), a panic (recover returns non-nil) and runtime.Goexit (recover returns nil).
func (st *Subtask[T]) run() {
	o := st.load() // a running outcome: it leads to the scope
	completed := false
	defer func() {
		if !completed {
			st.abort(o.s, recover())
		}
	}()
	var v T
	var err error
	if o.goFn {
		err = st.goFn()(o.s.ctx)
	} else {
		v, err = st.fn(o.s.ctx)
	}
	completed = true
	st.finish(o.s, v, err)
}

// finish classifies a returned function: Cancelled if the scope was cancelled first, else
// Failed or Succeeded and handed to the policy.
func (st *Subtask[T]) finish(s *Scope, v T, err error) {
	switch {
	case s.ended():
		st.store(s.rec.cancelled)
	case err != nil:
		st.store(&outcome{state: Failed, err: err})
		s.failed(st, err)
	default:
		st.val = v
		st.store(succeeded)
		if s.policy >= policyFirstSuccess {
			s.succeeded(st)
		}
	}
	if s.sem != nil {
		// Only now that the policy has decided: a fork waiting for this slot must not start
		// between a failure and the cancellation it causes.
		s.sem.Release(1)
	}
	s.done()
}

// abort handles a function that panicked (r != nil) or called runtime.Goexit (r == nil).
func (st *Subtask[T]) abort(s *Scope, r any) {
	if r == nil {
		var zero T
		st.finish(s, zero, ErrGoexit)
		return
	}
	pe := newPanicError(r)
	st.store(&outcome{state: Failed, err: pe}) // a panic is never discarded, even after cancellation
	s.panicked(st, pe)
	if s.sem != nil {
		s.sem.Release(1) // after the panic has cancelled the scope, as in finish
	}
	s.done()
}
