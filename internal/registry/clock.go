package registry

import "time"

// epoch is the origin of the monotonic readings the records keep.
var epoch = time.Now()

// now returns a monotonic reading: nanoseconds since epoch, in the calling goroutine's time (a
// synctest bubble has its own). One clock read, where time.Now takes two. Readings are only ever
// subtracted from readings taken in the same time, so ages are right in a bubble too.
func now() int64 { return int64(time.Since(epoch)) }
