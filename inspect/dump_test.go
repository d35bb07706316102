package inspect_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"runtime"
	"sort"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/inspect"
	"github.com/goloom/loom/internal/registry"
	"github.com/goloom/loom/internal/registry/regtest"
)

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// The JSON of a dump has exactly the field names of the format, with times as RFC 3339 strings,
// limit and all four counts always present, deadline only when there is one.
func TestDumpJSONShape(t *testing.T) {
	enable(t, inspect.Scopes)
	lim := regtest.NewLimiter(40, "llm-api")
	s := regtest.Open(t.Context(), regtest.Options{Name: "profile"})
	started, release := make(chan struct{}), make(chan struct{})
	s.Go(regtest.Block(started, release))
	<-started
	var child *regtest.Scope
	childOpened := make(chan struct{})
	s.Go(func(ctx context.Context) error {
		child = regtest.Open(ctx, regtest.Options{Timeout: time.Hour})
		close(childOpened)
		<-release
		return nil
	})
	<-childOpened

	raw, err := json.Marshal(inspect.Snapshot())
	require.NoError(t, err)
	var top map[string]any
	require.NoError(t, json.Unmarshal(raw, &top))
	assert.Equal(t, []string{"features", "formatVersion", "goVersion", "groups", "limiters", "processId", "scopes", "semaphores", "time"}, keys(top))
	assert.Equal(t, float64(1), top["formatVersion"])
	assert.Equal(t, float64(os.Getpid()), top["processId"])
	assert.Equal(t, runtime.Version(), top["goVersion"])
	assert.Equal(t, []any{"scopes"}, top["features"])
	_, err = time.Parse(time.RFC3339, top["time"].(string))
	assert.NoError(t, err)

	scopes := top["scopes"].([]any)
	require.Len(t, scopes, 1)
	root := scopes[0].(map[string]any)
	assert.Equal(t, []string{"blockedForks", "children", "counts", "id", "limit", "name", "opened", "policy", "running", "site", "state"}, keys(root), "no deadline: omitted")
	assert.Equal(t, "profile", root["name"])
	assert.Equal(t, "FailFast", root["policy"])
	assert.Equal(t, "running", root["state"])
	assert.Equal(t, float64(0), root["limit"])
	assert.Equal(t, float64(0), root["blockedForks"])
	_, err = time.Parse(time.RFC3339, root["opened"].(string))
	assert.NoError(t, err)
	assert.Equal(t, map[string]any{"running": float64(2), "succeeded": float64(0), "failed": float64(0), "cancelled": float64(0)}, root["counts"])
	running := root["running"].([]any)
	require.Len(t, running, 2)
	sub := running[0].(map[string]any)
	assert.Equal(t, []string{"seq", "site", "started"}, keys(sub))
	assert.Equal(t, float64(1), sub["seq"])
	_, err = time.Parse(time.RFC3339, sub["started"].(string))
	assert.NoError(t, err)

	kids := root["children"].([]any)
	require.Len(t, kids, 1)
	kid := kids[0].(map[string]any)
	assert.Equal(t, []string{"blockedForks", "children", "counts", "deadline", "id", "limit", "name", "opened", "policy", "running", "site", "state"}, keys(kid))
	deadline, err := time.Parse(time.RFC3339, kid["deadline"].(string))
	assert.NoError(t, err)
	assert.WithinDuration(t, time.Now().Add(time.Hour), deadline, time.Minute)
	assert.Equal(t, "", kid["name"], "name is present even when empty")
	assert.Equal(t, []any{}, kid["running"], "running is a list even when empty")
	assert.Equal(t, []any{}, kid["children"], "children is a list even when empty")
	assert.Equal(t, map[string]any{"running": float64(0), "succeeded": float64(0), "failed": float64(0), "cancelled": float64(0)}, kid["counts"], "counts are always present")

	var limiter map[string]any
	for _, l := range top["limiters"].([]any) {
		if l.(map[string]any)["name"] == "llm-api" {
			limiter = l.(map[string]any)
		}
	}
	require.NotNil(t, limiter)
	assert.Equal(t, []string{"config", "name", "oldestWaiting", "stats"}, keys(limiter))
	assert.Equal(t, map[string]any{}, limiter["config"], "config is an object even when empty")
	assert.Equal(t, []string{"cancelled", "completed", "failed", "inFlight", "limit", "overrunning", "panicked", "rejected", "submitted", "timedOut", "waiting"}, keys(limiter["stats"].(map[string]any)))
	assert.Equal(t, float64(40), limiter["stats"].(map[string]any)["limit"])
	assert.Equal(t, float64(0), limiter["oldestWaiting"])

	close(release)
	require.NoError(t, child.Join())
	require.NoError(t, s.Join())
	assert.Empty(t, inspect.Snapshot().Scopes, "a scope leaves the dump when Join returns")
	runtime.KeepAlive(lim)
}

