package fleetdriver_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/goloom/loom/fleet/fleetdriver"
)

// FuzzMemoryBackend drives the in-memory backend with a sequence of requests from several
// clients of different capacities — acquires with and without waiting, renewals, releases,
// repeated calls, clock jumps, restarts and outages — and checks after every step what every
// backend must keep: a grant fits the asker's capacity, a request that may not wait is never
// granted past a queue, tokens only grow (across restarts too), a released lease never comes
// back, and once everything is released nothing is held or queued.
func FuzzMemoryBackend(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7})
	f.Add([]byte{0x00, 0x10, 0x20, 0x01, 0x31, 0x42, 0x00, 0x53, 0x64})
	f.Add([]byte{0x80, 0x81, 0x82, 0x83, 0x04, 0x05, 0x86, 0x07, 0x40, 0x41})
	f.Add([]byte("restart in the middle of a queue of waiters"))
	f.Fuzz(func(t *testing.T, ops []byte) {
		synctest.Test(t, func(t *testing.T) { fuzzMemoryBackend(t, ops) })
	})
}

// fuzzMemoryBackend runs under synctest: the backend's clock moves only when the input says.
func fuzzMemoryBackend(t *testing.T, ops []byte) {
	m := fleetdriver.NewMemory()
	ctx := context.Background()
	const name = "x"
	ttl := time.Second
	caps := []int64{2, 3, 5}
	type lease struct {
		l       fleetdriver.Lease
		granted bool
	}
	var live []*lease             // granted or queued, as far as we know
	released := map[string]bool{} // IDs we released
	var lastToken uint64
	seq := 0
	down := false
	pick := func(b byte) *lease {
		if len(live) == 0 {
			return nil
		}
		return live[int(b)%len(live)]
	}
	drop := func(x *lease) {
		for i, y := range live {
			if y == x {
				live = append(live[:i], live[i+1:]...)
				return
			}
		}
	}
	for i, op := range ops {
		arg := byte(i * 7)
		if i+1 < len(ops) {
			arg = ops[i+1]
		}
		switch op % 8 {
		case 0, 1: // a new request
			c := int(op>>3) % len(caps)
			seq++
			x := &lease{l: fleetdriver.Lease{ID: fmt.Sprintf("c%d.%d", c, seq), N: 1 + int64(arg)%3, Capacity: caps[c]}}
			if x.l.N > x.l.Capacity {
				x.l.N = x.l.Capacity
			}
			wait := op&0x40 != 0
			queuedBefore := m.Queued(name)
			r, err := m.Acquire(ctx, fleetdriver.AcquireRequest{Name: name, Lease: x.l, TTL: ttl, Wait: wait})
			if err != nil {
				if !down {
					t.Fatalf("step %d: %v", i, err)
				}
				continue
			}
			if r.Granted {
				if !wait && queuedBefore > 0 {
					t.Fatalf("step %d: a request that may not wait was granted past %d queued", i, queuedBefore)
				}
				x.granted, x.l.Token, x.l.Epoch = true, r.Token, r.Epoch
			}
			if r.Granted || wait {
				live = append(live, x)
			}
			if r.Granted {
				if r.Token <= lastToken {
					t.Fatalf("step %d: token %d after %d", i, r.Token, lastToken)
				}
				lastToken = r.Token
				if held := m.Held(name); held > x.l.Capacity {
					t.Fatalf("step %d: %d held after a grant within capacity %d", i, held, x.l.Capacity)
				}
			}
		case 2: // ask again for a queued one (or repeat a granted one's call)
			x := pick(arg)
			if x == nil {
				continue
			}
			r, err := m.Acquire(ctx, fleetdriver.AcquireRequest{Name: name, Lease: x.l, TTL: ttl, Wait: true})
			if err != nil {
				continue
			}
			if r.Granted {
				// The same token for a lease still held (a repeated call after a lost reply); a
				// new grant, with a new token, for one that expired or was lost meanwhile.
				if !x.granted || r.Token != x.l.Token {
					if r.Token <= lastToken {
						t.Fatalf("step %d: token %d after %d", i, r.Token, lastToken)
					}
					lastToken = r.Token
					if held := m.Held(name); held > x.l.Capacity {
						t.Fatalf("step %d: %d held after a grant within capacity %d", i, held, x.l.Capacity)
					}
				}
				x.granted, x.l.Token, x.l.Epoch = true, r.Token, r.Epoch
			}
		case 3: // release one
			x := pick(arg)
			if x == nil {
				continue
			}
			if err := release(m, name, []fleetdriver.Lease{x.l}); err != nil {
				continue
			}
			released[x.l.ID] = true
			drop(x)
		case 4: // renew every granted lease of one client
			var ls []fleetdriver.Lease
			var xs []*lease
			for _, x := range live {
				if x.granted {
					ls, xs = append(ls, x.l), append(xs, x)
				}
			}
			for id := range released { // and a released one, which must not come back
				ls = append(ls, fleetdriver.Lease{ID: id, N: 1, Capacity: 5, Token: 1, Epoch: -1})
				break
			}
			r, err := m.Renew(ctx, fleetdriver.RenewRequest{Name: name, TTL: ttl, Leases: ls})
			if err != nil {
				continue
			}
			for j, st := range r.Status {
				if j >= len(xs) {
					if st == fleetdriver.LeaseRenewed {
						t.Fatalf("step %d: a released lease was renewed", i)
					}
					if st == fleetdriver.LeaseReregistered { // a stale holder: let it go again
						_ = release(m, name, ls[j:j+1])
					}
					continue
				}
				switch st {
				case fleetdriver.LeaseLost: // not a lease any more (it may be queued again)
					xs[j].granted = false
				case fleetdriver.LeaseReregistered:
					xs[j].l.Epoch = r.Epoch
				}
			}
			if held := m.Held(name); held > 5 {
				t.Fatalf("step %d: %d held", i, held)
			}
		case 5: // the backend's clock jumps
			m.Advance(time.Duration(arg) * 8 * time.Millisecond)
		case 6:
			if arg%4 == 0 {
				m.Restart()
			}
		case 7:
			down = !down
			m.SetDown(down)
		}
	}
	m.SetDown(false)
	var all []fleetdriver.Lease
	for _, x := range live {
		all = append(all, x.l)
	}
	if err := release(m, name, all); err != nil {
		t.Fatal(err)
	}
	if held, queued := m.Held(name), m.Queued(name); held != 0 || queued != 0 {
		t.Fatalf("after releasing everything: %d held, %d queued", held, queued)
	}
}

