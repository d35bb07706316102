package limiter

import (
	"context"
	"errors"
	"fmt"
)

// ErrRejected is matched (errors.Is) by every error of a call that got no slot: [ErrAcquireTimeout],
// [ErrTooManyWaiting] and [ErrClosed]. Such a call never ran and is counted in [Stats].Rejected.
var ErrRejected = errors.New("limiter: rejected")

// ErrAcquireTimeout is returned by a call that found no free slot within the time set by
// [WithAcquireTimeout]. It matches [ErrRejected] and, like every timeout of loom,
// context.DeadlineExceeded; its Timeout method reports true.
var ErrAcquireTimeout error = &acquireTimeoutError{rejectedError{"limiter: rejected: no slot within the acquire timeout"}}

// ErrTooManyWaiting is returned at once by a call that would have waited while as many calls as
// [WithMaxWaiting] allows were already waiting. It matches [ErrRejected].
var ErrTooManyWaiting error = &rejectedError{"limiter: rejected: too many waiting"}

// ErrClosed is returned by every call made after [Limiter.Shutdown] began, and by every call
// that was still waiting for a slot when it began. It matches [ErrRejected], as Java's executors
// reject work after shutdown.
var ErrClosed error = &rejectedError{"limiter: closed"}

// rejectedError is the detail of a rejection; it unwraps to ErrRejected.
type rejectedError struct{ msg string }

func (e *rejectedError) Error() string { return e.msg }
func (e *rejectedError) Unwrap() error { return ErrRejected }

// acquireTimeoutError is a rejection that is also a timeout.
type acquireTimeoutError struct{ rejectedError }

func (e *acquireTimeoutError) Is(target error) bool { return target == context.DeadlineExceeded }
func (e *acquireTimeoutError) Timeout() bool        { return true }

// ErrTaskTimeout is returned by a call whose task ran longer than [WithTaskTimeout] allows. It is
// also the cause (context.Cause) of the task's context from that moment on. It matches
// context.DeadlineExceeded, which is what the task's ctx.Err() returns then.
var ErrTaskTimeout error = timeoutError("limiter: task timed out")

type timeoutError string

func (e timeoutError) Error() string        { return string(e) }
func (e timeoutError) Is(target error) bool { return target == context.DeadlineExceeded }
func (e timeoutError) Timeout() bool        { return true } // like net.Error, for callers that ask

// ErrGoexit is returned by a call whose task called runtime.Goexit (t.FailNow does) on a
// goroutine of the limiter's own. Where the task runs on the caller's goroutine ([Limiter.Do]
// and [Call] without a task timeout) Goexit ends the caller instead, as it would without the
// limiter.
var ErrGoexit = errors.New("limiter: task called runtime.Goexit")

// A PanicError carries a panic from a task. The call that ran the task returns it (errors.As
// finds it); other calls and the limiter go on unharmed, and the task's slot is released.
type PanicError struct {
	Value any    // what was passed to panic; Unwrap returns it when it is an error
	Stack []byte // the task's stack at the panic
}

// Error returns the panic value, prefixed with "limiter: task panicked: ". The stack is in
// Stack (and in the limiter's log record of the panic), not in the message: a Do's error is
// returned, not re-panicked, so it is logged where it lands, on one line.
func (e *PanicError) Error() string { return fmt.Sprintf("limiter: task panicked: %v", e.Value) }

// Unwrap returns the panic value if it is an error, so errors.Is and errors.As reach it.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// ctxErr is the error of a call whose ctx ended: ctx.Err(), and the cause as well when the
// ctx was cancelled with one, so that errors.Is finds either.
func ctxErr(ctx context.Context) error {
	err := ctx.Err()
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return fmt.Errorf("%w: %w", err, cause)
	}
	return err
}