// The limiter's stats keep the limiter's field order in JSON, and read back the same.
func TestStatsJSONRoundTrip(t *testing.T) {
	st := inspect.Stats{{Name: "limit", Value: 40}, {Name: "inFlight", Value: 40}, {Name: "waiting", Value: 113}, {Name: "big", Value: -1 << 62}}
	raw, err := json.Marshal(st)
	require.NoError(t, err)
	assert.JSONEq(t, `{"limit":40,"inFlight":40,"waiting":113,"big":-4611686018427387904}`, string(raw))
	assert.Equal(t, `{"limit":40,"inFlight":40,"waiting":113,"big":-4611686018427387904}`, string(raw), "in order")
	var back inspect.Stats
	require.NoError(t, json.Unmarshal(raw, &back))
	assert.Equal(t, st, back)
	n, ok := back.Get("waiting")
	assert.True(t, ok)
	assert.Equal(t, int64(113), n)
	_, ok = back.Get("nope")
	assert.False(t, ok)
	for _, bad := range []string{`[1]`, `{"a":"x"}`, `{"a":1.5}`, `{"a":1`, `"s"`} {
		assert.Error(t, json.Unmarshal([]byte(bad), &back), bad)
	}
}

// A whole dump reads back from its JSON as it was.
func TestDumpJSONRoundTrip(t *testing.T) {
	d := sampleDump()
	raw, err := json.Marshal(d)
	require.NoError(t, err)
	var back inspect.Dump
	require.NoError(t, json.Unmarshal(raw, &back))
	assert.Equal(t, d, &back)
}

func TestStatesAndCause(t *testing.T) {
	enable(t, inspect.Scopes)
	s := regtest.Open(t.Context(), regtest.Options{Name: "ff", Policy: registry.FailFast})
	started, stuck := make(chan struct{}), make(chan struct{})
	s.Go(regtest.Block(started, stuck))
	<-started
	assert.Equal(t, inspect.StateRunning, find(t, inspect.Snapshot(), "ff").State)

	s.Cancel(errors.New("backend timed out\nwith a second line"))
	sc := find(t, inspect.Snapshot(), "ff")
	assert.Equal(t, inspect.StateCancelled, sc.State)
	assert.Equal(t, "backend timed out\nwith a second line", sc.Cause)
	assert.False(t, sc.Joining)

	joined := make(chan error)
	go func() { joined <- s.Join() }()
	require.Eventually(t, func() bool { return find(t, inspect.Snapshot(), "ff").Joining }, 10*time.Second, time.Millisecond)
	assert.Equal(t, inspect.StateCancelled, find(t, inspect.Snapshot(), "ff").State, "cancelled wins over joining")
	close(stuck)
	require.NoError(t, <-joined)

	j := regtest.Open(t.Context(), regtest.Options{Name: "joining"})
	release := make(chan struct{})
	j.Go(regtest.Block(nil, release))
	go func() { joined <- j.Join() }()
	require.Eventually(t, func() bool { return find(t, inspect.Snapshot(), "joining").State == inspect.StateJoining }, 10*time.Second, time.Millisecond)
	close(release)
	require.NoError(t, <-joined)
}

func TestSitesAreTheCallersCode(t *testing.T) {
	enable(t, inspect.Scopes)
	openSite := here(1)
	s := regtest.Open(t.Context(), regtest.Options{Name: "sites"})
	started, release := make(chan struct{}), make(chan struct{})
	forkSite := here(1)
	s.Go(func(context.Context) error {
		started <- struct{}{}
		<-release
		return nil
	})
	<-started
	sc := find(t, inspect.Snapshot(), "sites")
	assert.Equal(t, openSite, sc.Site)
	require.Len(t, sc.Running, 1)
	assert.Equal(t, forkSite, sc.Running[0].Site)
	close(release)
	require.NoError(t, s.Join())
}

// Ages, on a fake clock: a subtask forked 0.4 s after its scope opened shows 0.4 s less.
func TestAgesOnAFakeClock(t *testing.T) {
	enable(t, inspect.Scopes)
	synctest.Test(t, func(t *testing.T) {
		s := regtest.Open(t.Context(), regtest.Options{Name: "timed", Timeout: 2 * time.Second})
		release := make(chan struct{})
		time.Sleep(400 * time.Millisecond)
		s.Go(regtest.Block(nil, release))
		time.Sleep(800 * time.Millisecond)
		synctest.Wait()
		d := inspect.Snapshot()
		sc := find(t, d, "timed")
		assert.Equal(t, 1200*time.Millisecond, d.Time.Sub(sc.Opened))
		assert.Equal(t, 800*time.Millisecond, sc.Deadline.Sub(d.Time))
		require.Len(t, sc.Running, 1)
		assert.Equal(t, 800*time.Millisecond, d.Time.Sub(sc.Running[0].Started))
		close(release)
		require.NoError(t, s.Join())
	})
}

