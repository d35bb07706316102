// Package window turns a limiter's calls into the windows an [adaptive.Controller] reads, and
// applies the limits it returns: the machinery behind an adaptive limiter, kept apart from the
// limiter so that the simulation harness runs the code the limiter runs.
//
// A limiter holds one [Meter]. Each call that got a slot calls [Meter.Begin] as its task starts
// and [Meter.End] when the task has returned, with how it went ([OK], [Drop] or [Ignore]) and
// how many slots were held. That is all:
//
//	mk := m.Begin()            // after the slot is acquired
//	err := fn(ctx)
//	n := slots.Capacity() - slots.Available()
//	release()
//	if to := m.End(mk, outcome(err), n); to != 0 {
//		log the move to to (m.Last() is the window that made it; its Limit, the old one)
//	}
//
// # Cost
//
// Begin draws from the runtime's per-thread random source and reads the sampling rate (one
// atomic load), so concurrent calls write no shared memory; 1 call in k also reads the clock.
// k is a power of two, chosen at each window so that a window gets about 2×MinSamples samples,
// and doubled at once whenever a window gathers 256 samples before it is due (the first window,
// a surge). End, for a call that was not sampled, is one atomic load (the highest in-flight
// count of the window), plus an atomic add when the call was a drop. Only a sampled call takes
// the Meter's mutex, to record its RTT and to close the window when it is due: no goroutine,
// no timer.
//
// # Windows
//
// A window holds the calls that ended since the previous window closed: its RTT samples, its
// drops, its highest in-flight count, and an estimate of how many they were (each sampled call
// stands for k). A sampled End closes the window when it is at least MinDuration old (and as
// old as the last window's median RTT) and holds at least MinSamples samples (drops included;
// at small limits fewer: one per slot, at least 8), one of them a successful call (all of them,
// for the first window); or when it is MaxDuration old and holds at least one. Closing calls the controller's Update
// once, under the mutex, so windows and updates are strictly ordered; the new limit is applied
// to the [Capacity] under the same mutex, so the capacity always ends up at the latest limit
// however the closing calls race.
package window

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goloom/loom/limiter/adaptive"
)

// An Outcome is how a call ended, as far as the controller is concerned.
type Outcome uint8

const (
	// OK is a call whose RTT means something: it succeeded, or failed in the ordinary way.
	OK Outcome = iota
	// Drop is a call that failed because the downstream was overloaded (an overload error,
	// a timeout). It counts in Window.Drops and its running time in Window.DropShare.
	Drop
	// Ignore is a call that says nothing about the downstream: its caller gave up, it
	// panicked. It is neither a sample nor a drop.
	Ignore
)

// A Capacity is what a Meter moves: the FIFO core's SetCapacity.
type Capacity interface {
	SetCapacity(n int64)
}

// Config tunes the windows; a zero field means its default. The limiter uses the defaults.
type Config struct {
	MinDuration time.Duration // a window lasts at least this long; default 100 ms
	MaxDuration time.Duration // ... and closes after this long with one sample; default 1 s
	MinSamples  int           // ... or once it holds this many; default 32
	// Deterministic samples every k-th call by a counter instead of at random, so that calls
	// made in the same order are sampled the same way: for simulations that must repeat
	// exactly. It costs an atomic add on one shared word per call.
	Deterministic bool
}

const (
	defaultMinDuration = 100 * time.Millisecond
	defaultMaxDuration = time.Second
	defaultMinSamples  = 32
	minSamplesFloor    = 8 // the fewest samples a window needs before MaxDuration, however small the limit

	// ringSize bounds the RTTs a window keeps: past it, the latest ringSize are kept. The
	// sampling rate keeps windows near 2×MinSamples, so only a sudden surge overflows.
	ringSize = 256
	// maxShift caps k at 1<<maxShift: at 10, a million calls a second still give 10 000
	// samples a second.
	maxShift = 10
	// markShift is how many low bits of a Mark hold the sampling shift.
	markShift = 4
)

// A Mark is what Begin hands to End: for a sampled call, when it started (nanoseconds since the
// Meter's base, plus one) above markShift bits and the sampling shift in force (k = 1<<shift)
// below them; 0 for a call that is not sampled.
type Mark int64

// Sampled reports whether the call's RTT is measured.
func (mk Mark) Sampled() bool { return mk != 0 }

