package inspect_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/inspect"
)

func TestEnableDisableEnabled(t *testing.T) {
	enable(t)
	assert.False(t, inspect.Enabled(inspect.Scopes))
	inspect.Enable(inspect.Scopes)
	assert.True(t, inspect.Enabled(inspect.Scopes))
	assert.False(t, inspect.Enabled(inspect.Labels))
	assert.False(t, inspect.Enabled(inspect.Scopes|inspect.Labels), "Enabled of several: all of them")
	inspect.Enable(inspect.Labels, inspect.Scopes)
	assert.True(t, inspect.Enabled(inspect.Scopes|inspect.Labels))
	inspect.Disable(inspect.Scopes)
	assert.False(t, inspect.Enabled(inspect.Scopes))
	assert.True(t, inspect.Enabled(inspect.Labels))
	inspect.Disable(inspect.Labels)
	assert.False(t, inspect.Enabled(inspect.Labels))
	assert.False(t, inspect.Enabled(inspect.Feature(8)))
}

func TestEnableUnknownFeaturePanics(t *testing.T) {
	require.PanicsWithValue(t, "inspect: Enable: unknown feature Feature(8)", func() { inspect.Enable(inspect.Feature(8)) })
	require.PanicsWithValue(t, "inspect: Disable: unknown feature scopes|Feature(4)", func() { inspect.Disable(inspect.Scopes | 4) })
	require.PanicsWithValue(t, "inspect: Enable: unknown feature Feature(0)", func() { inspect.Enable(0) })
}

func TestFeatureString(t *testing.T) {
	assert.Equal(t, "scopes", inspect.Scopes.String())
	assert.Equal(t, "labels", inspect.Labels.String())
	assert.Equal(t, "scopes|labels", (inspect.Scopes | inspect.Labels).String())
}

// Features turn on and off while scopes churn: Enable, Disable and Enabled are safe for
// concurrent use (run with -race).
func TestFeaturesConcurrently(t *testing.T) {
	enable(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 10_000 {
			inspect.Enable(inspect.Labels)
			inspect.Disable(inspect.Labels)
		}
	}()
	for range 10_000 {
		inspect.Enable(inspect.Scopes)
		_ = inspect.Enabled(inspect.Labels)
		inspect.Disable(inspect.Scopes)
	}
	<-done
	assert.False(t, inspect.Enabled(inspect.Scopes|inspect.Labels))
}

// LOOM_INSPECT turns features on at start-up: run this test binary again with it set.
func TestLoomInspectAtStartUp(t *testing.T) {
	if os.Getenv("INSPECT_ENV_CHILD") == "1" {
		var on []string
		for _, f := range []inspect.Feature{inspect.Scopes, inspect.Labels} {
			if inspect.Enabled(f) {
				on = append(on, f.String())
			}
		}
		os.Stdout.WriteString("on=" + strings.Join(on, ",") + ".\n")
		return
	}
	for give, want := range map[string]string{
		"scopes": "scopes", "labels": "labels", "scopes,labels": "scopes,labels", " all ": "scopes,labels", "": "",
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestLoomInspectAtStartUp$")
		cmd.Env = append(os.Environ(), "INSPECT_ENV_CHILD=1", "LOOM_INSPECT="+give)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		assert.Contains(t, string(out), "on="+want+".\n", "LOOM_INSPECT=%q", give)
	}
}
