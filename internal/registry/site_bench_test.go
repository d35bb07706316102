package registry_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/goloom/loom/internal/registry"
)

// What the two tricks of site.go save, beside what they replace (benchstat -col /walk, /pc):
//
//	go test -run '^$' -bench 'OpenSite|FuncPC' -count 10 ./internal/registry/ | tee site.txt
//
// BenchmarkOpenSite: a recorded Open, Joining and Leave of a scope, walking frame pointers for the
// Open's site or calling runtime.Callers.
func BenchmarkOpenSite(b *testing.B) {
	enable(b, registry.Scopes)
	inner, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	for _, w := range []struct {
		name string
		fp   bool
	}{{"framepointers", true}, {"runtime.Callers", false}} {
		b.Run("walk="+w.name, func(b *testing.B) {
			was := registry.SetFramePointers(w.fp)
			defer registry.SetFramePointers(was)
			b.ReportAllocs()
			for b.Loop() {
				e := registry.Open(inner, registry.ScopeInfo{})
				e.Joining()
				e.Leave()
			}
		})
	}
}

var sinkPC uintptr

// BenchmarkFuncPC: the entry of a forked function, as a recorded fork's Enter takes it, loaded
// from the func value or asked of reflect.
func BenchmarkFuncPC(b *testing.B) {
	fn := any(func(context.Context) error { return nil })
	b.Run("pc=load", func(b *testing.B) {
		for b.Loop() {
			sinkPC = registry.FuncPC(fn)
		}
	})
	b.Run("pc=reflect", func(b *testing.B) {
		for b.Loop() {
			sinkPC = reflect.ValueOf(fn).Pointer()
		}
	})
}
