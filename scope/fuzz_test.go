package scope_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/goloom/loom/scope"
)

// FuzzScope drives a scope with a random sequence of forks (succeeding, failing, panicking,
// calling Goexit, waiting on a gate with or without watching the context), gate releases, parent
// cancellations and clock jumps past a timeout, under each policy. In a synctest bubble every step
// settles before the next, so a small model predicts every subtask's state and Join's outcome;
// the fuzzer checks the scope against it, and that every function has returned after Join.
//
// Input: byte 0 picks the policy, byte 1 the options, each further byte one step.
func FuzzScope(f *testing.F) {
	for _, seed := range [][]byte{
		{0, 0, 0, 1, 0},
		{0, 0, 3, 4, 6, 16, 0},
		{1, 0, 1, 11, 2, 0},
		{1, 1, 2, 12, 0},
		{2, 0, 1, 11, 3, 6, 3},
		{2, 0, 3, 3, 7, 0},
		{3, 0, 0, 3, 1, 21, 0},
		{4, 0, 9, 19, 1, 0, 3, 6},
		{4, 1, 2, 3, 0, 6},
		{0, 2, 3, 5, 8, 8, 0},
		{1, 2, 5, 8, 6, 8, 0},
		{2, 4, 3, 5, 0},
		{0, 4, 5, 3, 2, 1},
		{1, 8, 3, 4, 7, 0, 1},
		{3, 9, 3, 5, 2, 8, 8, 6, 16},
		{4, 6, 3, 5, 1, 21, 8, 8, 9},
		{0, 0, 5, 7, 3},
		{2, 1, 2, 0},
		{0, 0, 15, 1, 6},
		{1, 1, 15, 5, 7, 6, 16},
		{4, 4, 15, 3},
		{4, 18, 5, 8, 8, 7, 6}, // OnTimeout: the deadline, then the parent, while a stubborn one runs
		{4, 18, 5, 7, 8, 8, 6}, // the parent, then the deadline: not a timeout
		{4, 18, 3, 8, 8, 6, 0}, // OnTimeout with a watcher
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 2 || len(data) > 64 {
			return
		}
		synctest.Test(t, func(t *testing.T) { runScenario(t, data) })
	})
}

type fuzzStep struct{ kind, arg int }

// Fork kinds and other steps (byte % 10).
const (
	stepSucceed   = iota // fork: succeed at once with its index
	stepFail             // fork: fail at once
	stepPanic            // fork: panic at once
	stepGatedOK          // fork: wait for its gate (then succeed) or the context (then return its error)
	stepGatedFail        // fork: wait for its gate (then fail) or the context
	stepStubborn         // fork: wait for its gate only, then succeed (even arg) or panic (odd arg)
	stepRelease          // release the gate of gated fork number arg
	stepCancel           // cancel the parent context
	stepSleep            // let 3 s pass (the timeout, if any, is 5 s)
	stepOddFork          // fork: OnFork rejects it (custom Joiner) or it calls runtime.Goexit
)

var (
	errParent = errors.New("parent gone")
	errResult = errors.New("custom result")
)

// expected is what the model predicts for one subtask.
type expected struct {
	task     scope.Task
	state    scope.State
	err      error // the failure, for Failed ones that did not panic
	val      int   // for Succeeded ones forked with Fork
	typed    bool  // forked with Fork[int] (else Go)
	panicVal any   // for subtasks that panicked
	gate     chan struct{}
	watches  bool // a gated subtask that also returns when the context ends
	running  bool
}

type scenario struct {
	t              *testing.T
	policy         int
	panicsAsErrors bool
	timeout        bool
	closeFirst     bool
	s              *scope.Scope
	parent         context.Context
	cancelParent   context.CancelCauseFunc
	rec            *recorder
	onTimeout      *timeoutRecorder // rec with OnTimeout, when the flags ask for it
	predCalls      atomic.Int32
	live           atomic.Int32

	// the model
	subs      []*expected
	gated     []int // indices of gated subtasks, in fork order
	cancelled bool
	reason    string // "policy", "panic", "outside", "closed"
	cause     error
	ctxDone   bool
	ctxCause  error
	failures  []int // subtasks that failed before cancellation, in order
	won       bool
	first     int   // first subtask to panic, or -1
	panics    []int // every subtask that panicked, in order
	completed map[int]bool
	elapsed   time.Duration
}

