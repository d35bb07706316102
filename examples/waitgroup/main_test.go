package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/goloom/loom/scope"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestWaitGroup(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(t.Context(), &out, nil), out.String())
	got := out.String()
	assert.Regexp(t, `(?m)^wg \(WaitGroup \+ mutex \+ cancel\)\s+error: item 3: out of stock\s+\S+\s+0\s+0$`, got)
	assert.Regexp(t, `(?m)^wg-shortcut \(return on first error\)\s+error: item 3: out of stock\s+\S+\s+[1-9]\d*\s+0$`, got)
	assert.Regexp(t, `(?m)^scope \(Open, Fork, Join\)\s+error: item 3: out of stock\s+\S+\s+0\s+0$`, got)
	assert.Regexp(t, `(?m)^3\s+Failed\s+item 3: out of stock$`, got)
	assert.Regexp(t, `(?m)^5\s+Cancelled\s+item 3: out of stock$`, got)
}

// The three versions agree when nothing fails.
func TestVersionsAgreeOnSuccess(t *testing.T) {
	ok := func(_ context.Context, i int) (int, error) { return 10 * i, nil }
	want := []int{0, 10, 20, 30}
	got, err := fetchAllWaitGroup(t.Context(), 4, ok)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	got, err = fetchAllShortcut(t.Context(), 4, ok)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	got, tasks, err := fetchAllScope(t.Context(), 4, ok)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	for _, task := range tasks {
		assert.Equal(t, scope.Succeeded, task.State())
	}
}

func TestWaitGroupRejectsBadFlags(t *testing.T) {
	var out bytes.Buffer
	require.Error(t, run(t.Context(), &out, []string{"-unit", "0s"}))
}
