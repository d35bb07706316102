package limiter

import (
	"context"
	"errors"
	"log/slog"

	"github.com/goloom/loom/internal/window"
	"github.com/goloom/loom/limiter/adaptive"
)

// WithAdaptive lets c move the limit from what the calls observe, instead of keeping the limit
// given to [New], which becomes the starting limit — clamped into c's [Min, Max] if c is
// [adaptive.Bounded], as the built-ins are, so that [Stats].Limit and the calls running at once
// never leave c's range, even before the first window closes. c is asked once per window of calls (see
// package adaptive), never per call, by the call that closes the window — there is no goroutine
// and no timer — and the limit it returns is applied through the FIFO queue's capacity: when it
// grows, waiting calls are admitted in order; when it shrinks, running tasks are never
// interrupted, and the new limit takes effect as their slots come back. RTT is measured on 1
// call in k, from when the task starts (the wait for a slot is not RTT) to when it returns;
// drops are what [WithOverload] says. [Stats].Limit is the current limit and LimitChanges
// counts its moves; each move is logged at Debug ("limiter: limit changed"). It panics if c is
// nil, and [New] panics, on the controller's own terms, if c is misconfigured.
func WithAdaptive(c adaptive.Controller) Option {
	if c == nil {
		panic("limiter: WithAdaptive: nil Controller")
	}
	return func(cfg *config) { cfg.adaptive = c }
}

// WithOverload says which errors returned by a task mean "the downstream is overloaded": drops,
// the signal that cuts an adaptive limit at once (see [WithAdaptive]). The default counts
// [ErrTaskTimeout] and context.DeadlineExceeded returned by the task, when the caller's own ctx
// has not ended: a timeout is what an overloaded downstream looks like from here. A task that
// times out is a drop whatever it returns. Other errors are ordinary failures whose RTT counts;
// calls whose caller's ctx ended, and panics, are neither. It panics if overload is nil.
func WithOverload(overload func(error) bool) Option {
	if overload == nil {
		panic("limiter: WithOverload: nil function")
	}
	return func(cfg *config) { cfg.overload = overload }
}

func defaultOverload(err error) bool {
	return errors.Is(err, ErrTaskTimeout) || errors.Is(err, context.DeadlineExceeded)
}

// started marks, for the adaptive limit, a task that starts now; 0 without one.
func (l *Limiter) started() window.Mark {
	if l.meter == nil {
		return 0
	}
	return l.meter.Begin()
}

// held is the number of slots held, for the adaptive limit's in-flight count: taken just before
// a task's slot is given back, so it counts that task.
func (l *Limiter) held() int64 {
	if l.meter == nil {
		return 0
	}
	return l.slots.Capacity() - l.slots.Available()
}

// observe tells the adaptive limit how a task that started with mk ended: it returned err
// (timedOut: after its task timeout fired; broken: it panicked or called Goexit), with held slots
// held just before its own was given back. It runs once the slot is free; a move of the limit is
// logged here.
func (l *Limiter) observe(ctx context.Context, mk window.Mark, err error, timedOut, broken bool, held int64) {
	if l.meter == nil {
		return
	}
	o := window.OK
	switch {
	case broken || ctx.Err() != nil:
		o = window.Ignore // says nothing about the downstream
	case timedOut || err != nil && l.cfg.overload(err):
		o = window.Drop
	}
	if to := l.meter.End(mk, o, held); to != 0 {
		l.logLimit(ctx, to)
	}
}

// logLimit records a move of the adaptive limit.
func (l *Limiter) logLimit(ctx context.Context, to int) {
	if l.cfg.logger == nil || !l.cfg.logger.Enabled(ctx, slog.LevelDebug) {
		return
	}
	w := l.meter.Last()
	l.cfg.logger.LogAttrs(ctx, slog.LevelDebug, "limiter: limit changed",
		slog.String("limiter", l.cfg.name),
		slog.Int("from", w.Limit),
		slog.Int("to", to),
		slog.Duration("p50", w.P50),
		slog.Duration("p90", w.P90),
		slog.Int("drops", w.Drops),
		slog.Float64("drop_share", w.DropShare),
		slog.Int("max_in_flight", w.MaxInFlight),
		slog.Int("samples", w.Samples),
		slog.Duration("window", w.Duration))
}
