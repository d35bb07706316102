package registry_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/internal/registry"
	"github.com/goloom/loom/scope"
)

// scopesOnly turns Scopes on, and every other feature off, for the test.
func scopesOnly(t testing.TB) {
	t.Helper()
	was := registry.Current()
	registry.Disable(registry.All)
	registry.Enable(registry.Scopes)
	t.Cleanup(func() {
		registry.Disable(registry.All)
		registry.Enable(was)
	})
}

func stats(kv ...any) []registry.Stat {
	var out []registry.Stat
	for i := 0; i < len(kv); i += 2 {
		out = append(out, registry.Stat{Name: kv[i].(string), Value: int64(kv[i+1].(int))})
	}
	return out
}

func TestSumByName(t *testing.T) {
	for _, tt := range []struct {
		name    string
		give    []registry.LimiterRecord
		largest []string
		want    []registry.LimiterRecord
	}{
		{
			name: "distinct names pass as they are, in order",
			give: []registry.LimiterRecord{{Name: "b", Stats: stats("limit", 2)}, {Name: "a", Stats: stats("limit", 1)}},
			want: []registry.LimiterRecord{{Name: "b", Stats: stats("limit", 2)}, {Name: "a", Stats: stats("limit", 1)}},
		},
		{
			name: "one name is summed, stat by stat, where it first appears",
			give: []registry.LimiterRecord{
				{Name: "api", Stats: stats("limit", 4, "inFlight", 3), OldestWaiting: time.Second},
				{Name: "db", Stats: stats("limit", 1, "inFlight", 1)},
				{Name: "api", Stats: stats("limit", 6, "inFlight", 2), OldestWaiting: 3 * time.Second},
			},
			want: []registry.LimiterRecord{
				{Name: "api", Stats: stats("limit", 10, "inFlight", 5), OldestWaiting: 3 * time.Second},
				{Name: "db", Stats: stats("limit", 1, "inFlight", 1)},
			},
		},
		{
			name: "names are made valid UTF-8, then merged",
			give: []registry.LimiterRecord{{Name: "api\xff", Stats: stats("limit", 1)}, {Name: "api\xfe", Stats: stats("limit", 2)}},
			want: []registry.LimiterRecord{{Name: "api\uFFFD", Stats: stats("limit", 3)}},
		},
		{
			name:    "a largest stat takes the largest value",
			give:    []registry.LimiterRecord{{Name: "f", Stats: stats("capacity", 40, "held", 3)}, {Name: "f", Stats: stats("capacity", 30, "held", 4)}},
			largest: []string{"capacity"},
			want:    []registry.LimiterRecord{{Name: "f", Stats: stats("capacity", 40, "held", 7)}},
		},
		{
			name: "stats in another order, or missing, are matched by name",
			give: []registry.LimiterRecord{{Name: "x", Stats: stats("a", 1, "b", 2)}, {Name: "x", Stats: stats("b", 10, "c", 100, "a", 1000)}},
			want: []registry.LimiterRecord{{Name: "x", Stats: stats("a", 1001, "b", 12, "c", 100)}},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			given := make([]registry.LimiterRecord, len(tt.give))
			for i, r := range tt.give {
				given[i] = r
				given[i].Stats = append([]registry.Stat(nil), r.Stats...)
			}
			assert.Equal(t, tt.want, registry.SumByName(tt.give, tt.largest...))
			assert.Equal(t, given, tt.give, "the records given are not changed")
		})
	}
}

func TestLimiterRecordStat(t *testing.T) {
	r := registry.LimiterRecord{Name: "api", Stats: stats("limit", 4, "inFlight", 3)}
	v, ok := r.Stat("inFlight")
	assert.True(t, ok)
	assert.Equal(t, int64(3), v)
	_, ok = r.Stat("nope")
	assert.False(t, ok)
}

// count returns CountScopes' entry for name, and whether there is one.
func count(name string) (registry.ScopeCount, bool) {
	for _, c := range registry.CountScopes() {
		if c.Name == name {
			return c, true
		}
	}
	return registry.ScopeCount{}, false
}

