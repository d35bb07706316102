package scope_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/goloom/loom/scope"
)

// FuzzStream ranges over a Stream of random elements — each succeeds, fails, panics or calls
// runtime.Goexit after its own delay, returning early when its context ends, or ignores its
// context (a stubborn success or panic) — under FailFast or AwaitAll, a limit of 1 to 4, with or
// without PanicsAsErrors, a consumer that may break out after some pair, and a parent
// cancellation or a WithTimeout deadline at a random time, in a synctest bubble. Every delay is
// distinct (whole seconds plus 2^i microseconds; the outside end falls on a half second), so the
// run's timeline is a function of the input: an event simulation of the consumer's loop (fork
// while the window has room, else wait for the head and yield it) predicts every pair, and
// whether and with what the range re-panics. The fuzzer checks the Stream against it, that no
// call is running once the range is over, and — through synctest — that nothing hangs or leaks.
//
// Input: byte 0 the policy (bit 0), PanicsAsErrors (bit 1), the limit (bits 2-3) and the outside
// end (bits 4-6: none, or that many seconds and a half; bit 7: a deadline instead of the
// parent); byte 1 the pair after which the consumer breaks (0: never); each further byte one
// element (kind = b % 8, delay = 1 + b/8 % 4 seconds).
func FuzzStream(f *testing.F) {
	for _, seed := range [][]byte{
		{0, 0, 0, 8, 16},            // every element succeeds
		{0x0c, 0, 3, 0, 3, 0, 3},    // Goexit under FailFast: the last pair
		{0x01, 0, 3, 0, 3, 0, 3, 0}, // Goexit under AwaitAll: every pair, in order
		{0x05, 0, 0, 1, 8, 1, 0},    // AwaitAll, limit 2: failures are pairs too
		{0x04, 0, 8, 1, 0, 0, 16},   // FailFast, limit 2: a failure cancels an element before it
		{0x00, 0, 0, 2, 0},          // a panic re-panics on the consumer's goroutine
		{0x02, 0, 0, 2, 0, 0},       // PanicsAsErrors: the panic is the last pair
		{0x03, 0, 2, 0, 2, 8},       // AwaitAll and PanicsAsErrors
		{0x0c, 2, 0, 8, 16, 24, 0},  // break after two pairs
		{0x08, 1, 5, 24, 0},         // break while a stubborn panic runs: Close re-panics it
		{0x24, 0, 8, 16, 24, 0, 8},  // the parent ends at 2.5 s
		{0xa5, 0, 24, 0, 8, 0},      // the deadline at 2.5 s, AwaitAll
		{0x31, 0, 1, 24, 4, 0, 0},   // AwaitAll: a failure, then the parent ends
		{0x14, 0, 13, 8, 0},         // a stubborn panic after the parent ended
		{0x0e, 0, 5, 0, 1, 2},       // a stubborn panic after a failure, as an error
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 2 || len(data) > 14 {
			return
		}
		synctest.Test(t, func(t *testing.T) { runStream(t, data) })
	})
}

// Element kinds (b % 8); 6 and 7 succeed too.
const (
	streamSucceed = iota
	streamFail
	streamPanic
	streamGoexit
	streamStubborn      // ignores its context, then succeeds
	streamStubbornPanic // ignores its context, then panics
)

type streamElem struct {
	i, kind int
	d       time.Duration
}

