package registry_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/internal/registry"
	"github.com/goloom/loom/internal/registry/regtest"
	"github.com/goloom/loom/scopedvalue"
)

// enable turns features on for the test and off after it.
func enable(t testing.TB, f registry.Features) {
	t.Helper()
	was := registry.Current()
	registry.Disable(registry.All)
	registry.Enable(f)
	t.Cleanup(func() {
		registry.Disable(registry.All)
		registry.Enable(was)
	})
}

func collect() []registry.ScopeRecord { return registry.CollectScopes() }

func byName(t testing.TB, recs []registry.ScopeRecord, name string) registry.ScopeRecord {
	t.Helper()
	for _, r := range recs {
		if r.Name == name {
			return r
		}
	}
	require.Failf(t, "no scope named "+name, "have %v", names(recs))
	return registry.ScopeRecord{}
}

func names(recs []registry.ScopeRecord) []string {
	var out []string
	for _, r := range recs {
		out = append(out, r.Name)
	}
	return out
}

// here returns "file:line" of the line after the call, where the test opens or forks.
func here(delta int) string {
	_, file, line, _ := runtime.Caller(1)
	return fmt.Sprintf("%s:%d", file, line+delta)
}

func TestNothingRecordedWhenOff(t *testing.T) {
	enable(t, 0)
	assert.False(t, registry.Active())
	s := regtest.Open(t.Context(), regtest.Options{Name: "off"})
	assert.Nil(t, s.Record())
	release := make(chan struct{})
	s.Go(regtest.Block(nil, release))
	assert.Empty(t, collect())
	close(release)
	require.NoError(t, s.Join())
}

func TestScopeRecord(t *testing.T) {
	enable(t, registry.Scopes)
	openSite := here(1)
	s := regtest.Open(t.Context(), regtest.Options{Name: "profile", Policy: registry.AwaitAll, Limit: 5, Timeout: time.Hour})
	started, release := make(chan struct{}), make(chan struct{})
	quick := s.Go(func(context.Context) error { return nil })
	require.NoError(t, quick.Wait())
	failing := s.Go(func(context.Context) error { return nil })
	require.NoError(t, failing.Wait())
	blockSite := here(1)
	s.Go(func(ctx context.Context) error {
		started <- struct{}{}
		<-release
		return nil
	})
	<-started

	r := byName(t, collect(), "profile")
	assert.NotZero(t, r.ID)
	assert.Zero(t, r.Parent)
	assert.Equal(t, registry.AwaitAll, r.Policy)
	assert.Equal(t, openSite, r.Site)
	assert.Equal(t, 5, r.Limit)
	assert.False(t, r.Cancelled)
	assert.False(t, r.Joining)
	assert.WithinDuration(t, time.Now().Add(time.Hour), r.Deadline, time.Minute)
	assert.Equal(t, int64(1), r.Running)
	assert.Equal(t, int64(2), r.Succeeded)
	assert.Zero(t, r.Failed+r.CancelledSubtasks+r.Blocked)
	require.Len(t, r.Tasks, 1)
	assert.Equal(t, int64(3), r.Tasks[0].Seq, "seq is fork order from 1")
	assert.Equal(t, blockSite, r.Tasks[0].Site)
	assert.GreaterOrEqual(t, r.Age, r.Tasks[0].Age)

	close(release)
	require.NoError(t, s.Join())
	assert.Empty(t, collect(), "a scope leaves when Join returns")
}

func TestSubtaskLeavesRunningWhenItCompletes(t *testing.T) {
	enable(t, registry.Scopes)
	s := regtest.Open(t.Context(), regtest.Options{Name: "s"})
	var releases []chan struct{}
	var subtasks []*regtest.Subtask
	started := make(chan struct{})
	for range 3 {
		release := make(chan struct{})
		releases = append(releases, release)
		subtasks = append(subtasks, s.Go(regtest.Block(started, release)))
		<-started
	}
	seqs := func() []int64 {
		var out []int64
		for _, tr := range byName(t, collect(), "s").Tasks {
			out = append(out, tr.Seq)
		}
		return out
	}
	assert.Equal(t, []int64{1, 2, 3}, seqs())
	close(releases[1])
	require.NoError(t, subtasks[1].Wait())
	// Wait returns after Done: the record has the completion.
	assert.Equal(t, []int64{1, 3}, seqs())
	r := byName(t, collect(), "s")
	assert.Equal(t, int64(2), r.Running)
	assert.Equal(t, int64(1), r.Succeeded)
	close(releases[0])
	close(releases[2])
	require.NoError(t, s.Join())
}

