//go:build unix

package bench_test

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time the process has used so far, user and system, on every thread: the
// cost of a benchmark's work that other load on the machine does not inflate, as it does wall
// time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
