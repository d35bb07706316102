package limiter

import (
	"context"
	"log/slog"
	"time"
)

// The log records. Each is written without any lock of the limiter held, so a handler may call
// back into the limiter.

func (l *Limiter) logReject(ctx context.Context, err error, t0 time.Time) {
	if l.cfg.logger == nil {
		return
	}
	l.cfg.logger.LogAttrs(ctx, slog.LevelWarn, "limiter: call rejected",
		slog.String("limiter", l.cfg.name),
		slog.Duration("wait", time.Since(t0)),
		slog.Any("error", err))
}

// logTimeout records a task timeout; t1 is when the task started.
func (l *Limiter) logTimeout(ctx context.Context, t0, t1 time.Time) {
	if l.cfg.logger == nil {
		return
	}
	l.cfg.logger.LogAttrs(ctx, slog.LevelWarn, "limiter: task timed out",
		slog.String("limiter", l.cfg.name),
		slog.Duration("wait", t1.Sub(t0)),
		slog.Duration("run", time.Since(t1)),
		slog.Duration("timeout", l.cfg.taskTimeout))
}

// logPanic records a panic; t1 is when the task started.
func (l *Limiter) logPanic(ctx context.Context, pe *PanicError, t0, t1 time.Time) {
	if l.cfg.logger == nil {
		return
	}
	l.cfg.logger.LogAttrs(ctx, slog.LevelError, "limiter: task panicked",
		slog.String("limiter", l.cfg.name),
		slog.Duration("wait", t1.Sub(t0)),
		slog.Duration("run", time.Since(t1)),
		slog.Any("panic", pe.Value),
		slog.String("stack", string(pe.Stack)))
}
