package scope

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goloom/loom/internal/registry"
	"github.com/goloom/loom/internal/sema"
)

// The scope's state word: the number of live subtasks and a few flags, so that a fork and a
// completion are one atomic add each.
const (
	countMask     uint64 = 1<<40 - 1 // subtasks counted in (forked, or blocked in Fork) and not yet out
	flagCancelled uint64 = 1 << 40   // the scope has ended (Scope.rec.reason is set); its context is done
	flagWaiting   uint64 = 1 << 41   // Join or Close sleeps on Scope.wake until the count is zero
	flagJoined    uint64 = 1 << 42   // Join has finished waiting: Fork panics
	flagClosed    uint64 = 1 << 43   // Close has finished waiting: Fork panics
	flagDecided   uint64 = 1 << 44   // the policy (or a panic) ended the scope: nothing overrules it
)

// reason says what ended (cancelled) a scope.
type reason uint8

const (
	reasonNone    reason = iota // not cancelled: Join asks the policy
	reasonPolicy                // the policy decided (its decide returned true)
	reasonPanic                 // a subtask (or the Joiner) panicked
	reasonOutside               // parent context or timeout, while a subtask ran or before a fork
	reasonClosed                // Close before Join, while subtasks ran
)

// decides reports whether r is a decision made on a completion — the policy's or a panic's —
// rather than an end that came from outside the subtasks (parent, deadline, Close).
func (r reason) decides() bool { return r == reasonPolicy || r == reasonPanic }

// A Scope runs subtasks forked into it and does not let them outlive it: [Scope.Join] (or
// [Scope.Close]) waits for all of them. Create one with [Open] and always `defer s.Close()`. The
// zero value and a nil *Scope are not usable: every method panics with "scope: zero Scope; use
// Open". A Scope must not be copied.
//
// The goroutine that opened the scope owns it: Join and Close belong to the owner. [Fork] and
// [Scope.Go] may be called by the owner and by the scope's own subtasks (they run while Join
// waits), until Join has returned.
//
// # Cancellation
//
// The scope is cancelled — its context done, and every subtask that has not completed yet
// Cancelled — by the first of: its policy (see [Joiner]); a panicking subtask; the parent
// context or the [WithTimeout] deadline while a subtask is running (or before a later fork);
// Close before Join. Which came first is decided atomically with the subtasks' completions: a
// subtask that completed before the cancellation keeps its outcome, one that completes after it
// is Cancelled (unless it panicked), and an end from outside after every subtask had completed
// changes nothing but the context. Cancellation reaches nested scopes through the context.
type Scope struct {
	// The Scope is kept small: its size is most of what a scope costs beyond its subtasks.
	ctx            context.Context
	cancel         context.CancelCauseFunc
	policy         policy          // never nil: failFast{} unless an option chose another
	tr             traits          // the policy's, cached for the hot paths
	plain          bool            // no limit and no policy to ask: a fork is only counted in
	outside        bool            // the parent can be done, or there is a deadline: see ended
	panicsAsErrors bool            // PanicsAsErrors
	slots          *sema.Sema      // WithLimit's slots; nil without a limit
	opts           *settings       // the rarer options; nil without them
	ins            *registry.Scope // the inspection record (inspect, labels, trace); nil: nothing to record

	state atomic.Uint64  // live count and flags, above
	wake  sync.WaitGroup // one token while the owner waits (flagWaiting)

	mu  sync.Mutex // guards rec
	rec *record    // allocated at the first failure, win, panic or cancellation
}

// settings holds the options a scope needs after Open, other than the policy and the limit.
type settings struct {
	name     string
	parent   context.Context    // Open's ctx, for telling our deadline from the parent's end
	deadline context.Context    // WithTimeout's context, between parent and ours; nil without
	stop     context.CancelFunc // deadline's
}

// ownDeadline reports whether the WithTimeout deadline, rather than the parent, ended the scope's
// context: what came first in time decides, not the parent's state when the end is recorded (a
// subtask may return long after both). The deadline's context keeps the cause that reached it
// first: ErrTimeout from its own timer, or the parent's. A parent's cause can be ErrTimeout too
// (a parent scope's deadline); then ours came first only if it is the earlier one — context runs
// no timer of its own for a deadline after the parent's.
func (o *settings) ownDeadline() bool {
	if o.deadline == nil || context.Cause(o.deadline) != ErrTimeout {
		return false
	}
	if context.Cause(o.parent) != ErrTimeout {
		return true
	}
	ours, _ := o.deadline.Deadline()
	theirs, ok := o.parent.Deadline()
	return !ok || ours.Before(theirs)
}

