package fleettest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/goloom/loom/fleet/fleetdriver"
)

// ErrKilled is what every call through a killed [Killable] backend returns.
var ErrKilled = errors.New("fleettest: the process was killed")

// Killable wraps b as the backend of one process that can die: after kill, every call fails at
// once with [ErrKilled], and every subscription made through it has ended (as a dead process's
// connections close, so that the backend knows nobody listens there any more). kill is
// idempotent.
func Killable(b fleetdriver.Backend) (backend fleetdriver.Backend, kill func()) {
	k := &killable{b: b}
	return k, k.kill
}

type killable struct {
	b      fleetdriver.Backend
	killed atomic.Bool
	mu     sync.Mutex
	stops  []func()
}

func (k *killable) kill() {
	k.killed.Store(true)
	k.mu.Lock()
	stops := k.stops
	k.stops = nil
	k.mu.Unlock()
	for _, stop := range stops {
		stop()
	}
}

func (k *killable) dead() error {
	if k.killed.Load() {
		return ErrKilled
	}
	return nil
}

func (k *killable) Acquire(ctx context.Context, req fleetdriver.AcquireRequest) (fleetdriver.AcquireReply, error) {
	if err := k.dead(); err != nil {
		return fleetdriver.AcquireReply{}, err
	}
	return k.b.Acquire(ctx, req)
}

func (k *killable) Renew(ctx context.Context, req fleetdriver.RenewRequest) (fleetdriver.RenewReply, error) {
	if err := k.dead(); err != nil {
		return fleetdriver.RenewReply{}, err
	}
	return k.b.Renew(ctx, req)
}

func (k *killable) Release(ctx context.Context, req fleetdriver.ReleaseRequest) (fleetdriver.ReleaseReply, error) {
	if err := k.dead(); err != nil {
		return fleetdriver.ReleaseReply{}, err
	}
	return k.b.Release(ctx, req)
}

func (k *killable) Subscribe(ctx context.Context, name, inst string, deliver func(fleetdriver.Lease)) (func(), error) {
	if err := k.dead(); err != nil {
		return nil, err
	}
	stop, err := k.b.Subscribe(ctx, name, inst, func(g fleetdriver.Lease) {
		if !k.killed.Load() {
			deliver(g)
		}
	})
	if err != nil {
		return nil, err
	}
	var once sync.Once
	stopOnce := func() { once.Do(stop) }
	k.mu.Lock()
	if k.killed.Load() {
		k.mu.Unlock()
		stopOnce()
		return nil, ErrKilled
	}
	k.stops = append(k.stops, stopOnce)
	k.mu.Unlock()
	return stopOnce, nil
}

func (k *killable) Reserve(ctx context.Context, req fleetdriver.RateRequest) (fleetdriver.RateReply, error) {
	if err := k.dead(); err != nil {
		return fleetdriver.RateReply{}, err
	}
	return k.b.Reserve(ctx, req)
}

func (k *killable) CancelReservation(ctx context.Context, req fleetdriver.RateCancel) error {
	if err := k.dead(); err != nil {
		return err
	}
	return k.b.CancelReservation(ctx, req)
}
