package limiter_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/limiter"
	"github.com/goloom/loom/limiter/adaptive"
)

// script is a Controller that returns its limits one window at a time and keeps the windows.
type script struct {
	mu      sync.Mutex
	limits  []int
	windows []adaptive.Window
}

func (s *script) Update(w adaptive.Window) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.windows = append(s.windows, w)
	if len(s.limits) == 0 {
		return w.Limit
	}
	next := s.limits[0]
	s.limits = s.limits[1:]
	return next
}

func (s *script) seen() []adaptive.Window {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]adaptive.Window(nil), s.windows...)
}

// calls keeps n goroutines calling l until stop, each call taking d and returning what fn says.
func calls(t *testing.T, l *limiter.Limiter, n int, d time.Duration, fn func() error, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				_ = l.Do(context.Background(), func(context.Context) error { time.Sleep(d); return fn() })
			}
		})
	}
	return &wg
}

// "Stats().Limit moves; Stats().LimitChanges counts moves; a slog record at Debug per change."
// The controller is asked once per window (never per call) by the call that closes it, and the
// limit it returns is the limiter's.
func TestWithAdaptiveMovesTheLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		c := &script{limits: []int{6, 6, 3, 8}}
		l := limiter.New(4, limiter.WithAdaptive(c), limiter.WithName("api"),
			limiter.WithLogger(slog.New(rec)))
		assert.Equal(t, 4, l.Stats().Limit, "the starting limit")
		stop := make(chan struct{})
		wg := calls(t, l, 10, 10*time.Millisecond, func() error { return nil }, stop)
		time.Sleep(10 * time.Second)
		close(stop)
		wg.Wait()

		windows := c.seen()
		require.GreaterOrEqual(t, len(windows), 5)
		assert.Equal(t, 4, windows[0].Limit, "the first window ran at the starting limit")
		assert.Equal(t, []int{6, 6, 3, 8}, []int{windows[1].Limit, windows[2].Limit, windows[3].Limit, windows[4].Limit},
			"each window ran at the limit the previous one set")
		s := l.Stats()
		assert.Equal(t, 8, s.Limit)
		assert.Equal(t, int64(3), s.LimitChanges, "4→6, 6→3, 3→8: a window that keeps the limit is no move")
		var moves []string
		for _, r := range rec.all() {
			if r.Message == "limiter: limit changed" {
				assert.Equal(t, slog.LevelDebug, r.Level)
				a := attrs(r)
				assert.Equal(t, "api", a["limiter"].String())
				moves = append(moves, a["from"].String()+"→"+a["to"].String())
			}
		}
		assert.Equal(t, []string{"4→6", "6→3", "3→8"}, moves, "one record per move")
		atRest(t, l)
	})
}

// "the limit moves through the FIFO core's SetCapacity, so waiters are admitted in order as it
// grows and running tasks are never interrupted when it shrinks."
func TestWithAdaptiveShrinkNeverInterrupts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &script{limits: []int{1}}
		l := limiter.New(5, limiter.WithAdaptive(c))
		release := make(chan struct{})
		var interrupted atomic.Int32
		var wg sync.WaitGroup
		for range 4 { // four long tasks hold four slots
			wg.Go(func() {
				_ = l.Do(context.Background(), func(ctx context.Context) error {
					<-release
					if ctx.Err() != nil {
						interrupted.Add(1)
					}
					return nil
				})
			})
		}
		synctest.Wait()
		// Short calls through the fifth slot close the first window: the limit drops to 1
		// while the four run on.
		for i := 0; l.Stats().LimitChanges == 0; i++ {
			require.Less(t, i, 1000, "a thousand calls and the first window never closed")
			require.NoError(t, l.Do(context.Background(), func(context.Context) error { time.Sleep(50 * time.Millisecond); return nil }))
		}
		s := l.Stats()
		assert.Equal(t, 1, s.Limit)
		assert.Equal(t, 4, s.InFlight, "more held than the limit, until they come back")
		late := goDo(context.Background(), l, nil)
		assert.True(t, late.pending(), "a new call waits until the held slots are back below the limit")
		close(release)
		wg.Wait()
		require.NoError(t, <-late.err)
		assert.Zero(t, interrupted.Load(), "running tasks are never interrupted")
		atRest(t, l)
	})
}

