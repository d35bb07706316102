package fleet

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"
)

// health is what a Semaphore or Rate knows of its backend's reachability. The backend is down
// from the first failed call until the next successful one; each transition is logged once.
// While it is down, at most one call at a time, and at most one per probe interval, goes to the
// backend to find out whether it is back (a probe); every other one takes the fallback at once,
// so a backend that hangs costs one client timeout per interval, not one per call.
type health struct {
	what   string // "semaphore" or "rate", for the log
	name   string
	mode   Unavailable
	logger *slog.Logger
	probe  time.Duration

	down      atomic.Bool
	since     atomic.Int64 // unix nanoseconds of the last transition to down
	nextProbe atomic.Int64 // unix nanoseconds before which nobody calls the backend while it is down
	last      atomic.Pointer[error]
}

// skip reports whether a call should take the fallback without calling the backend: it is down,
// and this call did not win the next probe.
func (h *health) skip() bool {
	if !h.down.Load() {
		return false
	}
	now := time.Now().UnixNano()
	next := h.nextProbe.Load()
	if now < next {
		return true
	}
	return !h.nextProbe.CompareAndSwap(next, now+int64(h.probe))
}

// failed records a failed call.
func (h *health) failed(err error) {
	h.last.Store(&err)
	now := time.Now()
	h.nextProbe.Store(now.UnixNano() + int64(h.probe))
	if h.down.CompareAndSwap(false, true) {
		h.since.Store(now.UnixNano())
		if h.logger != nil {
			h.logger.LogAttrs(context.Background(), slog.LevelWarn, "fleet: backend unavailable",
				slog.String(h.what, h.name), slog.String("whenUnavailable", h.mode.String()),
				slog.Any("error", err))
		}
	}
}

// ok records a successful call, and reports whether it ended an outage.
func (h *health) ok() bool {
	if !h.down.Load() || !h.down.CompareAndSwap(true, false) {
		return false
	}
	if h.logger != nil {
		down := time.Duration(time.Now().UnixNano() - h.since.Load())
		h.logger.LogAttrs(context.Background(), slog.LevelInfo, "fleet: backend available again",
			slog.String(h.what, h.name), slog.Duration("down", down))
	}
	return true
}

// lastErr is the error of the last failed call.
func (h *health) lastErr() error {
	if p := h.last.Load(); p != nil {
		return *p
	}
	return nil
}
