package scope

// A Joiner decides when a scope is done and what Join returns: the policy of a scope, Java's
// StructuredTaskScope.Joiner. Install one with [WithJoiner]. The built-in policies ([FailFast],
// [AwaitAll], [FirstSuccess], [CancelWhen]) are asked the same things at the same points, through
// the same internal interface; they only say which questions they need (a success, a fork).
//
// OnFork runs on the forking goroutine for every Fork, before the subtask starts (its state is
// then Running), also when the scope is already cancelled; in [Map], on the worker about to run the
// call, for each call it runs. Forks from subtasks and Map's workers make concurrent calls
// possible. When it returns an error the function never runs and the subtask is Failed with that
// error and handed to OnComplete like any completion; on a cancelled scope the subtask is
// Cancelled whatever OnFork returns.
//
// OnComplete runs exactly once for each subtask that completes (Succeeded or Failed) before the
// scope is cancelled, on that subtask's goroutine, so calls may be concurrent; it never runs for a
// Cancelled subtask. Returning true cancels the scope.
//
// A panic in any of the three methods is user code failing like a subtask: it becomes a
// [*PanicError] and cancels the scope, Join re-panics with it (or, with [PanicsAsErrors], returns
// it), and every later Join returns it. Fork never panics for OnFork: that subtask is Failed with
// the *PanicError.
//
// Result runs once, on the owner's goroutine, in the first Join, after every subtask has returned;
// what it returns is what Join returns. It is not called when the scope ended from outside (parent
// context, timeout, Close before Join) while subtasks were running, nor when Join re-panics a
// subtask's panic. Each subtask's return, and each OnComplete call, synchronizes before Result.
//
// A Joiner may also have the method OnTimeout() error (JDK 26's Joiner.onTimeout): then, when the
// scope's [WithTimeout] deadline ends it before the Joiner decided, Join calls OnTimeout once,
// after every subtask has returned, instead of returning [ErrTimeout], and returns what it
// returns; subtasks that completed before the deadline keep their results, so OnTimeout can return
// what it has. What came first in time decides: a deadline that passed before the parent's
// cancellation is a timeout, even when a subtask returns only after both. A panic in OnTimeout is
// a *PanicError like one in Result.
//
// A Joiner holds the state of one scope: give each scope a fresh one.
type Joiner interface {
	OnFork(t Task) error
	OnComplete(t Task) (cancel bool)
	Result() error
}

// timeoutJoiner is the optional part of a Joiner; see [Joiner].
type timeoutJoiner interface {
	OnTimeout() error
}

// FailFast is the default policy: the first failure cancels the scope, and its error is both the
// scope's context.Cause and what Join returns (siblings' cancellation errors never mask it). With
// no failure Join returns nil.
func FailFast() Option { return func(c *config) { c.policy = failFast{} } }

// AwaitAll never cancels the scope on its own: every subtask runs to completion, and Join returns
// errors.Join of every failure, in the order they completed, or nil if none failed.
func AwaitAll() Option { return func(c *config) { c.policy = awaitAll{} } }

// FirstSuccess cancels the scope at the first success; a failure does not short-circuit. Join
// returns nil if any subtask succeeded, else errors.Join of the failures, or an error matching
// [ErrNoSubtasks] when nothing was forked. Successes that complete after the winner, once the
// scope is cancelled, are Cancelled and their results discarded.
func FirstSuccess() Option { return func(c *config) { c.policy = firstSuccess{} } }

// CancelWhen cancels the scope as soon as pred returns true for a completed subtask (Succeeded or
// Failed). pred runs once per subtask that completes before cancellation, on that subtask's
// goroutine, possibly concurrently. Join returns nil unless the scope ended from outside. It
// panics at once if pred is nil.
func CancelWhen(pred func(Task) bool) Option {
	if pred == nil {
		panic("scope: CancelWhen: nil predicate")
	}
	return func(c *config) { c.policy = cancelWhen{pred: pred} }
}

// WithJoiner makes j the scope's policy; see [Joiner] for when each method is called. It panics at
// once if j is nil.
func WithJoiner(j Joiner) Option {
	if j == nil {
		panic("scope: WithJoiner: nil Joiner")
	}
	return func(c *config) { c.policy = custom{j} }
}