func (e streamElem) run(ctx context.Context) (int, error) {
	if e.kind == streamStubborn || e.kind == streamStubbornPanic {
		time.Sleep(e.d)
	} else {
		select {
		case <-time.After(e.d):
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	switch e.kind {
	case streamFail:
		return 0, fmt.Errorf("fail-%d", e.i)
	case streamPanic, streamStubbornPanic:
		panic(fmt.Sprintf("panic-%d", e.i))
	case streamGoexit:
		runtime.Goexit()
	}
	return e.i, nil
}

// streamModel simulates one range over the Stream.
type streamModel struct {
	elems          []streamElem
	n, breakAt     int
	awaitAll       bool
	panicsAsErrors bool
	outsideAt      time.Duration // 0: none
	outside        string        // the outside end's cause

	now       time.Duration
	cancelled bool
	cause     string
	running   map[int]time.Duration // element -> when it completes
	state     []scope.State         // Running until done
	errs      []string
	decided   []bool // the element's completion ended the scope
	panics    []int  // elements that panicked, in time order
	pairs     []string
}

func (m *streamModel) errOf(e streamElem) string {
	switch e.kind {
	case streamFail:
		return fmt.Sprintf("fail-%d", e.i)
	case streamGoexit:
		return scope.ErrGoexit.Error()
	}
	return fmt.Sprintf("panic-%d", e.i)
}

// cancel ends the scope now: the elements that watch their context return at once, Cancelled.
func (m *streamModel) cancel(cause string) {
	if m.cancelled {
		return
	}
	m.cancelled, m.cause = true, cause
	for k := range m.running {
		if kind := m.elems[k].kind; kind != streamStubborn && kind != streamStubbornPanic {
			delete(m.running, k)
			m.state[k], m.errs[k] = scope.Cancelled, cause
		}
	}
}

// step processes the next event — a completion or the outside end — and reports whether there
// was one.
func (m *streamModel) step() bool {
	k, at := -1, time.Duration(0)
	for i, end := range m.running {
		if k < 0 || end < at {
			k, at = i, end
		}
	}
	if m.outsideAt > 0 && !m.cancelled && (k < 0 || m.outsideAt < at) {
		m.now = max(m.now, m.outsideAt)
		m.outsideAt = 0
		m.cancel(m.outside)
		return true
	}
	if k < 0 {
		return false
	}
	m.now = at
	delete(m.running, k)
	e := m.elems[k]
	switch {
	case e.kind == streamStubbornPanic:
		m.panics = append(m.panics, k)
		m.state[k], m.errs[k] = scope.Failed, m.errOf(e)
		if !m.cancelled {
			m.decided[k] = true
			m.cancel(m.errOf(e))
		}
	case m.cancelled: // a stubborn success after the end
		m.state[k], m.errs[k] = scope.Cancelled, m.cause
	case e.kind == streamPanic:
		m.panics = append(m.panics, k)
		m.state[k], m.errs[k], m.decided[k] = scope.Failed, m.errOf(e), true
		m.cancel(m.errOf(e))
	case e.kind == streamFail || e.kind == streamGoexit:
		m.state[k], m.errs[k] = scope.Failed, m.errOf(e)
		if !m.awaitAll {
			m.decided[k] = true
			m.cancel(m.errOf(e))
		}
	default:
		m.state[k] = scope.Succeeded
	}
	return true
}

func (m *streamModel) fork(k int) {
	if m.cancelled {
		m.state[k], m.errs[k] = scope.Cancelled, m.cause
		return
	}
	m.running[k] = m.now + m.elems[k].d
}

// emit waits for element k and yields it; false ends the range.
func (m *streamModel) emit(k int) bool {
	for m.state[k] == scope.Running {
		if !m.step() {
			panic("model: the head never completes")
		}
	}
	pair := func(s string) bool {
		m.pairs = append(m.pairs, s)
		return len(m.pairs) != m.breakAt
	}
	switch m.state[k] {
	case scope.Succeeded:
		return pair(fmt.Sprint(k))
	case scope.Failed:
		if m.elems[k].kind == streamPanic || m.elems[k].kind == streamStubbornPanic {
			if !m.panicsAsErrors {
				return false
			}
		}
		return pair("error: "+m.errs[k]) && !m.decided[k]
	}
	if len(m.panics) > 0 && !m.panicsAsErrors {
		return false
	}
	pair("error: " + m.errs[k])
	return false
}

// run is the consumer's loop, then Close's wait; it returns the value the range re-panics with,
// or "".
func (m *streamModel) run() string {
	m.running = map[int]time.Duration{}
	m.state = make([]scope.State, len(m.elems))
	m.errs = make([]string, len(m.elems))
	m.decided = make([]bool, len(m.elems))
	head, tail := 0, 0
	ranged := func() bool {
		for ; tail < len(m.elems); tail++ {
			if tail-head == m.n {
				if !m.emit(head) {
					return false
				}
				head++
			}
			m.fork(tail)
		}
		for ; head < tail; head++ {
			if !m.emit(head) {
				return false
			}
		}
		return true
	}
	if !ranged() {
		m.cancel("context canceled") // Close, if anything still runs
	}
	for m.step() { // Close (or Join) waits for every call
	}
	if len(m.panics) > 0 && !m.panicsAsErrors {
		return fmt.Sprintf("panic-%d", m.panics[0])
	}
	return ""
}

func runStream(t *testing.T, data []byte) {
	m := &streamModel{
		awaitAll:       data[0]&1 != 0,
		panicsAsErrors: data[0]&2 != 0,
		n:              1 + int(data[0]>>2)&3,
		breakAt:        int(data[1]),
	}
	if at := int(data[0]>>4) & 7; at > 0 {
		m.outsideAt = time.Duration(at)*time.Second + 500*time.Millisecond
	}
	deadline := data[0]&0x80 != 0 && m.outsideAt > 0
	for i, b := range data[2:] {
		m.elems = append(m.elems, streamElem{i: i, kind: int(b % 8), d: time.Duration(1+int(b/8)%4)*time.Second + time.Duration(1<<i)*time.Microsecond})
	}
	opts := []scope.Option{scope.WithLimit(m.n)}
	if m.awaitAll {
		opts = append(opts, scope.AwaitAll())
	}
	if m.panicsAsErrors {
		opts = append(opts, scope.PanicsAsErrors())
	}
	parent, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	errParent := errors.New("parent gone")
	switch {
	case deadline:
		m.outside = scope.ErrTimeout.Error()
		opts = append(opts, scope.WithTimeout(m.outsideAt))
	case m.outsideAt > 0:
		m.outside = errParent.Error()
		time.AfterFunc(m.outsideAt, func() { cancel(errParent) })
	}
	wantPanic := m.run()
	where := fmt.Sprintf("AwaitAll %v, PanicsAsErrors %v, limit %d, break after %d, outside end at %v (%s), elements %v",
		m.awaitAll, m.panicsAsErrors, m.n, m.breakAt, m.outsideAt, m.outside, m.elems)

	var live atomic.Int32
	var got []string
	r := catch(func() {
		for v, err := range scope.Stream(parent, slices.Values(m.elems), func(ctx context.Context, e streamElem) (int, error) {
			live.Add(1)
			defer live.Add(-1)
			return e.run(ctx)
		}, opts...) {
			if err != nil {
				var pe *scope.PanicError
				if errors.As(err, &pe) {
					got = append(got, fmt.Sprintf("error: %v", pe.Value))
				} else {
					got = append(got, "error: "+err.Error())
				}
			} else {
				got = append(got, fmt.Sprint(v))
			}
			if len(got) == m.breakAt {
				break
			}
		}
	})
	if live.Load() != 0 {
		t.Fatalf("%s: %d calls still running after the range", where, live.Load())
	}
	if !slices.Equal(got, m.pairs) {
		t.Fatalf("%s:\npairs %q\nwant  %q", where, got, m.pairs)
	}
	switch pe, _ := r.(*scope.PanicError); {
	case wantPanic == "" && r != nil:
		t.Fatalf("%s: unexpected panic %v", where, r)
	case wantPanic != "" && (pe == nil || pe.Value != wantPanic):
		t.Fatalf("%s: recovered %v, want %s", where, r, wantPanic)
	}
}