func runScenario(t *testing.T, data []byte) {
	sc := &scenario{t: t, policy: int(data[0]) % 5, first: -1, completed: map[int]bool{}}
	flags := data[1]
	sc.panicsAsErrors = flags&1 != 0
	sc.timeout = flags&2 != 0
	sc.closeFirst = flags&4 != 0
	opts := []scope.Option{}
	switch sc.policy {
	case 0:
		opts = append(opts, scope.FailFast())
	case 1:
		opts = append(opts, scope.AwaitAll())
	case 2:
		opts = append(opts, scope.FirstSuccess())
	case 3:
		opts = append(opts, scope.CancelWhen(func(t scope.Task) bool {
			sc.predCalls.Add(1)
			return stops(t)
		}))
	case 4:
		sc.rec = newRecorder()
		sc.rec.cancelOn = stops
		sc.rec.result = errResult
		if flags&16 != 0 { // a Joiner that decides its own deadline
			sc.onTimeout = &timeoutRecorder{recorder: sc.rec}
			opts = append(opts, scope.WithJoiner(sc.onTimeout))
		} else {
			opts = append(opts, scope.WithJoiner(sc.rec))
		}
	}
	if sc.panicsAsErrors {
		opts = append(opts, scope.PanicsAsErrors())
	}
	if sc.timeout {
		opts = append(opts, scope.WithTimeout(5*time.Second))
	}
	if flags&8 != 0 {
		opts = append(opts, scope.WithLimit(100)) // never blocks here, but takes the slot path
	}
	sc.parent, sc.cancelParent = context.WithCancelCause(t.Context())
	defer sc.cancelParent(nil)
	sc.s = scope.Open(sc.parent, opts...)

	for _, b := range data[2:] {
		sc.step(fuzzStep{int(b) % 10, int(b) / 10})
		synctest.Wait()
	}
	sc.finish()
}

// timeoutRecorder is a recorder that also decides the scope's own deadline.
type timeoutRecorder struct {
	*recorder
	timeouts atomic.Int32
}

var errOnTimeout = errors.New("OnTimeout's result")

func (r *timeoutRecorder) OnTimeout() error {
	r.timeouts.Add(1)
	return errOnTimeout
}

// asksOnTimeout reports whether the model's Join asks OnTimeout: the scope's own deadline ended
// it from outside before anything else did.
func (sc *scenario) asksOnTimeout() bool {
	return sc.onTimeout != nil && sc.reason == "outside" && sc.cause == scope.ErrTimeout
}

// stops is the CancelWhen predicate and the custom Joiner's OnComplete answer: successes with a
// value divisible by 3, failures whose message ends in "!".
func stops(t scope.Task) bool {
	switch t.State() {
	case scope.Succeeded:
		v, ok := t.Value().(int)
		return ok && v%3 == 0
	case scope.Failed:
		return strings.HasSuffix(t.Err().Error(), "!")
	}
	return false
}

func (sc *scenario) step(st fuzzStep) {
	i := len(sc.subs)
	switch st.kind {
	case stepRelease:
		if len(sc.gated) == 0 {
			return
		}
		e := sc.subs[sc.gated[st.arg%len(sc.gated)]]
		if e.gate != nil {
			close(e.gate)
			e.gate = nil
			if e.running {
				sc.gateReleased(e)
			}
		}
	case stepCancel:
		sc.cancelParent(errParent)
		sc.outsideEnds(errParent)
	case stepSleep:
		time.Sleep(3 * time.Second)
		before := sc.elapsed
		sc.elapsed += 3 * time.Second
		if sc.timeout && before < 5*time.Second && sc.elapsed >= 5*time.Second {
			sc.outsideEnds(scope.ErrTimeout)
		}
	default:
		sc.fork(i, st)
	}
}

