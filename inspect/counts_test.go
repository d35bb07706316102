package inspect_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goloom/loom/inspect"
	"github.com/goloom/loom/scope"
)

// Regression (issue 21): a blocked fork that a finishing subtask's goroutine took over was
// listed as running while it still counted as blocked, so a scope of 4 subtasks showed 5. A
// dump's counts are exact: a subtask is running or blocked, never both; the counts sum to the
// subtasks forked; no more run than the limit. Dumps race limited scopes whose every fork
// blocks and is handed a slot by a finishing sibling, thousands of times (300 rounds of 400
// forks, each round's dumps checked against the Fork calls begun and returned around them).
func TestDumpCountsRacingHandOffs(t *testing.T) {
	enable(t, inspect.Scopes)
	const limit, forks = 3, 400
	rounds := 300
	if raceEnabled {
		rounds = 60
	}
	deadline := time.Now().Add(10 * time.Second) // only a bound on a broken run's length
	var entered, returned atomic.Int64           // Fork calls begun and returned, in every round
	var bases sync.Map                           // scope ID -> entered when it was opened
	var stop atomic.Bool
	var wg sync.WaitGroup
	var bad atomic.Pointer[string]
	report := func(format string, args ...any) {
		s := fmt.Sprintf(format, args...)
		bad.CompareAndSwap(nil, &s)
	}
	wg.Go(func() {
		for !stop.Load() {
			lo := returned.Load()
			d := inspect.Snapshot()
			hi := entered.Load()
			for _, s := range d.Scopes {
				base, ok := bases.Load(s.ID)
				if !ok {
					continue
				}
				lo, hi := lo-base.(int64), hi-base.(int64)
				c := s.Counts
				sum := c.Running + s.BlockedForks + c.Succeeded + c.Failed + c.Cancelled
				switch {
				case sum < lo || sum > hi:
					report("counts sum to %d (%+v, %d blocked), with %d to %d subtasks forked", sum, c, s.BlockedForks, lo, hi)
				case c.Running > limit:
					report("%d running, above the limit %d (%+v, %d blocked)", c.Running, limit, c, s.BlockedForks)
				case c.Running+s.BlockedForks > limit+1:
					// Each running subtask holds a slot, and so does a blocked fork that has been
					// handed one but not started yet; one more waits, in the owner's Fork.
					report("%d running and %d blocked, with a limit of %d and one forking goroutine", c.Running, s.BlockedForks, limit)
				case int64(len(s.Running)) > c.Running:
					report("%d listed running, %d counted", len(s.Running), c.Running)
				}
			}
		}
	})
	for round := 0; round < rounds && bad.Load() == nil && time.Now().Before(deadline); round++ {
		s := scope.Open(t.Context(), scope.WithName("handoff"), scope.WithLimit(limit))
		bases.Store(find(t, inspect.Snapshot(), "handoff").ID, entered.Load())
		for range forks {
			entered.Add(1)
			s.Go(func(context.Context) error { return nil })
			returned.Add(1)
		}
		if err := s.Join(); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	if p := bad.Load(); p != nil {
		t.Fatal(*p)
	}
}
