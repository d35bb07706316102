package scope

import (
	"context"

	"github.com/goloom/loom/internal/registry"
)

// Fork runs fn in a new goroutine with the scope's context and returns its [Subtask].
//
// On a scope that is already cancelled fn does not run and the subtask is Cancelled at once. With
// [WithLimit], Fork blocks until a slot is free, and returns a Cancelled subtask without running
// fn if the scope is cancelled while it waits; a subtask that is forked once a slot frees runs on
// the goroutine of the subtask that freed it, so a limited scope starts no more goroutines than
// its limit needs. A custom [Joiner]'s OnFork runs first, on the caller's goroutine. Fork may be
// called by the owner and by the scope's subtasks until Join has returned; after that it panics
// with "scope: fork after join" (or "scope: fork after close" once Close has run). It panics if
// fn is nil.
//
// If fn panics, the panic is recovered, cancels the scope at once, and is re-raised as a
// [*PanicError] by Join on the owner's goroutine (see [PanicsAsErrors]).
func Fork[T any](s *Scope, fn func(ctx context.Context) (T, error)) *Subtask[T] {
	return fork(s, "", fn, "scope: Fork: nil function")
}

// ForkNamed is [Fork] with a name for the subtask, which package inspect's dumps and page show
// beside its fork order and site: "user", "orders", "avatar" tell the calls of a fan-out apart
// where their sites are one line of a loop. Names are for people: keep them few and constant (they
// are kept once each for the process, like the program's code; past 65,535 distinct names a fork's
// name is not shown). A scope that is not recorded ignores the name, at no cost.
func ForkNamed[T any](s *Scope, name string, fn func(ctx context.Context) (T, error)) *Subtask[T] {
	return fork(s, name, fn, "scope: ForkNamed: nil function")
}

// fork is Fork and ForkNamed: name is "" for none, nilFn the panic for a nil fn.
func fork[T any](s *Scope, name string, fn func(context.Context) (T, error), nilFn string) *Subtask[T] {
	s.mustBeOpen()
	if fn == nil {
		panic(nilFn)
	}
	l := new(launch[Subtask[T]])
	st := &l.sub
	st.fn, st.s = fn, s
	if name != "" && s.ins.Recorded() {
		st.rec.Name(name) // before admit, which numbers the fork: the name stays
	}
	if s.admit(st) {
		l.goStart(st)
	}
	return st
}

// Go is [Fork] for a function that returns only an error, shaped like errgroup's Go to ease
// migration: `g.Go(func() error {...})` becomes `s.Go(func(ctx context.Context) error {...})`.
// The subtask's value is struct{}.
func (s *Scope) Go(fn func(ctx context.Context) error) *Subtask[struct{}] {
	return s.goFork("", fn, "scope: Go: nil function")
}

// GoNamed is [Scope.Go] with a name for the subtask, as [ForkNamed] is Fork.
func (s *Scope) GoNamed(name string, fn func(ctx context.Context) error) *Subtask[struct{}] {
	return s.goFork(name, fn, "scope: GoNamed: nil function")
}

// goFork is Go and GoNamed, as fork is Fork and ForkNamed.
func (s *Scope) goFork(name string, fn func(context.Context) error, nilFn string) *Subtask[struct{}] {
	s.mustBeOpen()
	if fn == nil {
		panic(nilFn)
	}
	l := new(launch[goTask])
	gt := &l.sub
	gt.fn, gt.s = fn, s
	if name != "" && s.ins.Recorded() {
		gt.rec.Name(name)
	}
	if s.admit(gt) {
		l.goStart(gt)
	}
	return &gt.Subtask
}

// TryFork is [Fork] that never blocks: with [WithLimit] and no free slot it forks nothing and
// returns nil and false (fn does not run, and OnFork is not called). Otherwise it forks as Fork
// does and returns the subtask and true: without a limit it always forks, and on a cancelled
// scope it returns a Cancelled subtask and true. After Join or Close it panics like Fork.
// (errgroup's TryGo.)
func TryFork[T any](s *Scope, fn func(ctx context.Context) (T, error)) (*Subtask[T], bool) {
	s.mustBeOpen()
	if fn == nil {
		panic("scope: TryFork: nil function")
	}
	l := new(launch[Subtask[T]])
	st := &l.sub
	st.fn, st.s = fn, s
	start, forked := s.tryAdmit(st)
	if !forked {
		return nil, false
	}
	if start {
		l.goStart(st)
	}
	return st, true
}

// TryGo is [Scope.Go] that never blocks, as [TryFork] is Fork: with [WithLimit] and no free slot it
// forks nothing and reports false.
func (s *Scope) TryGo(fn func(ctx context.Context) error) bool {
	s.mustBeOpen()
	if fn == nil {
		panic("scope: TryGo: nil function")
	}
	l := new(launch[goTask])
	gt := &l.sub
	gt.fn, gt.s = fn, s
	start, forked := s.tryAdmit(gt)
	if start {
		l.goStart(gt)
	}
	return forked
}

// admit decides a fork: it returns true when the subtask is counted in and must be started, or
// settles it as Failed (OnFork's error) or Cancelled, or hands it to the goroutine that frees a
// slot, and returns false. A limited scope's fork waits for a slot.
func (s *Scope) admit(t subtask) bool {
	if !s.plain {
		return s.admitSlow(t)
	}
	// Count first, check after: one atomic operation on the common path.
	if f := s.state.Add(1); f&(flagJoined|flagClosed|flagCancelled) == 0 && (!s.outside || s.ctx.Err() == nil) {
		if s.ins != nil {
			s.ins.Fork(t.node()) // before anyone can start it
		}
		return true
	}
	return s.counted(t, false)
}