func (sc *scenario) fork(i int, st fuzzStep) {
	e := &expected{typed: true}
	sc.subs = append(sc.subs, e)
	var fail error
	if st.arg%2 == 0 {
		fail = fmt.Errorf("fail-%d!", i)
	} else {
		fail = fmt.Errorf("fail-%d", i)
	}
	reject := st.kind == stepOddFork && sc.policy == 4
	if reject {
		sc.rec.rejectFork = fail
	}
	var body func(ctx context.Context) (int, error)
	switch st.kind {
	case stepSucceed:
		body = func(context.Context) (int, error) { return i, nil }
	case stepFail:
		body = func(context.Context) (int, error) { return 0, fail }
	case stepPanic:
		e.panicVal = fmt.Sprintf("panic-%d", i)
		body = func(context.Context) (int, error) { panic(e.panicVal) }
	case stepGatedOK, stepGatedFail, stepStubborn:
		gate := make(chan struct{})
		e.gate, e.watches = gate, st.kind != stepStubborn
		sc.gated = append(sc.gated, i)
		watch := e.watches
		if st.kind == stepStubborn && st.arg%2 == 1 {
			e.panicVal = fmt.Sprintf("late-panic-%d", i)
		}
		body = func(ctx context.Context) (int, error) {
			if watch {
				select {
				case <-gate:
				case <-ctx.Done():
					return 0, ctx.Err()
				}
			} else {
				<-gate
			}
			if e.panicVal != nil {
				panic(e.panicVal)
			}
			if st.kind == stepGatedFail {
				return 0, fail
			}
			return i, nil
		}
	case stepOddFork:
		body = func(context.Context) (int, error) { runtime.Goexit(); return 0, nil }
	}
	counted := func(ctx context.Context) (int, error) {
		sc.live.Add(1)
		defer sc.live.Add(-1)
		return body(ctx)
	}
	if st.kind == stepFail && st.arg%3 == 1 {
		e.typed = false
		e.task = sc.s.Go(func(ctx context.Context) error { _, err := counted(ctx); return err })
	} else {
		e.task = scope.Fork(sc.s, counted)
	}
	if reject {
		sc.rec.rejectFork = nil
	}

	// The model of the fork.
	if !sc.cancelled && sc.ctxDone {
		sc.end("outside", sc.ctxCause) // a fork after an end from outside makes it count
	}
	if sc.cancelled {
		e.state, e.err = scope.Cancelled, sc.ctxCause
		return
	}
	switch {
	case reject:
		sc.complete(i, scope.Failed, fail)
	case st.kind == stepSucceed:
		e.val = i
		sc.complete(i, scope.Succeeded, nil)
	case st.kind == stepFail:
		sc.complete(i, scope.Failed, fail)
	case st.kind == stepPanic:
		sc.panicked(i)
	case st.kind == stepOddFork:
		sc.complete(i, scope.Failed, scope.ErrGoexit)
	default:
		e.running = true
		if st.kind == stepGatedFail {
			e.err = fail
		} else {
			e.val = i
		}
	}
}

// end cancels the scope in the model.
func (sc *scenario) end(reason string, cause error) {
	if sc.cancelled {
		return
	}
	sc.cancelled, sc.reason, sc.cause = true, reason, cause
	if !sc.ctxDone {
		sc.ctxDone, sc.ctxCause = true, cause
	}
	for _, e := range sc.subs { // the context watchers return now, too late
		if e.running && e.watches && e.gate != nil {
			e.running, e.state, e.err = false, scope.Cancelled, sc.ctxCause
		}
	}
}

// outsideEnds models the parent's cancellation or the deadline.
func (sc *scenario) outsideEnds(cause error) {
	if sc.ctxDone {
		return
	}
	sc.ctxDone, sc.ctxCause = true, cause
	for _, e := range sc.subs {
		if e.running && e.watches {
			sc.end("outside", cause) // a running watcher completes and finds the context done
			return
		}
	}
}

func (sc *scenario) gateReleased(e *expected) {
	i := sc.index(e)
	e.running = false
	if e.panicVal != nil {
		sc.panicked(i)
	} else if e.err != nil {
		sc.complete(i, scope.Failed, e.err)
	} else {
		sc.complete(i, scope.Succeeded, nil)
	}
}

func (sc *scenario) index(e *expected) int {
	for i, x := range sc.subs {
		if x == e {
			return i
		}
	}
	panic("unknown subtask")
}

// complete models a subtask that returned (not panicked).
func (sc *scenario) complete(i int, state scope.State, err error) {
	e := sc.subs[i]
	if !sc.cancelled && sc.ctxDone {
		sc.end("outside", sc.ctxCause)
	}
	if sc.cancelled {
		e.state, e.err = scope.Cancelled, sc.ctxCause
		return
	}
	e.state, e.err = state, err
	sc.completed[i] = true
	if state == scope.Failed {
		sc.failures = append(sc.failures, i)
	}
	switch sc.policy {
	case 0:
		if state == scope.Failed {
			sc.end("policy", err)
		}
	case 2:
		if state == scope.Succeeded {
			sc.won = true
			sc.end("policy", context.Canceled)
		}
	case 3, 4:
		if sc.stopsModel(i) {
			if state == scope.Failed {
				sc.end("policy", err)
			} else {
				sc.end("policy", context.Canceled)
			}
		}
	}
}

