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
	// Running + Blocked + the three outcomes is the number of subtasks forked.
	Running, Succeeded, Failed, CancelledSubtasks int64

	Tasks []TaskRecord // the running subtasks, in fork order
}

// A TaskRecord is a running subtask.
type TaskRecord struct {
	Seq  int64         // fork order in the scope, from 1
	Name string        // the name it was forked with, or ""
	Site string        // file:line of the function passed to Fork or Go
	Age  time.Duration // since its goroutine started
}

type taskCopy struct {
	seq     uint64 // with the name: see Task
	pc      uintptr
	started int64
}

// CollectScopes returns every recorded scope, by ID, with ages as of the call. It reads each
// scope's record with atomic loads, so it never holds up a fork or a completion. Each scope's
// counts are exact — they sum to the subtasks forked, and a subtask counts as running or as
// blocked, never both — and never show fewer running than listed; see hot.read for the instant
// they are of.
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
		r.Joining = e.joining.Load()
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
			r.Tasks[i] = TaskRecord{Seq: int64(c.seq & seqMask), Name: forkName(c.seq), Site: fnSite(c.pc), Age: max(r.Age-time.Duration(c.started), 0)}
		}
		slices.SortFunc(r.Tasks, func(a, b TaskRecord) int { return cmp.Compare(a.Seq, b.Seq) })
		out = append(out, r)
	}
	return out
}

// readTries bounds how often read tries for counts of one instant before it settles for counts
// that are exact but span the copy.
const readTries = 64

// read copies the counts and the running subtasks, appended to buf.
//
// Every count but blocked only grows, and a subtask moves through them in one order: forked
// (perhaps blocked, then unblocked: one word holds forks and blocked, so each move is one step),
// published in a slot, taken out of it, counted done. read takes the outcomes, then the slots,
// then the forks word, then the outcomes again. When the two readings of the outcomes agree, no
// subtask completed in between, so the outcomes and the forks word are of one instant — the word's
// reading — and every subtask listed was admitted and not done then: the counts are those of that
// instant (no more running than the limit allows), and none is listed that they do not count.
// When subtasks keep completing, read tries again, up to readTries times, and then keeps its last
// copy: the outcomes of the first reading, the word of a later instant, so that the running count
// may include a subtask that completed during the copy (and be above the limit) but never fewer
// than the list. Either way the counts sum to the forks.
func (h *hot) read(r *ScopeRecord, buf []taskCopy) []taskCopy {
	n := len(buf)
	for try := 0; ; try++ {
		buf = buf[:n]
		var done [4]int64
		h.outcomes(&done)
		tabs := h.tab.Load()
		for tab := tabs; tab != nil; tab = tab.older {
			for i := range tab.slots {
				sl := &tab.slots[i]
				seq := sl.seq.Load()
				if seq == 0 {
					continue
				}
				started := sl.started.Load() - 1
				pc := sl.pc.Load()
				if started < 0 || sl.seq.Load() != seq {
					continue // starting or leaving: counted, not listed (see slot)
				}
				buf = append(buf, taskCopy{seq, pc, started})
			}
		}
		w := h.forks.Load()
		var again [4]int64
		h.outcomes(&again)
		if done == again || try == readTries-1 {
			r.Succeeded, r.Failed, r.CancelledSubtasks = done[Succeeded], done[Failed], done[Cancelled]
			r.Blocked = int64(w / blockedOne)
			r.Running = int64(w&forkMask) - r.Blocked - r.Succeeded - r.Failed - r.CancelledSubtasks
			return buf
		}
	}
}

// outcomes reads the completions, by Outcome: successes of started subtasks count in the slots
// they ran in (in every table, the older ones included), the rest in done.
func (h *hot) outcomes(out *[4]int64) {
	out[Failed], out[Cancelled] = h.done[Failed].Load(), h.done[Cancelled].Load()
	out[Succeeded] = h.done[Succeeded].Load()
	for tab := h.tab.Load(); tab != nil; tab = tab.older {
		for i := range tab.slots {
			out[Succeeded] += tab.slots[i].succeeded.Load()
		}
	}
}