// record is what a scope remembers of its failures and its end.
type record struct {
	reason      reason
	cause       error         // the cancellation cause (context.Cause of ctx, for reasonOutside)
	ownDeadline bool          // reasonOutside: the scope's own WithTimeout deadline ended it
	cancelled   *outcome      // shared by the Cancelled subtasks; set with reason
	decider     call          // the completion a decision (reasonPolicy, reasonPanic) was made on; nil for a Joiner's panic
	failures    []error       // failures that completed before the cancellation, in order
	won         bool          // FirstSuccess: some subtask succeeded
	winner      Task          // FirstSuccess: the first success (Race reads it)
	panics      []*PanicError // every panic of the scope, subtasks' and the Joiner's, in order
	surfaced    bool          // panics[0] has been re-panicked by Join or Close
	joinErr     error         // what Join returned; set by the owner once every subtask has returned
}

// recLocked returns the record, making it if needed; s.mu must be held (or the owner must have
// the scope to itself).
func (s *Scope) recLocked() *record {
	if s.rec == nil {
		s.rec = new(record)
	}
	return s.rec
}

// firstPanic returns the scope's first panic, or nil.
func (rec *record) firstPanic() *PanicError {
	if rec == nil || len(rec.panics) == 0 {
		return nil
	}
	return rec.panics[0]
}

// Open starts a scope whose context is derived from ctx: cancelling ctx cancels the scope, and
// values bound in ctx (scoped values) are what every fork sees, whatever the owner binds later.
// The default policy is [FailFast]; opts choose another and set a timeout, a limit, a name. Open
// panics if ctx is nil. Always `defer s.Close()`.
func Open(ctx context.Context, opts ...Option) *Scope {
	if ctx == nil {
		panic("scope: Open: nil context")
	}
	if len(opts) == 0 {
		s := &Scope{policy: failFast{}, tr: failFast{}.traits(), plain: true, outside: ctx.Done() != nil}
		s.ctx, s.cancel = context.WithCancelCause(ctx)
		if registry.Active() { // one atomic load and one check, when nothing is recorded
			s.record()
		}
		return s
	}
	return open(ctx, collect(opts))
}

// record opens the scope's inspection record (a feature of package inspect is on, or a trace is
// being recorded); the scope's context becomes the record's, which answers for the scope in the
// tree of scopes and carries the trace task and the pprof labels.
func (s *Scope) record() {
	info := registry.ScopeInfo{Policy: s.tr.name}
	if s.opts != nil {
		info.Name = s.opts.name
	}
	if s.slots != nil {
		info.Limit = int(s.slots.Capacity())
	}
	if s.ins = registry.Open(s.ctx, info); s.ins != nil {
		s.ctx = s.ins.Context()
	}
}

// collect applies opts to a fresh config.
func collect(opts []Option) *config {
	c := new(config) // every default is the zero value
	for _, opt := range opts {
		opt(c)
	}
	return c
}

// open starts a scope configured by c.
func open(ctx context.Context, c *config) *Scope {
	s := &Scope{policy: failFast{}}
	if c.policy != nil {
		s.policy = c.policy
	}
	s.tr, s.panicsAsErrors = s.policy.traits(), c.panicsAsErrors
	if c.limit > 0 {
		s.slots = sema.New(int64(c.limit), true)
	}
	s.plain = s.slots == nil && !s.tr.forks
	if c.name != "" || c.hasTimeout {
		s.opts = &settings{name: c.name, parent: ctx}
		if c.hasTimeout {
			// The deadline's context sits between the parent and ours: when it fires our
			// context's Err is DeadlineExceeded and its cause ErrTimeout.
			s.opts.deadline, s.opts.stop = context.WithDeadlineCause(ctx, time.Now().Add(c.timeout), ErrTimeout)
			ctx = s.opts.deadline
		}
	}
	s.outside = ctx.Done() != nil // the deadline's context, with a timeout
	s.ctx, s.cancel = context.WithCancelCause(ctx)
	if registry.Active() {
		s.record()
	}
	return s
}