func TestCancelledFailedAndRefused(t *testing.T) {
	enable(t, registry.Scopes)
	s := regtest.Open(t.Context(), regtest.Options{Name: "ff"})
	started := make(chan struct{})
	stuck := make(chan struct{})
	s.Go(regtest.Block(started, stuck)) // ignores cancellation, like a stuck backend call
	<-started
	require.ErrorIs(t, s.Go(func(context.Context) error { return regtest.ErrBoom }).Wait(), regtest.ErrBoom)
	s.Go(func(context.Context) error { return nil }) // forked after cancellation: never runs

	r := byName(t, collect(), "ff")
	assert.True(t, r.Cancelled)
	assert.Equal(t, "boom", r.Cause)
	assert.Equal(t, int64(1), r.Running)
	assert.Equal(t, int64(1), r.Failed)
	assert.Equal(t, int64(1), r.CancelledSubtasks)
	require.Len(t, r.Tasks, 1)
	assert.Equal(t, int64(1), r.Tasks[0].Seq)

	joined := make(chan error)
	go func() { joined <- s.Join() }()
	require.Eventually(t, func() bool { return byName(t, collect(), "ff").Joining }, 10*time.Second, time.Millisecond)
	close(stuck)
	require.ErrorIs(t, <-joined, regtest.ErrBoom)
	assert.Empty(t, collect())
}

func TestOutsideCancellationShowsAtOnce(t *testing.T) {
	enable(t, registry.Scopes)
	ctx, cancel := context.WithCancelCause(t.Context())
	s := regtest.Open(ctx, regtest.Options{Name: "outside"})
	release := make(chan struct{})
	s.Go(regtest.Block(nil, release))
	cancel(fmt.Errorf("client went away"))
	// No subtask has completed: the scope itself has not noticed, the dump does.
	r := byName(t, collect(), "outside")
	assert.True(t, r.Cancelled)
	assert.Equal(t, "client went away", r.Cause)
	close(release)
	require.NoError(t, s.Join())
}

func TestBlockedForks(t *testing.T) {
	enable(t, registry.Scopes)
	s := regtest.Open(t.Context(), regtest.Options{Name: "limited", Limit: 1})
	started, release := make(chan struct{}), make(chan struct{})
	s.Go(regtest.Block(started, release))
	<-started
	forked := make(chan struct{})
	go func() {
		defer close(forked)
		s.Go(func(context.Context) error { return nil })
	}()
	require.Eventually(t, func() bool { return byName(t, collect(), "limited").Blocked == 1 }, 10*time.Second, time.Millisecond)
	close(release)
	<-forked
	require.NoError(t, s.Join())
}

var requestID = scopedvalue.New[string]("request-id")

func TestParentFoundThroughDerivedContexts(t *testing.T) {
	enable(t, registry.Scopes|registry.Labels)
	lim := regtest.NewLimiter(4, "api")
	root := regtest.Open(t.Context(), regtest.Options{Name: "root"})
	release := make(chan struct{})
	opened := make(chan struct{})
	var kids []*regtest.Scope
	openKid := func(ctx context.Context, name string) {
		kids = append(kids, regtest.Open(ctx, regtest.Options{Name: name}))
	}
	root.Go(func(ctx context.Context) error {
		openKid(ctx, "from-subtask")
		scopedvalue.Where(requestID, "r-1").Run(ctx, func(ctx context.Context) {
			tctx, cancel := context.WithTimeout(ctx, time.Hour)
			defer cancel()
			_ = lim.Do(tctx, func(ctx context.Context) error {
				openKid(ctx, "through-limiter-and-binding")
				return nil
			})
		})
		close(opened)
		<-release
		return nil
	})
	<-opened
	openKid(root.Context(), "from-context")
	grand := regtest.Open(kids[0].Context(), regtest.Options{Name: "grandchild"})

	recs := collect()
	rootID := byName(t, recs, "root").ID
	for _, name := range []string{"from-subtask", "through-limiter-and-binding", "from-context"} {
		assert.Equal(t, rootID, byName(t, recs, name).Parent, name)
	}
	assert.Equal(t, byName(t, recs, "from-subtask").ID, byName(t, recs, "grandchild").Parent)

	require.NoError(t, grand.Join())
	for _, k := range kids {
		require.NoError(t, k.Join())
	}
	close(release)
	require.NoError(t, root.Join())
	assert.Empty(t, collect())
}

