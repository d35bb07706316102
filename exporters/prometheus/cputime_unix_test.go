//go:build unix

package prometheus_test

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time the process has used, all its threads together: on a machine that
// other work shares, what a benchmark costs, where the wall clock also counts the waiting.
func cpuTime() (time.Duration, bool) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