// A Meter aggregates calls into windows and applies the controller's limits. It is safe for
// concurrent use; create one with [New].
type Meter struct {
	// The hot words, together, read by every call: Begin reads shift, End reads maxInFlight.
	shift       atomic.Uint64 // 1 call in 1<<shift is sampled
	maxInFlight atomic.Int64  // the most in flight seen by calls ending in this window
	ticket      atomic.Uint64 // calls begun, with Config.Deterministic only
	drops       atomic.Int64  // drops ending in this window
	limit       atomic.Int64  // the limit in force
	changes     atomic.Int64  // how many times the limit moved

	mu       sync.Mutex
	ctrl     adaptive.Controller
	sink     Capacity
	cfg      Config
	base     time.Time
	start    int64 // when the window opened, in nanoseconds since base, plus one
	calls    int   // calls ended in this window, estimated: each sampled one counts 1<<shift
	nrtt     int   // samples recorded in this window (the ring keeps the latest ringSize)
	nDrops   int   // sampled drops in this window
	okTime   int64 // running time of the sampled OK calls
	dropTime int64 // running time of the sampled drops
	rtts     [ringSize]int64
	scratch  [ringSize]int64
	lastP50  int64           // the median RTT of the last window with samples
	last     adaptive.Window // the window that made the latest move
}

// New returns a Meter that starts at limit and moves sink, which must already be at limit. If c
// is [adaptive.Bounded], limit is first clamped into its bounds and sink moved there (see
// [Start]); if c is an [adaptive.Starter], the Meter uses c.Start with that limit. A
// misconfigured controller panics here. It panics if c or sink is nil or limit is below 1.
func New(c adaptive.Controller, limit int, sink Capacity, cfg Config) *Meter {
	if c == nil {
		panic("window: New: nil controller")
	}
	if sink == nil {
		panic("window: New: nil capacity")
	}
	if limit < 1 {
		panic(fmt.Sprintf("window: New: limit must be at least 1, got %d", limit))
	}
	if start := Start(c, limit); start != limit {
		limit = start
		sink.SetCapacity(int64(limit))
	}
	if s, ok := c.(adaptive.Starter); ok {
		c = s.Start(limit)
	}
	if cfg.MinDuration <= 0 {
		cfg.MinDuration = defaultMinDuration
	}
	if cfg.MaxDuration <= 0 {
		cfg.MaxDuration = defaultMaxDuration
	}
	if cfg.MaxDuration < cfg.MinDuration {
		cfg.MaxDuration = cfg.MinDuration
	}
	if cfg.MinSamples <= 0 {
		cfg.MinSamples = defaultMinSamples
	}
	m := &Meter{ctrl: c, sink: sink, cfg: cfg, base: time.Now()}
	m.limit.Store(int64(limit))
	m.start = m.now()
	return m
}

// Start returns the limit a limiter given limit starts at under c: limit clamped into c's
// bounds if c is [adaptive.Bounded], else limit.
func Start(c adaptive.Controller, limit int) int {
	if b, ok := c.(adaptive.Bounded); ok {
		lo, hi := b.Bounds()
		return min(max(limit, lo), hi)
	}
	return limit
}

// now is the time since m's base, as Mark.at: never 0.
func (m *Meter) now() int64 { return int64(time.Since(m.base)) + 1 }

// Limit returns the limit in force.
func (m *Meter) Limit() int { return int(m.limit.Load()) }

// Changes returns how many times the limit has moved.
func (m *Meter) Changes() int64 { return m.changes.Load() }

// Last returns the window that made the latest move of the limit (the zero Window before the
// first move).
func (m *Meter) Last() adaptive.Window {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last
}

// Begin is called when a call's task starts, after its slot is acquired, and returns the Mark
// to pass to End. It never blocks; 1 call in k reads the clock.
func (m *Meter) Begin() Mark {
	shift := m.shift.Load()
	var r uint64
	if m.cfg.Deterministic {
		r = m.ticket.Add(1)
	} else {
		r = rand.Uint64()
	}
	if r&(1<<shift-1) != 0 {
		return 0
	}
	return m.sampledMark(shift)
}

// sampledMark is Begin's mark for a sampled call; kept out of line so that Begin stays small.
//
//go:noinline
func (m *Meter) sampledMark(shift uint64) Mark { return Mark(m.now()<<markShift | int64(shift)) }

// End is called when the task of a call that Begin marked has returned, with its outcome and
// the number of calls in flight at that moment, this one included (slots held, just before the
// slot is released, or just after plus one). It closes the window when this call is sampled
// and the window is due: the controller's Update runs then, on this goroutine, and the new
// limit is applied to the Capacity before End returns.
//
// End returns the new limit when this call moved it (the old one is [Meter.Last]'s Limit), and
// 0 when it did not. It never blocks but on the Meter's mutex, which only sampled calls take.
func (m *Meter) End(mk Mark, o Outcome, inFlight int64) (moved int) {
	// The common call, neither sampled nor a drop nor a new high, is this one load and test.
	if mk != 0 || o == Drop || inFlight > m.maxInFlight.Load() {
		return m.endSlow(mk, o, inFlight)
	}
	return 0
}

