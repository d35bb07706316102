package registry_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/internal/registry"
)

func TestParseFeatures(t *testing.T) {
	tests := []struct {
		give        string
		want        registry.Features
		wantUnknown []string
	}{
		{give: "", want: 0},
		{give: "scopes", want: registry.Scopes},
		{give: "labels", want: registry.Labels},
		{give: "scopes,labels", want: registry.All},
		{give: " Scopes , LABELS ,", want: registry.All},
		{give: "all", want: registry.All},
		{give: ",,scopes,,", want: registry.Scopes},
		{give: "scope,labels", want: registry.Labels, wantUnknown: []string{"scope"}},
		{give: "traces, x ", want: 0, wantUnknown: []string{"traces", "x"}},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			got, unknown := registry.ParseFeatures(tt.give)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.wantUnknown, unknown)
		})
	}
}

func TestEnableDisable(t *testing.T) {
	enable(t, 0)
	registry.Enable(registry.Scopes)
	assert.True(t, registry.Enabled(registry.Scopes))
	assert.False(t, registry.Enabled(registry.Labels))
	assert.False(t, registry.Enabled(registry.All))
	assert.True(t, registry.Active())
	registry.Enable(registry.Labels)
	assert.True(t, registry.Enabled(registry.All))
	assert.True(t, registry.LabelsOn())
	registry.Disable(registry.Scopes)
	assert.Equal(t, registry.Labels, registry.Current())
	registry.Disable(registry.All)
	assert.False(t, registry.Active())
}

// The environment variable is read when the program starts: run this test binary again with it
// set, and let the child report what it found.
func TestEnvVarEnablesAtStartUp(t *testing.T) {
	if os.Getenv("REGISTRY_ENV_CHILD") == "1" {
		os.Stdout.WriteString("features=" + strings.Join(featureNames(registry.Current()), "+") + "\n")
		return
	}
	for give, want := range map[string]string{
		"scopes":        "scopes",
		"labels,scopes": "scopes+labels",
		"":              "",
		"bogus,labels":  "labels",
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestEnvVarEnablesAtStartUp$")
		cmd.Env = append(os.Environ(), "REGISTRY_ENV_CHILD=1", registry.EnvVar+"="+give)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		assert.Contains(t, string(out), "features="+want+"\n", "LOOM_INSPECT=%q", give)
		if give == "bogus,labels" {
			assert.Contains(t, string(out), `loom: LOOM_INSPECT: unknown feature "bogus" (want scopes, labels or all)`)
		}
	}
}

func featureNames(f registry.Features) []string {
	var out []string
	if f&registry.Scopes != 0 {
		out = append(out, "scopes")
	}
	if f&registry.Labels != 0 {
		out = append(out, "labels")
	}
	return out
}

func FuzzParseFeatures(f *testing.F) {
	for _, s := range []string{"", "scopes", "labels,scopes", " ALL ", "x,,y", "scopes,\x00", "ſcopes"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, unknown := registry.ParseFeatures(s)
		require.Zero(t, got&^registry.All, "only known bits")
		// Every item is either a feature, empty, or reported: nothing is silently dropped.
		items := strings.Split(s, ",")
		known := 0
		for _, it := range items {
			switch strings.ToLower(strings.TrimSpace(it)) {
			case "", "scopes", "labels", "all":
				known++
			}
		}
		require.Equal(t, len(items)-known, len(unknown))
		// Parsing what was recognized again gives the same features.
		var names []string
		names = append(names, featureNames(got)...)
		again, none := registry.ParseFeatures(strings.Join(names, ","))
		require.Equal(t, got, again)
		require.Empty(t, none)
	})
}
