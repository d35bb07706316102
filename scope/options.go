package scope

import (
	"fmt"
	"time"

	"github.com/goloom/loom/semaphore"
)

// An Option configures a scope at [Open] (and [Map]). Later options override earlier ones of the
// same kind; in particular the last policy ([FailFast], [AwaitAll], [FirstSuccess], [CancelWhen],
// [WithJoiner]) wins.
type Option func(*config)

// config collects the options during Open; the Scope keeps what it needs.
type config struct {
	policy         policy // nil: FailFast
	name           string
	timeout        time.Duration
	hasTimeout     bool
	limit          int // 0: no limit
	panicsAsErrors bool
}

// WithTimeout cancels the scope d after [Open] if a subtask is still running then, or is forked
// later; Join then returns an error matching [ErrTimeout] and context.DeadlineExceeded, joined
// with the failures that happened before. If every subtask had completed by the deadline, the
// deadline changes nothing (the scope's context is still done). Subtasks that succeeded before
// the deadline keep their results. d <= 0 is already expired, as with context.WithTimeout. The
// scope's context reports the deadline.
func WithTimeout(d time.Duration) Option {
	return func(c *config) { c.timeout, c.hasTimeout = d, true }
}

// WithName names the scope, for [Scope.Name] and debugging.
func WithName(name string) Option { return func(c *config) { c.name = name } }

// WithLimit lets at most n subtasks of the scope run at once. A Fork beyond the limit blocks
// until a slot frees, and returns a Cancelled subtask without running its function if the scope
// is cancelled meanwhile. A subtask that forks into its own scope while holding a slot may thus
// wait for a slot that only it can free; give such trees a limit above their depth. It panics at
// once if n < 1 or n > [semaphore.MaxPermits].
func WithLimit(n int) Option {
	if n < 1 {
		panic("scope: WithLimit: n must be at least 1")
	}
	if int64(n) > semaphore.MaxPermits {
		panic(fmt.Sprintf("scope: WithLimit: n %d above the maximum %d", n, semaphore.MaxPermits))
	}
	return func(c *config) { c.limit = n }
}

// PanicsAsErrors makes a panicking subtask an ordinary failure: its [*PanicError] competes for
// "first failure" like any error, Join returns it (or an error wrapping it) instead of
// re-panicking, and Close never re-panics. A panic still cancels the scope at once, and none is
// ever lost: every *PanicError of the scope, also of subtasks that panicked after it was
// cancelled, is in Join's error (errors.Join of the policy's result and the panics, in order).
func PanicsAsErrors() Option { return func(c *config) { c.panicsAsErrors = true } }
