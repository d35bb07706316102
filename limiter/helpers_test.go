package limiter_test

import (
	"context"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/goloom/loom/limiter"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) } // checks after all tests, so t.Parallel is fine

// goid returns the current goroutine's id, to tell where a task ran.
// runPaths are the two places a call's function runs: on the caller's goroutine, and, with a
// task timeout, on a goroutine of the limiter's own. A rule that must hold on both runs under each.
var runPaths = []struct {
	name string
	opts []limiter.Option
}{
	{"caller goroutine", nil},
	{"task timeout", []limiter.Option{limiter.WithTaskTimeout(time.Hour)}},
}

func goid() string {
	var buf [64]byte
	n := runtime.Stack(buf[:], false)
	return strings.Fields(string(buf[:n]))[1]
}

// holder is a task that holds a slot until released.
type holder struct {
	started chan struct{}
	release chan struct{}
	err     chan error
}

// hold starts a Do that takes a slot and keeps it until h.free is called; it returns once the
// task runs.
func hold(t *testing.T, l *limiter.Limiter) *holder {
	t.Helper()
	h := &holder{started: make(chan struct{}), release: make(chan struct{}), err: make(chan error, 1)}
	go func() {
		h.err <- l.Do(context.Background(), func(context.Context) error {
			close(h.started)
			<-h.release
			return nil
		})
	}()
	<-h.started
	return h
}

// free lets the held task return and waits for its Do.
func (h *holder) free(t *testing.T) {
	t.Helper()
	close(h.release)
	require.NoError(t, <-h.err)
}

// call is a Do running in a goroutine of its own; err receives what Do returned.
type call struct {
	ran bool // set by fn; read after err
	err chan error
}

// goDo starts l.Do(ctx, fn) in a goroutine and, in a synctest bubble, waits until it has
// settled (queued, running, or done), so that calls queue in the order goDo is called.
func goDo(ctx context.Context, l *limiter.Limiter, fn func(context.Context) error) *call {
	c := &call{err: make(chan error, 1)}
	go func() {
		c.err <- l.Do(ctx, func(ctx context.Context) error {
			c.ran = true
			if fn == nil {
				return nil
			}
			return fn(ctx)
		})
	}()
	synctest.Wait()
	return c
}

// pending reports whether the call has not returned yet; call it after synctest.Wait.
func (c *call) pending() bool { return len(c.err) == 0 }

// atRest asserts the conservation of Stats once nothing waits or runs.
func atRest(t *testing.T, l *limiter.Limiter) limiter.Stats {
	t.Helper()
	s := l.Stats()
	assert.Zero(t, s.InFlight, "InFlight at rest")
	assert.Zero(t, s.Waiting, "Waiting at rest")
	assert.Zero(t, s.Overrunning, "Overrunning at rest")
	assert.Equal(t, s.Submitted, s.Completed+s.Failed+s.Rejected+s.TimedOut+s.Cancelled,
		"Submitted == Completed+Failed+Rejected+TimedOut+Cancelled: %+v", s)
	return s
}

// outcomes is the counters of s, to compare against what a test expects.
type outcomes struct {
	Submitted, Completed, Failed, Rejected, TimedOut, Cancelled, Panicked int64
}

func outcomesOf(s limiter.Stats) outcomes {
	return outcomes{s.Submitted, s.Completed, s.Failed, s.Rejected, s.TimedOut, s.Cancelled, s.Panicked}
}

// recorder is a slog.Handler that keeps every record.
type recorder struct {
	mu      sync.Mutex
	records []slog.Record
	hook    func(slog.Record) // called, unlocked, for each record
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *recorder) WithGroup(string) slog.Handler            { return r }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	r.records = append(r.records, rec.Clone())
	hook := r.hook
	r.mu.Unlock()
	if hook != nil {
		hook(rec)
	}
	return nil
}

func (r *recorder) all() []slog.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]slog.Record(nil), r.records...)
}

// attrs returns a record's attributes by key.
func attrs(rec slog.Record) map[string]slog.Value {
	m := map[string]slog.Value{}
	rec.Attrs(func(a slog.Attr) bool {
		m[a.Key] = a.Value
		return true
	})
	return m
}

type ctxKey struct{}

// exactly asserts that err is want itself, not an error wrapping it.
func exactly(t *testing.T, want, err error, msgAndArgs ...any) bool {
	t.Helper()
	if err == want {
		return true
	}
	return assert.Fail(t, "not the very error expected", append([]any{"want %#v (%v), got %#v (%v)", want, want, err, err}, msgAndArgs...)...)
}
