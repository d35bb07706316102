package scope

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
)

// ErrTimeout is the cause of a scope whose [WithTimeout] deadline passed while a subtask was
// still running (or before a later fork); Join's error then matches it. It also matches
// context.DeadlineExceeded, so errors.Is(err, context.DeadlineExceeded) holds as well.
var ErrTimeout error = timeoutError("scope: timed out")

// ErrGoexit is the error of a subtask whose function called runtime.Goexit (as t.FailNow does)
// instead of returning. The subtask is Failed with it like with any error; Join never hangs on it.
var ErrGoexit = errors.New("scope: subtask called runtime.Goexit")

// ErrNoSubtasks is returned by Join under [FirstSuccess] when nothing was forked, and by [Race]
// when it is given no functions: with no candidates there can be no first success.
var ErrNoSubtasks = errors.New("scope: no subtasks")

type timeoutError string

func (e timeoutError) Error() string        { return string(e) }
func (e timeoutError) Is(target error) bool { return target == context.DeadlineExceeded }
func (e timeoutError) Timeout() bool        { return true } // like net.Error, for callers that ask

// A PanicError carries a panic from a forked function (or from a custom [Joiner]). By default
// Join (or Close, when no Join surfaced it) re-panics with it on the owner's goroutine; with
// [PanicsAsErrors] Join returns it as an error. It is also the Err of the subtask that panicked
// and the scope's cancellation cause when the panic ended the scope.
type PanicError struct {
	Value any    // what was passed to panic; Unwrap returns it when it is an error
	Stack []byte // the stack of the goroutine that panicked, from runtime/debug.Stack
}

func newPanicError(v any) *PanicError { return &PanicError{Value: v, Stack: debug.Stack()} }

// Error returns the panic value and, after a blank line, the stack of the goroutine that
// panicked. When a re-panic reaches the top of the owner's goroutine, the runtime prints this
// text: the crash then shows where the child panicked, not only where Join re-raised it.
func (e *PanicError) Error() string {
	return fmt.Sprintf("scope: subtask panicked: %v\n\n%s", e.Value, e.Stack)
}

// Unwrap returns the panic value when it is an error, so that errors.Is and errors.As reach it,
// and nil otherwise.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// joinCause is the error of a scope that ended from outside: the cause, then the failures that
// happened before it.
func joinCause(cause error, failures []error) error {
	if len(failures) == 0 {
		return cause
	}
	return errors.Join(append([]error{cause}, failures...)...)
}

// joinAll is errors.Join that returns a lone error as itself.
func joinAll(errs []error) error {
	if len(errs) == 1 {
		return errs[0]
	}
	return errors.Join(errs...)
}
