package redisfleet_test

import (
	"cmp"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The order of the grants, checked from the calls the upstream saw (see call): fencing tokens
// grow with the grants, across every fault, and callers are served in the order they asked.

// tokenOrder checks the fencing tokens of calls (those that carry one): no token is handed out
// twice, and a call that asked after another had ended holds a larger token than it (the earlier
// one was granted before its call started, so before the later one asked, and so before it was
// granted). It returns how many pairs broke that (by the later call), and the duplicates.
func tokenOrder(calls []call) (broken, duplicates int) {
	type event struct {
		at    time.Time
		end   bool
		token uint64
	}
	var events []event
	seen := make(map[uint64]bool)
	for _, c := range calls {
		if c.Token == 0 {
			continue
		}
		if seen[c.Token] {
			duplicates++
		}
		seen[c.Token] = true
		events = append(events, event{c.End, true, c.Token}, event{c.Asked, false, c.Token})
	}
	slices.SortFunc(events, func(a, b event) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		if a.end == b.end {
			return 0
		}
		if a.end { // an end and an ask at the same instant: not "before"
			return 1
		}
		return -1
	})
	var ended uint64 // the largest token of the calls that have ended
	for _, e := range events {
		switch {
		case e.end:
			ended = max(ended, e.token)
		case e.token <= ended:
			broken++
		}
	}
	return broken, duplicates
}

// passed returns the share of calls (those that carry a token) that were granted before a call
// of another replica that had asked more than slack earlier: a FIFO inversion across processes,
// by the callers' arrival. Grants are in token order.
func passed(calls []call, slack time.Duration) (share float64, n int) {
	var cs []call
	for _, c := range calls {
		if c.Token != 0 {
			cs = append(cs, c)
		}
	}
	if len(cs) == 0 {
		return 0, 0
	}
	slices.SortFunc(cs, func(a, b call) int { return cmp.Compare(b.Token, a.Token) }) // latest grant first
	// The two earliest asks among the calls granted after the current one, of two replicas.
	type ask struct {
		at      time.Time
		replica int
	}
	var first, second *ask
	for _, c := range cs {
		earliest := first
		if earliest != nil && earliest.replica == c.Replica {
			earliest = second
		}
		if earliest != nil && earliest.at.Before(c.Asked.Add(-slack)) {
			n++
		}
		a := &ask{c.Asked, c.Replica}
		switch {
		case first == nil || a.at.Before(first.at):
			if first == nil || first.replica != a.replica {
				second = first
			}
			first = a
		case first.replica != a.replica && (second == nil || a.at.Before(second.at)):
			second = a
		}
	}
	return float64(n) / float64(len(cs)), n
}

func TestOrderChecksCatchWhatTheyShould(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	good := []call{
		{Replica: 1, Asked: at(0), Token: 10, Start: at(1), End: at(5)},
		{Replica: 2, Asked: at(2), Token: 11, Start: at(6), End: at(9)},
		{Replica: 1, Asked: at(6), Token: 12, Start: at(10), End: at(12)},
	}
	broken, dup := tokenOrder(good)
	assert.Zero(t, broken)
	assert.Zero(t, dup)
	share, n := passed(good, 0)
	assert.Zero(t, n)
	assert.Zero(t, share)

	// A call that asked after another ended, with a smaller token; and a token twice.
	bad := append(good, call{Replica: 3, Asked: at(13), Token: 11, Start: at(14), End: at(15)})
	broken, dup = tokenOrder(bad)
	assert.Equal(t, 1, broken)
	assert.Equal(t, 1, dup)

	// Replica 2's call granted before replica 1's, which asked 3 ms earlier: one inversion of
	// four calls, unless the slack covers it; none within one replica.
	inv := []call{
		{Replica: 1, Asked: at(0), Token: 21},
		{Replica: 2, Asked: at(3), Token: 20},
		{Replica: 2, Asked: at(4), Token: 22},
		{Replica: 1, Asked: at(1), Token: 19}, // passed its own replica's earlier call only: not counted
	}
	share, n = passed(inv, 0)
	assert.Equal(t, 1, n)
	assert.InDelta(t, 0.25, share, 1e-9)
	_, n = passed(inv, 5*time.Millisecond)
	assert.Zero(t, n)
}
