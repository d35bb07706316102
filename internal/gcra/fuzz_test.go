package gcra_test

import (
	"math"
	"testing"
	"time"

	"github.com/goloom/loom/internal/gcra"
)

// FuzzBucket drives a bucket of any valid rate and burst through reservations, returns and
// cancels at a clock that only moves forward: nothing panics or overflows, a new bucket's first
// token is there at once, delays are never negative, a token that is there is taken without
// waiting, and, for rates that do not saturate, the tokens kept never come faster than the
// bucket allows.
func FuzzBucket(f *testing.F) {
	f.Add(10.0, int64(3), int64(0), []byte{0, 0, 0, 0, 1, 2, 3})
	f.Add(1e-10, int64(1), int64(1e9), []byte{0, 0, 2, 0})
	f.Add(1.0, int64(1e10), int64(60e9), []byte{0, 0, 0, 3, 1})
	f.Add(math.Inf(1), int64(1), int64(5), []byte{0, 1, 0, 2})
	f.Add(1e12, int64(math.MaxInt64), int64(math.MaxInt64-10), []byte{0, 0, 0, 0})
	f.Add(math.SmallestNonzeroFloat64, int64(4), int64(7), []byte{0, 0, 0, 0, 0, 2, 3, 0})
	f.Fuzz(func(t *testing.T, perSecond float64, burst, start int64, ops []byte) {
		if !(perSecond > 0) || burst < 1 || start < 0 {
			return
		}
		r := gcra.NewRate(perSecond, burst)
		var b gcra.Bucket
		now := time.Duration(start)
		if wait, _ := b.Take(r, now); wait != 0 {
			t.Fatalf("a new bucket's first token waits %v", wait)
		}
		type held struct {
			at   time.Duration
			mark int64
		}
		var kept []held
		checked := r.Interval() > 0 && r.Interval() < time.Hour && burst < 1000
		for i, op := range ops {
			switch op % 4 {
			case 0:
				due := b.Due(r, now, 1)
				ok, d, mark := b.Reserve(r, now, time.Duration(op)*time.Millisecond)
				if d < 0 || due < 0 {
					t.Fatalf("op %d: negative delay %v (due %v)", i, d, due)
				}
				if d != due {
					t.Fatalf("op %d: Due said %v, Reserve %v", i, due, d)
				}
				if ok {
					kept = append(kept, held{addNow(now, d), mark})
				}
			case 1:
				if len(kept) > 0 && b.Return(r, kept[len(kept)-1].mark) {
					kept = kept[:len(kept)-1]
				}
			case 2:
				if len(kept) > 0 {
					h := kept[len(kept)-1]
					if b.Cancel(r, now, h.mark) || h.at > now {
						kept = kept[:len(kept)-1]
					}
				}
			case 3:
				step := time.Duration(op) * r.Interval() / 7
				if now <= gcra.Forever-step {
					now += step
				}
			}
		}
		if !checked {
			return
		}
		at := make([]int64, len(kept))
		for i, h := range kept {
			at[i] = int64(h.at)
		}
		checkEnvelope(t, at, int64(r.Interval()), burst)
	})
}

func addNow(now, d time.Duration) time.Duration {
	if now > gcra.Forever-d {
		return gcra.Forever
	}
	return now + d
}
