package semaphore

import (
	"context"
	"errors"
	"fmt"

	"github.com/goloom/loom/internal/sema"
)

// ErrTimeout is returned by [Semaphore.AcquireTimeout] when its wait times out. It also matches
// context.DeadlineExceeded, and its Timeout method reports true, as net.Error's does.
var ErrTimeout error = timeoutError("semaphore: acquire timed out")

// ErrInvalidWeight is returned for a request that can never be served: n < 0, or n above the
// capacity (at the call, or after a [Semaphore.SetCapacity] shrink while it waits). The returned
// error wraps it with the figures; test it with errors.Is.
var ErrInvalidWeight = errors.New("semaphore: invalid weight")

type timeoutError string

func (e timeoutError) Error() string        { return string(e) }
func (e timeoutError) Is(target error) bool { return target == context.DeadlineExceeded }
func (e timeoutError) Timeout() bool        { return true }

// public turns the core's errors into this package's; a ctx's error passes as is. Small enough to
// inline, so that a nil error costs no call.
func public(err error) error {
	if err == nil {
		return nil
	}
	return translate(err)
}

func translate(err error) error {
	switch err {
	case sema.ErrTimeout:
		return ErrTimeout
	}
	var we *sema.WeightError
	if errors.As(err, &we) {
		return fmt.Errorf("%w: %v", ErrInvalidWeight, we)
	}
	return err
}
