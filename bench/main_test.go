package bench_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks, after every benchmark of the run, that none left a goroutine behind: a peer
// that leaks would otherwise slow the benchmarks after it. The goroutines running before the
// first benchmark are ignored: ants starts a default pool of its own when it is initialized.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, goleak.IgnoreCurrent()) }

// sized returns n, or small under -short (a smoke run: the benchmark runs, its figure is not
// worth quoting).
func sized(n, small int) int {
	if testing.Short() {
		return small
	}
	return n
}
