// Package regtest drives the registry the way scope and limiter do — the same calls at the same
// points of a scope's and a limiter call's life — so that the registry and inspect can be tested
// and benchmarked without them. Its Scope is a minimal fork/join scope (goroutine per fork, cancel
// on first failure, optional limit), its Limiter a minimal named limiter with a FIFO of waiters.
package regtest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goloom/loom/internal/registry"
)

// A Scope is a minimal structured scope that reports to the registry.
type Scope struct {
	inner  context.Context // the scope's own context
	ctx    context.Context // what Context returns and subtasks receive
	cancel context.CancelCauseFunc
	stop   context.CancelFunc // the deadline's, if any
	ins    *registry.Scope
	slots  chan struct{} // the limit; nil without
	wg     sync.WaitGroup
	mu     sync.Mutex
	err    error
}

// Options configure Open.
type Options struct {
	Name    string
	Policy  registry.Policy
	Limit   int
	Timeout time.Duration // 0: none
}

// Open opens a scope on ctx. Its site is the line that called Open.
func Open(ctx context.Context, o Options) *Scope {
	s := &Scope{}
	if o.Timeout > 0 {
		ctx, s.stop = context.WithTimeout(ctx, o.Timeout)
	}
	s.inner, s.cancel = context.WithCancelCause(ctx)
	s.ctx = s.inner
	if o.Limit > 0 {
		s.slots = make(chan struct{}, o.Limit)
	}
	if registry.Active() {
		s.ins = registry.Open(s.inner, registry.ScopeInfo{Name: o.Name, Policy: o.Policy, Limit: o.Limit})
		if s.ins != nil {
			s.ctx = s.ins.Context()
		}
	}
	return s
}

// Context returns the scope's context, the one subtasks receive.
func (s *Scope) Context() context.Context { return s.ctx }

// Record returns the scope's registry record, or nil.
func (s *Scope) Record() *registry.Scope { return s.ins }

// A Subtask is a forked function; it embeds its registry Task, as scope.Subtask does.
type Subtask struct {
	fn   func(context.Context) error
	s    *Scope
	node registry.Task
	done chan struct{}
	err  error
}

// Wait waits for the subtask's function to return and returns its error.
func (st *Subtask) Wait() error { <-st.done; return st.err }

// Go forks fn. With a limit it blocks for a slot (counted as a blocked fork) or until the scope
// is cancelled; on a cancelled scope fn does not run.
func (s *Scope) Go(fn func(context.Context) error) *Subtask {
	st := &Subtask{fn: fn, s: s, done: make(chan struct{})}
	if s.slots != nil {
		select {
		case s.slots <- struct{}{}:
		default:
			// Counted in as blocked until it has its slot, as scope does.
			s.ins.ForkBlocked(&st.node)
			select {
			case s.slots <- struct{}{}:
				s.ins.Unblock()
				if s.inner.Err() == nil {
					s.wg.Add(1)
					go st.run()
					return st
				}
				<-s.slots
			case <-s.inner.Done():
				s.ins.Unblock()
			}
			s.ins.Done(registry.Running{}, registry.Cancelled)
			st.err = context.Cause(s.inner)
			close(st.done)
			return st
		}
	}
	if s.inner.Err() != nil {
		s.ins.Refuse(registry.Cancelled)
		st.err = context.Cause(s.inner)
		close(st.done)
		return st
	}
	s.ins.Fork(&st.node)
	s.wg.Add(1)
	go st.run()
	return st
}

func (st *Subtask) run() {
	s := st.s
	r := s.ins.Enter(&st.node, st.fn)
	err := st.fn(s.ctx)
	o := registry.Succeeded
	switch {
	case s.inner.Err() != nil:
		o = registry.Cancelled
	case err != nil:
		o = registry.Failed
		s.mu.Lock()
		if s.err == nil {
			s.err = err
		}
		s.mu.Unlock()
		s.cancel(err)
	}
	st.err = err
	s.ins.Done(r, o)
	if s.slots != nil {
		<-s.slots
	}
	close(st.done)
	s.wg.Done()
}

// Cancel cancels the scope with cause.
func (s *Scope) Cancel(cause error) { s.cancel(cause) }

