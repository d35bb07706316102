package redisfleet

import (
	"math"
	"time"
)

// microsToDuration converts microseconds to a Duration, saturating instead of overflowing.
func microsToDuration(us int64) time.Duration {
	if us > math.MaxInt64/int64(time.Microsecond) {
		return math.MaxInt64
	}
	return time.Duration(us) * time.Microsecond
}
