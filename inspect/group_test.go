package inspect_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/inspect"
	"github.com/goloom/loom/scope"
)

// openRequests opens n scopes as n requests of one handler do: named "profile", two named
// subtasks parked, one nested "avatar" scope with a parked subtask of its own. It returns a
// function that releases and joins them all.
func openRequests(t testing.TB, n int, name string) (done func()) {
	t.Helper()
	release := make(chan struct{})
	started := make(chan struct{}, 3*n)
	park := func(context.Context) error { started <- struct{}{}; <-release; return nil }
	var scopes []*scope.Scope
	for range n {
		s := scope.Open(context.Background(), scope.WithName(name))
		s.GoNamed("user", park)
		s.Go(func(ctx context.Context) error {
			c := scope.Open(ctx, scope.WithName("avatar"), scope.AwaitAll())
			c.Go(park)
			return c.Join()
		})
		s.GoNamed("orders", park)
		scopes = append(scopes, s)
	}
	for range 3 * n {
		<-started
	}
	// Each avatar's parked subtask may start before its owner reaches Join: wait (seconds at
	// most) until every avatar scope is joining, or identical scopes would differ in state.
	deadline := time.Now().Add(10 * time.Second)
	for joiningAvatars(inspect.Snapshot().Scopes) < n {
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s, %d of %d avatar scopes are joining", joiningAvatars(inspect.Snapshot().Scopes), n)
		}
		time.Sleep(time.Millisecond)
	}
	return func() {
		close(release)
		for _, s := range scopes {
			if err := s.Join(); err != nil {
				t.Error(err)
			}
		}
	}
}

// joiningAvatars counts the scopes named "avatar" in the trees of roots whose owner waits in Join.
func joiningAvatars(roots []*inspect.Scope) int {
	n := 0
	for _, sc := range roots {
		if sc.Name == "avatar" && sc.State == "joining" {
			n++
		}
		n += joiningAvatars(sc.Children)
	}
	return n
}

// Regression (issue 21): forty requests gave forty identical cards (a 4,198 px page) or eighty
// lines of text. Identical scopes — same name, site, policy, state, limit, running subtasks at
// the same sites — are one group with a count and the range of their ages, in the text as in
// Dump.Groups (JSON), and their children are grouped under them; JSON still has every scope.
func TestIdenticalScopesAreGrouped(t *testing.T) {
	enable(t, inspect.Scopes)
	done := openRequests(t, 40, "profile")
	defer done()
	other := scope.Open(context.Background(), scope.WithName("checkout"))
	defer other.Close()

	d := inspect.Snapshot()
	require.Len(t, d.Scopes, 41, "every scope is still in the tree")
	var g *inspect.Group
	for _, x := range d.Groups {
		if x.Name == "profile" {
			g = x
		}
	}
	require.NotNil(t, g)
	assert.Len(t, d.Groups, 2, "profile ×40, checkout")
	assert.Equal(t, 40, g.Count)
	assert.Len(t, g.IDs, 40)
	assert.Equal(t, int64(120), g.Counts.Running, "three running in each, one of them joining its child")
	require.Len(t, g.Running, 3)
	assert.Equal(t, [2]any{40, "user"}, [2]any{g.Running[0].Count, g.Running[0].Name})
	assert.Equal(t, [2]any{40, ""}, [2]any{g.Running[1].Count, g.Running[1].Name})
	assert.Equal(t, [2]any{40, "orders"}, [2]any{g.Running[2].Count, g.Running[2].Name})
	assert.False(t, g.Oldest.After(g.Newest))
	require.Len(t, g.Children, 1)
	assert.Equal(t, [2]any{"avatar", 40}, [2]any{g.Children[0].Name, g.Children[0].Count})

	raw, err := json.Marshal(d)
	require.NoError(t, err)
	var back struct {
		Scopes []json.RawMessage `json:"scopes"`
		Groups []struct {
			Count int      `json:"count"`
			IDs   []uint64 `json:"ids"`
		} `json:"groups"`
	}
	require.NoError(t, json.Unmarshal(raw, &back))
	assert.Len(t, back.Scopes, 41)
	assert.Equal(t, 40, back.Groups[0].Count)

	var b strings.Builder
	require.NoError(t, d.WriteText(&b))
	text := b.String()
	t.Log("\n" + text)
	// Limiters and semaphores other tests of this package registered may still be listed after
	// the scopes (the registry forgets them when they are collected); only scope lines count.
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(text), "\n") {
		if strings.HasPrefix(l, "limiter ") || strings.HasPrefix(l, "semaphore ") {
			break
		}
		lines = append(lines, l)
	}
	assert.LessOrEqual(t, len(lines), 8, "forty requests in a few lines, not 160")
	assert.Regexp(t, `(?m)^40 × scope "profile" FailFast running \S+  \S*group_test\.go:\d+  120 running  #\d+ … #\d+$`, text)
	assert.Regexp(t, `(?m)^  40 × #1 "user" running \S+  \S*group_test\.go:\d+$`, text)
	assert.Regexp(t, `(?m)^  40 × #3 "orders" running `, text)
	assert.Regexp(t, `(?m)^  40 × scope "avatar" AwaitAll joining \S+  \S*group_test\.go:\d+  40 running  #\d+ … #\d+$`, text)
	assert.Regexp(t, `(?m)^scope #\d+ "checkout" FailFast running `, text, "a scope alone is written as before")
}
