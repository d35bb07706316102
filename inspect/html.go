package inspect

import (
	"html/template"
	"io"
	"math"
	"time"
)

// writeHTML writes the dump as a page a person reads in a browser: the scope tree with states
// coloured and ages, the limiters with their slots and queues as bars, refreshing itself every
// two seconds (from the same URL, so the page keeps its query). Everything is inline: no
// external asset, no script from elsewhere.
func writeHTML(w io.Writer, d *Dump) error {
	return pageTemplate.Execute(w, newPage(d))
}

// The page's view of a dump: what the template shows, computed here so that the template only
// lays it out.
type page struct {
	Time, PID, GoVersion string
	ScopesOff            bool
	OpenScopes, Running  int
	Oldest               string
	Stuck                int
	Scopes               []*scopeView
	Limiters             []*limiterView
}

type scopeView struct {
	ID                         uint64
	Name, Policy, State, Cause string
	Joining                    bool
	Age, Site, ShortSite       string
	Deadline, DeadlineClass    string
	Counts                     Counts
	Limit                      int
	Blocked                    int64
	Tasks                      []taskView
	Children                   []*scopeView
	Hidden                     int   // scopes nested deeper than maxDepth, not shown
	NotStarted                 int64 // counted as running, goroutine not started yet
	RunningPct, SucceededPct   float64
	FailedPct, CancelledPct    float64
	HasCounts                  bool
}

type taskView struct {
	Seq                  int64
	Age, Site, ShortSite string
	Class                string // fresh, slow, stuck
	BarPct               float64
}

type limiterView struct {
	Name                              string
	Limit, InFlight, Waiting, Overrun int64
	BusyPct, OverrunPct, QueuePct     float64
	Oldest                            string
	OldestClass                       string
	Counters                          Stats
}

// Ages past these are shown as slow and stuck.
const (
	slowAge  = time.Second
	stuckAge = 10 * time.Second
)

// ageClass is the CSS class of an age: fresh, slow or stuck.
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
	var walk func(*Scope)
	walk = func(s *Scope) {
		p.OpenScopes++
		for _, t := range s.Running {
			p.Running++
			a := d.Time.Sub(t.Started)
			oldest = max(oldest, a)
			if a >= stuckAge {
				p.Stuck++
			}
		}
		for _, c := range s.Children {
			walk(c)
		}
	}
	for _, s := range d.Scopes {
		walk(s)
	}
	if p.Running > 0 {
		p.Oldest = age(oldest)
	}
	for _, s := range d.Scopes {
		p.Scopes = append(p.Scopes, newScopeView(d, s, oldest, 0))
	}
	var longest int64
	for _, l := range d.Limiters {
		n, _ := l.Stats.Get("waiting")
		longest = max(longest, n)
	}
	for _, l := range d.Limiters {
		p.Limiters = append(p.Limiters, newLimiterView(l, longest))
	}
	return p
}