// mustBeOpen panics for a Scope that Open did not make: the zero value, or nil.
func (s *Scope) mustBeOpen() {
	if s == nil || s.ctx == nil {
		panic("scope: zero Scope; use Open")
	}
}

// Context returns the scope's context: the one every subtask receives. It is done once the scope
// is cancelled, and always once Join or Close has returned.
func (s *Scope) Context() context.Context {
	s.mustBeOpen()
	return s.ctx
}

// Name returns the name given with [WithName], or "".
func (s *Scope) Name() string {
	s.mustBeOpen()
	if s.opts == nil {
		return ""
	}
	return s.opts.name
}

// ended reports whether the scope is cancelled. A done context without a recorded reason means
// the parent or the deadline ended it, and that the caller — a subtask completing or a fork — was
// still to come: that makes it an end from outside.
//
// This is the linearization point of a completion. end sets flagCancelled before it cancels the
// context, so a subtask that finds the flag unset returned before anyone could see its scope's own
// cancellation; one that also finds the context not done (when the scope can end from outside)
// returned before any cancellation. A scope whose parent can never be done and that has no
// deadline cannot end from outside: the flag is all it checks.
func (s *Scope) ended() bool {
	if s.state.Load()&flagCancelled != 0 {
		return true
	}
	return s.outside && s.endedOutside()
}

// endedOutside reports whether the context is done, and then records an end from outside, if
// nothing ended the scope before: see ended.
func (s *Scope) endedOutside() bool {
	if s.ctx.Err() == nil {
		return false
	}
	if s.state.Load()&flagCancelled == 0 {
		s.end(reasonOutside, nil, nil)
	}
	return true
}

// cancelledOutcome is the outcome the scope's Cancelled subtasks share, once it has ended. end
// makes it under s.mu after it sets flagCancelled, so a reader that saw the flag takes the lock.
func (s *Scope) cancelledOutcome() *outcome {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rec.cancelled
}

// end cancels the scope for r with cause, unless it was cancelled already; the first caller wins,
// with one exception. For reasonOutside the cause is the context's own.
//
// The exception: a decision (r.decides()) overrules an outside end or a Close recorded before it.
// Every decision was taken on a completion that found the context not done (see ended), so it was
// linearized before the context ended, however late it reaches this lock: a sibling that saw the
// parent's cancellation may have recorded the outside end in between. The context keeps the cause
// that reached it first (a parent's cancellation propagates by itself); Join reports the decision.
func (s *Scope) end(r reason, cause error, by call) {
	if f := s.state.Load(); f&flagDecided != 0 || (f&flagCancelled != 0 && !r.decides()) {
		return
	}
	s.mu.Lock()
	rec := s.recLocked()
	switch {
	case rec.reason == reasonNone:
		if r == reasonOutside {
			cause = context.Cause(s.ctx)
			rec.ownDeadline = s.opts != nil && s.opts.ownDeadline()
		}
		rec.reason, rec.cause = r, cause
		flags := flagCancelled
		if r.decides() {
			flags |= flagDecided
			rec.decider = by
		}
		s.state.Or(flags)
		if r != reasonOutside {
			s.cancel(cause) // after the flag: see ended
		}
		// Whichever cause reached the context first: ours, or a parent's racing it.
		rec.cancelled = &outcome{state: Cancelled, err: context.Cause(s.ctx)}
	case r.decides() && !rec.reason.decides():
		rec.reason, rec.cause, rec.decider = r, cause, by
		s.state.Or(flagDecided)
	}
	s.mu.Unlock()
}

// failed records a failure that completed before cancellation and lets the policy decide on it.
func (s *Scope) failed(c call, err error) {
	s.mu.Lock()
	rec := s.recLocked()
	rec.failures = append(rec.failures, err)
	s.mu.Unlock()
	if s.decide(c, err) {
		s.end(reasonPolicy, endCause(err), c)
	}
}

// succeeded lets a policy that hears successes decide on one.
func (s *Scope) succeeded(c call) {
	if s.decide(c, nil) {
		s.end(reasonPolicy, endCause(nil), c)
	}
}

