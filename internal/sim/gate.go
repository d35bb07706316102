package sim

import (
	"context"
	"errors"

	"github.com/goloom/loom/internal/sema"
	"github.com/goloom/loom/internal/window"
	"github.com/goloom/loom/limiter/adaptive"
)

// A Gate is what a scenario tests: it runs fn if the current limit allows, else rejects the call
// (returns an error without running fn). Limit is the limit in force. The limiter is one:
// limiter.New(start, limiter.WithAdaptive(c), limiter.WithAcquireTimeout(0)).
type Gate interface {
	Do(ctx context.Context, fn func(context.Context) error) error
	Limit() int
}

// A NewGate makes the gate of one run: it starts at limit start and is moved by c.
type NewGate func(start int, c adaptive.Controller) Gate

// ErrRejected is returned by [NewSemaGate]'s gate for a call that found no free slot.
var ErrRejected = errors.New("sim: rejected: no free slot")

// Overload is the default drop classification of [NewSemaGate]'s gate: the downstream's refusal
// and a call's timeout (the limiter's default counts ErrTaskTimeout and
// context.DeadlineExceeded).
func Overload(err error) bool {
	return errors.Is(err, ErrOverload) || errors.Is(err, context.DeadlineExceeded)
}

// NewSemaGate returns the gate the limiter will be: the FIFO core (only New, TryAcquire, Release,
// SetCapacity, Capacity and Available) and a [window.Meter] with the default windows, wired as
// the limiter wires them — sampling by a counter rather than at random
// (window.Config.Deterministic), so that a run repeats exactly. It never makes a caller wait: with no slot free it returns
// [ErrRejected] at once, like a limiter with an acquire timeout of 0, which keeps runs exactly
// repeatable. It is safe for concurrent use.
func NewSemaGate(start int, c adaptive.Controller) Gate {
	slots := sema.New(int64(start), true)
	return &semaGate{slots: slots, meter: window.New(c, start, slots, window.Config{Deterministic: true})}
}

type semaGate struct {
	slots *sema.Sema
	meter *window.Meter
}

func (g *semaGate) Do(ctx context.Context, fn func(context.Context) error) error {
	if ctx == nil {
		panic("sim: Do: nil context")
	}
	if !g.slots.TryAcquire(1) {
		return ErrRejected
	}
	mk := g.meter.Begin()
	err := fn(ctx)
	inFlight := g.slots.Capacity() - g.slots.Available() // this call included
	g.slots.Release(1)
	outcome := window.OK
	if Overload(err) {
		outcome = window.Drop
	}
	g.meter.End(mk, outcome, inFlight)
	return err
}

func (g *semaGate) Limit() int { return g.meter.Limit() }
