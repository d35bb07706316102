package inspect

import (
	"html/template"
	"io"
	"math"
	"strings"
	"time"
)

// writeHTML writes the dump as a page a person reads in a browser: the scope tree, identical
// scopes grouped (see [Group]) with a count and the range of their ages and the list of them to
// expand, states coloured, subtasks' ages as bars; the limiters with their settings and their
// slots and queues as bars; the fleet semaphores. It refreshes itself every two seconds from the
// same URL (so the page keeps its query), or, without JavaScript, reloads every five. Everything
// is inline: no external asset, no script from elsewhere.
func writeHTML(w io.Writer, d *Dump) error {
	return pageTemplate.Execute(w, newPage(d))
}

// What the page shows of a big dump: the groups of scopes and the members listed in each are
// bounded, so that ten thousand open scopes still make a page of a few hundred kilobytes (the
// rest are counted, and in ?format=json).
const (
	maxPageGroups  = 200 // groups of one level of the tree
	maxPageMembers = 50  // scopes listed in a group
)

// The page's view of a dump: what the template shows, computed here so that the template only
// lays it out.
type page struct {
	Time, PID, GoVersion string
	ScopesOff            bool
	OpenScopes, Running  int
	Oldest               string
	Stuck                int
	Groups               []*groupView
	MoreGroups           int // root groups not shown
	Limiters             []*limiterView
	Semaphores           []*semaphoreView
}

// A groupView is a card: one scope, or a group of identical ones.
type groupView struct {
	ID                         uint64 // the scope's, for one; the oldest's, for a group
	LastID                     uint64 // the newest's, for a group
	Count                      int
	Name, Policy, State, Cause string
	Causes                     int
	Joining                    bool
	Age, Site, ShortSite       string
	Deadline, DeadlineClass    string
	Counts                     Counts
	Limit                      int
	Blocked                    int64
	Tasks                      []taskView
	Scale                      string // what the subtasks' bars measure
	Members                    []memberView
	MoreMembers                int
	Children                   []*groupView
	MoreChildren               int   // child groups not shown
	Hidden                     int   // scopes nested deeper than maxDepth, not shown
	NotStarted                 int64 // counted as running, goroutine not started yet
	RunningPct, SucceededPct   float64
	FailedPct, CancelledPct    float64
	HasCounts                  bool
}

type taskView struct {
	Seq                  string // "#4", or "#2–#5" for a group's
	Count                int
	Name                 string
	Age, Site, ShortSite string
	Class                string // fresh, slow, stuck
	BarPct               float64
}

type memberView struct {
	ID                 uint64
	Age, State, Detail string
}

type limiterView struct {
	Name                              string
	Limit, InFlight, Waiting, Overrun int64
	RateWaiting                       int64
	HasRate                           bool
	BusyPct, OverrunPct, QueuePct     float64
	Oldest                            string
	OldestClass                       string
	Config                            []settingView
	Counters                          Stats
}

type semaphoreView struct {
	Name                    string
	Capacity, Held, Waiting int64
	HeldPct                 float64
	Paused                  string
	Config                  []settingView
	Counters                Stats
}

type settingView struct{ Name, Value string }

// Without a deadline, ages past these are shown as slow and stuck; with one, past half of the
// scope's time and past all of it.
const (
	slowAge  = time.Second
	stuckAge = 10 * time.Second
)

// ageClass is the CSS class of an age without a deadline: fresh, slow or stuck.
func ageClass(a time.Duration) string {
	switch {
	case a >= stuckAge:
		return "stuck"
	case a >= slowAge:
		return "slow"
	}
	return "fresh"
}

