package window_test

import (
	"context"
	"errors"
	"testing"

	"github.com/goloom/loom/internal/sema"
	"github.com/goloom/loom/internal/window"
	"github.com/goloom/loom/limiter/adaptive"
)

// nop is a task; a package variable, so that no loop below can inline it.
var nop = func(context.Context) error { return nil }

var errOverload = errors.New("overloaded")

// BenchmarkMeter is the aggregation's cost per call: Begin and End around nothing.
func BenchmarkMeter(b *testing.B) {
	b.Run("Begin+End", func(b *testing.B) {
		m := window.New(adaptive.Gradient{}, 64, sema.New(64, true), window.Config{})
		b.ReportAllocs()
		for b.Loop() {
			m.End(m.Begin(), window.OK, 1)
		}
	})
	b.Run("Begin+End/parallel", func(b *testing.B) {
		m := window.New(adaptive.Gradient{}, 64, sema.New(64, true), window.Config{})
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				m.End(m.Begin(), window.OK, 1)
			}
		})
	})
}

// BenchmarkCall is a limiter's fast path without and with the aggregation, in the same run:
// take a slot of the FIFO core, run the task, give the slot back — and, adaptive, Begin after
// the slot, End with the outcome and the slots held. The ratio of the two is the cost of
// limiter.WithAdaptive on an uncontended Do.
func BenchmarkCall(b *testing.B) {
	ctx := context.Background()
	b.Run("static", func(b *testing.B) {
		slots := sema.New(64, true)
		b.ReportAllocs()
		for b.Loop() {
			if !slots.TryAcquire(1) {
				b.Fatal("no slot")
			}
			_ = nop(ctx)
			slots.Release(1)
		}
	})
	b.Run("adaptive", func(b *testing.B) {
		slots := sema.New(64, true)
		m := window.New(adaptive.Gradient{}, 64, slots, window.Config{})
		b.ReportAllocs()
		for b.Loop() {
			if !slots.TryAcquire(1) {
				b.Fatal("no slot")
			}
			mk := m.Begin()
			err := nop(ctx)
			n := slots.Capacity() - slots.Available()
			slots.Release(1)
			o := window.OK
			if errors.Is(err, errOverload) {
				o = window.Drop
			}
			m.End(mk, o, n)
		}
	})
	b.Run("static/parallel", func(b *testing.B) {
		slots := sema.New(1<<20, true)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if !slots.TryAcquire(1) {
					b.Fatal("no slot")
				}
				_ = nop(ctx)
				slots.Release(1)
			}
		})
	})
	b.Run("adaptive/parallel", func(b *testing.B) {
		slots := sema.New(1<<20, true)
		m := window.New(adaptive.AIMD{Max: 1 << 20}, 1<<20, slots, window.Config{})
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if !slots.TryAcquire(1) {
					b.Fatal("no slot")
				}
				mk := m.Begin()
				_ = nop(ctx)
				n := slots.Capacity() - slots.Available()
				slots.Release(1)
				m.End(mk, window.OK, n)
			}
		})
	})
}
