package registry

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"sync"
)

// What the metrics exporters (exporters/prometheus, exporters/otel) read, at scrape time: the
// named limiters and fleet semaphores merged by name, and the recorded scopes counted by name.
// Nothing here runs on a call's path, and nothing here waits for a fork or a completion.

// Stat returns the value of the stat called name (lowerCamelCase, as [LimiterInfo] names a
// field) and whether the record has one.
func (r LimiterRecord) Stat(name string) (int64, bool) {
	for _, s := range r.Stats {
		if s.Name == name {
			return s.Value, true
		}
	}
	return 0, false
}

// SumByName merges the records that share a name into one, in the order each name first
// appears: each stat is the sum of that stat over the records, but for the stats named in
// largest, which take the largest value, and OldestWaiting is the longest. An exporter shows one
// series per name, and two limiters of one name (each handler's own, or an old and a new one)
// are one service's numbers: in flight, waiting, calls and limits add up. A fleet semaphore's
// capacity is the bound every process shares, not a per-semaphore number: it is a "largest" stat.
//
// Names are made valid UTF-8 first (each invalid byte sequence becomes U+FFFD), as label values
// must be, so two names that differ only there are one.
//
// It returns recs itself when every name is valid and distinct, the common case, and never
// changes recs. Records of one type list the same stats in the same order, so a merge compares
// names in step and looks a name up only when the lists differ.
func SumByName(recs []LimiterRecord, largest ...string) []LimiterRecord {
	at := make(map[string]int, len(recs)) // name → index in out
	var out []LimiterRecord               // nil until a name is not valid UTF-8 or repeats
	for k, r := range recs {
		name := strings.ToValidUTF8(r.Name, "\uFFFD")
		i, seen := at[name]
		if out == nil && !seen && name == r.Name {
			at[name] = k // the common case: out would be recs so far
			continue
		}
		if out == nil {
			out = make([]LimiterRecord, k, len(recs))
			copy(out, recs[:k])
		}
		if !seen {
			at[name] = len(out)
			out = append(out, LimiterRecord{Name: name, Stats: r.Stats, OldestWaiting: r.OldestWaiting})
			continue
		}
		out[i] = merge(out[i], r, largest)
	}
	if out == nil {
		return recs
	}
	return out
}

// merge returns m with r's stats added (see SumByName). m's stats are copied first: they may be
// those of a record given to SumByName, which it never changes.
func merge(m, r LimiterRecord, largest []string) LimiterRecord {
	m.Stats = slices.Clone(m.Stats)
	m.OldestWaiting = max(m.OldestWaiting, r.OldestWaiting)
	for k, s := range r.Stats {
		j := k
		if j >= len(m.Stats) || m.Stats[j].Name != s.Name {
			j = slices.IndexFunc(m.Stats, func(t Stat) bool { return t.Name == s.Name })
		}
		switch {
		case j < 0:
			m.Stats = append(m.Stats, s)
		case slices.Contains(largest, s.Name):
			m.Stats[j].Value = max(m.Stats[j].Value, s.Value)
		default:
			m.Stats[j].Value += s.Value
		}
	}
	return m
}

// UnnamedScope is the name the exporters give a scope opened without scope.WithName, as its
// pprof label does.
const UnnamedScope = "scope"

// A ScopeCount is what the exporters show of the recorded scopes of one name.
type ScopeCount struct {
	Name    string // the scopes' name, made valid UTF-8 as SumByName does; UnnamedScope for those without one
	Open    int64  // scopes open: recorded at Open, and Join or Close has not returned
	Running int64  // their running subtasks, as a dump counts them: forks blocked on a limit not included
}

// scopeNames holds every name CountScopes has counted, so that a name whose scopes have all been
// joined reads 0 instead of vanishing from the series (a gauge that disappears is a gap on a
// graph, not a zero). Scope names come from the code (scope.WithName), so the set stays small.
var scopeNames struct {
	sync.Mutex
	seen map[string]struct{}
}

// CountScopes counts the recorded scopes by name (with [Scopes] on; else only those recorded
// before it went off and not joined yet), sorted by name. Every name counted once is in every
// later result, at 0 when no scope of that name is open.
//
// It reads the scopes as [CollectScopes] does, without resolving any site: a shard's lock only
// to copy its list, then each scope's counters and slots with atomic loads, so it never holds up
// a fork or a completion. Each scope's numbers are read one after the other, not at one instant.
func CountScopes() []ScopeCount {
	by := make(map[string]*ScopeCount)
	var buf []taskCopy // reused from scope to scope
	for _, e := range listed(nil) {
		name := strings.ToValidUTF8(e.name, "\uFFFD")
		if name == "" {
			name = UnnamedScope
		}
		c := by[name]
		if c == nil {
			c = &ScopeCount{Name: name}
			by[name] = c
		}
		c.Open++
		var n int64
		n, buf = running(e, buf)
		c.Running += n
	}
	scopeNames.Lock()
	if scopeNames.seen == nil {
		scopeNames.seen = make(map[string]struct{})
	}
	for name := range by {
		scopeNames.seen[name] = struct{}{}
	}
	out := make([]ScopeCount, 0, len(scopeNames.seen))
	for name := range scopeNames.seen {
		if c := by[name]; c != nil {
			out = append(out, *c)
		} else {
			out = append(out, ScopeCount{Name: name})
		}
	}
	scopeNames.Unlock()
	slices.SortFunc(out, func(a, b ScopeCount) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// running returns how many of the scope's subtasks run, using buf.
//
// One read of the record takes the outcomes first and the forks last, so forks and completions
// between the two (a reader descheduled there, say) make forks minus outcomes too large: a
// churning scope read once can show hundreds running where a few do. Each read is at least what
// ran when it read the outcomes, so the least of a few reads is the closest; and the counts only
// grow, so two reads in a row that saw the same outcomes make the first one exact (the outcomes
// held while it read the forks): there it stops.
//
// A fork waiting for a limit's slot is forked and not completed but not running. It waits only
// while the subtasks holding the slots fill the limit, so the limit bounds the count: it takes
// the place of the dump's blocked forks, which a fork counts only once it waits. The started
// subtasks of the last read are the floor.
func running(e *Scope, buf []taskCopy) (int64, []taskCopy) {
	h := e.hot.Load()
	if h == nil { // nothing forked yet
		return 0, buf
	}
	const reads = 4
	var r ScopeRecord
	n, prev := int64(math.MaxInt64), int64(-1)
	for range reads {
		buf = h.read(&r, buf[:0])
		done := r.Succeeded + r.Failed + r.CancelledSubtasks
		if done == prev {
			break
		}
		n, prev = min(n, r.Running), done
	}
	n = max(n, int64(len(buf)))
	if e.limit > 0 {
		n = min(n, int64(e.limit))
	}
	return n, buf
}
