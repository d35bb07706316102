package registry

import (
	"cmp"
	"context"
	"slices"
	"time"
)

// A ScopeRecord is a recorded scope as a dump sees it: a copy, resolved, owing nothing to the
// live scope.
type ScopeRecord struct {
	ID     uint64
	Parent uint64 // the parent's ID, 0 for a scope opened outside every recorded scope
	Name   string
	Policy Policy
	Site   string        // file:line of the Open call
	Age    time.Duration // since Open

	Deadline  time.Time // zero without one
	Cancelled bool      // the scope's context is done
	Cause     string    // context.Cause of the scope's context, when Cancelled
	Joining   bool      // the owner waits in Join or Close

	Limit   int   // 0 without WithLimit
	Blocked int64 // forks waiting for a slot of the limit

	// Running counts the subtasks forked and not completed, but for the forks blocked on the limit
	// (counted in Blocked); Tasks lists those whose goroutine has started (the rest are about to).
	Running, Succeeded, Failed, CancelledSubtasks int64

	Tasks []TaskRecord // the running subtasks, in fork order
}

// A TaskRecord is a running subtask.
type TaskRecord struct {
	Seq  int64         // fork order in the scope, from 1
	Site string        // file:line of the function passed to Fork or Go
	Age  time.Duration // since its goroutine started
}

type taskCopy struct {
	seq     int64
	pc      uintptr
	started int64
}

// CollectScopes returns every recorded scope, by ID, with ages as of the call. It reads each scope's record with atomic loads, so it never holds up a fork or
// a completion; each scope's counts and running list are read one after the other, not at one
// instant, but never show more subtasks running than forked and not completed.
func CollectScopes() []ScopeRecord {
	mono := now()
	es := listed(nil)
	slices.SortFunc(es, func(a, b *Scope) int { return cmp.Compare(a.id, b.id) })
	out := make([]ScopeRecord, 0, len(es))
	var buf []taskCopy // reused from scope to scope
	for _, e := range es {
		r := ScopeRecord{ID: e.id, Name: e.name, Policy: e.policy, Limit: e.limit}
		if e.parent != nil {
			r.Parent = e.parent.id
		}
		buf = buf[:0]
		if h := e.hot.Load(); h != nil { // nil: nothing forked yet
			buf = h.read(&r, buf)
		}
		r.Blocked, r.Joining = e.blocked.Load(), e.joining.Load()
		// A fork blocked on the limit is forked and not completed, but it is not running: it
		// counts as blocked only. Read apart, the two may disagree for a moment (a fork just
		// granted its slot); the list of started subtasks is the floor.
		r.Running = max(r.Running-r.Blocked, int64(len(buf)))

		r.Age = time.Duration(max(mono-e.opened, 0))
		r.Site = openSite(e.pcs, int(e.npcs))
		r.Deadline, _ = e.inner.Deadline()
		if e.inner.Err() != nil {
			r.Cancelled = true
			if cause := context.Cause(e.inner); cause != nil {
				r.Cause = cause.Error()
			}
		}
		r.Tasks = make([]TaskRecord, len(buf))
		for i, c := range buf {
			r.Tasks[i] = TaskRecord{Seq: c.seq, Site: fnSite(c.pc), Age: max(r.Age-time.Duration(c.started), 0)}
		}
		slices.SortFunc(r.Tasks, func(a, b TaskRecord) int { return cmp.Compare(a.Seq, b.Seq) })
		out = append(out, r)
	}
	return out
}

// read copies the counts and the running subtasks, appended to buf.
//
// The outcomes, then the running subtasks, then forks: a subtask still in its slot when the
// slots are read had not completed when the outcomes were, and forks are read last, so the
// running count (forks minus outcomes, which also counts subtasks forked and not started yet) is
// never negative nor below the list's length. Each outcome count is a sum of counters that only
// grow. A table installed after tabs was read holds only subtasks started since: they count as
// forked and not completed.
func (h *hot) read(r *ScopeRecord, buf []taskCopy) []taskCopy {
	tabs := h.tab.Load()
	r.Failed, r.CancelledSubtasks = h.done[Failed].Load(), h.done[Cancelled].Load()
	r.Succeeded = h.done[Succeeded].Load()
	for tab := tabs; tab != nil; tab = tab.older {
		for i := range tab.slots {
			r.Succeeded += tab.slots[i].succeeded.Load()
		}
	}
	for tab := tabs; tab != nil; tab = tab.older {
		for i := range tab.slots {
			if t := tab.slots[i].t.Load(); t != nil {
				buf = append(buf, taskCopy{int64(t.seq), t.pc, t.started})
			}
		}
	}
	r.Running = h.forks.Load() - r.Succeeded - r.Failed - r.CancelledSubtasks
	return buf
}