func newPage(d *Dump) *page {
	p := &page{
		Time:      d.Time.Format(time.RFC3339),
		PID:       itoa(int64(d.ProcessID)),
		GoVersion: d.GoVersion,
		ScopesOff: !d.hasFeature("scopes"),
	}
	var oldest time.Duration
	var walk func(*Scope, int)
	walk = func(s *Scope, depth int) {
		p.OpenScopes++
		window := deadlineWindow(s)
		for _, t := range s.Running {
			p.Running++
			a := d.Time.Sub(t.Started)
			oldest = max(oldest, a)
			if taskClass(a, window) == "stuck" {
				p.Stuck++
			}
		}
		if depth+1 < maxDepth {
			for _, c := range s.Children {
				walk(c, depth+1)
			}
		}
	}
	for _, s := range d.Scopes {
		walk(s, 0)
	}
	if p.Running > 0 {
		p.Oldest = age(oldest)
	}
	groups := group(d.Scopes, 0)
	p.Groups, p.MoreGroups = newGroupViews(d, groups, oldest)
	var longest int64
	for _, l := range d.Limiters {
		if l != nil { // a dump decoded from JSON may hold nulls
			longest = max(longest, l.Stats.value("waiting"))
		}
	}
	for _, l := range d.Limiters {
		if l != nil {
			p.Limiters = append(p.Limiters, newLimiterView(l, longest))
		}
	}
	for _, s := range d.Semaphores {
		if s != nil {
			p.Semaphores = append(p.Semaphores, newSemaphoreView(d, s))
		}
	}
	return p
}

func newGroupViews(d *Dump, gs []*Group, oldest time.Duration) ([]*groupView, int) {
	more := 0
	if len(gs) > maxPageGroups {
		gs, more = gs[:maxPageGroups], len(gs)-maxPageGroups
	}
	views := make([]*groupView, len(gs))
	for i, g := range gs {
		views[i] = newGroupView(d, g, oldest)
	}
	return views, more
}

// deadlineWindow is the time a scope had from its Open to its deadline, 0 without one.
func deadlineWindow(s *Scope) time.Duration {
	if s.Deadline.IsZero() {
		return 0
	}
	return max(s.Deadline.Sub(s.Opened), time.Nanosecond)
}

// taskClass is the CSS class of a subtask's age: against its scope's time when it has a
// deadline (slow past half, stuck past all of it), else against slowAge and stuckAge.
func taskClass(a, window time.Duration) string {
	switch {
	case window == 0:
		return ageClass(a)
	case a >= window:
		return "stuck"
	case 2*a >= window:
		return "slow"
	}
	return "fresh"
}

