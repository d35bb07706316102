package sim

import (
	"fmt"
	"strings"
	"time"
)

// LimitAt returns the limit in force at t: the one the last window closed before t returned,
// or the starting limit.
func (tr *Trace) LimitAt(t time.Duration) int {
	limit := tr.Scenario.Start
	for _, r := range tr.Records {
		if r.At > t {
			break
		}
		limit = r.Next
	}
	return limit
}

// After returns the records of the windows that closed at or after t.
func (tr *Trace) After(t time.Duration) []Record {
	for i, r := range tr.Records {
		if r.At >= t {
			return tr.Records[i:]
		}
	}
	return nil
}

// Table formats the trace as a compact table of about rows lines, evenly spaced in time: for
// each, the hidden capacity, the offered load and, over the windows since the previous line,
// the limit's range and last value, the highest in-flight count, the last median RTT and the
// drops.
func (tr *Trace) Table(rows int) string {
	var b strings.Builder
	sc := tr.Scenario
	fmt.Fprintf(&b, "%s: %d windows, %d calls, %d drops, %d rejected\n", sc.Name, len(tr.Records), tr.Calls, tr.Drops, tr.Rejected)
	fmt.Fprintf(&b, "%8s %4s %7s %4s %9s %8s %7s %5s\n", "t", "C", "clients", "win", "limit", "(range)", "p50", "drops")
	step := sc.Duration / time.Duration(max(rows, 1))
	i := 0
	for t := step; t <= sc.Duration; t += step {
		lo, hi, inflight, drops, n := 1<<62, 0, 0, 0, 0
		var last Record
		for ; i < len(tr.Records) && tr.Records[i].At < t; i++ {
			r := tr.Records[i]
			lo, hi = min(lo, r.Next), max(hi, r.Next)
			inflight = max(inflight, r.Window.MaxInFlight)
			drops += r.Window.Drops
			last, n = r, n+1
		}
		if n == 0 {
			fmt.Fprintf(&b, "%8v %4d %7d %4d %9d %8s %7s %5s\n", t.Round(time.Millisecond), At(sc.Capacity, t), At(sc.Clients, t), 0, tr.LimitAt(t), "", "", "")
			continue
		}
		_ = inflight
		fmt.Fprintf(&b, "%8v %4d %7d %4d %9d %8s %7v %5d\n", t.Round(time.Millisecond), At(sc.Capacity, t), At(sc.Clients, t), n,
			last.Next, fmt.Sprintf("%d-%d", lo, hi), last.Window.P50.Round(time.Millisecond), drops)
	}
	return b.String()
}
