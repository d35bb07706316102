package inspect

import (
	"encoding/json"
	"expvar"
	"sync"
)

// expvarName is the name under which [Publish] exposes the dump.
const expvarName = "loom"

var publishMu sync.Mutex

// Publish exposes a fresh [Snapshot], as JSON, as the expvar variable "loom" (served with the
// others at /debug/vars once expvar is imported). Calling it again does nothing. It panics if
// other code has already published a variable named "loom".
func Publish() {
	publishMu.Lock()
	defer publishMu.Unlock()
	switch v := expvar.Get(expvarName); {
	case v == nil:
		expvar.Publish(expvarName, dumpVar{})
	case v != expvar.Var(dumpVar{}):
		panic(`inspect: Publish: an expvar named "loom" is already published`)
	}
}

// dumpVar is the expvar.Var of Publish: each read takes a snapshot.
type dumpVar struct{}

func (dumpVar) String() string {
	b, err := json.Marshal(Snapshot())
	if err != nil {
		b, _ = json.Marshal(map[string]string{"error": err.Error()})
	}
	return string(b)
}