func newGroupView(d *Dump, g *Group, oldest time.Duration) *groupView {
	first := g.first
	v := &groupView{
		ID: g.IDs[0], LastID: g.IDs[len(g.IDs)-1], Count: g.Count,
		Name: g.Name, Policy: g.Policy, State: g.State, Cause: g.Cause, Causes: g.Causes, Joining: g.Joining,
		Age: ages(d.Time, g.Newest, g.Oldest), Site: g.Site, ShortSite: shortSite(g.Site),
		Counts: g.Counts, Limit: g.Limit, Blocked: g.BlockedForks, Hidden: g.hidden,
	}
	if g.Count == 1 {
		v.Cause = first.Cause
	}
	var listed int64
	for _, t := range g.Running {
		listed += int64(t.Count)
	}
	v.NotStarted = max(g.Counts.Running-listed, 0)
	if !g.Deadline.IsZero() {
		left := g.Deadline.Sub(d.Time)
		prefix := ""
		if g.Count > 1 {
			prefix = "earliest "
		}
		switch {
		case left < 0:
			v.Deadline, v.DeadlineClass = prefix+"deadline passed "+age(-left)+" ago", "past"
		case left < time.Second:
			v.Deadline, v.DeadlineClass = prefix+"deadline in "+age(left), "soon"
		default:
			v.Deadline, v.DeadlineClass = prefix+"deadline in "+age(left), "later"
		}
	}
	c := g.Counts
	if total := c.Running + c.Succeeded + c.Failed + c.Cancelled; total > 0 {
		v.HasCounts = true
		pct := func(n int64) float64 { return math.Round(1000*float64(n)/float64(total)) / 10 }
		v.RunningPct, v.SucceededPct, v.FailedPct, v.CancelledPct = pct(c.Running), pct(c.Succeeded), pct(c.Failed), pct(c.Cancelled)
	}
	// The bars: against the scope's time when it has a deadline (the oldest's, for a group: the
	// scopes of a group share their site, so their timeout), else on a log scale up to the oldest
	// subtask of the page.
	window := deadlineWindow(first)
	switch {
	case len(g.Running) == 0:
	case window > 0:
		v.Scale = "bars: share of the scope's " + age(window) + " until its deadline (amber past half, red past the deadline)"
	default:
		v.Scale = "bars: log scale to " + age(oldest) + ", the oldest subtask here (amber over 1s, red over 10s)"
	}
	for _, t := range g.Running {
		a := d.Time.Sub(t.Oldest)
		tv := taskView{Seq: "#" + itoa(t.Seq), Count: t.Count, Name: t.Name, Age: ages(d.Time, t.Newest, t.Oldest),
			Site: t.Site, ShortSite: shortSite(t.Site), Class: taskClass(a, window)}
		if t.SeqTo != t.Seq {
			tv.Seq += "–#" + itoa(t.SeqTo)
		}
		if window > 0 {
			tv.BarPct = math.Round(max(2, min(100, 100*float64(a)/float64(window)))*10) / 10
		} else {
			tv.BarPct = barPct(a, oldest)
		}
		v.Tasks = append(v.Tasks, tv)
	}
	if g.Count > 1 {
		members := g.members
		if len(members) > maxPageMembers {
			v.MoreMembers = len(members) - maxPageMembers
			members = members[:maxPageMembers]
		}
		for _, s := range members {
			m := memberView{ID: s.ID, Age: age(d.Time.Sub(s.Opened)), State: stateText(s.State, s.Joining)}
			var detail []string
			if !s.Deadline.IsZero() {
				detail = append(detail, deadlineText(s.Deadline.Sub(d.Time)))
			}
			if s.Cause != "" {
				detail = append(detail, "cause: "+firstLine(s.Cause, 200))
			}
			m.Detail = strings.Join(detail, ", ")
			v.Members = append(v.Members, m)
		}
	}
	v.Children, v.MoreChildren = newGroupViews(d, g.Children, oldest)
	return v
}

// ages is the range of ages of things begun between oldest and newest, as of now: "0.2s–1.2s",
// or one age when the two print alike.
func ages(now, newest, oldest time.Time) string {
	young, old := age(now.Sub(newest)), age(now.Sub(oldest))
	if young == old {
		return old
	}
	return young + "–" + old
}

// barPct is an age's bar, on a log scale up to the oldest running subtask of the dump: a 30 s old
// subtask stands out beside 30 ms ones, and ones of a few ms stay visible.
func barPct(a, oldest time.Duration) float64 {
	if a <= 0 || oldest <= 0 {
		return 0
	}
	x := math.Log1p(float64(a)/float64(time.Millisecond)) / math.Log1p(float64(oldest)/float64(time.Millisecond))
	return math.Round(max(2, min(100, 100*x))*10) / 10
}

func settingViews(c Config) []settingView {
	out := make([]settingView, 0, len(c))
	for _, st := range c {
		out = append(out, settingView{Name: settingWord(st.Name), Value: st.Value})
	}
	return out
}

func newLimiterView(l *Limiter, longest int64) *limiterView {
	get := l.Stats.value
	v := &limiterView{Name: l.Name, Limit: get("limit"), InFlight: get("inFlight"), Waiting: get("waiting"),
		Overrun: get("overrunning"), RateWaiting: get("rateWaiting"), Config: settingViews(l.Config)}
	_, v.HasRate = l.Config.Get("rate")
	if v.Limit > 0 {
		v.BusyPct = math.Round(1000*float64(min(v.InFlight, v.Limit))/float64(v.Limit)) / 10
		v.OverrunPct = math.Round(1000*float64(min(v.Overrun, v.InFlight, v.Limit))/float64(v.Limit)) / 10
	}
	// The queue bar is scaled to the longest queue on the page, or to the limit if that is
	// longer: a queue of 3 behind 40 slots looks short, one of 113 long.
	if scale := max(longest, v.Limit); scale > 0 && v.Waiting > 0 {
		v.QueuePct = math.Round(max(2, 1000*float64(v.Waiting)/float64(scale))) / 10
	}
	if v.Waiting > 0 {
		o := secondsToDuration(l.OldestWaiting)
		v.Oldest, v.OldestClass = age(o), ageClass(o)
	}
	for _, st := range l.Stats {
		switch st.Name {
		case "limit", "inFlight", "waiting", "overrunning", "rateWaiting":
		default:
			v.Counters = append(v.Counters, st)
		}
	}
	return v
}

