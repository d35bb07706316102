package sim

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/goloom/loom/limiter/adaptive"
)

// A Record is one window as the controller saw it, and what it made of it.
type Record struct {
	At       time.Duration   // when the window closed, since the run began
	Window   adaptive.Window // what the controller was given
	Next     int             // what it returned
	Capacity int             // the hidden capacity at that moment
	Clients  int             // the offered load at that moment
}

// A Recorder is a Controller that records every window it passes to the controller it wraps.
// It is a Starter: Start starts the wrapped controller (if that is a Starter) and returns the
// Recorder itself, so it records whichever gate drives it. Update panics if it is called
// concurrently, which a limiter must never do. Use one Recorder per run.
type Recorder struct {
	inner adaptive.Controller
	epoch time.Time                      // the run's start: Records' At counts from it
	env   func(time.Duration) (int, int) // capacity and clients at a moment

	busy    atomic.Bool
	mu      sync.Mutex
	records []Record
}

// NewRecorder returns a Recorder around c. Run makes its own; this is for gates tested by hand.
func NewRecorder(c adaptive.Controller) *Recorder {
	return &Recorder{inner: c, epoch: time.Now(), env: func(time.Duration) (int, int) { return 0, 0 }}
}

// Start implements [adaptive.Starter].
func (r *Recorder) Start(limit int) adaptive.Controller {
	if s, ok := r.inner.(adaptive.Starter); ok {
		r.inner = s.Start(limit)
	}
	return r
}

// Update passes w to the wrapped controller and records both.
func (r *Recorder) Update(w adaptive.Window) int {
	if !r.busy.CompareAndSwap(false, true) {
		panic("sim: Recorder: concurrent Update")
	}
	defer r.busy.Store(false)
	next := r.inner.Update(w)
	at := time.Since(r.epoch)
	c, n := r.env(at)
	r.mu.Lock()
	r.records = append(r.records, Record{At: at, Window: w, Next: next, Capacity: c, Clients: n})
	r.mu.Unlock()
	return next
}

// Records returns a copy of the records so far.
func (r *Recorder) Records() []Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Record(nil), r.records...)
}
