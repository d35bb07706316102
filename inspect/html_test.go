package inspect_test

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/inspect"
)

func renderHTML(t *testing.T, d *inspect.Dump) string {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, inspect.WriteHTML(&b, d))
	return b.String()
}

func TestHTMLPage(t *testing.T) {
	page := renderHTML(t, sampleDump())
	contains := func(want string) {
		t.Helper()
		if !strings.Contains(page, want) {
			t.Errorf("the page has no %q", want)
		}
	}
	for _, want := range []string{
		"<!DOCTYPE html>",
		`<li class="scope" data-scope="42">`,
		`<span class="pill running">running</span>`,
		`<span class="pill cancelled">cancelled</span><span class="pill joining">joining</span>`,
		`<div class="cause">cause: context deadline exceeded</div>`,
		`<span class="deadline past">deadline passed 17.3s ago</span>`,
		`<div class="task stuck" data-seq="#4">`, `<span class="tag">stuck?</span>`,
		`bars: share of the scope&#39;s 30.0s until its deadline`, `bars: log scale to 47.2s, the oldest subtask here`,
		`<div class="limiter" data-limiter="llm-api">`,
		`113 waiting, oldest <span class="oldest slow">9.8s</span>`,
		"limit <b>8</b>, <b>12</b> forks blocked",
		`<span class="site" title="/srv/app/api/profile.go:31">api/profile.go:31</span>`,
		"setTimeout(refresh, 2000)",
	} {
		contains(want)
	}
	// The nested scope is inside its parent's item.
	parent := strings.Index(page, `data-scope="42"`)
	child := strings.Index(page, `data-scope="43"`)
	next := strings.Index(page, `data-scope="57"`)
	assert.True(t, parent < child && child < next, "scope 43 nested in 42")
	assert.Contains(t, page[parent:next], "<ul>")
}

// Everything the page needs is in it: no stylesheet, script, image or font from elsewhere.
func TestHTMLHasNoExternalAssets(t *testing.T) {
	page := renderHTML(t, sampleDump())
	assert.NotRegexp(t, regexp.MustCompile(`(?i)<(link|img|iframe|object|embed)\b`), page)
	assert.NotRegexp(t, regexp.MustCompile(`(?i)\ssrc\s*=`), page)
	assert.NotRegexp(t, regexp.MustCompile(`url\(|@import|(?i)https?://`), page, "CSS url() or @import, or an absolute URL")
}

func TestHTMLEscapesWhatItShows(t *testing.T) {
	d := sampleDump()
	d.Scopes[0].Name = `<script>alert("x")</script>`
	d.Scopes[1].Cause = `</div><b onclick="x">`
	d.Limiters[0].Name = `"><img src=x>`
	page := renderHTML(t, d)
	assert.NotContains(t, page, `<script>alert`)
	assert.NotContains(t, page, `<b onclick`)
	assert.NotContains(t, page, `<img src=x>`)
	assert.Contains(t, page, `&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;`)
}

func TestHTMLWhenEmpty(t *testing.T) {
	assert.Contains(t, renderHTML(t, &inspect.Dump{}), "Scopes are not recorded")
	page := renderHTML(t, &inspect.Dump{Features: []string{"scopes"}})
	assert.Contains(t, page, "No open scopes.")
	assert.Contains(t, page, "No named limiters")
}
