package inspect

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"runtime"
	"time"

	"github.com/goloom/loom/internal/registry"
)

// FormatVersion is the version of the dump's format, in [Dump].FormatVersion. It changes only
// when a field changes meaning or is removed; fields may be added within a version.
const FormatVersion = 1

// A Dump is what [Snapshot] saw: the open scopes as a tree and the named limiters. Its JSON form
// is what [Handler] serves for ?format=json and [Publish] exposes; the field names below are
// that format's. Times are RFC 3339, in UTC.
//
// A Dump is a plain value: it shares nothing with the live scopes and limiters.
type Dump struct {
	FormatVersion int       `json:"formatVersion"` // [FormatVersion]
	ProcessID     int       `json:"processId"`
	Time          time.Time `json:"time"` // when the snapshot was taken; ages are relative to it
	GoVersion     string    `json:"goVersion"`
	// Features are the features on when the snapshot was taken: "scopes", "labels".
	Features []string   `json:"features"`
	Scopes   []*Scope   `json:"scopes"`   // the root scopes, each with its children, by ID
	Limiters []*Limiter `json:"limiters"` // the named limiters, in the order they were made
	// Semaphores are the fleet semaphores (package fleet), in the order they were made.
	Semaphores []*Semaphore `json:"semaphores"`
	// Groups are Scopes grouped: identical scopes once, with a count (see [Group]), as the text
	// and the page show them. Snapshot fills it; a Dump made otherwise may leave it nil, and
	// WriteText and the page group its Scopes themselves.
	Groups []*Group `json:"groups"`
}

// A Scope is an open scope in a [Dump].
type Scope struct {
	ID     uint64 `json:"id"`     // unique in the process; a scope opened later has a larger one
	Name   string `json:"name"`   // given with scope.WithName, or ""
	Policy string `json:"policy"` // FailFast, AwaitAll, FirstSuccess, CancelWhen or Joiner
	Site   string `json:"site"`   // file:line of the Open call (of the call to scope.Map, All, Race)

	Opened   time.Time `json:"opened"`
	Deadline time.Time `json:"deadline,omitzero"` // the scope's context's deadline, if it has one

	// State is "running", "cancelled" (Cause says why) or "joining" (the owner waits in Join or
	// Close, and the scope is not cancelled).
	State   string `json:"state"`
	Cause   string `json:"cause,omitempty"`   // the text of context.Cause of the scope's context
	Joining bool   `json:"joining,omitempty"` // the owner waits in Join or Close, whatever State

	Limit        int   `json:"limit"`        // the WithLimit bound, 0 without one
	BlockedForks int64 `json:"blockedForks"` // forks waiting for a slot of the limit

	Counts  Counts    `json:"counts"`
	Running []Subtask `json:"running"` // the running subtasks whose goroutine has started, by Seq

	// Children are the scopes opened with a context derived from this scope's (from its
	// Context, or from a subtask's: through limiter calls, scoped values, timeouts...).
	Children []*Scope `json:"children"`
}

// States of a [Scope].
const (
	StateRunning   = "running"
	StateCancelled = "cancelled"
	StateJoining   = "joining"
)

// Counts are a scope's subtasks by state. Running counts the subtasks forked and not completed,
// but for the forks blocked on the limit ([Scope].BlockedForks); a subtask whose goroutine has
// not started yet is counted but not listed in [Scope].Running. The others count the completed
// subtasks, Cancelled also those forked after the scope was cancelled.
type Counts struct {
	Running   int64 `json:"running"`
	Succeeded int64 `json:"succeeded"`
	Failed    int64 `json:"failed"`
	Cancelled int64 `json:"cancelled"`
}

// A Subtask is a running subtask in a [Dump].
type Subtask struct {
	Seq     int64     `json:"seq"`            // fork order in the scope, from 1
	Name    string    `json:"name,omitempty"` // given with scope.ForkNamed or GoNamed
	Site    string    `json:"site"`           // file:line of the function passed to Fork or Go
	Started time.Time `json:"started"`        // when its goroutine started
}

