package scope_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/scope"
)

type wide struct {
	a   [9]uint64
	s   string
	ptr *int
}

// A fork starts its goroutine through the subtask's own allocation, laid out as the closure of a
// method value (see launch.go). The check at init must find that layout; then subtasks of every
// size and shape — a word, a string, nothing, a wide struct with pointers, Go's — run through it
// with their own receiver, and so does the fallback. If the runtime ever lays method values out
// differently, this fails (or crashes) here first.
func TestLaunch(t *testing.T) {
	require.True(t, scope.LaunchInUse(), "the method-value layout check failed at init: forks fall back to a closure each")
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("launch=%v", on), func(t *testing.T) {
			was := scope.SetLaunch(on)
			defer scope.SetLaunch(was)
			s := scope.Open(t.Context())
			defer s.Close()
			var gone atomic.Int32
			x := 7
			var ints []*scope.Subtask[int]
			var strs []*scope.Subtask[string]
			var wides []*scope.Subtask[wide]
			var empties []*scope.Subtask[struct{}]
			for i := range 50 {
				ints = append(ints, scope.Fork(s, func(context.Context) (int, error) { return i, nil }))
				strs = append(strs, scope.Fork(s, func(context.Context) (string, error) { return strings.Repeat("x", i), nil }))
				wides = append(wides, scope.Fork(s, func(context.Context) (wide, error) {
					return wide{a: [9]uint64{8: uint64(i)}, s: fmt.Sprint(i), ptr: &x}, nil
				}))
				empties = append(empties, scope.Fork(s, func(context.Context) (struct{}, error) { return struct{}{}, nil }))
				s.Go(func(context.Context) error { gone.Add(1); return nil })
			}
			require.NoError(t, s.Join())
			for i := range 50 {
				assert.Equal(t, i, ints[i].Get())
				assert.Equal(t, strings.Repeat("x", i), strs[i].Get())
				w := wides[i].Get()
				assert.Equal(t, [3]any{uint64(i), fmt.Sprint(i), &x}, [3]any{w.a[8], w.s, w.ptr})
				assert.Equal(t, scope.Succeeded, empties[i].State())
			}
			assert.Equal(t, int32(50), gone.Load())
		})
	}
}