// "WithOverload(func(error) bool) (which errors mean "the downstream is overloaded" — a drop;
// default: ErrTaskTimeout and context.DeadlineExceeded returned by fn)."
func TestWithOverloadSaysWhatADropIs(t *testing.T) {
	errBusy := errors.New("429 too many requests")
	for _, tt := range []struct {
		name  string
		opts  []limiter.Option
		err   error
		drops bool
	}{
		{"default: a deadline", nil, context.DeadlineExceeded, true},
		{"default: an ordinary error", nil, errBusy, false},
		{"WithOverload", []limiter.Option{limiter.WithOverload(func(err error) bool { return errors.Is(err, errBusy) })}, errBusy, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := &script{}
				l := limiter.New(4, append([]limiter.Option{limiter.WithAdaptive(c)}, tt.opts...)...)
				stop := make(chan struct{})
				wg := calls(t, l, 4, 5*time.Millisecond, func() error { return tt.err }, stop)
				time.Sleep(3 * time.Second)
				close(stop)
				wg.Wait()
				w := c.seen()
				require.NotEmpty(t, w)
				if tt.drops {
					assert.Positive(t, w[0].Drops)
					assert.Zero(t, w[0].Samples, "a drop is no RTT sample")
				} else {
					assert.Zero(t, w[0].Drops)
					assert.Positive(t, w[0].Samples, "an ordinary failure's RTT counts")
				}
			})
		})
	}
	t.Run("a task timeout is a drop", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c := &script{}
			l := limiter.New(4, limiter.WithAdaptive(c), limiter.WithTaskTimeout(time.Millisecond))
			stop := make(chan struct{})
			wg := calls(t, l, 4, 5*time.Millisecond, func() error { return nil }, stop)
			time.Sleep(3 * time.Second)
			close(stop)
			wg.Wait()
			require.NoError(t, l.Shutdown(t.Context())) // the overrunning tasks
			require.NotEmpty(t, c.seen())
			assert.Positive(t, c.seen()[0].Drops, "timed out, whatever fn returned")
		})
	})
}

func TestWithAdaptiveBadInput(t *testing.T) {
	assert.PanicsWithValue(t, "limiter: WithAdaptive: nil Controller", func() { limiter.WithAdaptive(nil) })
	assert.PanicsWithValue(t, "limiter: WithOverload: nil function", func() { limiter.WithOverload(nil) })
	assert.Panics(t, func() { limiter.New(4, limiter.WithAdaptive(adaptive.AIMD{Min: 5, Max: 2})) },
		"a misconfigured controller panics at New")
}

// "The adaptive start is clamped into the controller's [Min, Max]; Stats().Limit shows the
// clamped value." Regression: New(40, WithAdaptive(AIMD{Max: 5})) ran 40 at once.
func TestWithAdaptiveClampsTheStartingLimit(t *testing.T) {
	for _, tt := range []struct {
		name string
		c    adaptive.Controller
		give int
		want int
	}{
		{"AIMD above Max", adaptive.AIMD{Max: 5}, 40, 5},
		{"Vegas above Max", adaptive.Vegas{Max: 5}, 40, 5},
		{"Gradient above Max", adaptive.Gradient{Max: 5}, 40, 5},
		{"AIMD below Min", adaptive.AIMD{Min: 3, Max: 10}, 1, 3},
		{"Vegas below Min", adaptive.Vegas{Min: 3, Max: 10}, 1, 3},
		{"Gradient below Min", adaptive.Gradient{Min: 3, Max: 10}, 2, 3},
		{"the default Max", adaptive.AIMD{}, 5000, adaptive.DefaultMax},
		{"within the range", adaptive.AIMD{Min: 2, Max: 50}, 20, 20},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := limiter.New(tt.give, limiter.WithAdaptive(tt.c))
				assert.Equal(t, tt.want, l.Stats().Limit)
				var running, peak atomic.Int32
				release := make(chan struct{})
				var wg sync.WaitGroup
				for range tt.want + 5 {
					wg.Go(func() {
						_ = l.Do(t.Context(), func(context.Context) error {
							r := running.Add(1)
							for p := peak.Load(); r > p && !peak.CompareAndSwap(p, r); p = peak.Load() {
							}
							<-release
							running.Add(-1)
							return nil
						})
					})
				}
				synctest.Wait()
				assert.Equal(t, int32(tt.want), peak.Load(), "calls running at once")
				assert.Equal(t, 5, l.Stats().Waiting)
				close(release)
				wg.Wait()
				atRest(t, l)
			})
		})
	}
}
