package inspect_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/inspect"
)

// enable sets exactly the features fs for the test, and what was on before after it.
func enable(t testing.TB, fs ...inspect.Feature) {
	t.Helper()
	var was []inspect.Feature
	for _, f := range []inspect.Feature{inspect.Scopes, inspect.Labels} {
		if inspect.Enabled(f) {
			was = append(was, f)
		}
		inspect.Disable(f)
	}
	if len(fs) > 0 {
		inspect.Enable(fs...)
	}
	t.Cleanup(func() {
		inspect.Disable(inspect.Scopes, inspect.Labels)
		if len(was) > 0 {
			inspect.Enable(was...)
		}
	})
}

// here returns "file:line" of the line delta lines below the call.
func here(delta int) string {
	_, file, line, _ := runtime.Caller(1)
	return fmt.Sprintf("%s:%d", file, line+delta)
}

// find returns the scope named name anywhere in the tree.
func find(t testing.TB, d *inspect.Dump, name string) *inspect.Scope {
	t.Helper()
	var walk func([]*inspect.Scope) *inspect.Scope
	walk = func(ss []*inspect.Scope) *inspect.Scope {
		for _, s := range ss {
			if s.Name == name {
				return s
			}
			if c := walk(s.Children); c != nil {
				return c
			}
		}
		return nil
	}
	s := walk(d.Scopes)
	require.NotNil(t, s, "no scope named %q", name)
	return s
}

func limiterNamed(d *inspect.Dump, name string) *inspect.Limiter {
	for _, l := range d.Limiters {
		if l.Name == name {
			return l
		}
	}
	return nil
}

// sampleDump is a dump as a busy service would show it: a request fanning out, with a nested
// scope; a checkout stuck behind a payment call that ignores its cancelled context; a limited
// fan-out with forks blocked on its limit; a saturated limiter with a queue, and an idle one.
func sampleDump() *inspect.Dump {
	at := time.Date(2025, 6, 1, 12, 0, 10, 0, time.UTC)
	ago := func(d time.Duration) time.Time { return at.Add(-d) }
	st := func(kv ...any) inspect.Stats {
		var s inspect.Stats
		for i := 0; i < len(kv); i += 2 {
			s = append(s, inspect.Stat{Name: kv[i].(string), Value: int64(kv[i+1].(int))})
		}
		return s
	}
	var fanout []inspect.Subtask
	for i, a := range []time.Duration{2500, 1900, 1400, 800, 420, 160, 60, 20} {
		fanout = append(fanout, inspect.Subtask{Seq: int64(181 + i), Site: "/srv/app/search/fanout.go:52", Started: ago(a * time.Millisecond)})
	}
	return &inspect.Dump{
		FormatVersion: 1, ProcessID: 4242, Time: at, GoVersion: "go1.26.8", Features: []string{"scopes", "labels"},
		Scopes: []*inspect.Scope{
			{
				ID: 42, Name: "profile", Policy: "FailFast", Site: "/srv/app/api/profile.go:31", Opened: ago(1200 * time.Millisecond),
				Deadline: at.Add(800 * time.Millisecond), State: "running",
				Counts: inspect.Counts{Running: 2, Succeeded: 1},
				Running: []inspect.Subtask{
					{Seq: 2, Site: "/srv/app/api/profile.go:35", Started: ago(1200 * time.Millisecond)},
					{Seq: 3, Site: "/srv/app/api/profile.go:38", Started: ago(1100 * time.Millisecond)},
				},
				Children: []*inspect.Scope{{
					ID: 43, Name: "avatar", Policy: "AwaitAll", Site: "/srv/app/api/avatar.go:12", Opened: ago(1100 * time.Millisecond),
					State: "running", Counts: inspect.Counts{Running: 1},
					Running:  []inspect.Subtask{{Seq: 1, Site: "/srv/app/api/avatar.go:14", Started: ago(1100 * time.Millisecond)}},
					Children: []*inspect.Scope{},
				}},
			},
			{
				ID: 57, Name: "checkout", Policy: "FailFast", Site: "/srv/app/api/checkout.go:88", Opened: ago(47300 * time.Millisecond),
				Deadline: ago(17300 * time.Millisecond), State: "cancelled", Cause: "context deadline exceeded", Joining: true,
				Counts:   inspect.Counts{Running: 1, Succeeded: 3, Failed: 1, Cancelled: 2},
				Running:  []inspect.Subtask{{Seq: 4, Site: "/srv/app/payments/client.go:120", Started: ago(47200 * time.Millisecond)}},
				Children: []*inspect.Scope{},
			},
			{
				ID: 60, Name: "search", Policy: "AwaitAll", Site: "/srv/app/search/search.go:40", Opened: ago(3400 * time.Millisecond),
				State: "running", Limit: 8, BlockedForks: 12,
				Counts:   inspect.Counts{Running: 8, Succeeded: 180, Failed: 3},
				Running:  fanout,
				Children: []*inspect.Scope{},
			},
		},
		Limiters: []*inspect.Limiter{
			{Name: "llm-api", OldestWaiting: 9.8, Stats: st("limit", 40, "inFlight", 40, "waiting", 113, "overrunning", 2,
				"submitted", 10234, "completed", 9950, "failed", 12, "rejected", 7, "timedOut", 3, "cancelled", 9, "panicked", 0)},
			{Name: "payments", Stats: st("limit", 10, "inFlight", 3, "waiting", 0, "overrunning", 0,
				"submitted", 512, "completed", 498, "failed", 4, "rejected", 0, "timedOut", 7, "cancelled", 0, "panicked", 0)},
		},
	}
}

// sampleText is what WriteText writes for sampleDump.
const sampleText = `scope #42 "profile" FailFast running 1.2s deadline in 0.8s  api/profile.go:31  2 running, 1 succeeded
  #2 running 1.2s  api/profile.go:35
  #3 running 1.1s  api/profile.go:38
  scope #43 "avatar" AwaitAll running 1.1s  api/avatar.go:12  1 running
    #1 running 1.1s  api/avatar.go:14
scope #57 "checkout" FailFast cancelled, joining 47.3s deadline 17.3s ago  api/checkout.go:88  1 running, 3 succeeded, 1 failed, 2 cancelled  cause: "context deadline exceeded"
  #4 running 47.2s  payments/client.go:120
scope #60 "search" AwaitAll running 3.4s  search/search.go:40  8 running, 180 succeeded, 3 failed  limit 8, 12 blocked forks
  #181 running 2.5s  search/fanout.go:52
  #182 running 1.9s  search/fanout.go:52
  #183 running 1.4s  search/fanout.go:52
  #184 running 0.8s  search/fanout.go:52
  #185 running 0.4s  search/fanout.go:52
  #186 running 0.2s  search/fanout.go:52
  #187 running 60ms  search/fanout.go:52
  #188 running 20ms  search/fanout.go:52
limiter "llm-api" limit 40  in flight 40  waiting 113 (oldest 9.8s)  overrunning 2
limiter "payments" limit 10  in flight 3  waiting 0  overrunning 0
`