func (sc *scenario) stopsModel(i int) bool {
	e := sc.subs[i]
	if e.state == scope.Succeeded {
		return e.typed && e.val%3 == 0
	}
	return e.err != nil && strings.HasSuffix(e.err.Error(), "!")
}

func (sc *scenario) panicked(i int) {
	e := sc.subs[i]
	e.state = scope.Failed
	if sc.first < 0 {
		sc.first = i
	}
	sc.panics = append(sc.panics, i)
	if !sc.cancelled && sc.ctxDone {
		sc.end("outside", sc.ctxCause)
	}
	if sc.cancelled {
		return
	}
	sc.completed[i] = true
	sc.failures = append(sc.failures, i)
	sc.end("panic", nil) // the cause is the *PanicError, known after the fact
}

// failure returns the actual error a failed subtask should have.
func (sc *scenario) failure(i int) error {
	if sc.subs[i].panicVal != nil {
		return sc.subs[i].task.Err()
	}
	return sc.subs[i].err
}

func (sc *scenario) finish() {
	t := sc.t
	// Release the stubborn subtasks first: Close would wait for them forever.
	for _, i := range sc.gated {
		if e := sc.subs[i]; !e.watches && e.gate != nil {
			close(e.gate)
			e.gate = nil
			if e.running {
				sc.gateReleased(e)
			}
			synctest.Wait()
		}
	}
	if sc.closeFirst {
		stillRunning := false
		for _, e := range sc.subs {
			stillRunning = stillRunning || e.running
		}
		if stillRunning {
			sc.end("closed", context.Canceled)
		}
		wantPanic := sc.first >= 0 && !sc.panicsAsErrors
		r := catch(sc.s.Close)
		sc.checkPanic(r, wantPanic, "Close")
	} else {
		for _, i := range sc.gated {
			if e := sc.subs[i]; e.gate != nil {
				close(e.gate)
				e.gate = nil
				if e.running {
					sc.gateReleased(e)
				}
				synctest.Wait()
			}
		}
	}
	if sc.reason == "panic" {
		sc.cause = sc.failure(sc.first)
		if !sc.ctxDone || sc.ctxCause == nil {
			sc.ctxCause = sc.cause
		}
		for _, e := range sc.subs {
			if e.state == scope.Cancelled && e.err == nil {
				e.err = sc.cause
			}
		}
	}
	var err error
	r := catch(func() { err = sc.s.Join() })
	wantJoinPanic := !sc.closeFirst && sc.first >= 0 && !sc.panicsAsErrors
	sc.checkPanic(r, wantJoinPanic, "Join")
	if r := catch(sc.s.Close); r != nil {
		t.Fatalf("Close after Join panicked: %v", r)
	}
	if n := sc.live.Load(); n != 0 {
		t.Fatalf("%d functions still running after Join", n)
	}
	sc.checkSubtasks()
	if sc.first >= 0 && !sc.panicsAsErrors {
		if !errors.Is(err, sc.failure(sc.first)) && r == nil {
			t.Fatalf("Join after a surfaced panic returned %v, want the *PanicError", err)
		}
	} else {
		sc.checkJoinError(err)
	}
	sc.checkJoiner(r != nil)
}

func catch(fn func()) (r any) {
	defer func() { r = recover() }()
	fn()
	return nil
}

func (sc *scenario) checkPanic(r any, want bool, where string) {
	t := sc.t
	if !want {
		if r != nil {
			t.Fatalf("%s panicked unexpectedly: %v", where, r)
		}
		return
	}
	pe, ok := r.(*scope.PanicError)
	if !ok {
		t.Fatalf("%s: got panic %v, want the first *PanicError", where, r)
	}
	if pe.Value != sc.subs[sc.first].panicVal {
		t.Fatalf("%s re-panicked with %v, want the first panic %v", where, pe.Value, sc.subs[sc.first].panicVal)
	}
}

