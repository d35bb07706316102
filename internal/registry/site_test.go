package registry_test

import (
	"context"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/internal/registry"
)

func topLevel(context.Context) error { return nil }

type receiver struct{}

func (r receiver) method(context.Context) error { return nil }

func TestFuncPCMatchesReflect(t *testing.T) {
	captured := 3
	var r receiver
	var nilFn func(context.Context) error
	for name, fn := range map[string]any{
		"literal":      func(context.Context) error { return nil },
		"closure":      func(context.Context) error { captured++; return nil },
		"top-level":    topLevel,
		"method value": r.method,
		"generic":      func(context.Context) (int, error) { return captured, nil },
	} {
		assert.Equal(t, reflect.ValueOf(fn).Pointer(), registry.FuncPC(fn), name)
		assert.NotZero(t, registry.FuncPC(fn), name)
	}
	assert.Zero(t, registry.FuncPC(nilFn))
	assert.Zero(t, registry.FuncPC(nil))
}

//go:noinline
func viaGeneric[T any](n int) ([]uintptr, []uintptr) {
	if n > 0 {
		return viaGeneric[T](n - 1)
	}
	return registry.BothWalks()
}

func viaClosure() ([]uintptr, []uintptr) {
	f := func() ([]uintptr, []uintptr) { return registry.BothWalks() }
	return f()
}

func (r receiver) viaMethod() ([]uintptr, []uintptr) { return viaClosure() }

// The walk of frame pointers that Open uses for its site must find exactly the return addresses
// runtime.Callers finds, frame for frame, on stacks of every shape: generic and recursive
// functions, closures, method values, inlined calls. If the runtime ever lays out frames
// differently (or stops keeping frame pointers), this fails, and so does the check at init that
// would then switch the walk off.
func TestFramePointerWalkMatchesCallers(t *testing.T) {
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
		t.Skip("frame pointers are walked on amd64 and arm64 only")
	}
	require.True(t, registry.FramePointersInUse(), "the frame-pointer walk failed its check at init")
	var r receiver
	for name, walk := range map[string]func() ([]uintptr, []uintptr){
		"direct":        registry.BothWalks,
		"generic, deep": func() ([]uintptr, []uintptr) { return viaGeneric[int](5) },
		"closure":       viaClosure,
		"method value":  r.viaMethod,
	} {
		fp, rt := walk()
		require.NotEmpty(t, fp, name)
		// runtime.Callers marks an inlined call with a PC of its own where the walk has the one
		// physical frame that holds it; both expand to the same frames. The walk also sees the
		// frames Callers hides at the bottom of a goroutine: runtime.goexit, and the wrapper a go
		// statement makes (testing's gowrap1), never a site since a caller's frame comes first.
		assert.Equal(t, frames(rt), frames(fp), name)
	}
}

// frames resolves return addresses to "function file:line", as a dump does, without
// runtime.goexit and go statements' wrappers.
func frames(pcs []uintptr) []string {
	var out []string
	fs := runtime.CallersFrames(pcs)
	for {
		f, more := fs.Next()
		if f.Function != "runtime.goexit" && !strings.Contains(f.Function, ".gowrap") {
			out = append(out, fmt.Sprintf("%s %s:%d", f.Function, f.File, f.Line))
		}
		if !more {
			return out
		}
	}
}
