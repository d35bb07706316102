package registry_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"

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