func TestCountScopesByName(t *testing.T) {
	scopesOnly(t)
	release := make(chan struct{})
	started := make(chan struct{}, 8)
	block := func(context.Context) error { started <- struct{}{}; <-release; return nil }

	a := scope.Open(t.Context(), scope.WithName("count-profile"))
	a.Go(block)
	b := scope.Open(t.Context(), scope.WithName("count-profile"))
	b.Go(block)
	b.Go(block)
	b.Go(func(context.Context) error { return nil })
	idle := scope.Open(t.Context(), scope.WithName("count-idle")) // open, nothing forked
	// A limit of 1 with a second fork waiting for its slot: the waiting fork is not running.
	limited := scope.Open(t.Context(), scope.WithName("count-limited"), scope.WithLimit(1))
	limited.Go(block)
	for range 4 {
		<-started
	}
	blockedFork := make(chan struct{})
	go func() {
		defer close(blockedFork)
		limited.Go(func(context.Context) error { return nil })
	}()
	require.Eventually(t, func() bool {
		for _, r := range registry.CollectScopes() {
			if r.Name == "count-limited" {
				return r.Blocked == 1
			}
		}
		return false
	}, 10*time.Second, time.Millisecond, "the second fork waits for the limit's slot")
	require.Eventually(t, func() bool {
		c, _ := count("count-profile")
		return c.Running == 3 // b's quick subtask has completed
	}, 10*time.Second, time.Millisecond)

	counts := map[string]registry.ScopeCount{}
	for _, c := range registry.CountScopes() {
		counts[c.Name] = c
	}
	assert.Equal(t, registry.ScopeCount{Name: "count-profile", Open: 2, Running: 3}, counts["count-profile"])
	assert.Equal(t, registry.ScopeCount{Name: "count-idle", Open: 1}, counts["count-idle"])
	assert.Equal(t, registry.ScopeCount{Name: "count-limited", Open: 1, Running: 1}, counts["count-limited"])

	// The same numbers as a dump's, summed by name.
	fromDump := map[string]registry.ScopeCount{}
	for _, r := range registry.CollectScopes() {
		c := fromDump[r.Name]
		c.Name, c.Open, c.Running = r.Name, c.Open+1, c.Running+r.Running
		fromDump[r.Name] = c
	}
	for _, name := range []string{"count-profile", "count-idle", "count-limited"} {
		assert.Equal(t, fromDump[name], counts[name], name)
	}

	close(release)
	<-blockedFork
	for _, s := range []*scope.Scope{a, b, idle, limited} {
		require.NoError(t, s.Join())
	}
	// Joined scopes leave the counts, and their names stay, at 0.
	for _, name := range []string{"count-profile", "count-idle", "count-limited"} {
		c, ok := count(name)
		assert.True(t, ok, name)
		assert.Equal(t, registry.ScopeCount{Name: name}, c, name)
	}
}

func TestCountScopesNamesTheUnnamed(t *testing.T) {
	scopesOnly(t)
	before, _ := count(registry.UnnamedScope)
	s := scope.Open(t.Context())
	release := make(chan struct{})
	s.Go(func(context.Context) error { <-release; return nil })
	c, ok := count(registry.UnnamedScope)
	require.True(t, ok)
	assert.Equal(t, before.Open+1, c.Open)
	close(release)
	require.NoError(t, s.Join())
}

func TestCountScopesMakesNamesValidUTF8(t *testing.T) {
	scopesOnly(t)
	a := scope.Open(t.Context(), scope.WithName("count-\xff"))
	b := scope.Open(t.Context(), scope.WithName("count-\xfe"))
	c, ok := count("count-\uFFFD")
	require.True(t, ok)
	assert.Equal(t, int64(2), c.Open)
	require.NoError(t, a.Join())
	require.NoError(t, b.Join())
}

func TestCountScopesSkipsWhatWasNotRecorded(t *testing.T) {
	scopesOnly(t)
	registry.Disable(registry.Scopes)
	s := scope.Open(t.Context(), scope.WithName("count-unrecorded"))
	_, ok := count("count-unrecorded")
	assert.False(t, ok, "a scope opened with Scopes off is never counted")
	require.NoError(t, s.Join())
}

// TestCountScopesWhileForking counts a limited scope's subtasks while its owner forks as fast as
// the limit lets it: the owner is nearly always blocked on the limit, counted in already, so a
// count that took a blocked fork for a running one would show limit+1.
func TestCountScopesWhileForking(t *testing.T) {
	scopesOnly(t)
	const limit, forks = 4, 20_000
	s := scope.Open(t.Context(), scope.WithName("count-stress"), scope.WithLimit(limit))
	stop, counted := make(chan struct{}), make(chan int)
	go func() {
		n := 0
		defer func() { counted <- n }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			c, ok := count("count-stress")
			if !ok {
				continue
			}
			n++
			if c.Running < 0 || c.Running > limit || c.Open > 1 {
				t.Errorf("counted %+v with a limit of %d", c, limit)
				return
			}
		}
	}()
	for range forks {
		s.Go(func(context.Context) error { runtime.Gosched(); return nil })
	}
	require.NoError(t, s.Join())
	close(stop)
	assert.Positive(t, <-counted, "counted while forking")
}

// TestCountScopesWhileChurning counts a scope without a limit whose owner forks one subtask at a
// time and waits until it has completed: at most two are forked and not completed at any instant
// (the last one's outcome is settled a moment before it leaves the count). One read of a scope
// takes its outcomes before its forks, so a reader descheduled in between would count every fork
// made meanwhile as running.
func TestCountScopesWhileChurning(t *testing.T) {
	scopesOnly(t)
	s := scope.Open(t.Context(), scope.WithName("count-churn"))
	stop, counted := make(chan struct{}), make(chan int)
	go func() {
		n := 0
		defer func() { counted <- n }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if c, ok := count("count-churn"); ok {
				n++
				if c.Running < 0 || c.Running > 2 {
					t.Errorf("counted %+v, with at most 2 forked and not completed", c)
					return
				}
			}
		}
	}()
	for range 20_000 {
		st := s.Go(func(context.Context) error { return nil })
		for st.State() == scope.Running {
			runtime.Gosched()
		}
	}
	require.NoError(t, s.Join())
	close(stop)
	assert.Positive(t, <-counted, "counted while forking")
}