// A Limiter is a named limiter in a [Dump].
type Limiter struct {
	Name  string `json:"name"`
	Stats Stats  `json:"stats"`
	// OldestWaiting is how long, in seconds, the call waiting longest for a slot has waited; 0 if
	// none waits.
	OldestWaiting float64 `json:"oldestWaiting"`
	// Config is the options the limiter was made with, but for its limit (a stat: WithAdaptive
	// moves it): "rate" and "burst" (WithRate), "acquireTimeout", "taskTimeout", "maxWaiting",
	// "fleet" and "fleetCapacity" (WithFleet), "fleetRate", "adaptive" — only those given.
	Config Config `json:"config"`
}

// A Semaphore is a fleet semaphore (package fleet) in a [Dump]: one process's handle on a limit
// that every process of a fleet shares.
type Semaphore struct {
	Name string `json:"name"`
	// Stats are the Semaphore's Stats fields in lowerCamelCase: "capacity", "held", "waiting",
	// "acquired", "released", "leasesLost", "unavailable", "degraded", "roundTrips", …
	Stats Stats `json:"stats"`
	// Config is how it was made: "lease" (the TTL), "whenUnavailable".
	Config Config `json:"config"`
	// PausedUntil is when it admits again, after its backend lost its data; omitted when it is
	// not paused.
	PausedUntil time.Time `json:"pausedUntil,omitzero"`
}

// Config is a limiter's (or a semaphore's) settings, each value as text, in the order to show
// them. In JSON it is one object of strings, keys in order.
type Config []Setting

// A Setting is one named setting.
type Setting struct {
	Name, Value string
}

// Get returns the value of the setting named name, and whether there is one.
func (c Config) Get(name string) (string, bool) {
	for _, st := range c {
		if st.Name == name {
			return st.Value, true
		}
	}
	return "", false
}

// MarshalJSON writes the settings as one object, keys in order.
func (c Config) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, st := range c {
		if i > 0 {
			b.WriteByte(',')
		}
		for j, v := range [2]string{st.Name, st.Value} {
			q, err := json.Marshal(v)
			if err != nil {
				return nil, err
			}
			b.Write(q)
			if j == 0 {
				b.WriteByte(':')
			}
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads an object of strings, keeping the keys' order.
func (c *Config) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return errors.New("inspect: config: not a JSON object")
	}
	var out Config // nil for {}, as a dump without settings has
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		name, _ := t.(string)
		var v string
		if err := dec.Decode(&v); err != nil {
			return errors.New("inspect: config: " + name + ": not a string")
		}
		out = append(out, Setting{name, v})
	}
	if _, err := dec.Token(); err != nil {
		return err
	}
	*c = out
	return nil
}

// Stats are a limiter's numbers — its Stats fields, named in lowerCamelCase ("limit",
// "inFlight", "waiting", "overrunning", "submitted", "completed", "failed", "rejected",
// "timedOut", "cancelled", "panicked", and any the limiter adds) — in the limiter's order. In
// JSON they are one object.
type Stats []Stat

// A Stat is one named number of a limiter.
type Stat struct {
	Name  string
	Value int64
}

// Get returns the stat named name, and whether there is one.
func (s Stats) Get(name string) (int64, bool) {
	for _, st := range s {
		if st.Name == name {
			return st.Value, true
		}
	}
	return 0, false
}

// value is Get without the flag: 0 for a stat that is not there.
func (s Stats) value(name string) int64 { n, _ := s.Get(name); return n }

// MarshalJSON writes the stats as one object, keys in order.
func (s Stats) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, st := range s {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(st.Name)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(json.RawMessage(itoa(st.Value)))
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads an object of integers, keeping the keys' order.
func (s *Stats) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return errors.New("inspect: stats: not a JSON object")
	}
	out := Stats{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		name, _ := t.(string)
		var n json.Number
		if err := dec.Decode(&n); err != nil {
			return errors.New("inspect: stats: " + name + ": not a number")
		}
		v, err := n.Int64()
		if err != nil {
			return errors.New("inspect: stats: " + name + ": not an integer")
		}
		out = append(out, Stat{name, v})
	}
	if _, err := dec.Token(); err != nil {
		return err
	}
	*s = out
	return nil
}

