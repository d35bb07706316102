package sim_test

import (
	"flag"
	"fmt"
	"testing"

	"github.com/goloom/loom/internal/sim"
)

var seeds = flag.Int("sim.seeds", 0, "also run every scenario with this many other seeds and report the misses")

// TestSeeds runs the claims of TestScenarios and TestFailures with -sim.seeds other seeds each
// (it takes a minute for 20), and fails if any run misses; it prints one line per scenario and
// controller. It is off by default: the committed seeds are the ones CI checks.
//
//	go test ./internal/sim -run TestSeeds -sim.seeds=20 -v
func TestSeeds(t *testing.T) {
	if *seeds == 0 {
		t.Skip("set -sim.seeds=N to sweep N seeds")
	}
	for _, b := range builtins {
		for _, sc := range scenarios {
			misses := 0
			for i := 1; i <= *seeds; i++ {
				s := sc.Scenario
				s.Seed = uint64(i) * 7919
				if !t.Run(fmt.Sprint(b.name, "/", sc.Name, "/", s.Seed), func(t *testing.T) {
					tr := sim.Simulate(t, s, b.c, sim.NewSemaGate)
					neverOutside(t, tr, b.min, 500)
					sc.check(t, tr)
				}) {
					misses++
				}
			}
			t.Logf("SEEDS %-8s %-30s %d of %d missed", b.name, sc.Name, misses, *seeds)
		}
	}
	for _, f := range failures {
		for _, name := range f.builtins {
			b := builtin(t, name)
			misses := 0
			for i := 1; i <= *seeds; i++ {
				s := f.scenario
				s.Seed = uint64(i) * 7919
				if figure, ok := f.measure(sim.Simulate(t, s, b.c, sim.NewSemaGate)); !ok {
					misses++
					t.Errorf("%s, %s, seed %d: %s", name, s.Name, s.Seed, figure)
				}
			}
			t.Logf("SEEDS %-8s %-30s %d of %d missed", name, f.scenario.Name, misses, *seeds)
		}
	}
}
