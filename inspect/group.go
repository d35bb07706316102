package inspect

import (
	"strconv"
	"strings"
	"time"
)

// A Group is a set of identical scopes in a [Dump]: the same name, site, policy and state, with
// running subtasks at the same sites (and of the same names), and the same limit — what forty
// requests in the same handler look like. The text and the page show a group once, with a count
// and the range of ages, as pprof's goroutine?debug=1 shows one stack for the goroutines that
// share it; Dump.Groups holds them for tools, beside every scope of Dump.Scopes. The children of
// a group's scopes are grouped in turn.
type Group struct {
	Count int      `json:"count"`
	IDs   []uint64 `json:"ids"` // of the scopes, by ID (oldest first)

	Name    string `json:"name"`
	Policy  string `json:"policy"`
	Site    string `json:"site"`
	State   string `json:"state"`
	Joining bool   `json:"joining,omitempty"`
	Limit   int    `json:"limit"`

	// Oldest and Newest are when the oldest and the newest of the scopes were opened.
	Oldest time.Time `json:"oldest"`
	Newest time.Time `json:"newest"`
	// Deadline is the earliest deadline among the scopes; omitted if none has one.
	Deadline time.Time `json:"deadline,omitzero"`
	// Cause is the cause of the oldest cancelled scope; Causes counts the distinct causes.
	Cause  string `json:"cause,omitempty"`
	Causes int    `json:"causes,omitempty"`

	BlockedForks int64          `json:"blockedForks"` // summed over the scopes
	Counts       Counts         `json:"counts"`       // summed over the scopes
	Running      []SubtaskGroup `json:"running"`      // the running subtasks, by site, in fork order
	Children     []*Group       `json:"children"`     // the groups of the scopes' children

	causes  map[string]bool // the distinct causes, while the group is made
	first   *Scope          // the oldest of the scopes: the one the text and the page show when Count is 1
	members []*Scope        // the scopes, by ID, for the page's list
	hidden  int             // scopes nested below the depth the text and the page show
}

// A SubtaskGroup is the running subtasks of a [Group] that share a site and a name, one or more in
// each of the group's scopes.
type SubtaskGroup struct {
	Count int    `json:"count"`
	Seq   int64  `json:"seq"`   // the lowest fork order among them
	SeqTo int64  `json:"seqTo"` // the highest: Seq when they were all forked in the same place
	Name  string `json:"name,omitempty"`
	Site  string `json:"site"`
	// Oldest and Newest are when the longest-running and the newest of them started.
	Oldest time.Time `json:"oldest"`
	Newest time.Time `json:"newest"`
}

// group groups scopes — siblings: the roots of a dump, or the children of one group's scopes —
// keeping the order in which each group's first scope comes (by ID). depth bounds the recursion
// into children, as the text and the page bound the tree.
func group(scopes []*Scope, depth int) []*Group {
	var out []*Group
	at := make(map[string]*Group, len(scopes))
	var kids map[*Group][]*Scope
	var key strings.Builder
	for _, s := range scopes {
		key.Reset()
		groupKey(&key, s)
		g := at[key.String()]
		if g == nil {
			g = &Group{Name: s.Name, Policy: s.Policy, Site: s.Site, State: s.State, Joining: s.Joining,
				Limit: s.Limit, Oldest: s.Opened, Newest: s.Opened, Running: []SubtaskGroup{}, Children: []*Group{}}
			at[key.String()] = g
			out = append(out, g)
		}
		g.add(s)
		switch {
		case len(s.Children) == 0:
		case depth+1 >= maxDepth:
			g.hidden += descendants(s)
		default:
			if kids == nil {
				kids = make(map[*Group][]*Scope)
			}
			kids[g] = append(kids[g], s.Children...)
		}
	}
	for _, g := range out {
		if ks := kids[g]; len(ks) > 0 {
			g.Children = group(ks, depth+1)
		}
	}
	return out
}

// groupKey writes what scopes of one group share.
func groupKey(b *strings.Builder, s *Scope) {
	for _, f := range [...]string{s.Name, s.Site, s.Policy, s.State, strconv.FormatBool(s.Joining), strconv.Itoa(s.Limit)} {
		b.WriteString(f)
		b.WriteByte(0)
	}
	for _, t := range s.Running {
		b.WriteString(t.Site)
		b.WriteByte(1)
		b.WriteString(t.Name)
		b.WriteByte(0)
	}
}

// add puts s in g.
func (g *Group) add(s *Scope) {
	if g.Count == 0 {
		g.first = s
	}
	g.Count++
	g.members = append(g.members, s)
	g.IDs = append(g.IDs, s.ID)
	if s.Opened.Before(g.Oldest) {
		g.Oldest = s.Opened
	}
	if s.Opened.After(g.Newest) {
		g.Newest = s.Opened
	}
	if !s.Deadline.IsZero() && (g.Deadline.IsZero() || s.Deadline.Before(g.Deadline)) {
		g.Deadline = s.Deadline
	}
	if s.Cause != "" {
		if g.Cause == "" {
			g.Cause = s.Cause // the scopes come by ID: this is the oldest's
		}
		if g.causes == nil {
			g.causes = make(map[string]bool)
		}
		if !g.causes[s.Cause] {
			g.causes[s.Cause] = true
			g.Causes++
		}
	}
	g.BlockedForks += s.BlockedForks
	g.Counts.Running += s.Counts.Running
	g.Counts.Succeeded += s.Counts.Succeeded
	g.Counts.Failed += s.Counts.Failed
	g.Counts.Cancelled += s.Counts.Cancelled
	// The scopes of a group have their running subtasks at the same sites, in the same order:
	// the i-th of each is the i-th SubtaskGroup.
	for i, t := range s.Running {
		if i == len(g.Running) {
			g.Running = append(g.Running, SubtaskGroup{Seq: t.Seq, SeqTo: t.Seq, Name: t.Name, Site: t.Site, Oldest: t.Started, Newest: t.Started})
		}
		sg := &g.Running[i]
		sg.Count++
		sg.Seq, sg.SeqTo = min(sg.Seq, t.Seq), max(sg.SeqTo, t.Seq)
		if t.Started.Before(sg.Oldest) {
			sg.Oldest = t.Started
		}
		if t.Started.After(sg.Newest) {
			sg.Newest = t.Started
		}
	}
}