func newSemaphoreView(d *Dump, s *Semaphore) *semaphoreView {
	get := s.Stats.value
	v := &semaphoreView{Name: s.Name, Capacity: get("capacity"), Held: get("held"), Waiting: get("waiting"), Config: settingViews(s.Config)}
	if v.Capacity > 0 {
		v.HeldPct = math.Round(1000*float64(min(v.Held, v.Capacity))/float64(v.Capacity)) / 10
	}
	if !s.PausedUntil.IsZero() {
		v.Paused = "paused after the backend lost its data: admits again in " + age(s.PausedUntil.Sub(d.Time))
	}
	for _, st := range s.Stats {
		switch st.Name {
		case "capacity", "held", "waiting", "pausedMillis": // pausedMillis: the pause's own line
		default:
			v.Counters = append(v.Counters, st)
		}
	}
	return v
}

var pageTemplate = template.Must(template.New("page").Parse(pageHTML))

const pageHTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>loom · pid {{.PID}}</title>
<noscript><meta http-equiv="refresh" content="5"></noscript>
<style>
:root {
  --bg: #f6f8fa; --card: #ffffff; --ink: #1f2328; --muted: #656d76; --line: #d0d7de;
  --run: #1a7f37; --run-bg: #dafbe1; --join: #9a6700; --join-bg: #fff8c5;
  --cancel: #cf222e; --cancel-bg: #ffebe9; --blue: #0969da; --blue-bg: #ddf4ff;
  --slow: #bc4c00; --stuck: #cf222e; --queue: #8250df;
}
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--ink);
  font: 14px/1.45 -apple-system, BlinkMacSystemFont, "Segoe UI", Helvetica, Arial, sans-serif; }
