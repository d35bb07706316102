package limiter

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/goloom/loom/limiter/adaptive"
)

// An Option configures a Limiter. Options are applied by [New]; the configuration is fixed once
// New returns.
type Option func(*config)

type config struct {
	name           string
	acquireTimeout time.Duration
	acquireTimed   bool // WithAcquireTimeout was given; d <= 0 then means "never wait"
	maxWaiting     int  // < 0: no bound
	taskTimeout    time.Duration
	logger         *slog.Logger
	perSecond      float64 // WithRate; 0: no rate
	burst          int
	adaptive       adaptive.Controller // WithAdaptive
	overload       func(error) bool    // WithOverload; defaultOverload unless given

	// The admission steps after the slot, each set by its option (WithFleet, WithFleetRate) and
	// put in their one order by New. Interfaces, so that a program that uses neither option
	// links no code of package fleet.
	permit step
	token  step
}

// steps returns the admission steps after the slot, in the order a call takes them: the fleet's
// permit, then its token.
func (c *config) steps() []step {
	var steps []step
	for _, s := range []step{c.permit, c.token} {
		if s != nil {
			steps = append(steps, s)
		}
	}
	return steps
}

// WithAcquireTimeout bounds how long a call waits for a slot: after d it is rejected with
// [ErrAcquireTimeout] (matching [ErrRejected]), counted Rejected. With d <= 0 a call never waits:
// it runs at once if a slot is free and nobody is queued, else it is rejected. Without this
// option a call waits until a slot frees or its ctx ends. With [WithFleet] or [WithFleetRate] the
// same d, counted from the call's start, covers the waits for the fleet too.
func WithAcquireTimeout(d time.Duration) Option {
	return func(c *config) { c.acquireTimeout, c.acquireTimed = d, true }
}

// WithMaxWaiting bounds how many calls may wait for a slot at once (blocked Do and Call callers
// and queued Submits together): a call that would be one more is rejected at once with
// [ErrTooManyWaiting] (matching [ErrRejected]). With n == 0 nothing ever waits. It panics if n is
// negative. Without this option the queue is unbounded.
func WithMaxWaiting(n int) Option {
	if n < 0 {
		panic(fmt.Sprintf("limiter: WithMaxWaiting: negative bound %d", n))
	}
	return func(c *config) { c.maxWaiting = n }
}

// WithTaskTimeout bounds how long a task may run: d after it starts, its context is cancelled
// with cause [ErrTaskTimeout] and its call returns ErrTaskTimeout at once, counted TimedOut,
// whether or not the task heeds its context. A task that goes on running keeps its slot until it
// returns and is counted in [Stats].Overrunning meanwhile, so the limit holds. Once the timeout
// has fired the call's result is ErrTaskTimeout, even if fn returns a value just after (unless
// it panicked). With a task timeout, [Limiter.Do] and [Call] run the task on a goroutine of its
// own. The timer is the task context's own: one timer and one goroutine per call. It panics
// unless d > 0.
func WithTaskTimeout(d time.Duration) Option {
	if d <= 0 {
		panic(fmt.Sprintf("limiter: WithTaskTimeout: timeout must be positive, got %v", d))
	}
	return func(c *config) { c.taskTimeout = d }
}

// WithName names the limiter. The name does three things:
//
//   - It is the "limiter" attribute of every record [WithLogger]'s logger gets.
//   - It lists the limiter for package inspect's dumps and for the metrics exporters (through a
//     weak pointer: the listing never keeps the limiter alive), and makes every queued call note
//     when it began to wait (a clock read per wait that queues), so that a dump can show how long
//     the oldest has waited.
//   - It is the value of the pprof label loom.limiter on every task while package inspect's
//     Labels feature is on ("limiter" for an unnamed limiter).
//
// An empty name, the default, lists nothing and stamps nothing.
func WithName(name string) Option { return func(c *config) { c.name = name } }

// WithLogger makes the limiter write one record to logger for each rejected call (Warn), each
// task timeout (Warn) and each panic (Error), with the limiter's name and the time the call
// waited or ran. Successful calls, task errors and cancellations are not logged. The logger is
// never called with a lock of the limiter held, and every record about a call is written after
// the call's slot has been released, so a handler may call back into the limiter: the record of
// a task that overran its timeout is written when the task returns (until then it shows in
// [Stats].Overrunning). A nil logger, the default, logs nothing.
func WithLogger(logger *slog.Logger) Option { return func(c *config) { c.logger = logger } }
