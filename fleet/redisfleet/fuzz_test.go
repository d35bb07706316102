package redisfleet_test

import (
	"strings"
	"testing"

	"github.com/goloom/loom/fleet"
	"github.com/goloom/loom/fleet/fleetdriver"
	"github.com/goloom/loom/fleet/redisfleet"
)

// FuzzKeys checks the keys made from any name: every key and the channel share one hash tag, the
// escaped name, which is never empty (so Redis Cluster puts them in one slot); distinct names
// never share a key; and a member's ID comes back out of it.
func FuzzKeys(f *testing.F) {
	for _, s := range []string{"api", "}", "{", "{}", "}{", "a{b}c", "%", "%7B", "{%7B}", "llm-api:eu", "\x00\xff"} {
		f.Add(s, "other")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		if a == "" || len(a) > fleet.MaxName {
			return
		}
		keys, channel := redisfleet.Keys(a)
		tag := redisfleet.HashTag(keys[0])
		if tag == "" || tag == keys[0] {
			t.Fatalf("%q: key %q has no hash tag", a, keys[0])
		}
		if tag != redisfleet.Escape(a) {
			t.Fatalf("%q: hash tag %q is not the escaped name %q", a, tag, redisfleet.Escape(a))
		}
		for _, k := range append(keys[1:], channel) {
			if got := redisfleet.HashTag(k); got != tag {
				t.Fatalf("%q: %q hashes %q, not %q", a, k, got, tag)
			}
		}
		if b != a && b != "" {
			other, _ := redisfleet.Keys(b)
			for i := range keys {
				if keys[i] == other[i] {
					t.Fatalf("names %q and %q share the key %q", a, b, keys[i])
				}
			}
		}
		id := a + ".1" // IDs are the Semaphore's, but the member must give back any ID
		m := redisfleet.Member(fleetdriver.Lease{ID: id, N: 3, Capacity: 40})
		if got := redisfleet.IDOf(m); got != id {
			t.Fatalf("member %q gives back ID %q, not %q", m, got, id)
		}
		if !strings.HasSuffix(m, ":40:3") {
			t.Fatalf("member %q", m)
		}
	})
}

// FuzzParseReplies feeds the reply parsers arbitrary replies, as a broken or hostile server
// might send: they return an error or a sound answer, and never panic.
func FuzzParseReplies(f *testing.F) {
	f.Add(int64(1), int64(1796122325506594), int64(1796122326041734), int64(0), "", 3)
	f.Add(int64(0), int64(333333), int64(1796122326041734), int64(0), "", 3)
	f.Add(int64(2), int64(-1), int64(0), int64(7), "x", 4)
	f.Add(int64(1), int64(0), int64(1796122326041734), int64(999), "1.5", 2)
	f.Add(int64(1), int64(1796122325506594), int64(1796122326041734), int64(0), "a.1:3:1 1796122325506594 1796122326041734", 8)
	f.Add(int64(0), int64(200000), int64(1796122326041734), int64(0), "a.1:3:1 0 1", 8)
	f.Fuzz(func(t *testing.T, a, b, c, d int64, s string, n int) {
		if n < 0 || n > 9 {
			return
		}
		all := []any{a, b, c, d, d, c, b, s, nil} // eight integers make an acquire reply
		if g, ok := redisfleet.ParseGrant(s); ok && (g.Token == 0 || g.ID == "" || g.N < 0 || g.Capacity < 0) {
			t.Fatalf("grant %q parsed as %+v", s, g)
		}
		v := all[:n]
		for behind := range 2 {
			if r, err := redisfleet.ParseAcquire(v, behind); err == nil {
				if r.Granted && r.Token == 0 || !r.Granted && r.RetryIn <= 0 || len(r.Behind) != behind {
					t.Fatalf("acquire reply %v parsed as %+v", v, r)
				}
			}
		}
		for behind := -1; behind <= 1; behind++ {
			if r, err := redisfleet.ParseRelease(v, behind); err == nil {
				if behind >= 0 && len(r.Then.Behind) != behind || r.Queued < 0 {
					t.Fatalf("release reply %v parsed as %+v", v, r)
				}
			}
		}
		if r, err := redisfleet.ParseRenew(v, n-1); err == nil {
			if len(r.Status) != n-1 {
				t.Fatalf("renew reply %v parsed as %+v", v, r)
			}
		}
		if r, err := redisfleet.ParseReserve(v); err == nil {
			if r.Delay < 0 || r.OK && r.Mark == "" {
				t.Fatalf("reserve reply %v parsed as %+v", v, r)
			}
		}
	})
}