// panicked records a panic: every one is kept for Join, and a panic before cancellation is a
// failure that cancels the scope at once, handed to the policy like any completion (whatever it
// answers, the scope is ended already).
func (s *Scope) panicked(c call, pe *PanicError) {
	before := !s.ended()
	s.mu.Lock()
	rec := s.recLocked()
	rec.panics = append(rec.panics, pe)
	if before {
		rec.failures = append(rec.failures, pe)
	}
	s.mu.Unlock()
	if before {
		s.end(reasonPanic, pe, c)
		s.decide(c, pe)
	}
}

// decide asks the policy about a completion. A panic in it (a CancelWhen predicate, a Joiner's
// OnComplete) is user code failing like a subtask: it is kept and cancels the scope.
func (s *Scope) decide(c call, err error) (end bool) {
	defer func() {
		if r := recover(); r != nil {
			s.joinerPanicked(newPanicError(r))
			end = false
		}
	}()
	return s.policy.decide(s, c.task(), err)
}

// joinerPanicked records a panic in the policy's user code: kept, and cancelling the scope.
func (s *Scope) joinerPanicked(pe *PanicError) {
	s.mu.Lock()
	rec := s.recLocked()
	rec.panics = append(rec.panics, pe)
	s.mu.Unlock()
	s.end(reasonPanic, pe, nil)
}

// done counts a subtask out and wakes the owner if it was the last.
func (s *Scope) done() {
	if f := s.state.Add(^uint64(0)); f&countMask == 0 && f&flagWaiting != 0 {
		s.wakeOwner()
	}
}

// wakeOwner wakes the owner waiting in Join or Close, once the count is zero.
func (s *Scope) wakeOwner() {
	for {
		f := s.state.Load()
		if f&countMask != 0 || f&flagWaiting == 0 {
			return // someone forked again (misuse) or another done woke the owner
		}
		if s.state.CompareAndSwap(f, f&^flagWaiting) {
			s.wake.Done()
			return
		}
	}
}

// wait blocks until no subtask is live, then sets flag (flagJoined or flagClosed) in the same
// atomic step, so that no fork can slip in between.
func (s *Scope) wait(flag uint64) {
	for {
		f := s.state.Load()
		if f&countMask == 0 {
			if s.state.CompareAndSwap(f, f|flag) {
				return
			}
			continue
		}
		s.wake.Add(1)
		if s.state.CompareAndSwap(f, f|flagWaiting) {
			s.wake.Wait()
			continue
		}
		s.wake.Done()
	}
}

// release cancels the scope's contexts once nothing runs, so that nothing stays registered on a
// long-lived parent.
func (s *Scope) release() {
	s.cancel(nil)
	if s.opts != nil && s.opts.stop != nil {
		s.opts.stop()
	}
}

// Join waits until every subtask has returned — after cancelling the rest if the policy says so —
// and returns the scope's outcome. When it returns, no goroutine of the scope is running, every
// subtask's state is final, and the scope's context is done. Everything a subtask did before
// returning happens-before Join returns.
//
// The outcome is the policy's (see [FailFast], [AwaitAll], [FirstSuccess], [CancelWhen],
// [Joiner]), unless the scope ended from outside while a subtask was running (or before a later
// fork): then Join returns that cause — the parent's (context.Canceled, or its own cause) or one
// matching [ErrTimeout] — joined with the failures that happened before, and the policy is not
// asked (a Joiner with OnTimeout is asked about its own deadline, see [Joiner]). After a Close
// that had to cancel running subtasks, context.Canceled plays that part.
//
// A decision the policy took on a completion stands: if that completion came before the scope
// was ended from outside, Join returns the policy's result even when a sibling recorded the
// outside end first (context.Cause of the scope's context is then still the outside cause, which
// reached the context first).
//
// If a subtask panicked, Join re-panics on the caller's goroutine, after every subtask has
// returned, with the first [*PanicError]; with [PanicsAsErrors] it returns the outcome joined
// (errors.Join) with every *PanicError of the scope that is not in it already, in the order they
// happened, so that no panic is ever lost. A panic in a custom [Joiner]'s methods is a
// *PanicError like a subtask's.
//
// Join belongs to the owner: it must not run concurrently with another Join or Close, nor in a
// subtask of the scope (it would wait for itself). Calling it again returns the same error
// (after a re-panic: the *PanicError).
func (s *Scope) Join() error {
	s.mustBeOpen()
	f := s.state.Load()
	if f&flagJoined != 0 {
		return s.joinErr()
	}
	if f&flagClosed != 0 {
		s.state.Or(flagJoined)
	} else {
		s.ins.Joining()
		s.wait(flagJoined)
		s.ins.Leave() // the scope leaves the dump; before release, which a trace must not log
		s.release()
	}
	// Every subtask has returned: the owner has the record to itself.
	if pe := s.rec.firstPanic(); pe != nil && !s.panicsAsErrors {
		return s.surface(pe)
	}
	pe, err := s.outcome()
	if pe != nil {
		// The Joiner's Result (or OnTimeout) panicked: a failure like a subtask's panic.
		s.recLocked().panics = append(s.rec.panics, pe)
		if !s.panicsAsErrors {
			return s.surface(pe)
		}
		err = pe
	}
	if err != nil {
		s.recLocked().joinErr = err
	}
	return err
}

