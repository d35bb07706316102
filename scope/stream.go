package scope

import (
	"context"
	"iter"
	"runtime"
	"sync"
)

// Stream runs fn over every element of in, at most n calls at once — n from [WithLimit], else
// GOMAXPROCS — and yields the results in input order, each as soon as it and all before it are
// ready (conc's stream, as an iterator). Each call is a subtask of a scope opened on ctx with
// opts, so a failure, a panic, the parent's end or [WithTimeout] act as they do in a scope.
//
// Memory is bounded whatever the input's length: Stream reads ahead at most n elements beyond the
// one it waits to yield (it stops reading while n results wait), so the calls running and the
// results waiting are never more than n together.
//
// Under [FailFast] (the default) the first failure is yielded, as an error, as the last pair: the
// element that failed, or the first element in input order that the failure cancelled, which
// then carries the failure (the scope's cause). Under [AwaitAll] every element's pair is yielded,
// failures included. An end from outside (ctx, the deadline) is yielded as the last pair too,
// with its cause. A panic in fn re-panics on the consumer's goroutine, as a [*PanicError] with the
// child's stack, when the stream reaches it (with [PanicsAsErrors] it is yielded as an error). A
// call that runs runtime.Goexit is a failure with [ErrGoexit], yielded in its place like any.
//
// Breaking out of the loop cancels the calls still running and waits for them before range
// returns: nothing outlives the loop. A Stream may be ranged over more than once; each range runs
// every call again. It panics if ctx, in or fn is nil.
func Stream[In, Out any](ctx context.Context, in iter.Seq[In], fn func(context.Context, In) (Out, error), opts ...Option) iter.Seq2[Out, error] {
	switch {
	case ctx == nil:
		panic("scope: Stream: nil context")
	case in == nil:
		panic("scope: Stream: nil input")
	case fn == nil:
		panic("scope: Stream: nil function")
	}
	c := collect(opts)
	n := c.limit
	if n == 0 {
		n = runtime.GOMAXPROCS(0)
	}
	c.limit = 0 // the window below bounds the calls: no fork ever waits for a slot
	return func(yield func(Out, error) bool) {
		st := &stream[In, Out]{
			s:     open(ctx, c),
			fn:    fn,
			ring:  make([]*streamItem[In, Out], n),
			ready: make([]bool, n),
			done:  make(chan int, n),
			work:  make(chan *streamItem[In, Out], n),
		}
		st.run(in, yield)
	}
}

// stream is one range over a Stream. The elements read and not yet yielded, head to tail, sit in
// ring at their index modulo n; ready says which have completed (their call signalled on done).
// The calls run on up to n workers, started as needed, that take them from work: a goroutine
// start saved per element.
type stream[In, Out any] struct {
	s          *Scope
	fn         func(context.Context, In) (Out, error)
	ring       []*streamItem[In, Out]
	ready      []bool
	done       chan int                  // a completed call's index; never blocks: at most n are out
	work       chan *streamItem[In, Out] // calls for the workers; never blocks, likewise
	workers    int                       // workers started, each until work is closed; the consumer's
	wg         sync.WaitGroup            // the workers
	head, tail int
}

func (st *stream[In, Out]) run(in iter.Seq[In], yield func(Out, error) bool) {
	s := st.s
	defer func() { // after Close, whatever it does: let the workers go, and wait for them
		close(st.work)
		st.wg.Wait()
	}()
	defer s.Close() // a break: cancel, wait for the calls; a panic not surfaced is re-raised
	n := len(st.ring)
	for v := range in {
		if st.tail-st.head == n && !st.emit(yield) {
			return
		}
		st.fork(v)
	}
	for st.head < st.tail {
		if !st.emit(yield) {
			return
		}
	}
	_ = s.Join() // every pair was yielded; Join only surfaces a panic, if any
}

// fork starts a call for element v, at index tail.
func (st *stream[In, Out]) fork(v In) {
	i := st.tail % len(st.ring)
	it := &streamItem[In, Out]{st: st, in: v, idx: st.tail}
	st.ring[i], st.ready[i] = it, false
	st.tail++
	if !st.s.admit(it) {
		st.ready[i] = true // settled at the fork (Cancelled, or OnFork refused it): no signal comes
		return
	}
	if st.workers < len(st.ring) {
		st.workers++
		st.wg.Add(1)
		go st.worker()
	}
	st.work <- it
}

// worker runs calls until the stream ends: each call's after hands it the next one (see take). A
// call that runs runtime.Goexit ends the worker's goroutine; body then runs the worker's next
// call on a new one, so the worker lives on, and a queued element always has a worker to run it.
func (st *stream[In, Out]) worker() { run(st.s, st.take()) }

// take returns the next call for a worker, waiting for it, or nil once the stream has ended —
// then the worker is done.
func (st *stream[In, Out]) take() subtask {
	if it, ok := <-st.work; ok {
		return it
	}
	st.wg.Done()
	return nil
}

// emit waits for the element at head and yields it. It reports whether to go on: false when the
// consumer broke out, or the pair yielded was the stream's last (a failure that ended the scope,
// an end from outside), or a panic is to be re-raised.
func (st *stream[In, Out]) emit(yield func(Out, error) bool) bool {
	i := st.head % len(st.ring)
	for !st.ready[i] {
		st.ready[<-st.done%len(st.ring)] = true
	}
	it := st.ring[i]
	st.ring[i] = nil
	st.head++
	s := st.s
	var zero Out
	switch state, err := it.state(); state {
	case Succeeded:
		return yield(it.val, nil)
	case Failed:
		if _, ok := err.(*PanicError); ok && !s.panicsAsErrors {
			return false // run's Join re-panics it, on the consumer's goroutine
		}
		// A failure that ended the scope (FailFast's first, a panic as an error) is the last
		// pair; any other (AwaitAll's, a panic after the end) is one pair among others, and an
		// end from outside is still to be yielded, with its cause, at the first Cancelled call.
		return yield(zero, err) && !st.decidedOn(it)
	default: // Cancelled: the scope ended; its cause is the last pair
		if st.panicked() {
			return false
		}
		yield(zero, err)
		return false
	}
}

// decidedOn reports whether the scope's end was decided on it: its completion.
func (st *stream[In, Out]) decidedOn(it *streamItem[In, Out]) bool {
	s := st.s
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rec != nil && s.rec.decider == call(it)
}

// panicked reports whether a panic is waiting to be re-raised by Join.
func (st *stream[In, Out]) panicked() bool {
	s := st.s
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rec.firstPanic() != nil && !s.panicsAsErrors
}

// A streamItem is one call of a Stream: a subtask whose completion also tells the stream.
type streamItem[In, Out any] struct {
	Subtask[Out]
	st  *stream[In, Out]
	in  In
	idx int
}

func (it *streamItem[In, Out]) forked() any { return it.st.fn }

// invoke runs a call of a Stream. Like any subtask forked before the scope was cancelled, it runs
// even if the cancellation came while it waited for a worker: which of the two came first is the
// fork's admission, not the worker's timing.
func (it *streamItem[In, Out]) invoke(ctx context.Context) (err error) {
	it.val, err = it.st.fn(ctx, it.in)
	return err
}

// after tells the stream that the call's outcome is settled, counts it out, and returns the
// worker's next call.
func (it *streamItem[In, Out]) after(s *Scope) subtask {
	it.st.done <- it.idx
	s.done()
	return it.st.take()
}
