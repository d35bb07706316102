package inspect_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/inspect"
	"github.com/goloom/loom/internal/registry/regtest"
)

func TestWriteText(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, sampleDump().WriteText(&b))
	assert.Equal(t, sampleText, b.String())
}

func TestWriteTextWhenEmpty(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, (&inspect.Dump{Features: []string{"scopes"}}).WriteText(&b))
	assert.Equal(t, "no open scopes\n", b.String())
	b.Reset()
	require.NoError(t, (&inspect.Dump{}).WriteText(&b))
	assert.Equal(t, "scopes not recorded: inspect.Scopes is off (LOOM_INSPECT=scopes turns it on at start-up)\n", b.String())
}

func TestWriteTextCutsACauseToItsFirstLine(t *testing.T) {
	d := &inspect.Dump{Features: []string{"scopes"}, Scopes: []*inspect.Scope{{
		ID: 1, Policy: "FailFast", State: "cancelled", Site: "a/b/c.go:1",
		Cause: "scope: subtask panicked: boom\n\ngoroutine 7 [running]:\n...",
	}}}
	var b bytes.Buffer
	require.NoError(t, d.WriteText(&b))
	assert.Equal(t, "scope #1 FailFast cancelled 0s  b/c.go:1  no subtasks  cause: \"scope: subtask panicked: boom\"\n", b.String())
}

type failingWriter struct{ n int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.n -= len(p); w.n < 0 {
		return 0, errors.New("disk full")
	}
	return len(p), nil
}

func TestWriteTextReturnsTheWritersError(t *testing.T) {
	assert.EqualError(t, sampleDump().WriteText(&failingWriter{n: 10}), "disk full")
}

// A live dump on a fake clock, in the format of the text: the ages are exact.
func TestWriteTextOfLiveScopes(t *testing.T) {
	enable(t, inspect.Scopes)
	synctest.Test(t, func(t *testing.T) {
		lim := regtest.NewLimiter(1, "backend")
		openSite := here(1)
		s := regtest.Open(t.Context(), regtest.Options{Name: "profile", Timeout: 2 * time.Second})
		release := make(chan struct{})
		s.Go(func(context.Context) error { return nil })
		time.Sleep(100 * time.Millisecond)
		forkSite := here(1)
		s.Go(func(ctx context.Context) error {
			return lim.Do(ctx, func(context.Context) error { <-release; return nil })
		})
		time.Sleep(1100 * time.Millisecond)
		synctest.Wait()
		var b bytes.Buffer
		require.NoError(t, inspect.Snapshot().WriteText(&b))
		lines := strings.Split(b.String(), "\n")
		require.GreaterOrEqual(t, len(lines), 3)
		assert.Regexp(t, `^scope #\d+ "profile" FailFast running 1\.2s deadline in 0\.8s  `+shortOf(openSite)+`  1 running, 1 succeeded$`, lines[0])
		assert.Equal(t, "  #2 running 1.1s  "+shortOf(forkSite), lines[1])
		assert.Contains(t, lines, `limiter "backend" limit 1  in flight 1  waiting 0  overrunning 0`)
		close(release)
		require.NoError(t, s.Join())
	})
}

func shortOf(site string) string {
	parts := strings.Split(site, "/")
	return strings.Join(parts[len(parts)-2:], "/")
}

// Regression (issue 21): a cause went to the operator's terminal raw — a carriage return that
// overwrites the line, escape sequences that clear the screen or retitle the window — while
// names were quoted. Every string from the program is escaped the same way in the text: names
// and causes quoted like Go strings, sites bare when they are plain and quoted when not.
func TestWriteTextEscapesEveryProgramString(t *testing.T) {
	hostile := "a\rb\x1b[2Jc\x1b]0;pwned\x07d\u202ee\x00"
	d := &inspect.Dump{Features: []string{"scopes"}, Scopes: []*inspect.Scope{{
		ID: 1, Name: hostile, Policy: "FailFast", State: "cancelled", Site: "/srv/" + hostile + "/c.go:1",
		Cause:   "cause " + hostile + "\nsecond line",
		Running: []inspect.Subtask{{Seq: 1, Site: "/srv/x/" + hostile + ".go:9"}},
	}}, Limiters: []*inspect.Limiter{{Name: hostile}}}
	var b bytes.Buffer
	require.NoError(t, d.WriteText(&b))
	out := b.String()
	for i, r := range out {
		if r == '\n' {
			continue
		}
		require.Truef(t, r >= 0x20 && r != 0x7f && r != '\u202e', "a raw control character %U at byte %d of %q", r, i, out)
	}
	quoted := `"a\rb\x1b[2Jc\x1b]0;pwned\ad\u202ee\x00"`
	assert.Contains(t, out, `scope #1 `+quoted+` FailFast`, "the name")
	assert.Contains(t, out, `cause: "cause a\rb\x1b[2Jc\x1b]0;pwned\ad\u202ee\x00"`, "the cause, its first line")
	assert.Contains(t, out, `  "a\rb\x1b[2Jc\x1b]0;pwned\ad\u202ee\x00/c.go:1"  `, "the scope's site, quoted")
	assert.Contains(t, out, `  #1 running 0s  "x/a\rb`, "the subtask's site")
	assert.Contains(t, out, `limiter `+quoted+` limit 0`, "the limiter's name")
	// A plain site stays bare.
	b.Reset()
	require.NoError(t, sampleDump().WriteText(&b))
	assert.Contains(t, b.String(), "  api/profile.go:31  ")
}