// surface re-panics the scope's first panic, once; every later Join returns it as its error.
func (s *Scope) surface(pe *PanicError) error {
	rec := s.rec
	rec.joinErr = pe
	if !rec.surfaced {
		rec.surfaced = true
		panic(pe)
	}
	return pe
}

func (s *Scope) joinErr() error {
	if s.rec == nil {
		return nil
	}
	return s.rec.joinErr
}

// outcome computes Join's error once every subtask has returned: the cause of an end from
// outside joined with the failures before it (or a Joiner's OnTimeout, for its own deadline), or
// else the policy's result; then, with PanicsAsErrors, every panic that is not in it already, in
// the order they happened. A panic in the Joiner's Result or OnTimeout is returned as pe instead.
func (s *Scope) outcome() (pe *PanicError, err error) {
	rec := s.rec
	if rec == nil {
		rec = &record{} // nothing failed, won or ended: does not escape
	}
	switch {
	case rec.reason == reasonOutside && rec.ownDeadline && s.policy.onTimeout() != nil:
		if pe, err = s.ask(s.policy.onTimeout()); pe != nil {
			return pe, nil
		}
	case rec.reason == reasonOutside || rec.reason == reasonClosed:
		err = joinCause(rec.cause, rec.failures)
	default:
		if pe, err = s.ask(func() error { return s.policy.result(s) }); pe != nil {
			return pe, nil
		}
	}
	// PanicsAsErrors: no panic is ever lost, whatever the policy says.
	for _, pe := range rec.panics {
		if !errors.Is(err, pe) {
			if err == nil {
				err = pe
			} else {
				err = errors.Join(err, pe)
			}
		}
	}
	return nil, err
}

// ask calls user code of the policy on the owner's goroutine, recovering a panic there as a
// *PanicError.
func (s *Scope) ask(fn func() error) (pe *PanicError, err error) {
	defer func() {
		if r := recover(); r != nil {
			pe = newPanicError(r)
		}
	}()
	return nil, fn()
}

// Close cancels the scope if Join has not completed, waits for every subtask to return, and
// releases the scope's context. It is idempotent and safe in a defer after an early return; it
// never panics for a missing Join. It does re-panic, once, a subtask's [*PanicError] that no Join
// has surfaced yet — a panic is never lost — unless [PanicsAsErrors] was given. Close belongs to
// the owner, like Join. After Close, Fork panics.
func (s *Scope) Close() {
	s.mustBeOpen()
	f := s.state.Load()
	if f&flagClosed != 0 {
		return
	}
	if f&flagJoined != 0 {
		s.state.Or(flagClosed)
		return
	}
	if f&countMask != 0 {
		s.end(reasonClosed, context.Canceled, nil)
	}
	s.ins.Joining()
	s.wait(flagClosed)
	s.ins.Leave()
	s.release()
	if pe := s.rec.firstPanic(); pe != nil && !s.panicsAsErrors && !s.rec.surfaced {
		s.rec.surfaced = true
		panic(pe)
	}
}
