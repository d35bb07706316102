package redisfleet

import (
	"strings"
	"sync"
)

// The keys of one name. Every key and the channel carry the escaped name as their hash tag
// ("{...}"), so in a Cluster they all live in one slot and a script may touch them together.
//
//	fleet:{NAME}:s     hash: the state (see scripts.go). b: eleven fields, packed — the epoch,
//	                   the pause and its reason, the last token, the queue length, a lower bound
//	                   of the earliest lease expiry, when a script last trusted the state, the
//	                   longest TTL in use and until when, the queue's arrival counter, the
//	                   server run that last confirmed the state; h: the summed weight of the
//	                   leases (plus 2^52 while anyone is queued)
//	fleet:{NAME}:l     sorted set: lease member → expiry (µs)
//	fleet:{NAME}:q     sorted set: queued member → arrival number
//	fleet:{NAME}:qx    hash: queued member → "DEATH TTL PUSH" (hexadecimal µs: when its entry dies
//	                   unless asked about again, the lease TTL it asks for; whether its asker
//	                   listens for its grant)
//	fleet:{NAME}:rate  string: the rate bucket's theoretical arrival time (µs)
//	fleet:{NAME}:w:INSTANCE  the channel on which the Semaphore INSTANCE hears its grants
//
// A member is "ID:CAPACITY:N": the scripts read the weight and the asker's capacity from it, and
// the instance from the ID (up to its first ".").
type names struct {
	sem    []string // s, l, q, qx: KEYS of the semaphore scripts, in that order
	rate   []string // rate: KEYS of the rate scripts
	prefix string   // "fleet:{NAME}:", of the channels
}

// channel returns the channel of a Semaphore instance's grants.
func (k *names) channel(inst string) string { return k.prefix + "w:" + inst }

var cache sync.Map // name → *names

func keysOf(name string) *names {
	if k, ok := cache.Load(name); ok {
		return k.(*names)
	}
	p := "fleet:{" + escape(name) + "}:"
	k := &names{
		sem:    []string{p + "s", p + "l", p + "q", p + "qx"},
		rate:   []string{p + "rate"},
		prefix: p,
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
