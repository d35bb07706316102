// Package kept is what an exporter keeps of each name between scrapes (Prometheus) or
// collections (OpenTelemetry): the things made once for a name, such as its label pairs or
// attribute sets, kept while the name is read at every scrape and forgotten at the first scrape
// that does not read it, so that what is kept does not grow with every limiter a process ever
// made. Both exporters keep their names through it.
package kept

// A Key is one name of one family: the label (or attribute) that names it, and the name.
type Key struct{ Label, Name string }

// Names keeps a V per Key. A scrape calls Begin, then Get for each name it reads, then End. It is
// not safe for concurrent use: the exporter serializes its scrapes.
type Names[V any] struct {
	scrape uint64            // the scrapes so far, the current one included
	seen   int               // the names the current scrape has read
	m      map[Key]*entry[V] // every name of the last scrape, and those of this one read so far
}

type entry[V any] struct {
	scrape uint64 // the last scrape that read the name
	v      V
}

// Begin starts a scrape.
func (n *Names[V]) Begin() {
	n.scrape++
	n.seen = 0
}

// Get returns what is kept of k, made by make if k was not read by the last scrape, and marks k
// as read by this one.
func (n *Names[V]) Get(k Key, make func() V) V {
	e, ok := n.m[k]
	if !ok {
		if n.m == nil {
			n.m = map[Key]*entry[V]{}
		}
		e = &entry[V]{v: make()}
		n.m[k] = e
	}
	if e.scrape != n.scrape {
		e.scrape = n.scrape
		n.seen++
	}
	return e.v
}

// End ends a scrape: the names it did not read are forgotten.
func (n *Names[V]) End() {
	if n.seen == len(n.m) {
		return
	}
	for k, e := range n.m {
		if e.scrape != n.scrape {
			delete(n.m, k)
		}
	}
}

// Keys returns the keys kept, for tests.
func (n *Names[V]) Keys() []Key {
	keys := make([]Key, 0, len(n.m))
	for k := range n.m {
		keys = append(keys, k)
	}
	return keys
}