// Join waits for every subtask and returns the first failure. The scope leaves the registry
// before Join returns.
func (s *Scope) Join() error {
	if s.ins != nil {
		s.ins.Joining()
	}
	s.wg.Wait()
	if s.ins != nil {
		s.ins.Leave()
	}
	s.cancel(nil)
	if s.stop != nil {
		s.stop()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Block returns a function for Go that sends on started (if not nil), then waits until release
// is closed.
func Block(started chan<- struct{}, release <-chan struct{}) func(context.Context) error {
	return func(ctx context.Context) error {
		if started != nil {
			started <- struct{}{}
		}
		<-release
		return nil
	}
}

// ErrBoom is a failure for tests.
var ErrBoom = errors.New("boom")

// Stats mirrors limiter.Stats: the fields a dump shows.
type Stats struct {
	Limit       int
	InFlight    int
	Waiting     int
	Overrunning int
	Submitted   int64
	Completed   int64
	Failed      int64
	Rejected    int64
	TimedOut    int64
	Cancelled   int64
	Panicked    int64
}

// A Limiter is a minimal concurrency limiter that reports to the registry as limiter does.
type Limiter struct {
	slots     chan struct{}
	labels    registry.LimiterLabels
	submitted atomic.Int64
	completed atomic.Int64
	failed    atomic.Int64
	cancelled atomic.Int64
	overrun   atomic.Int64

	mu      sync.Mutex
	waiters []*time.Time // FIFO of the waiting calls' start times
}

// NewLimiter returns a limiter of limit slots, listed in the registry if name is not empty.
func NewLimiter(limit int, name string) *Limiter {
	l := &Limiter{slots: make(chan struct{}, limit), labels: registry.NewLimiterLabels(name)}
	if name != "" {
		registry.AddLimiter(l, name, (*Limiter).info, nil)
	}
	return l
}

func (l *Limiter) info() registry.LimiterInfo {
	l.mu.Lock()
	var oldest time.Duration
	if len(l.waiters) > 0 {
		oldest = time.Since(*l.waiters[0])
	}
	waiting := len(l.waiters)
	l.mu.Unlock()
	return registry.LimiterInfo{Stats: Stats{
		Limit:       cap(l.slots),
		InFlight:    len(l.slots),
		Waiting:     waiting,
		Overrunning: int(l.overrun.Load()),
		Submitted:   l.submitted.Load(),
		Completed:   l.completed.Load(),
		Failed:      l.failed.Load(),
		Cancelled:   l.cancelled.Load(),
	}, OldestWaiting: oldest}
}

// SetOverrunning sets the overrunning gauge, for dumps that show one.
func (l *Limiter) SetOverrunning(n int64) { l.overrun.Store(n) }

// Do runs fn with a slot, waiting in FIFO order (as a "loom.limiter.wait" region while a trace
// records), with fn on the caller's goroutine labelled loom.limiter while Labels is on.
func (l *Limiter) Do(ctx context.Context, fn func(context.Context) error) error {
	l.submitted.Add(1)
	select {
	case l.slots <- struct{}{}:
	default:
		if err := l.wait(ctx); err != nil {
			l.cancelled.Add(1)
			return err
		}
	}
	tctx, labelled := l.labels.Enter(ctx)
	defer func() {
		if labelled {
			registry.RestoreLabels(ctx)
		}
		<-l.slots
	}()
	err := fn(tctx)
	if err != nil {
		l.failed.Add(1)
	} else {
		l.completed.Add(1)
	}
	return err
}

func (l *Limiter) wait(ctx context.Context) error {
	start := time.Now()
	l.mu.Lock()
	l.waiters = append(l.waiters, &start)
	l.mu.Unlock()
	r := registry.StartWait(ctx)
	defer r.End()
	defer func() {
		l.mu.Lock()
		for i, w := range l.waiters {
			if w == &start {
				l.waiters = append(l.waiters[:i], l.waiters[i+1:]...)
				break
			}
		}
		l.mu.Unlock()
	}()
	select {
	case l.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// A Task is one task for RunReused.
type Task struct {
	Ctx context.Context
	Fn  func(context.Context)
}

// RunReused runs tasks one after another on one goroutine of the limiter's own, as Submit's
// goroutines take the next granted task: each task is labelled by the limiter's labels, the
// goroutine marked foreign from the second task on. It returns when the last has returned.
func (l *Limiter) RunReused(tasks ...Task) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i, t := range tasks {
			ctx := l.labels.Task(t.Ctx, i > 0)
			t.Fn(ctx)
		}
	}()
	<-done
}

// Waiting returns how many calls wait for a slot.
func (l *Limiter) Waiting() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.waiters)
}
