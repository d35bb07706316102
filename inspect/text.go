package inspect

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode"
)

// WriteText writes the dump as text: one line per scope, with its running subtasks and its child
// scopes indented under it, then one line per limiter (and one with its settings) and per fleet
// semaphore:
//
//	scope #42 "profile" FailFast running 1.2s deadline in 0.8s  api/profile.go:31  2 running, 1 succeeded
//	  #2 "user" running 1.2s  api/profile.go:35
//	  #3 running 1.1s  api/profile.go:38
//	  scope #43 "avatar" AwaitAll running 1.1s  api/avatar.go:12  1 running
//	    #1 running 1.1s  api/avatar.go:14
//	limiter "llm-api" limit 40  in flight 40  waiting 113 (oldest 9.8s)  overrunning 2
//	  rate 10/s, burst 20 (113 held back by the rate)  acquire timeout 30s
//	semaphore "llm-api" capacity 40  held 40  waiting 3  lease 15s  when unavailable FailClosed
//
// Identical scopes — same name, site, policy, state and limit, running subtasks at the same
// sites (see [Group]) — are one line with a count and the range of their ages, and their
// subtasks one line per site with a count, as pprof's goroutine?debug=1 shows a stack once:
//
//	40 × scope "profile" FailFast running 0.2s–1.2s  api/profile.go:31  80 running, 40 succeeded  #42 … #97
//	  40 × #2 "user" running 0.1s–1.2s  api/profile.go:35
//
// Ages are as of the dump's Time; sites are shortened to their last directory and file. A
// cancelled scope's line ends with its cause (its first line). Every string that comes from the
// program is escaped the same way, as Go quotes strings, so that none can move the cursor or
// send a terminal a command: names and causes are always quoted, sites only when they hold a
// space, a quote or a character that is not printable. It returns the first error of w.
func (d *Dump) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	tw := &textWriter{w: bw, d: d}
	if len(d.Scopes) == 0 {
		if d.hasFeature("scopes") {
			tw.line(0, "no open scopes")
		} else {
			tw.line(0, "scopes not recorded: inspect.Scopes is off (LOOM_INSPECT=scopes turns it on at start-up)")
		}
	}
	for _, g := range group(d.Scopes, 0) {
		tw.group(0, g)
	}
	for _, l := range d.Limiters {
		if l != nil { // a dump decoded from JSON may hold nulls
			tw.limiter(l)
		}
	}
	for _, sem := range d.Semaphores {
		if sem != nil {
			tw.semaphore(sem)
		}
	}
	if tw.err != nil {
		return tw.err
	}
	return bw.Flush()
}

func (d *Dump) hasFeature(name string) bool {
	for _, f := range d.Features {
		if f == name {
			return true
		}
	}
	return false
}

type textWriter struct {
	w   *bufio.Writer
	d   *Dump
	err error
}

func (tw *textWriter) line(depth int, format string, args ...any) {
	if tw.err != nil {
		return
	}
	_, tw.err = fmt.Fprintf(tw.w, strings.Repeat("  ", depth)+format+"\n", args...)
}

// group writes a group of identical scopes: the scope itself when it is alone, else one line for
// all with a count and the range of their ages; then their subtasks, then their children's groups.
func (tw *textWriter) group(depth int, g *Group) {
	if g.Count == 1 {
		tw.scope(depth, g.first)
	} else {
		tw.groupLine(depth, g)
	}
	if g.hidden > 0 {
		tw.line(depth+1, "… %d more nested scopes, not shown", g.hidden)
	}
	for _, c := range g.Children {
		tw.group(depth+1, c)
	}
}

// scope writes one scope's line and its running subtasks.
func (tw *textWriter) scope(depth int, s *Scope) {
	var b strings.Builder
	fmt.Fprintf(&b, "scope #%d ", s.ID)
	if s.Name != "" {
		fmt.Fprintf(&b, "%s ", quote(s.Name))
	}
	fmt.Fprintf(&b, "%s %s %s", s.Policy, stateText(s.State, s.Joining), age(tw.d.Time.Sub(s.Opened)))
	if !s.Deadline.IsZero() {
		b.WriteString(" " + deadlineText(s.Deadline.Sub(tw.d.Time)))
	}
	fmt.Fprintf(&b, "  %s  %s", siteText(s.Site), counts(s.Counts))
	limitText(&b, s.Limit, s.BlockedForks)
	if s.State == StateCancelled && s.Cause != "" {
		fmt.Fprintf(&b, "  cause: %s", quote(firstLine(s.Cause, 200)))
	}
	tw.line(depth, "%s", b.String())
	for _, t := range s.Running {
		tw.line(depth+1, "#%d %srunning %s  %s", t.Seq, nameText(t.Name), age(tw.d.Time.Sub(t.Started)), siteText(t.Site))
	}
}

