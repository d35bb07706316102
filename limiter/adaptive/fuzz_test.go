package adaptive_test

import (
	"encoding/binary"
	"math"
	"testing"
	"time"

	"github.com/goloom/loom/limiter/adaptive"
)

// FuzzControllers drives each built-in, started and as a value, with windows decoded from the
// input: whatever the windows say, Update never panics and never returns a limit outside
// [Min, Max]. The first bytes choose the bounds; each following 40 bytes are one window.
func FuzzControllers(f *testing.F) {
	f.Add([]byte{4, 200, 0, 0})
	f.Add(append([]byte{1, 0, 0, 0}, windowBytes(healthy(10))...))
	f.Add(append(append([]byte{2, 50, 0, 1}, windowBytes(slow(40, 3))...), windowBytes(adaptive.Window{Limit: 40, Drops: 9, DropShare: 1})...))
	f.Add(append([]byte{0, 0, 0, 0}, windowBytes(adaptive.Window{Limit: -1, Samples: -1, MaxInFlight: math.MaxInt32, P50: -1, P90: math.MaxInt64})...))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 4 {
			return
		}
		min, max := int(data[0]), int(data[0])+int(binary.LittleEndian.Uint16(data[1:3]))
		backoff := float64(data[3]%100+1) / 101 // in (0, 1)
		controllers := []adaptive.Starter{
			adaptive.AIMD{Min: min, Max: max, Backoff: backoff},
			adaptive.Vegas{Min: min, Max: max},
			adaptive.Gradient{Min: min, Max: max},
		}
		lo, hi := min, max
		if lo == 0 {
			lo = adaptive.DefaultMin
		}
		if max == 0 {
			hi = adaptive.DefaultMax
		}
		hi = maxInt(hi, lo)
		for _, c := range controllers {
			started := c.Start(int(data[0]) * 3)
			limit := lo
			for rest := data[4:]; len(rest) >= windowSize; rest = rest[windowSize:] {
				w := decodeWindow(rest[:windowSize])
				if rest[0]&1 == 0 { // half the windows carry the limit the controller returned
					w.Limit = limit
				}
				limit = started.Update(w)
				if limit < lo || limit > hi {
					t.Fatalf("%T: limit %d outside [%d, %d] after %v", c, limit, lo, hi, w)
				}
				if got := c.Update(w); got < lo || got > hi {
					t.Fatalf("%T value: limit %d outside [%d, %d] after %v", c, got, lo, hi, w)
				}
			}
		}
	})
}

const windowSize = 40

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// decodeWindow reads a window from 40 bytes, every field free to be nonsense.
func decodeWindow(b []byte) adaptive.Window {
	u32 := func(i int) int { return int(int32(binary.LittleEndian.Uint32(b[i:]))) }
	d := func(i int) time.Duration {
		return time.Duration(int32(binary.LittleEndian.Uint32(b[i:]))) * time.Microsecond
	}
	return adaptive.Window{
		Limit:       u32(0),
		Duration:    d(4),
		Calls:       u32(8),
		Samples:     u32(12),
		Drops:       u32(16),
		DropShare:   float64(int32(binary.LittleEndian.Uint32(b[20:]))) / (1 << 28),
		MaxInFlight: u32(24),
		MinRTT:      d(28),
		P50:         d(32),
		P90:         d(36),
	}
}

// windowBytes encodes w as decodeWindow reads it (durations in microseconds, truncated).
func windowBytes(w adaptive.Window) []byte {
	b := make([]byte, windowSize)
	put := func(i int, v int64) { binary.LittleEndian.PutUint32(b[i:], uint32(int32(v))) }
	put(0, int64(w.Limit))
	put(4, w.Duration.Microseconds())
	put(8, int64(w.Calls))
	put(12, int64(w.Samples))
	put(16, int64(w.Drops))
	put(20, int64(w.DropShare*(1<<28)))
	put(24, int64(w.MaxInFlight))
	put(28, w.MinRTT.Microseconds())
	put(32, w.P50.Microseconds())
	put(36, w.P90.Microseconds())
	return b
}
