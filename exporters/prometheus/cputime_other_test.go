//go:build !unix

package prometheus_test

import "time"

func cpuTime() (time.Duration, bool) { return 0, false }