func (sc *scenario) checkSubtasks() {
	t := sc.t
	for i, e := range sc.subs {
		got := e.task.State()
		if got != e.state {
			t.Fatalf("subtask %d: state %v, want %v (reason %q)", i, got, e.state, sc.reason)
		}
		switch e.state {
		case scope.Succeeded:
			if e.typed && e.task.Value() != e.val {
				t.Fatalf("subtask %d: value %v, want %d", i, e.task.Value(), e.val)
			}
		case scope.Failed:
			if e.panicVal != nil {
				pe, ok := e.task.Err().(*scope.PanicError)
				if !ok || pe.Value != e.panicVal {
					t.Fatalf("subtask %d: err %v, want its *PanicError", i, e.task.Err())
				}
			} else if e.task.Err() != e.err {
				t.Fatalf("subtask %d: err %v, want %v", i, e.task.Err(), e.err)
			}
		case scope.Cancelled:
			if want := context.Cause(sc.s.Context()); e.task.Err() != want && e.task.Err() != sc.ctxCause {
				t.Fatalf("subtask %d: Cancelled with %v, want the cause %v", i, e.task.Err(), sc.ctxCause)
			}
		}
	}
}

func (sc *scenario) checkJoinError(err error) {
	t := sc.t
	var want []error
	switch {
	case sc.asksOnTimeout():
		want = append(want, errOnTimeout)
	case sc.reason == "outside" || sc.reason == "closed":
		want = append(want, sc.cause)
		for _, i := range sc.failures {
			want = append(want, sc.failure(i))
		}
	default:
		switch sc.policy {
		case 0:
			if sc.reason != "" {
				want = append(want, sc.cause)
			}
		case 1:
			for _, i := range sc.failures {
				want = append(want, sc.failure(i))
			}
		case 2:
			switch {
			case sc.won:
			case len(sc.failures) > 0:
				for _, i := range sc.failures {
					want = append(want, sc.failure(i))
				}
			default:
				want = append(want, scope.ErrNoSubtasks)
			}
		case 4:
			want = append(want, errResult)
		}
	}
	// "With PanicsAsErrors, every *PanicError of the scope (also those of subtasks that panicked
	// after cancellation) is in Join's error (errors.Join of the policy's result and the panics,
	// in completion order)."
	for _, i := range sc.panics {
		if pe := sc.failure(i); !contains(want, pe) {
			want = append(want, pe)
		}
	}
	var got []error
	if err != nil {
		got = unwrapAll(err)
	}
	if len(got) != len(want) {
		t.Fatalf("Join: %v (%d errors), want %v (reason %q)", err, len(got), want, sc.reason)
	}
	for k := range want {
		if got[k] != want[k] {
			t.Fatalf("Join: error %d is %v, want %v; all: %v", k, got[k], want[k], err)
		}
	}
}

func contains(errs []error, target error) bool {
	for _, e := range errs {
		if e == target {
			return true
		}
	}
	return false
}

func (sc *scenario) checkJoiner(repanicked bool) {
	t := sc.t
	switch sc.policy {
	case 3:
		if got := int(sc.predCalls.Load()); got != len(sc.completed) {
			t.Fatalf("CancelWhen predicate called %d times, want once per completion before cancellation (%d)", got, len(sc.completed))
		}
	case 4:
		r := sc.rec
		r.mu.Lock()
		defer r.mu.Unlock()
		if len(r.forks) != len(sc.subs) {
			t.Fatalf("OnFork called %d times for %d forks", len(r.forks), len(sc.subs))
		}
		if len(r.completions) != len(sc.completed) {
			t.Fatalf("OnComplete saw %d subtasks, want %d", len(r.completions), len(sc.completed))
		}
		for i := range sc.completed {
			if r.completions[sc.subs[i].task] != 1 {
				t.Fatalf("OnComplete called %d times for subtask %d", r.completions[sc.subs[i].task], i)
			}
		}
		wantResult := int32(1)
		if sc.reason == "outside" || sc.reason == "closed" || repanicked || (sc.first >= 0 && !sc.panicsAsErrors) {
			wantResult = 0
		}
		if got := r.results.Load(); got != wantResult {
			t.Fatalf("Result called %d times, want %d (reason %q)", got, wantResult, sc.reason)
		}
		if sc.onTimeout != nil {
			want := int32(0)
			if sc.asksOnTimeout() && !repanicked && (sc.first < 0 || sc.panicsAsErrors) {
				want = 1
			}
			if got := sc.onTimeout.timeouts.Load(); got != want {
				t.Fatalf("OnTimeout called %d times, want %d (reason %q, cause %v)", got, want, sc.reason, sc.cause)
			}
		}
	}
}

var _ = sync.Mutex{}
