// Package exporttest holds what the tests of both metrics exporters (exporters/prometheus and
// exporters/otel, modules of their own) share: limiters and semaphores in a known state, and
// reading an exporter's output at an instant when nothing moves. It belongs to the root module,
// whose dependencies the exporters' tests have anyway.
package exporttest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/fleet"
	"github.com/goloom/loom/inspect"
	"github.com/goloom/loom/internal/registry"
	"github.com/goloom/loom/limiter"
	"github.com/goloom/loom/limiter/adaptive"
	"github.com/goloom/loom/scope"
)

// Every wait polls for its condition with this deadline: far above what any condition takes on
// a loaded machine.
const (
	Deadline  = 10 * time.Second
	PollEvery = time.Millisecond
)

var names atomic.Int64

// Unique returns base with a number of its own: a limiter of an earlier run of a test (go test
// -count) may not have been collected yet, and would add to the numbers of one of the same name.
func Unique(base string) string { return fmt.Sprintf("%s-%d", base, names.Add(1)) }

// Eventually polls cond until it holds, failing the test after the deadline.
func Eventually(t testing.TB, cond func() bool, msg string) {
	t.Helper()
	require.Eventually(t, cond, Deadline, PollEvery, msg)
}

// Add returns the field-by-field sum of the integer fields of two structs, such as two
// limiter.Stats: what an exporter shows of two limiters of one name. Other fields (fleet.Stats's
// PausedUntil, a time) are a's.
func Add[S any](a, b S) S {
	va, vb := reflect.ValueOf(&a).Elem(), reflect.ValueOf(b)
	for i := range va.NumField() {
		if f := va.Field(i); f.CanInt() {
			f.SetInt(f.Int() + vb.Field(i).Int())
		}
	}
	return a
}

// AtRest reads an exporter's output at an instant when stats reads the same before and after,
// and returns the output and those stats: a read whose numbers moved meanwhile is taken again.
func AtRest[S comparable, R any](t testing.TB, read func() R, stats func() S) (R, S) {
	t.Helper()
	for start := time.Now(); ; {
		before := stats()
		got := read()
		if after := stats(); after == before {
			return got, before
		}
		require.Less(t, time.Since(start), Deadline, "the numbers never stood still")
	}
}

var errTask = errors.New("task failed")

// BusyLimiter returns a limiter called name with every outcome counted at least once, and its
// gauges held still: 2 slots held by tasks that overran their timeout, 1 call waiting, 1
// rejected (too many waiting). release lets the held tasks and the waiter finish; it waits for
// them.
func BusyLimiter(t *testing.T, name string) (l *limiter.Limiter, release func()) {
	t.Helper()
	l = limiter.New(2, limiter.WithName(name), limiter.WithMaxWaiting(1), limiter.WithTaskTimeout(20*time.Millisecond))
	ctx := t.Context()
	require.NoError(t, l.Do(ctx, func(context.Context) error { return nil }))
	require.ErrorIs(t, l.Do(ctx, func(context.Context) error { return errTask }), errTask)
	var pe *limiter.PanicError
	require.ErrorAs(t, l.Do(ctx, func(context.Context) error { panic("boom") }), &pe)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	require.Error(t, l.Do(cancelled, func(context.Context) error { return nil }))

	// Two tasks that ignore their timeout: their calls end TimedOut, and they keep their slots.
	hold := make(chan struct{})
	held := make(chan struct{}, 2)
	for range 2 {
		_, err := limiter.Call(ctx, l, func(context.Context) (struct{}, error) {
			held <- struct{}{}
			<-hold
			return struct{}{}, nil
		})
		require.ErrorIs(t, err, limiter.ErrTaskTimeout)
	}
	<-held
	<-held
	waited := make(chan error, 1)
	go func() { waited <- l.Do(ctx, func(context.Context) error { return nil }) }()
	Eventually(t, func() bool { return l.Stats().Waiting == 1 }, "a call waits for a slot")
	require.ErrorIs(t, l.Do(ctx, func(context.Context) error { return nil }), limiter.ErrRejected)

	s := l.Stats()
	for _, n := range []int64{s.Completed, s.Failed, s.Rejected, s.TimedOut, s.Cancelled, s.Panicked} {
		require.Positive(t, n, "every outcome is counted: %+v", s)
	}
	require.Equal(t, 2, s.InFlight)
	return l, func() {
		close(hold)
		require.NoError(t, <-waited)
		Eventually(t, func() bool { return l.Stats().InFlight == 0 }, "the held tasks return")
	}
}

