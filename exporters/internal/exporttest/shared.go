package exporttest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/limiter"
)

// MetricsDoc returns docs/metrics.md, read from an exporter module's directory in a checkout of
// the repository; the test is skipped where there is none (a module downloaded alone has no docs).
func MetricsDoc(t *testing.T) string {
	t.Helper()
	const path = "../../docs/metrics.md"
	doc, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		t.Skip("no " + path + ": not in a checkout of the repository")
	}
	require.NoError(t, err)
	return string(doc)
}

// BenchmarkDo runs a named limiter's uncontended Do without and with an exporter registered
// (register, given the sub-benchmark, registers it and reads once): an exporter reads at
// collection time only, so the two must cost the same. label names the sub-benchmarks'
// parameter ("collector", "registered").
func BenchmarkDo(b *testing.B, label string, register func(b *testing.B)) {
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("%s=%v", label, on), func(b *testing.B) {
			if on {
				register(b)
			}
			l := limiter.New(8, limiter.WithName(fmt.Sprintf("bench-do-%v", on)))
			ctx := context.Background()
			fn := func(context.Context) error { return nil }
			b.ReportAllocs()
			for b.Loop() {
				_ = l.Do(ctx, fn)
			}
		})
	}
}
