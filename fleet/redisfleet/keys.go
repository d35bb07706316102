package redisfleet

import (
	"strings"
	"sync"
)

// The keys of one name. Every key and the channel carry the escaped name as their hash tag
// ("{...}"), so in a Cluster they all live in one slot and a script may touch them together.
//
//	fleet:{NAME}:m     hash: born (the epoch, µs), qt (no new grants before it, µs), tok (the last
//	                   token), held (summed weight of the leases), nq (queue length), mexp (a
//	                   lower bound of the earliest lease expiry, µs), seq (arrival counter)
//	fleet:{NAME}:l     sorted set: lease member → expiry (µs)
//	fleet:{NAME}:q     sorted set: queued member → arrival number
//	fleet:{NAME}:qe    sorted set: queued member → expiry of its queue entry (µs)
//	fleet:{NAME}:rate  string: the rate bucket's theoretical arrival time (µs)
//	fleet:{NAME}:wake  the channel on which the head of the queue is told it fits
//
// A member is "ID:CAPACITY:N": the scripts read the weight and the asker's capacity from it.
type names struct {
	sem     []string // m, l, q, qe: KEYS of the semaphore scripts, in that order
	rate    []string // rate: KEYS of the rate scripts
	channel string
}

var cache sync.Map // name → *names

func keysOf(name string) *names {
	if k, ok := cache.Load(name); ok {
		return k.(*names)
	}
	p := "fleet:{" + escape(name) + "}:"
	k := &names{
		sem:     []string{p + "m", p + "l", p + "q", p + "qe"},
		rate:    []string{p + "rate"},
		channel: p + "wake",
	}
	cache.Store(name, k)
	return k
}

// escape makes name safe as a hash tag: it may hold no brace (a "}" would end the tag early, and
// a leading one would make it empty, so that Redis hashes the whole key), so braces and the
// escape character itself are percent-encoded. Distinct names stay distinct.
func escape(name string) string {
	if !strings.ContainsAny(name, "%{}") {
		return name
	}
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		switch c := name[i]; c {
		case '%':
			b.WriteString("%25")
		case '{':
			b.WriteString("%7B")
		case '}':
			b.WriteString("%7D")
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
