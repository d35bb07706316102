package limiter_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/limiter"
)

// FuzzLimiter drives a limiter through a sequence of operations read from the input — blocking
// and ctx-heeding tasks through every entry point, releases, Future.Cancel, caller
// cancellations, the passing of time, failures, panics, Shutdown — on synctest's clock, and
// checks after every step that no more task bodies run than the limit, and at the end that the
// Stats add up and that every caller got an answer.
func FuzzLimiter(f *testing.F) {
	f.Add([]byte{0x00, 0, 0, 2, 3, 3})
	f.Add([]byte{0x11, 0, 1, 2, 0, 4, 0, 5, 3, 3, 3})
	f.Add([]byte{0x25, 0, 0, 0, 1, 1, 5, 5, 4, 1, 3, 6, 7, 3, 3})
	f.Add([]byte{0x3e, 2, 2, 2, 0, 8, 9, 5, 10, 3, 3, 4, 2, 11, 3, 3, 3})
	f.Add([]byte{0x7f, 0, 1, 2, 8, 9, 10, 11, 5, 5, 5, 7, 0, 1, 2, 3, 3, 3})
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 || len(in) > 64 {
			return
		}
		synctest.Test(t, func(t *testing.T) { runOps(t, in) })
	})
}

func runOps(t *testing.T, in []byte) {
	cfg, ops := in[0], in[1:]
	limit := 1 + int(cfg&3)
	var opts []limiter.Option
	if cfg&4 != 0 {
		opts = append(opts, limiter.WithAcquireTimeout(time.Duration(cfg>>6)*time.Second))
	}
	if cfg&8 != 0 {
		opts = append(opts, limiter.WithMaxWaiting(int(cfg>>5&3)))
	}
	if cfg&16 != 0 {
		opts = append(opts, limiter.WithTaskTimeout(time.Duration(1+cfg>>6)*time.Second))
	}
	l := limiter.New(limit, opts...)
	var g gauge
	var blockers []chan struct{} // released in order by op 3
	var futures []*limiter.Future[int]
	var cancels []context.CancelFunc
	var answers []chan error // one per Do and Call; futures answer through Wait
	calls := 0
	errX := errors.New("x")

	blocker := func() func(context.Context) error {
		release := make(chan struct{})
		blockers = append(blockers, release)
		return func(context.Context) error {
			g.enter()
			defer g.exit()
			<-release // ignores its ctx
			return nil
		}
	}
	heeder := func(ctx context.Context) error {
		g.enter()
		defer g.exit()
		<-ctx.Done() // released by a cancel, a timeout, or Shutdown's end of everything
		return ctx.Err()
	}
	ctxFor := func() context.Context {
		ctx, cancel := context.WithCancel(context.Background())
		cancels = append(cancels, cancel)
		return ctx
	}
	submit := func(fn func(context.Context) error) {
		calls++
		futures = append(futures, limiter.Submit(ctxFor(), l, func(ctx context.Context) (int, error) { return 0, fn(ctx) }))
	}
	do := func(fn func(context.Context) error) {
		calls++
		ctx := ctxFor()
		ch := make(chan error, 1)
		answers = append(answers, ch)
		go func() { ch <- l.Do(ctx, fn) }()
	}
	call := func(fn func(context.Context) error) {
		calls++
		ctx := ctxFor()
		ch := make(chan error, 1)
		answers = append(answers, ch)
		go func() {
			_, err := limiter.Call(ctx, l, func(ctx context.Context) (int, error) { return 0, fn(ctx) })
			ch <- err
		}()
	}
	pick := func(i, n int) int { return int(ops[i]>>4) % n }

	for i, op := range ops {
		switch op & 15 {
		case 0:
			submit(blocker())
		case 1:
			submit(heeder)
		case 2:
			do(blocker())
		case 3:
			if len(blockers) > 0 {
				close(blockers[0])
				blockers = blockers[1:]
			}
		case 4:
			if len(futures) > 0 {
				futures[pick(i, len(futures))].Cancel()
			}
		case 5:
			time.Sleep(time.Duration(1+op>>4) * 500 * time.Millisecond)
		case 6:
			if len(cancels) > 0 {
				cancels[pick(i, len(cancels))]()
			}
		case 7:
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = l.Shutdown(ctx)
			cancel()
		case 8:
			call(heeder)
		case 9:
			submit(func(context.Context) error { g.enter(); defer g.exit(); return errX })
		case 10:
			submit(func(context.Context) error { g.enter(); defer g.exit(); panic("boom") })
		case 11:
			do(func(context.Context) error { g.enter(); defer g.exit(); return errX })
		default:
			call(blocker())
		}
		synctest.Wait()
		require.LessOrEqual(t, g.peak.Load(), int64(limit), "step %d", i)
		s := l.Stats()
		require.LessOrEqual(t, s.InFlight, limit)
		require.LessOrEqual(t, s.Overrunning, s.InFlight)
	}

	// Let everything finish: release the blockers, cancel the rest, wait.
	for _, release := range blockers {
		close(release)
	}
	for _, cancel := range cancels {
		cancel()
	}
	require.NoError(t, l.Shutdown(context.Background()))
	for _, ch := range answers {
		<-ch
	}
	for _, f := range futures {
		_, _ = f.Wait(context.Background())
	}
	synctest.Wait()
	s := atRest(t, l)
	assert.Equal(t, int64(calls), s.Submitted)
	assert.LessOrEqual(t, g.peak.Load(), int64(limit))
}