func TestUnrecordedScopeIsSkippedInTheTree(t *testing.T) {
	enable(t, registry.Scopes)
	root := regtest.Open(t.Context(), regtest.Options{Name: "root"})
	registry.Disable(registry.Scopes)
	middle := regtest.Open(root.Context(), regtest.Options{Name: "middle"})
	registry.Enable(registry.Scopes)
	leaf := regtest.Open(middle.Context(), regtest.Options{Name: "leaf"})
	recs := collect()
	assert.Equal(t, []string{"root", "leaf"}, names(recs), "a scope opened while Scopes is off never appears")
	assert.Equal(t, byName(t, recs, "root").ID, byName(t, recs, "leaf").Parent)
	require.NoError(t, leaf.Join())
	require.NoError(t, middle.Join())
	require.NoError(t, root.Join())
}

func TestDisableKeepsRecordedScopesUntilJoined(t *testing.T) {
	enable(t, registry.Scopes)
	s := regtest.Open(t.Context(), regtest.Options{Name: "kept"})
	registry.Disable(registry.Scopes)
	assert.Equal(t, []string{"kept"}, names(collect()))
	require.NoError(t, s.Join())
	assert.Empty(t, collect())
}

func TestIDsIncrease(t *testing.T) {
	enable(t, registry.Scopes)
	a := regtest.Open(t.Context(), regtest.Options{Name: "a"})
	b := regtest.Open(t.Context(), regtest.Options{Name: "b"})
	assert.Less(t, a.Record().ID(), b.Record().ID())
	require.NoError(t, b.Join())
	require.NoError(t, a.Join())
}

type server struct{}

func (server) fetch(context.Context) error { return nil }

func TestSiteOfAMethodValue(t *testing.T) {
	enable(t, registry.Scopes)
	s := regtest.Open(t.Context(), regtest.Options{Name: "m"})
	release := make(chan struct{})
	started := make(chan struct{})
	var srv server
	s.Go(func(ctx context.Context) error { started <- struct{}{}; <-release; return srv.fetch(ctx) })
	<-started
	r := byName(t, collect(), "m")
	require.Len(t, r.Tasks, 1)
	assert.Contains(t, r.Tasks[0].Site, "scope_test.go:")
	close(release)
	require.NoError(t, s.Join())

	s = regtest.Open(t.Context(), regtest.Options{Name: "m2"})
	blocker := &blockingServer{started: make(chan struct{}), release: make(chan struct{})}
	s.Go(blocker.run)
	<-blocker.started
	r = byName(t, collect(), "m2")
	require.Len(t, r.Tasks, 1)
	assert.True(t, strings.HasSuffix(r.Tasks[0].Site, "registry_test.(*blockingServer).run"), r.Tasks[0].Site)
	close(blocker.release)
	require.NoError(t, s.Join())
}

type blockingServer struct{ started, release chan struct{} }

func (b *blockingServer) run(context.Context) error {
	b.started <- struct{}{}
	<-b.release
	return nil
}

// opener opens through a chain of the caller's own functions, some inlined, some not.
//
//go:noinline
func openDeep(ctx context.Context) *regtest.Scope {
	return regtest.Open(ctx, regtest.Options{Name: "deep"})
}

func TestOpenSiteWithAndWithoutFramePointers(t *testing.T) {
	if runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64" {
		require.True(t, registry.FramePointersInUse(), "the frame-pointer walk failed its check at init")
	}
	enable(t, registry.Scopes)
	for _, fp := range []bool{true, false} {
		was := registry.SetFramePointers(fp)
		site := here(1)
		s := regtest.Open(t.Context(), regtest.Options{Name: "site"})
		deep := openDeep(t.Context())
		registry.SetFramePointers(was)
		recs := collect()
		assert.Equal(t, site, byName(t, recs, "site").Site, "frame pointers %v", fp)
		assert.Contains(t, byName(t, recs, "deep").Site, "scope_test.go:", "frame pointers %v", fp)
		require.NoError(t, deep.Join())
		require.NoError(t, s.Join())
	}
}

const (
	testTimeout = 10 * time.Second
	pollEvery   = time.Millisecond
)

// A fan-out larger than the record's first table of slots: every running subtask is listed, those
// that took a slot before the table grew as well as those after.
func TestWideFanOutIsListedWhole(t *testing.T) {
	enable(t, registry.Scopes)
	const n = 300
	s := regtest.Open(t.Context(), regtest.Options{Name: "wide"})
	started := make(chan struct{})
	releases := make([]chan struct{}, n)
	subtasks := make([]*regtest.Subtask, n)
	for i := range n {
		releases[i] = make(chan struct{})
		subtasks[i] = s.Go(regtest.Block(started, releases[i]))
		<-started
	}
	seqs := func() []int64 {
		var out []int64
		for _, tr := range byName(t, collect(), "wide").Tasks {
			out = append(out, tr.Seq)
		}
		return out
	}
	var all, even []int64
	for i := range int64(n) {
		all = append(all, i+1)
		if (i+1)%2 == 0 {
			even = append(even, i+1)
		}
	}
	assert.Equal(t, all, seqs())
	for i := 0; i < n; i += 2 { // seq i+1 odd
		close(releases[i])
		require.NoError(t, subtasks[i].Wait())
	}
	assert.Equal(t, even, seqs())
	r := byName(t, collect(), "wide")
	assert.Equal(t, int64(n/2), r.Running)
	assert.Equal(t, int64(n/2), r.Succeeded)
	for i := 1; i < n; i += 2 {
		close(releases[i])
	}
	require.NoError(t, s.Join())
}

