package limiter

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goloom/loom/internal/registry"
	"github.com/goloom/loom/internal/sema"
	"github.com/goloom/loom/internal/window"
)

// A Limiter runs tasks with at most a fixed number of task bodies running at once. Create one
// with [New]. The zero value and a nil *Limiter are not usable: every method panics with
// "limiter: zero Limiter; use New". A Limiter is safe for concurrent use by multiple goroutines
// and must not be copied after first use.
type Limiter struct {
	// slots holds one permit per slot. It is fair, so Do, Call and Submit share one FIFO queue,
	// and a task goroutine that gives its slot back takes over the queued task the slot goes to
	// (sema's ReleaseAndTake) instead of starting a goroutine for it. With a rate, its gate is
	// the rate's bucket: a slot and its token are the first admission step, taken together.
	slots sema.Sema
	rate  *tokens       // WithRate's tokens, the slots' gate; nil without a rate
	meter *window.Meter // WithAdaptive's windows, which move the slots' capacity; nil without
	// steps are the admission steps after the slot, in order (the fleet's permit, then its
	// token), built by New from the options. A call takes them once it holds its slot, on the
	// goroutine that will run its task, and gives them back in reverse.
	steps []step
	cfg   config
	epoch time.Time // with stamp: the base of calls' timestamps
	stamp bool      // calls note when they begin: for the logger, or the steps' share of the acquire timeout
	plain bool      // no logger and no steps: a call on the caller's goroutine needs only its slot

	closed atomic.Bool // Shutdown has begun; set before slots is closed
	// closing is done once Shutdown has begun (cause ErrClosed): it ends the steps' waits, as
	// closing slots ends the waits for a slot. Made only for a limiter with steps.
	closing  context.Context
	closeAll context.CancelCauseFunc

	overrunning atomic.Int64 // tasks holding a slot after their call ended
	shutdown    sync.Once    // closes slots, once

	count  counters
	labels registry.LimiterLabels // loom.limiter = the name, for package inspect's Labels
}

// New returns a Limiter that runs at most limit task bodies at once, configured by opts. It
// panics if limit is below 1 (or above 1<<59).
func New(limit int, opts ...Option) *Limiter {
	if limit < 1 {
		panic(fmt.Sprintf("limiter: New: limit must be at least 1, got %d", limit))
	}
	if int64(limit) > sema.MaxPermits {
		panic(fmt.Sprintf("limiter: New: limit %d above the maximum %d", limit, int64(sema.MaxPermits)))
	}
	c := config{maxWaiting: -1, overload: defaultOverload} // every default, in one place
	for _, opt := range opts {
		opt(&c)
	}
	l := &Limiter{cfg: c, steps: c.steps()}
	l.stamp = c.logger != nil || len(l.steps) > 0 && c.acquireTimed
	if l.stamp {
		l.epoch = time.Now()
	}
	l.plain = c.logger == nil && len(l.steps) == 0
	if len(l.steps) > 0 {
		l.closing, l.closeAll = context.WithCancelCause(context.Background())
	}
	l.slots.Init(int64(limit), true)
	l.slots.SetMaxWaiting(c.maxWaiting) // WithMaxWaiting, kept by the queue itself: exact under any race
	if c.perSecond > 0 {
		l.rate = newTokens(c.perSecond, c.burst)
		l.slots.SetGate(l.rate)
	}
	if c.adaptive != nil {
		l.meter = window.New(c.adaptive, limit, &l.slots, window.Config{})
	}
	l.labels = registry.NewLimiterLabels(c.name)
	if c.name != "" {
		// A named limiter is listed for package inspect's dumps, through a weak pointer: the
		// registry never keeps it alive. Its waiters note when they queued, for the dump's
		// oldest wait.
		l.slots.StampWaiters()
		registry.AddLimiter(l, c.name, (*Limiter).inspectInfo, (*Limiter).inspectConfig)
	}
	return l
}

// inspectInfo is what a dump and an exporter read of the limiter: its stats and its oldest wait.
// inspectConfig is what a dump reads besides: the options it was made with (the limit is a stat:
// WithAdaptive moves it). Method expressions, so that the registry holds nothing that keeps l
// alive.
func (l *Limiter) inspectInfo() registry.LimiterInfo {
	return registry.LimiterInfo{Stats: l.Stats(), OldestWaiting: l.slots.OldestWaiting()}
}

func (l *Limiter) inspectConfig() []registry.Setting {
	c := &l.cfg
	var set []registry.Setting
	add := func(name, value string) { set = append(set, registry.Setting{Name: name, Value: value}) }
	if c.perSecond > 0 {
		add("rate", strconv.FormatFloat(c.perSecond, 'g', 4, 64)+"/s")
		add("burst", strconv.Itoa(c.burst))
	}
	switch {
	case c.acquireTimed && c.acquireTimeout <= 0:
		add("acquireTimeout", "0 (never waits)")
	case c.acquireTimed:
		add("acquireTimeout", c.acquireTimeout.String())
	}
	if c.taskTimeout > 0 {
		add("taskTimeout", c.taskTimeout.String())
	}
	if c.maxWaiting >= 0 {
		add("maxWaiting", strconv.Itoa(c.maxWaiting))
	}
	for _, s := range l.steps {
		s.describe(add) // the fleet's permit and token, each in its own words
	}
	if c.adaptive != nil {
		add("adaptive", fmt.Sprintf("%T", c.adaptive))
	}
	return set
}

// check panics for a Limiter that New did not make (the zero value, or nil) and for a nil ctx.
func (l *Limiter) check(ctx context.Context, op string) {
	if l == nil || !l.slots.Ready() {
		panic("limiter: zero Limiter; use New")
	}
	if ctx == nil {
		panic("limiter: " + op + ": nil context")
	}
}

// Shutdown closes the limiter and waits for its tasks. From the moment it is called, every new
// call and every call still waiting to start — for a slot, a token of [WithRate], or what
// [WithFleet] and [WithFleetRate] wait for — fails with [ErrClosed] (counted Rejected), and no
// task starts. It then waits until no task holds a slot, overrunning ones included, and returns
// nil; or, if ctx ends first, it returns ctx's error, wrapped with the number of tasks still
// running. Shutdown may be called again, concurrently too, to wait some more. It must not be
// called from a task of the limiter, which would wait for itself.
func (l *Limiter) Shutdown(ctx context.Context) error {
	l.check(ctx, "Shutdown")
	l.shutdown.Do(func() {
		// closed first: a call admitted after this sees it before its task starts (see
		// admitRest).
		l.closed.Store(true)
		l.slots.Close(ErrClosed)
		if l.closeAll != nil {
			l.closeAll(ErrClosed)
		}
	})
	drained := l.slots.Drained()
	select {
	case <-drained:
		return nil
	default:
	}
	select {
	case <-drained:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("limiter: shutdown: %d tasks still running: %w", l.inFlight(), ctxErr(ctx))
	}
}