header { display: flex; align-items: center; flex-wrap: wrap; gap: 4px 16px; padding: 12px 24px; background: #24292f; color: #fff; }
header h1 { margin: 0; font-size: 18px; letter-spacing: .5px; }
header .meta { color: #c9d1d9; font-size: 13px; overflow-wrap: anywhere; }
header .live { margin-left: auto; display: flex; align-items: center; gap: 8px; font-size: 13px; }
.dot { width: 9px; height: 9px; border-radius: 50%; background: #3fb950; display: inline-block; flex: none; }
.dot.paused { background: #8b949e; } .dot.down { background: #f85149; }
button { font: inherit; font-size: 12px; padding: 3px 10px; border-radius: 6px; border: 1px solid #57606a;
  background: #32383f; color: #fff; cursor: pointer; }
button[hidden] { display: none; }
main { padding: 16px 24px 40px; max-width: 1600px; }
.summary { display: flex; gap: 12px; margin-bottom: 16px; flex-wrap: wrap; }
.stat { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 8px 14px; flex: 1 1 130px; max-width: 220px; }
.stat b { display: block; font-size: 22px; }
.stat span { color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .4px; }
.stat.alert b { color: var(--stuck); }
h2 { font-size: 15px; margin: 22px 0 8px; color: var(--muted); text-transform: uppercase; letter-spacing: .6px; }
.empty { color: var(--muted); background: var(--card); border: 1px dashed var(--line); border-radius: 8px; padding: 14px; }
ul.tree, ul.tree ul { list-style: none; margin: 0; padding: 0; }
ul.tree ul { margin-left: 22px; padding-left: 14px; border-left: 2px solid var(--line); }
li.scope { margin: 8px 0; }
.card { background: var(--card); border: 1px solid var(--line); border-left: 4px solid var(--run); border-radius: 8px; padding: 8px 12px; min-width: 0; }
.card.cancelled { border-left-color: var(--cancel); }
.card.joining { border-left-color: var(--join); }
.card.group { box-shadow: 3px 3px 0 -1px var(--card), 3px 3px 0 0 var(--line), 6px 6px 0 -1px var(--card), 6px 6px 0 0 var(--line); margin-right: 6px; }
.head { display: flex; align-items: baseline; flex-wrap: wrap; gap: 4px 8px; }
.count { font-weight: 700; font-size: 15px; color: var(--blue); }
.id { color: var(--muted); font-variant-numeric: tabular-nums; }
.name { font-weight: 600; font-size: 15px; overflow-wrap: anywhere; }
.pill { font-size: 11px; font-weight: 600; border-radius: 10px; padding: 1px 8px; text-transform: uppercase; letter-spacing: .4px; }
.pill.running { color: var(--run); background: var(--run-bg); }
.pill.joining { color: var(--join); background: var(--join-bg); }
.pill.cancelled { color: var(--cancel); background: var(--cancel-bg); }
.policy { font-size: 12px; color: var(--blue); background: var(--blue-bg); border-radius: 6px; padding: 0 6px; }
.age { font-variant-numeric: tabular-nums; }
.deadline.past, .deadline.soon { color: var(--cancel); font-weight: 600; }
.deadline.later { color: var(--muted); }
.site { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12px; color: var(--muted); overflow-wrap: anywhere; min-width: 0; }
.cause { margin-top: 4px; color: var(--cancel); font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; white-space: pre-wrap; overflow-wrap: anywhere; max-height: 4.5em; overflow: hidden; }
.counts { display: flex; gap: 4px 10px; align-items: center; margin-top: 4px; font-size: 12px; color: var(--muted); flex-wrap: wrap; }
.mix { display: flex; width: 160px; max-width: 100%; height: 8px; border-radius: 4px; overflow: hidden; background: #eaeef2; }
.mix i { display: block; height: 100%; }
.c-run { background: var(--blue); } .c-ok { background: #2da44e; } .c-fail { background: var(--cancel); } .c-cancel { background: #8c959f; }
.legend b { font-weight: 600; color: var(--ink); }
.tasks { margin-top: 6px; max-width: 900px; }
.task { display: grid; grid-template-columns: 6.5em 9em minmax(40px, 220px) minmax(0, 1fr); gap: 2px 8px; align-items: center; font-size: 13px; padding: 1px 0; }
.task > span { min-width: 0; overflow-wrap: anywhere; }
.tname { font-weight: 600; }
.track { height: 8px; background: #eaeef2; border-radius: 4px; overflow: hidden; }
.track i { display: block; height: 100%; border-radius: 4px; background: #8c959f; }
.task.slow .track i { background: var(--slow); } .task.stuck .track i { background: var(--stuck); }
.task.slow .age { color: var(--slow); font-weight: 600; } .task.stuck .age { color: var(--stuck); font-weight: 700; }
.scale { font-size: 11px; color: var(--muted); margin-top: 2px; }
.tag { font-size: 11px; color: #fff; background: var(--stuck); border-radius: 4px; padding: 0 5px; margin-left: 4px; }
.seq { color: var(--muted); font-variant-numeric: tabular-nums; }
details.members { margin-top: 6px; font-size: 12px; }
details.members summary { cursor: pointer; color: var(--blue); }
details.members ol { margin: 4px 0 0; padding-left: 22px; color: var(--muted); }
details.members li { overflow-wrap: anywhere; }
.layout { display: grid; grid-template-columns: minmax(0, 1fr) 410px; gap: 20px; align-items: start; }
@media (max-width: 1100px) { .layout { grid-template-columns: minmax(0, 1fr); } }
.layout h2 { margin-top: 4px; }
.limiters { display: grid; grid-template-columns: minmax(0, 1fr); gap: 12px; }
.limiter { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 10px 14px; min-width: 0; }
.limiter .title { display: flex; justify-content: space-between; align-items: baseline; flex-wrap: wrap; gap: 4px 8px; }
.limiter .title b { font-size: 15px; overflow-wrap: anywhere; }
.row { display: grid; grid-template-columns: 52px minmax(0, 1fr) minmax(0, auto); gap: 8px; align-items: center; margin-top: 8px; font-size: 12px; }
.row .label { color: var(--muted); }
.meter { position: relative; height: 14px; background: #eaeef2; border-radius: 4px; overflow: hidden; }
.meter i { position: absolute; top: 0; bottom: 0; left: 0; }
.meter .busy { background: var(--blue); } .meter .over { background: var(--slow); }
.meter .queue { background: var(--queue); }
.oldest.slow { color: var(--slow); font-weight: 600; } .oldest.stuck { color: var(--stuck); font-weight: 700; }
dl.config { display: grid; grid-template-columns: max-content minmax(0, 1fr); gap: 1px 10px; margin: 8px 0 0; font-size: 12px; }
dl.config dt { color: var(--muted); } dl.config dd { margin: 0; overflow-wrap: anywhere; }
.paused { margin-top: 6px; color: var(--slow); font-weight: 600; font-size: 12px; }
.counters { display: flex; flex-wrap: wrap; gap: 4px 14px; margin-top: 10px; font-size: 12px; color: var(--muted); }
.counters b { color: var(--ink); font-weight: 600; font-variant-numeric: tabular-nums; }
footer { color: var(--muted); font-size: 12px; margin-top: 28px; }
a { color: var(--blue); }
@media (max-width: 600px) {
  header, main { padding-left: 12px; padding-right: 12px; }
  ul.tree ul { margin-left: 4px; padding-left: 8px; }
  .task { grid-template-columns: 5em minmax(0, 1fr) minmax(30px, 1fr); }
  .task .site { grid-column: 1 / -1; padding-left: 5em; }
  .stat { padding: 6px 10px; }
}
</style>
</head>
<body>
<header>
  <h1>loom</h1>
  <span class="meta">pid {{.PID}} · {{.GoVersion}} · <span id="stamp">{{.Time}}</span></span>
  <span class="live"><span id="dot" class="dot"></span><span id="status">reloads itself every 5 s (JavaScript is off)</span>
    <button id="toggle" type="button" hidden>pause</button></span>
</header>
<main id="dump">
<div class="summary">
  <div class="stat"><b>{{.OpenScopes}}</b><span>open scopes</span></div>
  <div class="stat"><b>{{.Running}}</b><span>running subtasks</span></div>
  <div class="stat{{if .Stuck}} alert{{end}}"><b>{{if .Oldest}}{{.Oldest}}{{else}}–{{end}}</b><span>oldest subtask</span></div>
  <div class="stat{{if .Stuck}} alert{{end}}" title="past their scope's deadline, or running over 10 s without one"><b>{{.Stuck}}</b><span>stuck subtasks</span></div>
  <div class="stat"><b>{{len .Limiters}}</b><span>named limiters</span></div>
</div>
<div class="layout">
<section>
<h2>Scopes</h2>
{{if .Groups}}<ul class="tree" id="scopes">{{range .Groups}}{{template "group" .}}{{end}}{{if .MoreGroups}}<li class="scope"><div class="empty">… {{.MoreGroups}} more groups of scopes, not shown (all are in <a href="?format=json">JSON</a>)</div></li>{{end}}</ul>
{{else if .ScopesOff}}<div class="empty">Scopes are not recorded: turn on <code>inspect.Scopes</code>, or start the program with <code>LOOM_INSPECT=scopes</code>.</div>
{{else}}<div class="empty">No open scopes.</div>{{end}}
</section>
<section>
<h2>Limiters</h2>
{{if .Limiters}}<div class="limiters" id="limiters">{{range .Limiters}}
<div class="limiter" data-limiter="{{.Name}}">
  <div class="title"><b>{{.Name}}</b><span class="site">limit {{.Limit}}</span></div>
  <div class="row"><span class="label">slots</span>
    <div class="meter" title="{{.InFlight}} of {{.Limit}} slots held, {{.Overrun}} by overrunning tasks"><i class="busy" style="width: {{.BusyPct}}%"></i><i class="over" style="width: {{.OverrunPct}}%"></i></div>
    <span>{{.InFlight}} in flight{{if .Overrun}}, {{.Overrun}} overrunning{{end}}</span></div>
  <div class="row"><span class="label">queue</span>
    <div class="meter" title="{{.Waiting}} calls waiting for a slot"><i class="queue" style="width: {{.QueuePct}}%"></i></div>
    <span>{{.Waiting}} waiting{{if .Oldest}}, oldest <span class="oldest {{.OldestClass}}">{{.Oldest}}</span>{{end}}{{if .HasRate}}, {{.RateWaiting}} held back by the rate{{end}}</span></div>
  {{if .Config}}<dl class="config">{{range .Config}}<dt>{{.Name}}</dt><dd>{{.Value}}</dd>{{end}}</dl>{{end}}
  <div class="counters">{{range .Counters}}<span>{{.Name}} <b>{{.Value}}</b></span>{{end}}</div>
</div>{{end}}
</div>
{{else}}<div class="empty">No named limiters (a limiter appears here once it is made with <code>limiter.WithName</code>).</div>{{end}}
{{if .Semaphores}}<h2>Fleet semaphores</h2>
<div class="limiters" id="semaphores">{{range .Semaphores}}
<div class="limiter" data-semaphore="{{.Name}}">
  <div class="title"><b>{{.Name}}</b><span class="site">capacity {{.Capacity}}</span></div>
  <div class="row"><span class="label">held</span>
    <div class="meter" title="{{.Held}} of the fleet's {{.Capacity}} permits held by this process"><i class="busy" style="width: {{.HeldPct}}%"></i></div>
    <span>{{.Held}} held here, {{.Waiting}} waiting</span></div>
  {{if .Paused}}<div class="paused">{{.Paused}}</div>{{end}}
  {{if .Config}}<dl class="config">{{range .Config}}<dt>{{.Name}}</dt><dd>{{.Value}}</dd>{{end}}</dl>{{end}}
  <div class="counters">{{range .Counters}}<span>{{.Name}} <b>{{.Value}}</b></span>{{end}}</div>
</div>{{end}}
</div>{{end}}
</section>
</div>
<footer>Also as <a href="?format=text">text</a> and <a href="?format=json">JSON</a> (every scope, and the groups). Ages are as of {{.Time}}.</footer>
</main>
<script>
(function () {
  "use strict";
  var paused = false, timer = null;
  var dot = document.getElementById("dot"), status = document.getElementById("status");
  var toggle = document.getElementById("toggle");
  var live = "live, every 2 s";
  toggle.hidden = false;
  status.textContent = live;
  function pageURL() {
    var u = new URL(window.location.href);
    u.searchParams.set("format", "html");
    return u.toString();
  }
  function refresh() {
    fetch(pageURL(), {cache: "no-store"}).then(function (r) {
      if (!r.ok) { throw new Error(r.status + " " + r.statusText); }
      return r.text();
    }).then(function (html) {
      var doc = new DOMParser().parseFromString(html, "text/html");
      var next = doc.getElementById("dump"), stamp = doc.getElementById("stamp");
      if (next) {
        // Keep open what the reader opened: the groups' lists of scopes.
        var open = {};
        document.querySelectorAll("details[open][data-group]").forEach(function (d) { open[d.dataset.group] = true; });
        next.querySelectorAll("details[data-group]").forEach(function (d) { if (open[d.dataset.group]) { d.open = true; } });
        document.getElementById("dump").replaceWith(next);
      }
      if (stamp) { document.getElementById("stamp").textContent = stamp.textContent; }
      dot.className = "dot"; status.textContent = live;
    }).catch(function (e) {
      dot.className = "dot down"; status.textContent = "cannot refresh: " + e.message;
    }).finally(schedule);
  }
  function schedule() { if (!paused) { timer = setTimeout(refresh, 2000); } }
  toggle.addEventListener("click", function () {
    paused = !paused;
    clearTimeout(timer);
    toggle.textContent = paused ? "resume" : "pause";
    dot.className = paused ? "dot paused" : "dot";
    status.textContent = paused ? "paused" : live;
    if (!paused) { refresh(); }
  });
  schedule();
})();
</script>
</body>
</html>
{{define "group"}}<li class="scope" {{if eq .Count 1}}data-scope="{{.ID}}"{{else}}data-group="{{.ID}}"{{end}}>
<div class="card {{.State}}{{if gt .Count 1}} group{{end}}">
  <div class="head">
    {{if gt .Count 1}}<span class="count">{{.Count}} ×</span><span class="id">#{{.ID}} … #{{.LastID}}</span>{{else}}<span class="id">#{{.ID}}</span>{{end}}{{if .Name}}<span class="name">{{.Name}}</span>{{end}}
    <span class="pill {{.State}}">{{.State}}</span>{{if and .Joining (ne .State "joining")}}<span class="pill joining">joining</span>{{end}}
    <span class="policy">{{.Policy}}</span>
    <span class="age" title="{{if gt .Count 1}}open for, youngest to oldest{{else}}open for{{end}}">{{.Age}}</span>
    {{if .Deadline}}<span class="deadline {{.DeadlineClass}}">{{.Deadline}}</span>{{end}}
    <span class="site" title="{{.Site}}">{{.ShortSite}}</span>
  </div>
  <div class="counts">
    {{if .HasCounts}}<span class="mix" title="subtasks by state"><i class="c-run" style="width: {{.RunningPct}}%"></i><i class="c-ok" style="width: {{.SucceededPct}}%"></i><i class="c-fail" style="width: {{.FailedPct}}%"></i><i class="c-cancel" style="width: {{.CancelledPct}}%"></i></span>{{end}}
    <span class="legend"><b>{{.Counts.Running}}</b> running · <b>{{.Counts.Succeeded}}</b> succeeded · <b>{{.Counts.Failed}}</b> failed · <b>{{.Counts.Cancelled}}</b> cancelled{{if gt .Count 1}} (all {{.Count}}){{end}}</span>
    {{if .Limit}}<span>limit <b>{{.Limit}}</b>{{if .Blocked}}, <b>{{.Blocked}}</b> forks blocked{{end}}</span>{{end}}
    {{if .NotStarted}}<span>{{.NotStarted}} not started yet</span>{{end}}
  </div>
  {{if .Cause}}<div class="cause">cause: {{.Cause}}{{if gt .Causes 1}} (and {{.Causes}} other causes){{end}}</div>{{end}}
  {{if .Tasks}}<div class="tasks">{{range .Tasks}}
    <div class="task {{.Class}}" data-seq="{{.Seq}}"><span class="seq">{{if gt .Count 1}}{{.Count}} × {{end}}{{.Seq}}</span><span class="age">{{.Age}}{{if eq .Class "stuck"}}<span class="tag">stuck?</span>{{end}}</span><span class="track"><i style="width: {{.BarPct}}%"></i></span><span class="site" title="{{.Site}}">{{if .Name}}<span class="tname">{{.Name}}</span> {{end}}{{.ShortSite}}</span></div>{{end}}
  </div>
  <div class="scale">{{.Scale}}</div>{{end}}
  {{if .Members}}<details class="members" data-group="{{.ID}}"><summary>the {{.Count}} scopes</summary><ol>{{range .Members}}<li data-member="{{.ID}}">#{{.ID}} · {{.State}} · {{.Age}}{{if .Detail}} · {{.Detail}}{{end}}</li>{{end}}{{if .MoreMembers}}<li>… {{.MoreMembers}} more (in <a href="?format=json">JSON</a>)</li>{{end}}</ol></details>{{end}}
</div>
{{if or .Children .MoreChildren}}<ul>{{range .Children}}{{template "group" .}}{{end}}{{if .MoreChildren}}<li class="scope"><div class="empty">… {{.MoreChildren}} more groups of scopes, not shown</div></li>{{end}}</ul>{{end}}
{{if .Hidden}}<ul><li class="scope"><div class="empty">… {{.Hidden}} more nested scopes, not shown</div></li></ul>{{end}}
</li>{{end}}`
