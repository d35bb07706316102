package fleet

import (
	"context"
	"errors"
	"fmt"
)

// ErrTimeout is returned by [Semaphore.AcquireTimeout] when no permit came within its time, and
// by [Rate.Wait] when the next token would come after the ctx deadline. It matches
// context.DeadlineExceeded and has a Timeout method that returns true.
var ErrTimeout error = timeoutError("fleet: acquire timed out")

// ErrUnavailable is matched (errors.Is) by the error of an Acquire, or a [Rate] reservation, that
// could not reach the backend while [FailClosed] is in force (or when [Degrade] allows fewer
// permits than asked). The error also wraps the backend's own error.
var ErrUnavailable = errors.New("fleet: backend unavailable")

// ErrLeaseLost is the cause (context.Cause) of a [Permit]'s context once its lease is gone while
// it was held: it could not be renewed before it expired, the backend no longer knew it, or the
// Semaphore was closed under it. Work guarded by the permit must stop: another process may hold
// the permit now.
var ErrLeaseLost = errors.New("fleet: lease lost")

// ErrClosed is returned by Acquire after [Semaphore.Close], and by every Acquire that was still
// waiting when Close was called.
var ErrClosed = errors.New("fleet: semaphore closed")

// ErrInvalidWeight is returned at once for a request that can never be served: n < 1, or n above
// the Semaphore's capacity. The returned error wraps it with the figures.
var ErrInvalidWeight = errors.New("fleet: invalid weight")

// errCloseLost is the cause of the context of a permit that [Semaphore.Close] released while it
// was held: the lease is gone (ErrLeaseLost) because the Semaphore was closed (ErrClosed).
var errCloseLost = fmt.Errorf("%w: %w", ErrLeaseLost, ErrClosed)

type timeoutError string

func (e timeoutError) Error() string        { return string(e) }
func (e timeoutError) Is(target error) bool { return target == context.DeadlineExceeded }
func (e timeoutError) Timeout() bool        { return true } // like net.Error, for callers that ask

// unavailable wraps the backend's error so that it matches both ErrUnavailable and the cause.
func unavailable(cause error) error {
	if cause == nil {
		return ErrUnavailable
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, cause)
}

// ctxErr is the error of a call whose ctx ended: ctx.Err(), and the cause as well when the ctx
// was cancelled with one, so that errors.Is finds either.
func ctxErr(ctx context.Context) error {
	err := ctx.Err()
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return fmt.Errorf("%w: %w", err, cause)
	}
	return err
}

// errBehind is a backend's answer to a request's Behind of the wrong length.
func errBehind(got, want int) error {
	return fmt.Errorf("fleet: backend answered %d requests behind the asker for %d", got, want)
}