func TestTreeAcrossLimiterCallsAndOrphans(t *testing.T) {
	enable(t, inspect.Scopes)
	lim := regtest.NewLimiter(2, "tree-limiter")
	root := regtest.Open(t.Context(), regtest.Options{Name: "root"})
	release, opened := make(chan struct{}), make(chan struct{})
	var inner *regtest.Scope
	root.Go(func(ctx context.Context) error {
		return lim.Do(ctx, func(ctx context.Context) error {
			inner = regtest.Open(ctx, regtest.Options{Name: "inside-limiter"})
			close(opened)
			<-release
			return nil
		})
	})
	<-opened
	// A scope whose parent is gone (opened on a subtask's context, outliving its scope) is a root.
	leaked := make(chan *regtest.Scope, 1)
	short := regtest.Open(t.Context(), regtest.Options{Name: "short"})
	short.Go(func(ctx context.Context) error {
		leaked <- regtest.Open(ctx, regtest.Options{Name: "orphan"})
		return nil
	})
	orphan := <-leaked
	require.NoError(t, short.Join())

	d := inspect.Snapshot()
	var rootNames []string
	for _, s := range d.Scopes {
		rootNames = append(rootNames, s.Name)
	}
	assert.Equal(t, []string{"root", "orphan"}, rootNames)
	r := find(t, d, "root")
	require.Len(t, r.Children, 1)
	assert.Equal(t, "inside-limiter", r.Children[0].Name)

	require.NoError(t, orphan.Join())
	close(release)
	require.NoError(t, inner.Join())
	require.NoError(t, root.Join())
	runtime.KeepAlive(lim)
}

// Named limiters are in the dump whether or not Scopes is on, and leave it once collected.
func TestLimitersWithScopesOffAndAfterCollection(t *testing.T) {
	enable(t)
	func() {
		lim := regtest.NewLimiter(3, "gone-soon")
		require.NotNil(t, limiterNamed(inspect.Snapshot(), "gone-soon"))
		runtime.KeepAlive(lim)
	}()
	runtime.GC()
	assert.Nil(t, limiterNamed(inspect.Snapshot(), "gone-soon"))
	assert.Empty(t, inspect.Snapshot().Scopes)
	assert.Empty(t, inspect.Snapshot().Features)
}

func TestOldestWaiting(t *testing.T) {
	enable(t)
	lim := regtest.NewLimiter(1, "queue")
	holding, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 2)
	go func() {
		done <- lim.Do(t.Context(), func(context.Context) error { close(holding); <-release; return nil })
	}()
	<-holding
	go func() { done <- lim.Do(t.Context(), func(context.Context) error { return nil }) }()
	require.Eventually(t, func() bool { return lim.Waiting() == 1 }, 10*time.Second, time.Millisecond)
	time.Sleep(10 * time.Millisecond) // a lower bound on the wait, never an upper one
	l := limiterNamed(inspect.Snapshot(), "queue")
	require.NotNil(t, l)
	assert.GreaterOrEqual(t, l.OldestWaiting, 0.010)
	w, _ := l.Stats.Get("waiting")
	assert.Equal(t, int64(1), w)
	close(release)
	require.NoError(t, <-done)
	require.NoError(t, <-done)
}

// Snapshots, and their text, JSON and page, taken while scopes open, fork, complete and join on
// every core: race-free (run with -race), every dump well formed, nothing left afterwards.
func TestSnapshotWhileScopesChurn(t *testing.T) {
	enable(t, inspect.Scopes, inspect.Labels)
	lim := regtest.NewLimiter(2, "churn")
	stop := make(chan struct{})
	var workers sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		workers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				s := regtest.Open(t.Context(), regtest.Options{Name: "churn", Limit: 3})
				for k := range 5 {
					s.Go(func(ctx context.Context) error {
						if k == 2 {
							c := regtest.Open(ctx, regtest.Options{Name: "inner"})
							c.Go(func(context.Context) error { return nil })
							return c.Join()
						}
						return lim.Do(ctx, func(context.Context) error { return nil })
					})
				}
				assert.NoError(t, s.Join())
			}
		})
	}
	for range 300 {
		d := inspect.Snapshot()
		var b bytes.Buffer
		require.NoError(t, d.WriteText(&b))
		require.NoError(t, inspect.WriteHTML(&b, d))
		_, err := json.Marshal(d)
		require.NoError(t, err)
		for _, s := range d.Scopes {
			assert.LessOrEqual(t, int64(len(s.Running)), s.Counts.Running)
		}
	}
	close(stop)
	workers.Wait()
	assert.Empty(t, inspect.Snapshot().Scopes)
	runtime.KeepAlive(lim)
}