// endSlow is End for a call that has something to record.
func (m *Meter) endSlow(mk Mark, o Outcome, inFlight int64) int {
	if inFlight > m.maxInFlight.Load() {
		m.raiseInFlight(inFlight)
	}
	if o == Drop {
		m.drops.Add(1)
	}
	if mk == 0 {
		return 0
	}
	return m.endSampled(mk, o)
}

func (m *Meter) raiseInFlight(n int64) {
	for {
		cur := m.maxInFlight.Load()
		if n <= cur || m.maxInFlight.CompareAndSwap(cur, n) {
			return
		}
	}
}

// endSampled records a sampled call and closes the window if it is due; it returns the new
// limit if the window moved it, else 0.
func (m *Meter) endSampled(mk Mark, o Outcome) int {
	now := m.now()
	rtt := now - int64(mk)>>markShift
	m.mu.Lock()
	defer m.mu.Unlock() // a panicking controller must not leave the Meter locked
	m.calls += 1 << (int64(mk) & (1<<markShift - 1))
	switch o {
	case OK:
		m.rtts[m.nrtt%ringSize] = rtt
		m.nrtt++
		m.okTime += rtt
	case Drop:
		m.nDrops++
		m.dropTime += rtt
	}
	age, n := now-m.start, m.nrtt+m.nDrops
	if o != Ignore && n%ringSize == 0 && age < int64(m.cfg.MinDuration) {
		// A ring of samples before the window is even due: the calls come faster than the
		// sampling rate was set for (the first window, a surge). Sample half as often from now
		// on; the window's close sets the rate properly.
		if shift := m.shift.Load(); shift < maxShift {
			m.shift.Store(shift + 1)
		}
	}
	// A small limit gets fewer samples a second: ask it for one per slot (at least 8), so that
	// its windows last about an RTT, not MaxDuration, and a limit cut low comes back quickly.
	need := min(m.cfg.MinSamples, max(minSamplesFloor, int(m.limit.Load())))
	// A window shorter than the calls it measures holds only the short ones (a window of fast
	// refusals while the successes are still running reads as an outage): it lasts at least
	// the last window's median RTT and closes early only with a successful call in it. The
	// first window, when all calls started together and no RTT is known, waits for need of
	// them: until then only the fastest have ended.
	minAge, okNeed := max(int64(m.cfg.MinDuration), m.lastP50), 1
	if m.lastP50 == 0 {
		okNeed = need
	}
	if !(age >= minAge && n >= need && m.nrtt >= okNeed || age >= int64(m.cfg.MaxDuration) && n >= 1) {
		return 0
	}
	w := m.close(now)
	to := m.ctrl.Update(w)
	to = max(to, 1) // a limit of 0 would stall the limiter for good
	to = min(to, adaptive.MaxLimit)
	if to == w.Limit {
		return 0
	}
	m.limit.Store(int64(to))
	m.sink.SetCapacity(int64(to))
	m.changes.Add(1)
	m.last = w
	return to
}

// close summarizes the open window, which ends at now, and opens the next one. m.mu is held.
func (m *Meter) close(now int64) adaptive.Window {
	w := adaptive.Window{
		Limit:       int(m.limit.Load()),
		Duration:    time.Duration(now - m.start),
		Calls:       m.calls,
		Samples:     m.nrtt,
		Drops:       int(m.drops.Swap(0)),
		MaxInFlight: int(m.maxInFlight.Swap(0)),
	}
	if total := m.okTime + m.dropTime; total > 0 {
		w.DropShare = float64(m.dropTime) / float64(total)
	}
	if kept := min(m.nrtt, ringSize); kept > 0 {
		s := m.scratch[:kept]
		copy(s, m.rtts[:kept])
		slices.Sort(s)
		w.MinRTT = time.Duration(s[0])
		w.P50 = time.Duration(s[rank(kept, 0.5)])
		w.P90 = time.Duration(s[rank(kept, 0.9)])
		m.lastP50 = int64(w.P50)
	}

	// The sampling rate for the next window: about 2×MinSamples samples per MinDuration at
	// this window's call rate.
	shift := 0
	if perMin := float64(w.Calls) * float64(m.cfg.MinDuration) / float64(max(w.Duration, 1)); perMin >= float64(4*m.cfg.MinSamples) {
		shift = min(bits.Len64(uint64(perMin/float64(2*m.cfg.MinSamples)))-1, maxShift)
	}
	m.start = now
	m.calls, m.nrtt, m.nDrops, m.okTime, m.dropTime = 0, 0, 0, 0, 0
	m.shift.Store(uint64(shift))
	return w
}

// rank is the nearest-rank index of the p-th quantile of n sorted values.
func rank(n int, p float64) int { return max(int(math.Ceil(p*float64(n)))-1, 0) }
