package inspect_test

import (
	"encoding/json"
	"expvar"
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/inspect"
	"github.com/goloom/loom/internal/registry/regtest"
)

func TestPublish(t *testing.T) {
	enable(t, inspect.Scopes)
	inspect.Publish()
	inspect.Publish() // again: nothing happens
	v := expvar.Get("loom")
	require.NotNil(t, v)

	s := regtest.Open(t.Context(), regtest.Options{Name: "published"})
	var d inspect.Dump
	require.NoError(t, json.Unmarshal([]byte(v.String()), &d), "each read is a fresh dump, as JSON")
	assert.Equal(t, 1, d.FormatVersion)
	assert.Equal(t, "published", find(t, &d, "published").Name)
	require.NoError(t, s.Join())
	require.NoError(t, json.Unmarshal([]byte(v.String()), &d))
	assert.Empty(t, d.Scopes)
}

// Publish refuses to replace another package's "loom": checked in a child process, whose expvar
// is fresh.
func TestPublishWhenTheNameIsTaken(t *testing.T) {
	if os.Getenv("INSPECT_PUBLISH_CHILD") == "1" {
		expvar.NewString("loom")
		defer func() { os.Stdout.WriteString("panic: " + recover().(string) + "\n") }()
		inspect.Publish()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestPublishWhenTheNameIsTaken$")
	cmd.Env = append(os.Environ(), "INSPECT_PUBLISH_CHILD=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), `panic: inspect: Publish: an expvar named "loom" is already published`)
}