// The Stats fields the exporters stand for, by the names Go gives them.
var (
	LimiterFields = []string{"Limit", "InFlight", "Waiting", "RateWaiting", "Completed", "Failed", "Rejected", "TimedOut", "Cancelled", "Panicked", "LimitChanges"}
	FleetFields   = []string{"Capacity", "Held", "Waiting", "Acquired", "LeasesLost", "Unavailable", "Degraded", "RoundTrips"}
)

// CheckStatsRead checks what an exporter reads of limiter.Stats and fleet.Stats, by field name
// through the registry (limiters and semaphores: the stats its tables read, in lowerCamelCase):
// every field of LimiterFields and FleetFields is still there, the tables read those and no
// other, and the registry's record of a live limiter and semaphore has each. It fails naming the
// field that went missing.
func CheckStatsRead(t *testing.T, limiters, semaphores []string) {
	t.Helper()
	name := Unique("fields")
	l := limiter.New(1, limiter.WithName(name))
	sem := fleet.New(fleet.NewMemory(), name, 1)
	defer sem.Close()
	for _, tt := range []struct {
		what   string
		typ    reflect.Type
		fields []string
		reads  []string
		recs   []registry.LimiterRecord
	}{
		{"limiter.Stats", reflect.TypeFor[limiter.Stats](), LimiterFields, limiters, registry.CollectLimiters()},
		{"fleet.Stats", reflect.TypeFor[fleet.Stats](), FleetFields, semaphores, registry.CollectSemaphores()},
	} {
		want := map[string]bool{}
		for _, f := range tt.fields {
			_, ok := tt.typ.FieldByName(f)
			require.True(t, ok, "%s has no field %s any more: the exporters' tables need it", tt.what, f)
			want[registry.LowerCamel(f)] = true
		}
		got := map[string]bool{}
		for _, stat := range tt.reads {
			got[stat] = true
		}
		assert.Equal(t, want, got, "%s: the fields read", tt.what)
		var rec *registry.LimiterRecord
		for i := range tt.recs {
			if tt.recs[i].Name == name {
				rec = &tt.recs[i]
			}
		}
		require.NotNil(t, rec, "%s: the registry lists %s", tt.what, name)
		for _, stat := range tt.reads {
			_, ok := rec.Stat(stat)
			assert.True(t, ok, "%s: the registry has no stat %q", tt.what, stat)
		}
	}
	runtime.KeepAlive(l)
}

// BusyFleet returns two fleet semaphores at rest (a long lease: no renewal moves their numbers):
// busy, of capacity 3, all 3 permits held and an Acquire waiting; down, whose backend is down,
// with 1 permit granted degraded (Degrade(1)). release ends the wait and gives the permits back.
func BusyFleet(t *testing.T, busyName, downName string) (busy, down *fleet.Semaphore, release func()) {
	t.Helper()
	busy = fleet.New(fleet.NewMemory(), busyName, 3, fleet.WithLease(time.Hour))
	held, err := busy.Acquire(t.Context(), 3)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	waited := make(chan error, 1)
	go func() {
		p, err := busy.Acquire(ctx, 1)
		if err == nil {
			p.Release()
		}
		waited <- err
	}()
	Eventually(t, func() bool { return busy.Stats().Waiting == 1 }, "an Acquire waits")

	downMem := fleet.NewMemory()
	down = fleet.New(downMem, downName, 2, fleet.WithLease(time.Hour), fleet.WhenUnavailable(fleet.Degrade(1)),
		fleet.WithLogger(slog.New(slog.DiscardHandler))) // the outage is on purpose
	downMem.SetDown(true)
	degraded, err := down.Acquire(t.Context(), 1)
	require.NoError(t, err)
	require.True(t, degraded.Degraded())
	d := down.Stats()
	require.Positive(t, d.Unavailable)
	require.Positive(t, d.Degraded)
	return busy, down, func() {
		cancel()
		require.ErrorIs(t, <-waited, context.Canceled)
		held.Release()
		degraded.Release()
		downMem.SetDown(false)
		require.NoError(t, busy.Close())
		_ = down.Close()
	}
}

