package scope

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/goloom/loom/internal/registry"
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
// Except with a custom [Joiner], Map runs its calls on a set of worker goroutines — n of them with
// WithLimit(n), one per element without — instead of one goroutine per element; each call is
// still a subtask in every other respect (outcome, policy, cancellation, panics): it ends through
// the same step as a forked subtask.
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
	if _, ok := s.policy.(custom); ok {
		// A Joiner sees every fork on the forking goroutine, in input order: fork one by one.
		sts := make([]*Subtask[Out], len(in))
		for i := range in {
			sts[i] = Fork(s, func(ctx context.Context) (Out, error) { return fn(ctx, in[i]) })
		}
		if err := s.Join(); err != nil {
			return nil, err
		}
		for i, st := range sts {
			if st.State() == Succeeded {
				out[i] = st.val
			}
		}
		return out, nil
	}
	workers := len(in)
	if s.slots != nil && int(s.slots.Capacity()) < workers {
		workers = int(s.slots.Capacity())
	}
	m := &mapper[In, Out]{s: s, fn: fn, in: in, out: out, looks: s.policy.traits().looks, callsAreIn: callsAreIn}
	if s.ins.Recorded() {
		m.nodes = make([]registry.Task, len(in)) // one allocation per Map, only when inspected
	}
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

// mapper runs Map's calls on worker goroutines. Each call is a subtask without a Subtask or a
// goroutine of its own: not run once the scope is cancelled, and ended through Scope.complete
// like a forked subtask. The workers are the scope's goroutines: Map waits for them before Join.
type mapper[In, Out any] struct {
	s     *Scope
	fn    func(context.Context, In) (Out, error)
	in    []In
	out   []Out
	looks bool // the policy looks at subtasks: each call is handed to it as one
	wg    sync.WaitGroup
	next  atomic.Int64 // the next element to take
	// nodes are the calls' places in the scope's inspection record, made only when it is
	// recorded; callsAreIn says the elements are the functions forked (All), for their sites.
	nodes      []registry.Task
	callsAreIn bool
}

func (m *mapper[In, Out]) work() {
	normal := false
	defer func() {
		if !normal && m.next.Load() < int64(len(m.in)) {
			// A call ran runtime.Goexit, which ends this goroutine: another takes over the rest.
			m.wg.Add(1)
			go m.work()
		}
		m.wg.Done()
	}()
	for m.run() {
	}
	normal = true
}

// run takes elements until none is left or the scope is cancelled. One deferred function covers
// the whole loop; after a panic, run returns true to be called again.
func (m *mapper[In, Out]) run() (again bool) {
	s, n := m.s, int64(len(m.in))
	returned := false
	var node *registry.Task // the call running, in the inspection record
	var region registry.Region
	defer func() {
		if returned {
			return
		}
		var zero Out
		if r := recover(); r != nil {
			m.left(node, s.complete(m.call(zero), nil, newPanicError(r)), region)
			again = true
			return
		}
		// The goroutine ends: work starts another.
		m.left(node, s.complete(m.call(zero), ErrGoexit, nil), region)
	}()
	fresh := true // no check of the scope since the last call returned
	for {
		k := m.next.Add(1) - 1
		if k >= n {
			break
		}
		if fresh && s.ended() {
			break // forked after cancellation: Cancelled, fn never runs
		}
		i := int(k)
		if s.ins != nil {
			node, region = m.enter(i)
		}
		v, err := m.fn(s.ctx, m.in[i])
		o := s.complete(m.call(v), err, nil)
		m.left(node, o, region)
		node = nil
		if o.state == Cancelled {
			break // completed after cancellation: discarded, and so is the rest
		}
		if o.state == Succeeded {
			m.out[i] = v
		}
		// complete's look at the scope also serves as the next element's fork check, unless the
		// policy may have acted on this completion.
		fresh = o.state == Failed || s.hears
	}
	returned = true
	return false
}

// enter puts call i in the scope's inspection record, as a fork and a start on this goroutine.
func (m *mapper[In, Out]) enter(i int) (*registry.Task, registry.Region) {
	s := m.s
	if m.nodes == nil {
		return nil, s.ins.Enter(nil) // labels and trace only
	}
	node := &m.nodes[i]
	var site any = m.fn
	if m.callsAreIn {
		site = m.in[i]
	}
	s.ins.ForkAt(node, int64(i)+1, site)
	return node, s.ins.Enter(node)
}

// left takes a call that has completed off the inspection record.
func (m *mapper[In, Out]) left(node *registry.Task, o *outcome, region registry.Region) {
	if m.s.ins != nil {
		m.s.ins.Done(node, registry.Outcome(o.state))
		region.End()
	}
}

// call makes a call of Map a Task for a policy that looks at subtasks (CancelWhen); complete
// settles it. The others only need the error: no allocation for them.
func (m *mapper[In, Out]) call(v Out) call {
	if !m.looks {
		return nil
	}
	return &Subtask[Out]{val: v}
}
