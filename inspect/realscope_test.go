package inspect_test

import (
	"context"
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