// FuzzRateBucket reserves and cancels tokens of the in-memory bucket at random times, and checks
// that the reserved (not cancelled) start times never put more than burst + d·rate starts in any
// span d, that a refused reservation takes nothing, and that cancelling the last reservation
// leaves the bucket as if it had never been made.
func FuzzRateBucket(f *testing.F) {
	f.Add(uint16(10), uint8(3), []byte{0, 0, 0, 0, 10, 1, 0, 200, 2})
	f.Add(uint16(1), uint8(1), []byte{1, 2, 3, 4, 5, 6, 7, 8})
	f.Add(uint16(1000), uint8(20), []byte("a burst, then a steady stream"))
	f.Fuzz(func(t *testing.T, rate uint16, burst uint8, ops []byte) {
		synctest.Test(t, func(t *testing.T) { fuzzRateBucket(t, rate, burst, ops) })
	})
}

// fuzzRateBucket runs under synctest: the backend's clock moves only when the input says.
func fuzzRateBucket(t *testing.T, rate uint16, burst uint8, ops []byte) {
	perSecond := float64(1 + rate%1000)
	b := int64(1 + burst%20)
	m := fleetdriver.NewMemory()
	ctx := context.Background()
	req := fleetdriver.RateRequest{Name: "r", PerSecond: perSecond, Burst: b, MaxWait: -1}
	type start struct {
		at   time.Time
		mark string
	}
	var starts []start
	for i, op := range ops {
		switch op % 4 {
		case 0, 1: // reserve, maybe bounded
			r := req
			if op%4 == 1 {
				r.MaxWait = time.Duration(op) * time.Millisecond
			}
			now := m.Now()
			rep, err := m.Reserve(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			if !rep.OK {
				again, err := m.Reserve(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				if again.Delay < rep.Delay-time.Microsecond {
					t.Fatalf("step %d: a refused reservation moved the bucket", i)
				}
				starts = append(starts, start{now.Add(again.Delay), again.Mark})
				continue
			}
			starts = append(starts, start{now.Add(rep.Delay), rep.Mark})
		case 2: // cancel the last one, if not due: the next reservation sees the same delay
			if len(starts) == 0 {
				continue
			}
			last := starts[len(starts)-1]
			if !m.Now().Before(last.at) {
				continue
			}
			if err := m.CancelReservation(ctx, fleetdriver.RateCancel{Name: "r", PerSecond: perSecond, Burst: b, Mark: last.mark}); err != nil {
				t.Fatal(err)
			}
			starts = starts[:len(starts)-1]
		case 3: // time passes on the backend
			m.Advance(time.Duration(op) * time.Millisecond)
		}
	}
	interval := time.Duration(float64(time.Second) / perSecond)
	for i := range starts {
		for j := i + 1; j < len(starts); j++ {
			span := starts[j].at.Sub(starts[i].at)
			if span < 0 {
				span = -span
			}
			allowed := b + int64(span/interval)
			if int64(j-i+1) > allowed+1 { // +1: rounding to microseconds at both ends
				t.Fatalf("%d starts within %v (rate %v, burst %d)", j-i+1, span, perSecond, b)
			}
		}
	}
}

func release(m *fleetdriver.Memory, name string, leases []fleetdriver.Lease) error {
	_, err := m.Release(context.Background(), fleetdriver.ReleaseRequest{Name: name, Leases: leases})
	return err
}
