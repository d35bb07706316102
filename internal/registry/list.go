package registry

import "sync"

// The recorded scopes, spread over shards by id so that scopes opened and joined on different
// cores rarely meet on one mutex. Each shard is a doubly linked list through the Scopes.
const shardCount = 16

type shard struct {
	mu   sync.Mutex
	head *Scope
	_    [64 - 16]byte // one shard per cache line
}

var shards [shardCount]shard

func list(e *Scope) {
	sh := &shards[e.id%shardCount]
	sh.mu.Lock()
	e.listed = true
	e.snext = sh.head
	if sh.head != nil {
		sh.head.sprev = e
	}
	sh.head = e
	sh.mu.Unlock()
}

func unlist(e *Scope) {
	sh := &shards[e.id%shardCount]
	sh.mu.Lock()
	if e.listed {
		if e.sprev != nil {
			e.sprev.snext = e.snext
		} else {
			sh.head = e.snext
		}
		if e.snext != nil {
			e.snext.sprev = e.sprev
		}
		e.sprev, e.snext, e.listed = nil, nil, false
	}
	sh.mu.Unlock()
}

// listed returns every recorded scope, shard by shard, appended to buf.
func listed(buf []*Scope) []*Scope {
	for i := range shards {
		sh := &shards[i]
		sh.mu.Lock()
		for e := sh.head; e != nil; e = e.snext {
			buf = append(buf, e)
		}
		sh.mu.Unlock()
	}
	return buf
}
