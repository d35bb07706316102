package scope

import (
	"context"
	"sync"
	"sync/atomic"
)

// All runs every function in its own subtask of a fail-fast scope opened on ctx and returns their
// results in input order. The first failure cancels the others and is the error returned (with a
// nil slice); a panic re-panics on the caller's goroutine as a [*PanicError]. With no functions it
// returns an empty slice and nil. It panics at once if a function is nil.
func All[T any](ctx context.Context, fns ...func(context.Context) (T, error)) ([]T, error) {
	for _, fn := range fns {
		if fn == nil {
			panic("scope: All: nil function")
		}
	}
	return mapOver(ctx, fns, invoke[T], nil, true)
}

func invoke[T any](ctx context.Context, fn func(context.Context) (T, error)) (T, error) {
	return fn(ctx)
}

// Race runs every function in its own subtask of a [FirstSuccess] scope opened on ctx and returns
// the first success, cancelling the rest. If none succeeds it returns errors.Join of the failures;
// with no functions, an error matching [ErrNoSubtasks]. A panic re-panics on the caller's
// goroutine as a [*PanicError].
func Race[T any](ctx context.Context, fns ...func(context.Context) (T, error)) (T, error) {
	s := Open(ctx, FirstSuccess())
	defer s.Close()
	for _, fn := range fns {
		Fork(s, fn)
	}
	if err := s.Join(); err != nil {
		var zero T
		return zero, err
	}
	return s.rec.winner.(*Subtask[T]).val, nil // FirstSuccess's decide kept the first success
}

// Map calls fn for every element of in, each call a subtask of a scope opened on ctx with opts, and
// returns the results in input order. The default policy is [FailFast]; any [Option] applies, e.g.
// [WithLimit] to bound the calls running at once, [AwaitAll] to run every call whatever fails, or
// [WithTimeout].
//
// When Join returns an error, Map returns a nil slice with it. When it returns nil, out[i] is
// fn's result for in[i] if that call succeeded and the zero value otherwise (only policies that
// cancel early without failing, such as [FirstSuccess] or [CancelWhen], leave such gaps). A panic
// in fn re-panics on the caller's goroutine as a [*PanicError] (or is an error with
// [PanicsAsErrors]).
//
// Map runs its calls on worker goroutines — n of them with WithLimit(n), one per element without
// — that take the elements in input order; each call is a subtask in every respect (outcome,
// policy, cancellation, panics, runtime.Goexit) and runs through the same steps as a forked one.
// Once the scope is cancelled, the calls not started yet are not started. With a custom [Joiner],
// OnFork is asked about each call by the worker about to run it, so calls may be concurrent.
func Map[In, Out any](ctx context.Context, in []In, fn func(context.Context, In) (Out, error), opts ...Option) ([]Out, error) {
	if fn == nil {
		panic("scope: Map: nil function")
	}
	return mapOver(ctx, in, fn, opts, false)
}

// mapOver is Map; callsAreIn says that the elements are the functions the user forked (All), so
// that a dump shows their sites rather than fn's.
func mapOver[In, Out any](ctx context.Context, in []In, fn func(context.Context, In) (Out, error), opts []Option, callsAreIn bool) ([]Out, error) {
	s := Open(ctx, opts...)
	defer s.Close()
	out := make([]Out, len(in))
	workers := len(in)
	if s.slots != nil && int(s.slots.Capacity()) < workers {
		workers = int(s.slots.Capacity())
	}
	m := &mapper[In, Out]{s: s, fn: fn, in: in, out: out, looks: s.tr.looks, callsAreIn: callsAreIn}
	m.wg.Add(workers)
	for range workers {
		go m.work()
	}
	m.wg.Wait()
	if err := s.Join(); err != nil {
		return nil, err
	}
	return out, nil
}

// mapper runs Map's calls on worker goroutines. Its workers are the scope's goroutines, not
// counted in it: Map waits for them (wg) before Join.
type mapper[In, Out any] struct {
	s     *Scope
	fn    func(context.Context, In) (Out, error)
	in    []In
	out   []Out
	wg    sync.WaitGroup // the workers
	next  atomic.Int64   // the next element to take
	looks bool           // the policy looks at subtasks: each call needs its own (see take)
	// callsAreIn says the elements are the functions forked (All), for their sites.
	callsAreIn bool
}

func (m *mapper[In, Out]) work() { run(m.s, m.take(nil)) }

// take returns the call of the next element for a worker that has run prev (nil for its first),
// or nil once no element is left or the scope is cancelled — then the worker is done. Taking an
// element is its fork: the policy is asked about it, and it is recorded. A worker reuses its call
// unless the policy looks at subtasks (and may keep them): then each element has one of its own.
func (m *mapper[In, Out]) take(prev *mapCall[In, Out]) subtask {
	s := m.s
	// A success that the policy does not hear changed nothing, and complete found the scope not
	// cancelled just before it: that look serves as this fork's, which is linearized with it.
	looked := prev != nil && prev.succeeded && !s.tr.hears
	for {
		k := m.next.Add(1) - 1
		if k >= int64(len(m.in)) || !looked && s.ended() {
			m.wg.Done()
			return nil
		}
		looked = false
		c := prev
		if c == nil || m.looks {
			c = &mapCall[In, Out]{m: m}
		}
		c.i = int(k)
		if s.tr.forks && !s.asked(c) {
			continue // refused by OnFork, and settled
		}
		if s.ins.Recorded() {
			s.ins.ForkAt(&c.rec, k+1) // a reused call's record is free again: Done came first
		}
		return c
	}
}

// A mapCall is one call of Map, as a subtask run by a worker: its outcome is its element's
// result. A worker's call is reused for its next element when the policy does not look at
// subtasks; then nothing reads its state, and settle does not keep it.
type mapCall[In, Out any] struct {
	Subtask[Out]
	m         *mapper[In, Out]
	i         int  // the element
	succeeded bool // the last outcome settled
}

func (c *mapCall[In, Out]) invoke(ctx context.Context) (err error) {
	c.val, err = c.m.fn(ctx, c.m.in[c.i])
	return err
}

// settle keeps a success's value in its element's place.
func (c *mapCall[In, Out]) settle(o *outcome) {
	if c.m.looks {
		c.res.Store(o) // the policy may keep the call as a Task, and read it
	}
	if c.succeeded = o.state == Succeeded; c.succeeded {
		c.m.out[c.i] = c.val
	}
}

func (c *mapCall[In, Out]) after(*Scope) subtask { return c.m.take(c) }

func (c *mapCall[In, Out]) forked() any {
	if c.m.callsAreIn {
		return c.m.in[c.i]
	}
	return c.m.fn
}