// Every seq picks a slot in range, len(slots) consecutive seqs pick every slot once, and any two
// consecutive seqs pick different cache lines: subtasks forked in a row, running on different
// cores, do not write the same line.
func TestTableIndex(t *testing.T) {
	for _, n := range []int{16, 64, 256} {
		seen := make(map[uintptr]bool)
		for seq := uintptr(1); seq <= uintptr(n); seq++ {
			i, perLine := registry.TableIndex(n, seq)
			next, _ := registry.TableIndex(n, seq+1)
			require.Less(t, i, uintptr(n))
			require.False(t, seen[i], "n=%d: slot %d picked twice", n, i)
			seen[i] = true
			require.NotEqual(t, i/perLine, next/perLine, "n=%d: seqs %d and %d share a line", n, seq, seq+1)
		}
	}
}

// openVia opens a scope through depth frames of the caller's own, none inlined: loom's deepest
// chain above registry.Open is six frames, and the site must still be found.
//
//go:noinline
func openVia(ctx context.Context, depth int) *regtest.Scope {
	if depth == 0 {
		return regtest.Open(ctx, regtest.Options{Name: "via"})
	}
	return openVia(ctx, depth-1)
}

func TestSiteThroughDeepLoomLikeChains(t *testing.T) {
	enable(t, registry.Scopes)
	s := openVia(t.Context(), 5)
	r := byName(t, collect(), "via")
	assert.Contains(t, r.Site, "scope_test.go:", "the first frame that is not loom's: here")
	require.NoError(t, s.Join())
	assert.False(t, (*registry.Scope)(nil).Recorded())
}

// A nil record (nothing recorded) takes every call and does nothing.
func TestNilRecordDoesNothing(t *testing.T) {
	var e *registry.Scope
	var task registry.Task
	e.Fork(&task)
	e.ForkAt(&task, 1)
	e.Refuse(registry.Cancelled)
	e.Done(e.Enter(&task, noop), registry.Succeeded)
	e.ForkBlocked(&task)
	e.Unblock()
	e.Joining()
	e.Leave()
	assert.Nil(t, e.Labels())
}

// A fork blocked on the limit counts as blocked, not as running.
func TestBlockedForkIsNotRunning(t *testing.T) {
	enable(t, registry.Scopes)
	inner, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	e := registry.Open(inner, registry.ScopeInfo{Name: "lim", Limit: 1})
	defer e.Leave()
	var a, b registry.Task
	e.Fork(&a)
	ra := e.Enter(&a, noop)
	e.ForkBlocked(&b) // counted in as blocked, as scope's admitSlow does
	r := byName(t, collect(), "lim")
	assert.Equal(t, [2]int64{1, 1}, [2]int64{r.Running, r.Blocked})
	e.Done(ra, registry.Succeeded)
	e.Unblock() // handed a's slot
	rb := e.Enter(&b, noop)
	r = byName(t, collect(), "lim")
	assert.Equal(t, [3]int64{1, 0, 1}, [3]int64{r.Running, r.Blocked, r.Succeeded})
	e.Done(rb, registry.Succeeded)
}

// A fork without a Task is counted, never listed, and its completion counted: the counts stay
// exact for a call site that has no Task to give.
func TestForkWithoutATaskIsCountedNotListed(t *testing.T) {
	enable(t, registry.Scopes)
	inner, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	e := registry.Open(inner, registry.ScopeInfo{Name: "untasked"})
	defer e.Leave()
	e.Fork(nil)
	e.ForkAt(nil, 2)
	e.Enter(nil, noop)
	r := byName(t, collect(), "untasked")
	assert.Equal(t, int64(2), r.Running)
	assert.Empty(t, r.Tasks)
	e.Done(registry.Running{}, registry.Succeeded)
	e.Done(registry.Running{}, registry.Failed)
	r = byName(t, collect(), "untasked")
	assert.Equal(t, [3]int64{0, 1, 1}, [3]int64{r.Running, r.Succeeded, r.Failed})
}
