package inspect_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/inspect"
	"github.com/goloom/loom/scope"
	"github.com/goloom/loom/scopedvalue"
)

var rid = scopedvalue.New[string]("rid")

func TestRealScope(t *testing.T) {
	enable(t, inspect.Scopes)
	openSite := here(1)
	s := scope.Open(t.Context(), scope.WithName("root"), scope.WithLimit(2), scope.AwaitAll())
	release := make(chan struct{})
	started := make(chan struct{}, 10)
	forkSite := here(1)
	scope.Fork(s, func(ctx context.Context) (int, error) {
		started <- struct{}{}
		scopedvalue.Where(rid, "x").Run(ctx, func(ctx context.Context) {
			c := scope.Open(ctx, scope.WithName("child"))
			c.Go(func(context.Context) error { <-release; return nil })
			started <- struct{}{}
			_ = c.Join()
		})
		return 1, nil
	})
	<-started
	<-started
	s.Go(func(context.Context) error { started <- struct{}{}; <-release; return nil })
	<-started
	go s.Go(func(context.Context) error { return errors.New("late") }) // blocked on the limit
	require.Eventually(t, func() bool { return find(t, inspect.Snapshot(), "root").BlockedForks == 1 }, 10*time.Second, time.Millisecond)

	d := inspect.Snapshot()
	r := find(t, d, "root")
	assert.Equal(t, openSite, r.Site)
	assert.Equal(t, "AwaitAll", r.Policy)
	assert.Equal(t, 2, r.Limit)
	require.Len(t, r.Running, 2)
	assert.Equal(t, forkSite, r.Running[0].Site)
	require.Len(t, r.Children, 1)
	assert.Equal(t, "child", r.Children[0].Name)
	var b strings.Builder
	require.NoError(t, d.WriteText(&b))
	t.Log("\n" + b.String())
	close(release)
	require.EqualError(t, s.Join(), "late")
	assert.Empty(t, inspect.Snapshot().Scopes)
}

func TestRealHelpersSites(t *testing.T) {
	enable(t, inspect.Scopes)
	for _, tc := range []struct {
		name string
		run  func(ctx context.Context, wait func(context.Context) (int, error)) string
	}{
		{"Map", func(ctx context.Context, wait func(context.Context) (int, error)) string {
			site := here(1)
			_, _ = scope.Map(ctx, []int{1}, func(ctx context.Context, _ int) (int, error) { return wait(ctx) })
			return site
		}},
		{"All", func(ctx context.Context, wait func(context.Context) (int, error)) string {
			site := here(1)
			_, _ = scope.All(ctx, wait)
			return site
		}},
		{"Race", func(ctx context.Context, wait func(context.Context) (int, error)) string {
			site := here(1)
			_, _ = scope.Race(ctx, wait)
			return site
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			seen := make(chan string, 1)
			go func() {
				for {
					if ss := inspect.Snapshot().Scopes; len(ss) > 0 {
						seen <- ss[0].Site
						close(release)
						return
					}
				}
			}()
			want := tc.run(t.Context(), func(context.Context) (int, error) { <-release; return 0, nil })
			assert.Equal(t, want, <-seen)
		})
	}
}

// A fork may carry a name (scope.ForkNamed, Scope.GoNamed): the dump shows it, in JSON and text,
// beside the fork order and the site; a fork without one shows none, and a reused name is the
// same name.
func TestSubtaskNames(t *testing.T) {
	enable(t, inspect.Scopes)
	s := scope.Open(t.Context(), scope.WithName("fanout"))
	release := make(chan struct{})
	started := make(chan struct{}, 4)
	wait := func(context.Context) error { started <- struct{}{}; <-release; return nil }
	scope.ForkNamed(s, "user", func(ctx context.Context) (int, error) { return 0, wait(ctx) })
	s.GoNamed("orders", wait)
	s.Go(wait)
	s.GoNamed("user", wait)
	for range 4 {
		<-started
	}
	r := find(t, inspect.Snapshot(), "fanout")
	require.Len(t, r.Running, 4)
	var got []string
	for _, st := range r.Running {
		got = append(got, st.Name)
	}
	assert.Equal(t, []string{"user", "orders", "", "user"}, got)
	var b strings.Builder
	require.NoError(t, (&inspect.Dump{Time: time.Now(), Scopes: []*inspect.Scope{r}}).WriteText(&b))
	assert.Contains(t, b.String(), "  #1 \"user\" running ")
	assert.Contains(t, b.String(), "  #3 running ")
	raw, err := json.Marshal(r.Running[:3])
	require.NoError(t, err)
	assert.Contains(t, string(raw), `{"seq":2,"name":"orders","site":`)
	assert.NotContains(t, string(raw), `"seq":3,"name"`, "no name: omitted")
	close(release)
	require.NoError(t, s.Join())

	inspect.Disable(inspect.Scopes)
	quiet := scope.Open(t.Context(), scope.WithName("quiet"))
	st := scope.ForkNamed(quiet, "ignored", func(context.Context) (int, error) { return 7, nil })
	require.NoError(t, quiet.Join())
	assert.Equal(t, 7, st.Get(), "a scope not recorded ignores the name")
}