// groupLine writes the line of a group of scopes and a line for each site of their running
// subtasks, each with a count:
//
//	40 × scope "profile" FailFast running 0.2s–1.2s  api/profile.go:31  80 running, 40 succeeded  #42 … #97
//	  40 × #2 "user" running 0.1s–1.2s  api/profile.go:35
func (tw *textWriter) groupLine(depth int, g *Group) {
	var b strings.Builder
	fmt.Fprintf(&b, "%d × scope ", g.Count)
	if g.Name != "" {
		fmt.Fprintf(&b, "%s ", quote(g.Name))
	}
	fmt.Fprintf(&b, "%s %s %s", g.Policy, stateText(g.State, g.Joining), ages(tw.d.Time, g.Newest, g.Oldest))
	if !g.Deadline.IsZero() {
		b.WriteString(" earliest " + deadlineText(g.Deadline.Sub(tw.d.Time)))
	}
	fmt.Fprintf(&b, "  %s  %s", siteText(g.Site), counts(g.Counts))
	limitText(&b, g.Limit, g.BlockedForks)
	fmt.Fprintf(&b, "  #%d … #%d", g.IDs[0], g.IDs[len(g.IDs)-1])
	if g.State == StateCancelled && g.Cause != "" {
		fmt.Fprintf(&b, "  cause: %s", quote(firstLine(g.Cause, 200)))
		if g.Causes > 1 {
			fmt.Fprintf(&b, " (and %d other causes)", g.Causes-1)
		}
	}
	tw.line(depth, "%s", b.String())
	for _, t := range g.Running {
		seq := "#" + itoa(t.Seq)
		if t.SeqTo != t.Seq {
			seq += "–#" + itoa(t.SeqTo)
		}
		tw.line(depth+1, "%d × %s %srunning %s  %s", t.Count, seq, nameText(t.Name), ages(tw.d.Time, t.Newest, t.Oldest), siteText(t.Site))
	}
}

func stateText(state string, joining bool) string {
	if state == StateCancelled && joining {
		return state + ", joining"
	}
	return state
}

func deadlineText(left time.Duration) string {
	if left >= 0 {
		return "deadline in " + age(left)
	}
	return "deadline " + age(-left) + " ago"
}

func limitText(b *strings.Builder, limit int, blocked int64) {
	if limit > 0 {
		fmt.Fprintf(b, "  limit %d", limit)
		if blocked > 0 {
			fmt.Fprintf(b, ", %d blocked forks", blocked)
		}
	}
}

// maxDepth bounds how deep the text and the page show the tree: real trees are far shallower,
// and a dump read from elsewhere must not make the rendering quadratic in its depth.
const maxDepth = 64

// descendants counts the scopes below s.
func descendants(s *Scope) int {
	n := 0
	for _, c := range s.Children {
		n += 1 + descendants(c)
	}
	return n
}

// counts lists the non-zero counts: "2 running, 1 succeeded"; "no subtasks" if none.
func counts(c Counts) string {
	var parts []string
	for _, p := range []struct {
		n    int64
		name string
	}{{c.Running, "running"}, {c.Succeeded, "succeeded"}, {c.Failed, "failed"}, {c.Cancelled, "cancelled"}} {
		if p.n != 0 {
			parts = append(parts, fmt.Sprintf("%d %s", p.n, p.name))
		}
	}
	if len(parts) == 0 {
		return "no subtasks"
	}
	return strings.Join(parts, ", ")
}

func (tw *textWriter) limiter(l *Limiter) {
	get := l.Stats.value
	waiting := fmt.Sprintf("waiting %d", get("waiting"))
	if get("waiting") > 0 {
		waiting += fmt.Sprintf(" (oldest %s)", age(secondsToDuration(l.OldestWaiting)))
	}
	tw.line(0, "limiter %s limit %d  in flight %d  %s  overrunning %d",
		quote(l.Name), get("limit"), get("inFlight"), waiting, get("overrunning"))
	if conf := configText(l.Config, get("rateWaiting")); conf != "" {
		tw.line(1, "%s", conf)
	}
}

// nameText is a name and a space, quoted, or "" for no name.
func nameText(name string) string {
	if name == "" {
		return ""
	}
	return quote(name) + " "
}

func (tw *textWriter) semaphore(sem *Semaphore) {
	get := sem.Stats.value
	line := fmt.Sprintf("semaphore %s capacity %d  held %d  waiting %d", quote(sem.Name), get("capacity"), get("held"), get("waiting"))
	if conf := configText(sem.Config, 0); conf != "" {
		line += "  " + conf
	}
	if !sem.PausedUntil.IsZero() {
		line += fmt.Sprintf("  paused: admits again in %s", age(sem.PausedUntil.Sub(tw.d.Time)))
	}
	tw.line(0, "%s", line)
}

// settingWords are the words the text and the page use for the settings a limiter or semaphore
// reports; a setting not named here is shown by its name.
var settingWords = map[string]string{
	"rate": "rate", "burst": "burst", "acquireTimeout": "acquire timeout", "taskTimeout": "task timeout",
	"maxWaiting": "max waiting", "fleet": "fleet", "fleetCapacity": "fleet capacity", "fleetRate": "fleet rate",
	"adaptive": "adaptive", "lease": "lease", "whenUnavailable": "when unavailable",
}

func settingWord(name string) string {
	if w, ok := settingWords[name]; ok {
		return w
	}
	return name
}

// configText is a limiter's settings on one line: "rate 10/s, burst 20 (3 held back by the rate)
// acquire timeout 30s  fleet "llm-api" …", values escaped as sites are. rateWaiting is how many
// calls the rate holds back (rate only).
func configText(c Config, rateWaiting int64) string {
	var parts []string
	for _, st := range c {
		v := valueText(st.Value)
		switch st.Name {
		case "burst":
			continue // with the rate
		case "rate":
			v += ", burst " + valueText(func() string { b, _ := c.Get("burst"); return b }())
			v += fmt.Sprintf(" (%d held back by the rate)", rateWaiting)
		case "fleet":
			v = quote(st.Value)
		}
		parts = append(parts, settingWord(st.Name)+" "+v)
	}
	return strings.Join(parts, "  ")
}

// valueText is a setting's value for the text: bare when plain, quoted when not (as sites).
func valueText(v string) string {
	for _, r := range v {
		if !unicode.IsPrint(r) || r == '"' || r == '\\' {
			return quote(v)
		}
	}
	return v
}