func newScopeView(d *Dump, s *Scope, oldest time.Duration, depth int) *scopeView {
	v := &scopeView{
		ID: s.ID, Name: s.Name, Policy: s.Policy, State: s.State, Cause: s.Cause, Joining: s.Joining,
		Age: age(d.Time.Sub(s.Opened)), Site: s.Site, ShortSite: shortSite(s.Site),
		Counts: s.Counts, Limit: s.Limit, Blocked: s.BlockedForks,
		NotStarted: max(s.Counts.Running-int64(len(s.Running)), 0),
	}
	if !s.Deadline.IsZero() {
		switch left := s.Deadline.Sub(d.Time); {
		case left < 0:
			v.Deadline, v.DeadlineClass = "deadline passed "+age(-left)+" ago", "past"
		case left < time.Second:
			v.Deadline, v.DeadlineClass = "deadline in "+age(left), "soon"
		default:
			v.Deadline, v.DeadlineClass = "deadline in "+age(left), "later"
		}
	}
	c := s.Counts
	if total := c.Running + c.Succeeded + c.Failed + c.Cancelled; total > 0 {
		v.HasCounts = true
		pct := func(n int64) float64 { return math.Round(1000*float64(n)/float64(total)) / 10 }
		v.RunningPct, v.SucceededPct, v.FailedPct, v.CancelledPct = pct(c.Running), pct(c.Succeeded), pct(c.Failed), pct(c.Cancelled)
	}
	for _, t := range s.Running {
		a := d.Time.Sub(t.Started)
		v.Tasks = append(v.Tasks, taskView{Seq: t.Seq, Age: age(a), Site: t.Site, ShortSite: shortSite(t.Site), Class: ageClass(a), BarPct: barPct(a, oldest)})
	}
	if depth+1 >= maxDepth {
		v.Hidden = descendants(s)
		return v
	}
	for _, ch := range s.Children {
		v.Children = append(v.Children, newScopeView(d, ch, oldest, depth+1))
	}
	return v
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

func newLimiterView(l *Limiter, longest int64) *limiterView {
	get := l.Stats.value
	v := &limiterView{Name: l.Name, Limit: get("limit"), InFlight: get("inFlight"), Waiting: get("waiting"), Overrun: get("overrunning")}
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
		case "limit", "inFlight", "waiting", "overrunning":
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
header { display: flex; align-items: center; gap: 16px; padding: 12px 24px; background: #24292f; color: #fff; }
header h1 { margin: 0; font-size: 18px; letter-spacing: .5px; }
header .meta { color: #c9d1d9; font-size: 13px; }
header .live { margin-left: auto; display: flex; align-items: center; gap: 8px; font-size: 13px; }
.dot { width: 9px; height: 9px; border-radius: 50%; background: #3fb950; display: inline-block; }
.dot.paused { background: #8b949e; } .dot.down { background: #f85149; }
button { font: inherit; font-size: 12px; padding: 3px 10px; border-radius: 6px; border: 1px solid #57606a;
  background: #32383f; color: #fff; cursor: pointer; }
main { padding: 16px 24px 40px; max-width: 1600px; }
.summary { display: flex; gap: 12px; margin-bottom: 16px; flex-wrap: wrap; }
.stat { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 8px 14px; min-width: 130px; }
.stat b { display: block; font-size: 22px; }
.stat span { color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .4px; }
.stat.alert b { color: var(--stuck); }
h2 { font-size: 15px; margin: 22px 0 8px; color: var(--muted); text-transform: uppercase; letter-spacing: .6px; }
.empty { color: var(--muted); background: var(--card); border: 1px dashed var(--line); border-radius: 8px; padding: 14px; }
ul.tree, ul.tree ul { list-style: none; margin: 0; padding: 0; }
ul.tree ul { margin-left: 22px; padding-left: 14px; border-left: 2px solid var(--line); }
li.scope { margin: 8px 0; }
.card { background: var(--card); border: 1px solid var(--line); border-left: 4px solid var(--run); border-radius: 8px; padding: 8px 12px; }
.card.cancelled { border-left-color: var(--cancel); }
.card.joining { border-left-color: var(--join); }
.head { display: flex; align-items: baseline; flex-wrap: wrap; gap: 8px; }
.id { color: var(--muted); font-variant-numeric: tabular-nums; }
.name { font-weight: 600; font-size: 15px; }
.pill { font-size: 11px; font-weight: 600; border-radius: 10px; padding: 1px 8px; text-transform: uppercase; letter-spacing: .4px; }
.pill.running { color: var(--run); background: var(--run-bg); }
.pill.joining { color: var(--join); background: var(--join-bg); }
.pill.cancelled { color: var(--cancel); background: var(--cancel-bg); }
.policy { font-size: 12px; color: var(--blue); background: var(--blue-bg); border-radius: 6px; padding: 0 6px; }
.age { font-variant-numeric: tabular-nums; }
.deadline.past, .deadline.soon { color: var(--cancel); font-weight: 600; }
.deadline.later { color: var(--muted); }
.site { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12px; color: var(--muted); }
.cause { margin-top: 4px; color: var(--cancel); font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; white-space: pre-wrap; max-height: 4.5em; overflow: hidden; }
.counts { display: flex; gap: 10px; align-items: center; margin-top: 4px; font-size: 12px; color: var(--muted); flex-wrap: wrap; }
.mix { display: flex; width: 160px; height: 8px; border-radius: 4px; overflow: hidden; background: #eaeef2; }
.mix i { display: block; height: 100%; }
.c-run { background: var(--blue); } .c-ok { background: #2da44e; } .c-fail { background: var(--cancel); } .c-cancel { background: #8c959f; }
.legend b { font-weight: 600; color: var(--ink); }
table.tasks { border-collapse: collapse; margin-top: 6px; width: 100%; max-width: 900px; }
table.tasks { table-layout: fixed; }
table.tasks td { padding: 2px 8px 2px 0; font-size: 13px; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
table.tasks td.seq { width: 56px; } table.tasks td.age { width: 100px; } table.tasks td.bar { width: 220px; }
.track { height: 8px; background: #eaeef2; border-radius: 4px; overflow: hidden; }
.track i { display: block; height: 100%; border-radius: 4px; background: #8c959f; }
tr.slow .track i { background: var(--slow); } tr.stuck .track i { background: var(--stuck); }
tr.slow .age { color: var(--slow); font-weight: 600; } tr.stuck .age { color: var(--stuck); font-weight: 700; }
.tag { font-size: 11px; color: #fff; background: var(--stuck); border-radius: 4px; padding: 0 5px; margin-left: 4px; }
.seq { color: var(--muted); font-variant-numeric: tabular-nums; }
.layout { display: grid; grid-template-columns: minmax(0, 1fr) 410px; gap: 20px; align-items: start; }
@media (max-width: 1100px) { .layout { grid-template-columns: minmax(0, 1fr); } }
.layout h2 { margin-top: 4px; }
.limiters { display: grid; grid-template-columns: minmax(0, 1fr); gap: 12px; }
.limiter { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 10px 14px; }
.limiter .title { display: flex; justify-content: space-between; align-items: baseline; }
.limiter .title b { font-size: 15px; }
.row { display: grid; grid-template-columns: 52px minmax(0, 1fr) 170px; gap: 8px; align-items: center; margin-top: 8px; font-size: 12px; }
.row .label { color: var(--muted); }
.meter { position: relative; height: 14px; background: #eaeef2; border-radius: 4px; overflow: hidden; }
.meter i { position: absolute; top: 0; bottom: 0; left: 0; }
.meter .busy { background: var(--blue); } .meter .over { background: var(--slow); }
.meter .queue { background: var(--queue); }
.oldest.slow { color: var(--slow); font-weight: 600; } .oldest.stuck { color: var(--stuck); font-weight: 700; }
.counters { display: flex; flex-wrap: wrap; gap: 4px 14px; margin-top: 10px; font-size: 12px; color: var(--muted); }
.counters b { color: var(--ink); font-weight: 600; font-variant-numeric: tabular-nums; }
footer { color: var(--muted); font-size: 12px; margin-top: 28px; }
a { color: var(--blue); }
</style>
</head>
<body>
<header>
  <h1>loom</h1>
  <span class="meta">pid {{.PID}} · {{.GoVersion}} · <span id="stamp">{{.Time}}</span></span>
  <span class="live"><span id="dot" class="dot"></span><span id="status">live, every 2 s</span>
    <button id="toggle" type="button">pause</button></span>
</header>
<main id="dump">
<div class="summary">
  <div class="stat"><b>{{.OpenScopes}}</b><span>open scopes</span></div>
  <div class="stat"><b>{{.Running}}</b><span>running subtasks</span></div>
  <div class="stat{{if .Stuck}} alert{{end}}"><b>{{if .Oldest}}{{.Oldest}}{{else}}–{{end}}</b><span>oldest subtask</span></div>
  <div class="stat{{if .Stuck}} alert{{end}}"><b>{{.Stuck}}</b><span>running over 10 s</span></div>
  <div class="stat"><b>{{len .Limiters}}</b><span>named limiters</span></div>
</div>
<div class="layout">
<section>
<h2>Scopes</h2>
{{if .Scopes}}<ul class="tree" id="scopes">{{range .Scopes}}{{template "scope" .}}{{end}}</ul>
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
    <span>{{.Waiting}} waiting{{if .Oldest}}, oldest <span class="oldest {{.OldestClass}}">{{.Oldest}}</span>{{end}}</span></div>
  <div class="counters">{{range .Counters}}<span>{{.Name}} <b>{{.Value}}</b></span>{{end}}</div>
</div>{{end}}
</div>
{{else}}<div class="empty">No named limiters (a limiter appears here once it is made with <code>limiter.WithName</code>).</div>{{end}}
</section>
</div>
<footer>Also as <a href="?format=text">text</a> and <a href="?format=json">JSON</a>. Ages are as of {{.Time}}.</footer>
</main>
<script>
(function () {
  "use strict";
  var paused = false, timer = null;
  var dot = document.getElementById("dot"), status = document.getElementById("status");
  var toggle = document.getElementById("toggle");
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
      if (next) { document.getElementById("dump").replaceWith(next); }
      if (stamp) { document.getElementById("stamp").textContent = stamp.textContent; }
      dot.className = "dot"; status.textContent = "live, every 2 s";
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
    status.textContent = paused ? "paused" : "live, every 2 s";
    if (!paused) { refresh(); }
  });
  schedule();
})();
</script>
</body>
</html>
{{define "scope"}}<li class="scope" data-scope="{{.ID}}">
<div class="card {{.State}}">
  <div class="head">
    <span class="id">#{{.ID}}</span>{{if .Name}}<span class="name">{{.Name}}</span>{{end}}
    <span class="pill {{.State}}">{{.State}}</span>{{if and .Joining (ne .State "joining")}}<span class="pill joining">joining</span>{{end}}
    <span class="policy">{{.Policy}}</span>
    <span class="age" title="open for">{{.Age}}</span>
    {{if .Deadline}}<span class="deadline {{.DeadlineClass}}">{{.Deadline}}</span>{{end}}
    <span class="site" title="{{.Site}}">{{.ShortSite}}</span>
  </div>
  <div class="counts">
    {{if .HasCounts}}<span class="mix" title="subtasks by state"><i class="c-run" style="width: {{.RunningPct}}%"></i><i class="c-ok" style="width: {{.SucceededPct}}%"></i><i class="c-fail" style="width: {{.FailedPct}}%"></i><i class="c-cancel" style="width: {{.CancelledPct}}%"></i></span>{{end}}
    <span class="legend"><b>{{.Counts.Running}}</b> running · <b>{{.Counts.Succeeded}}</b> succeeded · <b>{{.Counts.Failed}}</b> failed · <b>{{.Counts.Cancelled}}</b> cancelled</span>
    {{if .Limit}}<span>limit <b>{{.Limit}}</b>{{if .Blocked}}, <b>{{.Blocked}}</b> forks blocked{{end}}</span>{{end}}
    {{if .NotStarted}}<span>{{.NotStarted}} not started yet</span>{{end}}
  </div>
  {{if .Cause}}<div class="cause">cause: {{.Cause}}</div>{{end}}
  {{if .Tasks}}<table class="tasks">{{range .Tasks}}
    <tr class="{{.Class}}" data-seq="{{.Seq}}"><td class="seq">#{{.Seq}}</td><td class="age">{{.Age}}{{if eq .Class "stuck"}}<span class="tag">stuck?</span>{{end}}</td>
    <td class="bar"><div class="track"><i style="width: {{.BarPct}}%"></i></div></td><td class="site" title="{{.Site}}">{{.ShortSite}}</td></tr>{{end}}
  </table>{{end}}
</div>
{{if .Children}}<ul>{{range .Children}}{{template "scope" .}}{{end}}</ul>{{end}}
{{if .Hidden}}<ul><li class="scope"><div class="empty">… {{.Hidden}} more nested scopes, not shown</div></li></ul>{{end}}
</li>{{end}}`