// Snapshot returns what loom is doing now: every scope recorded (opened while [Scopes] was on,
// and not joined yet) as a tree, and every named limiter still reachable. It never holds up a
// fork or a subtask's completion: each scope's record is read with atomic loads, one scope after
// another, so a snapshot taken while scopes churn is consistent scope by scope, not as of one
// instant (a subtask counted as running may already have completed, a scope opened during the
// snapshot may be missing). It leaves nothing behind. Sites are resolved here, not when forks
// happen.
func Snapshot() *Dump {
	now := time.Now()
	recs := registry.CollectScopes()
	lims := registry.CollectLimiters()
	sems := registry.CollectSemaphores()
	d := &Dump{
		FormatVersion: FormatVersion,
		ProcessID:     os.Getpid(),
		Time:          now.UTC(),
		GoVersion:     runtime.Version(),
		Features:      featureNames(),
		Scopes:        []*Scope{},
		Limiters:      make([]*Limiter, 0, len(lims)),
		Semaphores:    make([]*Semaphore, 0, len(sems)),
	}
	byID := make(map[uint64]*Scope, len(recs))
	for _, r := range recs { // by ID, so a parent comes before its children
		s := scopeOf(r, d.Time)
		byID[r.ID] = s
		if p, ok := byID[r.Parent]; ok && r.Parent != 0 {
			p.Children = append(p.Children, s)
		} else {
			d.Scopes = append(d.Scopes, s) // a root, or a child whose parent has left
		}
	}
	d.Groups = append([]*Group{}, group(d.Scopes, 0)...) // a list even when empty, as scopes
	for _, l := range lims {
		d.Limiters = append(d.Limiters, &Limiter{Name: l.Name, Stats: statsOf(l), OldestWaiting: l.OldestWaiting.Seconds(), Config: configOf(l)})
	}
	for _, l := range sems {
		sem := &Semaphore{Name: l.Name, Stats: statsOf(l), Config: configOf(l)}
		if l.PausedUntil.After(now) {
			sem.PausedUntil = l.PausedUntil.UTC()
		}
		d.Semaphores = append(d.Semaphores, sem)
	}
	return d
}

func statsOf(l registry.LimiterRecord) Stats {
	st := make(Stats, len(l.Stats))
	for i, s := range l.Stats {
		st[i] = Stat(s)
	}
	return st
}

func configOf(l registry.LimiterRecord) Config {
	c := make(Config, len(l.Config))
	for i, s := range l.Config {
		c[i] = Setting(s)
	}
	return c
}

func featureNames() []string {
	names := []string{}
	for _, f := range []Feature{Scopes, Labels} {
		if Enabled(f) {
			names = append(names, f.String())
		}
	}
	return names
}

func scopeOf(r registry.ScopeRecord, now time.Time) *Scope {
	s := &Scope{
		ID:           r.ID,
		Name:         r.Name,
		Policy:       r.Policy.String(),
		Site:         r.Site,
		Opened:       now.Add(-r.Age),
		State:        StateRunning,
		Joining:      r.Joining,
		Limit:        r.Limit,
		BlockedForks: r.Blocked,
		Counts:       Counts{Running: r.Running, Succeeded: r.Succeeded, Failed: r.Failed, Cancelled: r.CancelledSubtasks},
		Running:      make([]Subtask, len(r.Tasks)),
		Children:     []*Scope{},
	}
	if !r.Deadline.IsZero() {
		s.Deadline = r.Deadline.UTC()
	}
	switch {
	case r.Cancelled:
		s.State, s.Cause = StateCancelled, r.Cause
	case r.Joining:
		s.State = StateJoining
	}
	for i, t := range r.Tasks {
		s.Running[i] = Subtask{Seq: t.Seq, Name: t.Name, Site: t.Site, Started: now.Add(-t.Age)}
	}
	return s
}
