package semaphore

import "github.com/goloom/loom/internal/sema"

// ErrTimeout is returned by [Semaphore.AcquireTimeout] when its wait times out. It also matches
// context.DeadlineExceeded.
var ErrTimeout = sema.ErrTimeout

// ErrInvalidWeight is returned for a request that can never be served: n < 0, or n above the
// capacity (at the call, or after a [Semaphore.SetCapacity] shrink while it waits). The returned
// error wraps it with the figures; test it with errors.Is.
var ErrInvalidWeight = sema.ErrInvalidWeight
