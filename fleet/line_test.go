package fleet_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/fleet"
)

// Regression: a grant that came for a waiter behind the head was handed to it without its entry
// leaving the Semaphore's map of entries, so every such grant left a waiter (and its channels)
// behind for good: 40 entries after 20 rounds of three waiters, with nobody waiting. Each round
// queues three waiters behind a holder of every permit and releases them at once, so the one
// release grants the waiters behind the head too.
func TestLineForgetsEveryEntryItHandsOver(t *testing.T) {
	s := newSem(t, fleet.NewMemory(), "line", 3, fleet.WithLease(time.Minute))
	ctx := context.Background()
	for round := range 20 {
		all, err := s.Acquire(ctx, 3)
		require.NoError(t, err)
		got := make(chan *fleet.Permit, 3)
		for range 3 {
			go func() {
				p, err := s.Acquire(ctx, 1)
				if err != nil {
					t.Error(err)
				}
				got <- p
			}()
		}
		deadline := time.Now().Add(10 * time.Second)
		for s.Stats().Waiting < 3 {
			require.True(t, time.Now().Before(deadline), "round %d: the waiters never queued", round)
			time.Sleep(time.Millisecond)
		}
		all.Release()
		for range 3 {
			(<-got).Release()
		}
	}
	entries, line := fleet.Entries(s)
	assert.Zero(t, line, "nobody waits")
	assert.Zero(t, entries, "every entry handed over is forgotten")
}
