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
	return Map(ctx, fns, call[T])
}

func call[T any](ctx context.Context, fn func(context.Context) (T, error)) (T, error) { return fn(ctx) }

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
	return s.rec.winner.(*Subtask[T]).val, nil
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
// still a subtask in every other respect (outcome, policy, cancellation, panics).
func Map[In, Out any](ctx context.Context, in []In, fn func(context.Context, In) (Out, error), opts ...Option) ([]Out, error) {
	if fn == nil {
		panic("scope: Map: nil function")
	}
	s := Open(ctx, opts...)
	defer s.Close()
	out := make([]Out, len(in))
	if s.policy == policyCustom {
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
	if s.sem != nil && int(s.sem.Capacity()) < workers {
		workers = int(s.sem.Capacity())
	}
	m := &mapper[In, Out]{s: s, fn: fn, in: in, out: out}
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

// mapper runs Map's calls on worker goroutines. Each call goes through the same steps as a forked
// subtask — cancelled scope: not run; completion classified with Scope.ended; failures and
// successes to the policy; panics recovered — without a Subtask or a goroutine of its own. The
// workers are the scope's goroutines: Map waits for them before Join.
type mapper[In, Out any] struct {
	s   *Scope
	fn  func(context.Context, In) (Out, error)
	in  []In
	out []Out
	wg  sync.WaitGroup
	// Every worker bumps next for every element: keep it off the line with the fields they read.
	_    [64]byte
	next atomic.Int64
	_    [56]byte
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

// run takes elements until none is left or the scope is cancelled. Each element goes through the
// steps of a forked subtask: not run on a cancelled scope, classified on return, handed to the
// policy. One deferred recover covers the whole loop; after a panic, run returns true to be called
// again.
func (m *mapper[In, Out]) run() (again bool) {
	s, n, watch := m.s, int64(len(m.in)), m.s.policy >= policyFirstSuccess
	i, completed := -1, false
	defer func() {
		if !completed {
			m.abort(i, recover())
			again = true
		}
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
		i = int(k)
		v, err := m.fn(s.ctx, m.in[i])
		if s.ended() {
			break // completed after cancellation: discarded, and so is the rest
		}
		// That check also serves as the next element's fork check, unless the policy acts now.
		fresh = false
		switch {
		case err != nil:
			s.failed(m.task(Failed, v, err), err)
			fresh = true
		case watch:
			m.out[i] = v
			s.succeeded(m.task(Succeeded, v, nil))
			fresh = true
		default:
			m.out[i] = v
		}
	}
	completed = true
	return false
}

// abort records how the call of element i ended: a panic (r != nil) or runtime.Goexit.
func (m *mapper[In, Out]) abort(i int, r any) {
	s := m.s
	var zero Out
	if r == nil {
		if !s.ended() {
			s.failed(m.task(Failed, zero, ErrGoexit), ErrGoexit)
		}
		return
	}
	pe := newPanicError(r)
	s.panicked(m.task(Failed, zero, pe), pe)
}

// task materializes a call as a Task for the policies that look at it: CancelWhen's predicate.
// FailFast, AwaitAll and FirstSuccess only need the error, so no allocation there.
func (m *mapper[In, Out]) task(state State, v Out, err error) Task {
	if m.s.policy != policyCancelWhen {
		return nil
	}
	if state == Succeeded {
		return &Subtask[Out]{val: v, res: succeeded}
	}
	return &Subtask[Out]{res: &outcome{state: state, err: err}}
}
