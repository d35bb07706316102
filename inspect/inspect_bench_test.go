package inspect_test

import (
	"context"
	"testing"

	"github.com/goloom/loom/inspect"
	"github.com/goloom/loom/limiter"
	"github.com/goloom/loom/scope"
)

// What inspection costs the code it watches, with each feature set as a sibling sub-benchmark of
// one run, so that `benchstat -col /features` shows the ratios to features=off:
//
//	go test -run '^$' -bench . -count 10 ./inspect/ | tee inspect.txt
//	benchstat -col /features inspect.txt
var featureSets = []struct {
	name string
	fs   []inspect.Feature
}{
	{"off", nil},
	{"scopes", []inspect.Feature{inspect.Scopes}},
	{"labels", []inspect.Feature{inspect.Labels}},
}

// BenchmarkForkJoin100: Open + 100 no-op forks + Join, per subtask.
func BenchmarkForkJoin100(b *testing.B) {
	ctx := context.Background()
	for _, set := range featureSets {
		b.Run("features="+set.name, func(b *testing.B) {
			enable(b, set.fs...)
			b.ReportAllocs()
			for b.Loop() {
				s := scope.Open(ctx)
				for range 100 {
					scope.Fork(s, func(context.Context) (int, error) { return 0, nil })
				}
				if err := s.Join(); err != nil {
					b.Fatal(err)
				}
				s.Close()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*100), "ns/subtask")
		})
	}
}

// BenchmarkOpenJoinEmpty: Open, Join and Close of a scope with no subtask.
func BenchmarkOpenJoinEmpty(b *testing.B) {
	ctx := context.Background()
	for _, set := range featureSets {
		b.Run("features="+set.name, func(b *testing.B) {
			enable(b, set.fs...)
			b.ReportAllocs()
			for b.Loop() {
				s := scope.Open(ctx)
				if err := s.Join(); err != nil {
					b.Fatal(err)
				}
				s.Close()
			}
		})
	}
}

// BenchmarkLimiterDo: an uncontended Do of a named limiter (listed whatever the features).
func BenchmarkLimiterDo(b *testing.B) {
	ctx := context.Background()
	nop := func(context.Context) error { return nil }
	for _, set := range featureSets {
		b.Run("features="+set.name, func(b *testing.B) {
			enable(b, set.fs...)
			l := limiter.New(8, limiter.WithName("bench"))
			b.ReportAllocs()
			for b.Loop() {
				if err := l.Do(ctx, nop); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