// Twice makes two limiters and two fleet semaphores of one name, at rest: a BusyLimiter (limit 2)
// beside an idle limiter of limit 5 that completed one call, and two semaphores of capacity 3 on
// one backend, holding 2 and 1 permits. limiters and semaphores read their summed Stats; release
// lets everything go.
func Twice(t *testing.T, name string) (limiters func() limiter.Stats, semaphores func() fleet.Stats, release func()) {
	t.Helper()
	a, releaseA := BusyLimiter(t, name)
	b := limiter.New(5, limiter.WithName(name))
	require.NoError(t, b.Do(t.Context(), func(context.Context) error { return nil }))
	mem := fleet.NewMemory()
	s1, s2 := fleet.New(mem, name, 3), fleet.New(mem, name, 3)
	p1, err := s1.Acquire(t.Context(), 2)
	require.NoError(t, err)
	p2, err := s2.Acquire(t.Context(), 1)
	require.NoError(t, err)
	return func() limiter.Stats { return Add(a.Stats(), b.Stats()) },
		func() fleet.Stats { return Add(s1.Stats(), s2.Stats()) },
		func() {
			p1.Release()
			p2.Release()
			require.NoError(t, s1.Close())
			require.NoError(t, s2.Close())
			releaseA()
		}
}

// grow is an adaptive controller that raises the limit by one each window, up to 8.
type grow struct{}

func (grow) Update(w adaptive.Window) int { return min(w.Limit+1, 8) }

// RatedAndMoved returns two limiters at rest: rated (limit 4, one token an hour, burst 1), whose
// token the first call took and whose second call waits for the next (RateWaiting 1), and moved
// (WithAdaptive, starting at 2), whose limit has moved at least once. release ends the wait.
func RatedAndMoved(t *testing.T, ratedName, movedName string) (rated, moved *limiter.Limiter, release func()) {
	t.Helper()
	rated = limiter.New(4, limiter.WithName(ratedName), limiter.WithRate(1.0/3600, 1))
	require.NoError(t, rated.Do(t.Context(), func(context.Context) error { return nil }))
	ctx, cancel := context.WithCancel(t.Context())
	waited := make(chan error, 1)
	go func() { waited <- rated.Do(ctx, func(context.Context) error { return nil }) }()
	Eventually(t, func() bool { return rated.Stats().RateWaiting == 1 }, "a call waits for a token")
	moved = limiter.New(2, limiter.WithName(movedName), limiter.WithAdaptive(grow{}))
	for i := 0; moved.Stats().LimitChanges == 0; i++ {
		require.Less(t, i, 1_000_000, "no window closed")
		require.NoError(t, moved.Do(t.Context(), func(context.Context) error { return nil }))
	}
	require.Greater(t, moved.Stats().Limit, 2)
	return rated, moved, func() {
		cancel()
		require.ErrorIs(t, <-waited, context.Canceled)
	}
}

// OpenScopes turns inspect's Scopes on and opens two scopes called name with three subtasks
// running in all. join lets the subtasks return, joins the scopes and turns Scopes off; it runs
// when the test ends if it has not run before.
func OpenScopes(t *testing.T, name string) (join func()) {
	t.Helper()
	inspect.Enable(inspect.Scopes)
	release := make(chan struct{})
	started := make(chan struct{}, 3)
	block := func(context.Context) error { started <- struct{}{}; <-release; return nil }
	a := scope.Open(t.Context(), scope.WithName(name))
	a.Go(block)
	a.Go(block)
	b := scope.Open(t.Context(), scope.WithName(name))
	b.Go(block)
	for range 3 {
		<-started
	}
	var once sync.Once
	join = func() {
		once.Do(func() {
			close(release)
			assert.NoError(t, a.Join())
			assert.NoError(t, b.Join())
			inspect.Disable(inspect.Scopes)
		})
	}
	t.Cleanup(join) // also when the test fails before it joins
	return join
}
