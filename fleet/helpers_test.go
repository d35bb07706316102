package fleet_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goloom/loom/fleet"
	"github.com/goloom/loom/fleet/fleetdriver"
)

const ttl = time.Second // the shortest lease: tests run under synctest, or want expiries soon

// newSem returns a Semaphore on b with a one-second lease and no logging (unless opts say
// otherwise), closed when the test ends.
func newSem(t testing.TB, b fleet.Backend, name string, capacity int64, opts ...fleet.Option) *fleet.Semaphore {
	t.Helper()
	s := fleet.New(b, name, capacity, append([]fleet.Option{fleet.WithLease(ttl), fleet.WithLogger(nil)}, opts...)...)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// partition wraps a backend as one process sees it: cut, every call fails at once (the process
// is partitioned away, or dead: it can neither renew nor release); lose makes the next calls
// reach the backend but lose their replies; deaf drops every wake-up message; slow makes every
// Acquire's reply take that long (nanoseconds) after the backend decided.
type partition struct {
	b     fleet.Backend
	cut   atomic.Bool
	lose  atomic.Int32
	deaf  atomic.Bool
	slow  atomic.Int64
	nosub atomic.Bool // every Subscribe fails: grants are never pushed to it

	mu    sync.Mutex
	stops []func() // the subscriptions made through it
}

// kill cuts the process off for good, as if it died: every call fails, and its subscriptions end
// (a dead process's connections close, so the backend knows nobody listens there any more).
func (p *partition) kill() {
	p.cut.Store(true)
	p.mu.Lock()
	stops := p.stops
	p.stops = nil
	p.mu.Unlock()
	for _, stop := range stops {
		stop()
	}
}

var errCut = errors.New("partition: cut")

func (p *partition) fail() error {
	if p.cut.Load() {
		return errCut
	}
	return nil
}

// lost reports whether this call's reply is lost (after the call reached the backend).
func (p *partition) lost() bool {
	for {
		n := p.lose.Load()
		if n <= 0 {
			return false
		}
		if p.lose.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

var errLostReply = errors.New("partition: reply lost")

func (p *partition) Acquire(ctx context.Context, req fleetdriver.AcquireRequest) (fleetdriver.AcquireReply, error) {
	if err := p.fail(); err != nil {
		return fleetdriver.AcquireReply{}, err
	}
	r, err := p.b.Acquire(ctx, req)
	if d := p.slow.Load(); d > 0 {
		time.Sleep(time.Duration(d))
	}
	if err == nil && p.lost() {
		return fleetdriver.AcquireReply{}, errLostReply
	}
	return r, err
}

func (p *partition) Renew(ctx context.Context, req fleetdriver.RenewRequest) (fleetdriver.RenewReply, error) {
	if err := p.fail(); err != nil {
		return fleetdriver.RenewReply{}, err
	}
	r, err := p.b.Renew(ctx, req)
	if err == nil && p.lost() {
		return fleetdriver.RenewReply{}, errLostReply
	}
	return r, err
}

func (p *partition) Release(ctx context.Context, req fleetdriver.ReleaseRequest) (fleetdriver.ReleaseReply, error) {
	if err := p.fail(); err != nil {
		return fleetdriver.ReleaseReply{}, err
	}
	r, err := p.b.Release(ctx, req)
	if err == nil && p.lost() {
		return fleetdriver.ReleaseReply{}, errLostReply
	}
	return r, err
}

func (p *partition) Subscribe(ctx context.Context, name, inst string, deliver func(fleetdriver.Lease)) (func(), error) {
	if err := p.fail(); err != nil {
		return nil, err
	}
	if p.nosub.Load() {
		return nil, errCut
	}
	stop, err := p.b.Subscribe(ctx, name, inst, func(g fleetdriver.Lease) {
		if !p.deaf.Load() && !p.cut.Load() {
			deliver(g)
		}
	})
	if err == nil {
		p.mu.Lock()
		p.stops = append(p.stops, stop)
		p.mu.Unlock()
	}
	return stop, err
}

func (p *partition) Reserve(ctx context.Context, req fleetdriver.RateRequest) (fleetdriver.RateReply, error) {
	if err := p.fail(); err != nil {
		return fleetdriver.RateReply{}, err
	}
	r, err := p.b.Reserve(ctx, req)
	if err == nil && p.lost() {
		return fleetdriver.RateReply{}, errLostReply
	}
	return r, err
}

func (p *partition) CancelReservation(ctx context.Context, req fleetdriver.RateCancel) error {
	if err := p.fail(); err != nil {
		return err
	}
	return p.b.CancelReservation(ctx, req)
}

// logs records log messages.
type logs struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logs) Enabled(context.Context, slog.Level) bool { return true }
func (l *logs) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.msgs = append(l.msgs, r.Message)
	l.mu.Unlock()
	return nil
}
func (l *logs) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logs) WithGroup(string) slog.Handler      { return l }

func (l *logs) logger() *slog.Logger { return slog.New(l) }

// count returns how many messages contain s.
func (l *logs) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.msgs {
		if strings.Contains(m, s) {
			n++
		}
	}
	return n
}

// acquireAsync starts an Acquire of n on its own goroutine and returns where its outcome comes.
func acquireAsync(ctx context.Context, s *fleet.Semaphore, n int64) <-chan result {
	ch := make(chan result, 1)
	go func() {
		p, err := s.Acquire(ctx, n)
		ch <- result{p, err}
	}()
	return ch
}

type result struct {
	p   *fleet.Permit
	err error
}

// ready reports whether ch has a value now, and returns it.
func ready(ch <-chan result) (result, bool) {
	select {
	case r := <-ch:
		return r, true
	default:
		return result{}, false
	}
}
