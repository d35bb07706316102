package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/goloom/loom/limiter/adaptive"
)

// A Step is a value that holds from At on, until the next Step.
type Step struct {
	At time.Duration
	N  int
}

// At returns the value of steps at t: that of the last step with At <= t, or 0 before the first.
func At(steps []Step, t time.Duration) int {
	n := 0
	for _, s := range steps {
		if s.At > t {
			break
		}
		n = s.N
	}
	return n
}

// A Scenario is one scripted run.
type Scenario struct {
	Name     string
	Seed     uint64
	Duration time.Duration
	Start    int           // the gate's starting limit
	Capacity []Step        // the hidden capacity C over time, in ascending At
	Clients  []Step        // the offered load over time: how many clients call, in ascending At
	Think    time.Duration // each client's pause between calls
	Slowness []Step        // the server's latency over time, in percent of Server's (none: 100)
	Server   Server
}

// maxClients bounds a scenario's clients: each wakes at instants of its own modulo it.
const maxClients = 4096

func (sc *Scenario) check() {
	if sc.Duration <= 0 || sc.Start < 1 || len(sc.Capacity) == 0 || len(sc.Clients) == 0 {
		panic(fmt.Sprintf("sim: scenario %q: needs a Duration, a Start of at least 1, Capacity and Clients", sc.Name))
	}
	for _, steps := range [][]Step{sc.Capacity, sc.Clients, sc.Slowness} {
		for i, s := range steps {
			if s.N < 0 || s.N > maxClients || i > 0 && s.At < steps[i-1].At {
				panic(fmt.Sprintf("sim: scenario %q: steps must ascend and lie in [0, %d]", sc.Name, maxClients))
			}
		}
	}
	if sc.Server.Service <= 0 {
		panic(fmt.Sprintf("sim: scenario %q: Server.Service must be positive (start from DefaultServer)", sc.Name))
	}
}

// A Trace is the outcome of a run.
type Trace struct {
	Scenario Scenario
	Records  []Record // every window, in order
	Calls    int64    // calls that ran
	Drops    int64    // ... and were refused or timed out
	Rejected int64    // calls the gate rejected
}

// Simulate runs sc in a synctest bubble of its own (see [Run]).
func Simulate(t *testing.T, sc Scenario, c adaptive.Controller, newGate NewGate) *Trace {
	t.Helper()
	var tr *Trace
	synctest.Test(t, func(*testing.T) { tr = Run(sc, c, newGate) })
	return tr
}

// Run runs sc against the gate newGate makes around c (wrapped in a [Recorder]) and returns
// what happened. It must run in a synctest bubble, where sc.Duration of fake time passes in a
// moment; outside one it would take sc.Duration.
func Run(sc Scenario, c adaptive.Controller, newGate NewGate) *Trace {
	sc.check()
	epoch := time.Now()
	d := &downstream{model: sc.Server, capacity: func(t time.Duration) int { return At(sc.Capacity, t) }, slowness: func(time.Duration) float64 { return 1 }}
	if len(sc.Slowness) > 0 {
		d.slowness = func(t time.Duration) float64 { return float64(At(sc.Slowness, t)) / 100 }
	}
	rec := &Recorder{inner: c, epoch: epoch, env: func(t time.Duration) (int, int) {
		return At(sc.Capacity, t), At(sc.Clients, t)
	}}
	gate := newGate(sc.Start, rec)

	clients := 0
	for _, s := range sc.Clients {
		clients = max(clients, s.N)
	}
	counts := make([]struct{ calls, drops, rejected int64 }, clients)
	var wg sync.WaitGroup
	for i := range clients {
		cl := &client{res: time.Duration(i), epoch: epoch, rng: rand.New(rand.NewPCG(sc.Seed, uint64(i)))}
		wg.Go(func() {
			ct := &counts[i]
			cl.sleepUntil(0)
			for {
				now := cl.now()
				if now >= sc.Duration {
					return
				}
				if i >= At(sc.Clients, now) { // not offering load now: wait for the next step
					next := sc.Duration
					for _, s := range sc.Clients {
						if s.At > now {
							next = s.At
							break
						}
					}
					cl.sleepUntil(next)
					continue
				}
				ran := false
				err := gate.Do(context.Background(), func(ctx context.Context) error {
					ran = true
					return d.call(ctx, cl)
				})
				switch {
				case !ran:
					ct.rejected++
					cl.sleep(time.Duration(float64(sc.Server.Service) * (1 + 2*cl.rng.Float64())))
					continue
				case Overload(err):
					ct.drops++
				}
				ct.calls++
				cl.sleep(sc.Think)
			}
		})
	}
	wg.Wait()
	tr := &Trace{Scenario: sc, Records: rec.Records()}
	for _, ct := range counts {
		tr.Calls += ct.calls
		tr.Drops += ct.drops
		tr.Rejected += ct.rejected
	}
	return tr
}

// A client is one goroutine of offered load. It wakes only at instants congruent to res modulo
// maxClients nanoseconds, so no two clients ever wake at once.
type client struct {
	res   time.Duration
	epoch time.Time
	rng   *rand.Rand
}

func (c *client) now() time.Duration { return time.Since(c.epoch) }

// sleepUntil sleeps until the first instant of c's own at or after t.
func (c *client) sleepUntil(t time.Duration) {
	at := t - t%maxClients + c.res
	if at < t {
		at += maxClients
	}
	if d := at - c.now(); d > 0 {
		time.Sleep(d)
	}
}

// sleep sleeps for about d, to an instant of c's own.
func (c *client) sleep(d time.Duration) { c.sleepUntil(c.now() + d) }
