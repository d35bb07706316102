package registry_test

import (
	"context"
	"testing"

	"github.com/goloom/loom/internal/registry"
	"github.com/goloom/loom/internal/registry/regtest"
)

// The registry's cost per Open and per fork, on regtest's minimal scope (a goroutine and a
// WaitGroup per fork), which calls the registry where scope will. "off" is the same loop with
// every feature off: the baseline each other row is compared with. The figures that count are
// scope's own (scope/scope_bench_test.go) once it is wired; these show the registry's share.
var modes = []struct {
	name string
	f    registry.Features
}{
	{"off", 0},
	{"scopes", registry.Scopes},
	{"labels", registry.Labels},
	{"all", registry.All},
}

// BenchmarkOpenJoin: Open and Join of an empty scope.
func BenchmarkOpenJoin(b *testing.B) {
	ctx := context.Background()
	for _, m := range modes {
		b.Run(m.name, func(b *testing.B) {
			enable(b, m.f)
			b.ReportAllocs()
			for b.Loop() {
				s := regtest.Open(ctx, regtest.Options{Name: "bench"})
				_ = s.Join()
			}
		})
	}
}

// BenchmarkForkJoin100: Open, 100 no-op forks, Join.
func BenchmarkForkJoin100(b *testing.B) {
	ctx := context.Background()
	for _, m := range modes {
		b.Run(m.name, func(b *testing.B) {
			enable(b, m.f)
			b.ReportAllocs()
			for b.Loop() {
				s := regtest.Open(ctx, regtest.Options{})
				for range 100 {
					s.Go(noop)
				}
				_ = s.Join()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*100), "ns/subtask")
		})
	}
}

func noop(context.Context) error { return nil }

// BenchmarkRecord isolates the registry's calls for one subtask (Fork, Enter, Done) from the
// goroutine around them.
func BenchmarkRecord(b *testing.B) {
	enable(b, registry.Scopes)
	inner, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	e := registry.Open(inner, registry.ScopeInfo{})
	defer e.Leave()
	var t registry.Task
	b.ReportAllocs()
	for b.Loop() {
		e.Fork(&t)
		e.Done(e.Enter(&t, noop), registry.Succeeded)
	}
}

// BenchmarkCollect: a dump of 100 open scopes with 10 running subtasks each.
func BenchmarkCollect(b *testing.B) {
	enable(b, registry.Scopes)
	release := make(chan struct{})
	var scopes []*regtest.Scope
	for range 100 {
		s := regtest.Open(context.Background(), regtest.Options{Name: "s"})
		for range 10 {
			s.Go(func(context.Context) error { <-release; return nil })
		}
		scopes = append(scopes, s)
	}
	b.ReportAllocs()
	for b.Loop() {
		collect()
	}
	close(release)
	for _, s := range scopes {
		_ = s.Join()
	}
}

// BenchmarkRecordOpenLeave isolates the registry's calls for a scope that forks nothing (Open,
// Joining, Leave), with Scopes on, from the scope around them.
func BenchmarkRecordOpenLeave(b *testing.B) {
	enable(b, registry.Scopes)
	inner, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	b.ReportAllocs()
	for b.Loop() {
		e := registry.Open(inner, registry.ScopeInfo{})
		e.Joining()
		e.Leave()
	}
}