// count counts a fork in, or refuses it if the scope is joined, closed or cancelled. Count first,
// check after: one atomic operation on the common path. blocked says that the fork waits for a
// slot of the limit, and is recorded as blocked until it has one (see Scope.takeNext).
func (s *Scope) count(t subtask, blocked bool) bool {
	s.state.Add(1)
	return s.counted(t, blocked)
}

// counted is count once the fork is counted in.
func (s *Scope) counted(t subtask, blocked bool) bool {
	if f := s.state.Load(); f&(flagJoined|flagClosed) != 0 || s.ended() {
		s.done()
		if f&(flagJoined|flagClosed) != 0 {
			panic(forkAfter(f))
		}
		s.refuse(t, s.cancelledOutcome())
		return false
	}
	switch {
	case !s.ins.Recorded():
	case blocked:
		s.ins.ForkBlocked(t.node()) // before anyone can take it over
	default:
		s.ins.Fork(t.node()) // before anyone can start it
	}
	return true
}

// refuse settles a fork whose function never runs with o, and tells the inspection record.
func (s *Scope) refuse(t subtask, o *outcome) {
	t.settle(o)
	s.ins.Refuse(registry.Outcome(o.state))
}

// admitSlow is admit with the policy to ask (a Joiner's OnFork) or a WithLimit slot to get first.
func (s *Scope) admitSlow(t subtask) bool {
	if f := s.state.Load(); f&(flagJoined|flagClosed) != 0 {
		panic(forkAfter(f))
	}
	if !s.asked(t) {
		return false
	}
	if s.slots == nil {
		return s.count(t, false)
	}
	if s.slots.TryAcquire(1) {
		if !s.count(t, false) {
			s.slots.Release(1)
			return false
		}
		return true
	}
	// Wait for a slot, counted in already: Join waits for us (our caller is the owner, not in
	// Join, or a subtask, counted itself).
	if !s.count(t, true) {
		return false
	}
	taken, err := s.slots.AcquireFor(s.ctx, 1, t)
	if taken {
		return false // a finishing subtask's goroutine unblocks and runs it (see takeNext)
	}
	// The slot came to us, or the wait failed: the fork is ours to unblock, before it starts.
	s.ins.Unblock()
	switch {
	case err == nil && !s.ended():
		return true
	case err == nil:
		s.slots.Release(1) // granted as the scope was cancelled: of no use
	}
	// Only a done context makes the wait fail: the scope is cancelled.
	s.ended()
	s.unstarted(t)
	return false
}

// unstarted settles a fork that was counted in but never started — cancelled while it waited for
// a slot, or as its slot was handed to it — and counts it out.
func (s *Scope) unstarted(t subtask) {
	t.settle(s.cancelledOutcome())
	s.ins.Done(registry.Running{}, registry.Cancelled) // forked (count), never entered
	s.done()
}

// tryAdmit is admit for TryFork and TryGo: forked is false when a limited scope has no free
// slot, in which case nothing happened. A cancelled scope forks (a Cancelled subtask), like Fork.
func (s *Scope) tryAdmit(t subtask) (start, forked bool) {
	if s.slots == nil || s.ended() {
		return s.admit(t), true // never waits: a cancelled scope refuses at once
	}
	if f := s.state.Load(); f&(flagJoined|flagClosed) != 0 {
		panic(forkAfter(f))
	}
	if !s.slots.TryAcquire(1) {
		return false, false
	}
	if !s.asked(t) || !s.count(t, false) {
		s.slots.Release(1)
		return false, true
	}
	return true, true
}

// asked asks the policy about a fork, if it asks about forks (a Joiner's OnFork), and reports
// whether the fork goes on. When it does not, the subtask is settled as any completion is, by
// complete — Failed with OnFork's error or its panic, handed to the policy; Cancelled if the scope
// was cancelled, whatever OnFork said — and its fork is recorded as one that never ran.
func (s *Scope) asked(t subtask) bool {
	if !s.tr.forks {
		return true
	}
	// Runs on the forking goroutine: the owner, which is not in Join, or a subtask, which is
	// counted, so Join cannot finish meanwhile (Map's workers: Map joins after them).
	pe, err := s.ask(func() error { return s.policy.onFork(t.task()) })
	if pe == nil && err == nil {
		return true
	}
	o := s.complete(t, err, pe)
	s.ins.Refuse(registry.Outcome(o.state))
	return false
}

func forkAfter(flags uint64) string {
	if flags&flagClosed != 0 {
		return "scope: fork after close"
	}
	return "scope: fork after join"
}

// finish ends a subtask's time in the scope, once complete has settled it: it frees the
// subtask's slot — to the blocked fork it goes to, whose subtask this goroutine then runs next,
// so that a limited scope of many short subtasks costs no goroutine start per subtask — and
// counts the subtask out. The slot goes only now that the policy has decided: a fork waiting
// for it must not start between a failure and the cancellation the policy makes of it.
func (s *Scope) finish() (next subtask) {
	if s.slots != nil {
		next = s.takeNext()
	}
	s.done() // after the hand-off: the count never touches zero while a subtask changes hands
	return next
}

// takeNext gives a finished subtask's slot back and returns the subtask of the blocked fork it
// went to, to run on this goroutine. A fork it went to after the scope was cancelled is Cancelled
// here without running (it was forked after the cancellation), and the slot passes on.
func (s *Scope) takeNext() subtask {
	for {
		owner := s.slots.ReleaseAndTake(1)
		if owner == nil {
			return nil
		}
		t := owner.(subtask)
		s.ins.Unblock() // the blocked fork has its slot: it is not blocked from now on
		if !s.ended() {
			return t
		}
		s.unstarted(t) // its Fork counted it in
	}
}
