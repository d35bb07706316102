package exporttest_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"

	"github.com/goloom/loom/exporters/internal/exporttest"
	"github.com/goloom/loom/inspect"
	"github.com/goloom/loom/limiter"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestAdd(t *testing.T) {
	got := exporttest.Add(limiter.Stats{Limit: 2, Completed: 3}, limiter.Stats{Limit: 5, Completed: 1, Failed: 1})
	assert.Equal(t, limiter.Stats{Limit: 7, Completed: 4, Failed: 1}, got)
}

func TestUnique(t *testing.T) {
	assert.NotEqual(t, exporttest.Unique("x"), exporttest.Unique("x"))
}

func TestBusyLimiter(t *testing.T) {
	l, release := exporttest.BusyLimiter(t, exporttest.Unique("busy"))
	s := l.Stats()
	assert.Equal(t, 2, s.InFlight)
	assert.Equal(t, 1, s.Waiting)
	release()
	assert.Zero(t, l.Stats().InFlight)
}

func TestBusyFleet(t *testing.T) {
	busy, down, release := exporttest.BusyFleet(t, exporttest.Unique("busy"), exporttest.Unique("down"))
	assert.Equal(t, int64(3), busy.Stats().Held)
	assert.Equal(t, 1, busy.Stats().Waiting)
	assert.Equal(t, int64(1), down.Stats().Held)
	release()
}

func TestOpenScopes(t *testing.T) {
	join := exporttest.OpenScopes(t, exporttest.Unique("scopes"))
	assert.True(t, inspect.Enabled(inspect.Scopes))
	join()
	assert.False(t, inspect.Enabled(inspect.Scopes))
	join() // once only
}

func TestRatedAndMoved(t *testing.T) {
	rated, moved, release := exporttest.RatedAndMoved(t, exporttest.Unique("rated"), exporttest.Unique("moved"))
	assert.Equal(t, 1, rated.Stats().RateWaiting)
	assert.Positive(t, moved.Stats().LimitChanges)
	release()
}

func TestTwice(t *testing.T) {
	limiters, semaphores, release := exporttest.Twice(t, exporttest.Unique("twice"))
	assert.Equal(t, 7, limiters().Limit)
	assert.Equal(t, int64(3), semaphores().Held)
	release()
}
