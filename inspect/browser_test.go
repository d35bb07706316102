package inspect_test

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/inspect"
	"github.com/goloom/loom/internal/registry/regtest"
)

// chromium returns the path of a Chromium (or Chrome) binary, LOOM_CHROMIUM first. Without one
// the browser checks are skipped, except under CI=true, where they must run.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{os.Getenv("LOOM_CHROMIUM"), "chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if name == "" {
			continue
		}
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no chromium: CI runs the browser check of the HTML page (apt-get install -y chromium, or set LOOM_CHROMIUM)")
	}
	t.Skip("no chromium: skipping the browser check of the HTML page (apt-get install -y chromium, or set LOOM_CHROMIUM; CI=true makes this a failure)")
	return ""
}

// headless runs the browser on url with extra flags and returns its standard output.
func headless(t *testing.T, bin, url string, extra ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	args := append([]string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--hide-scrollbars", "--user-data-dir=" + t.TempDir(),
		"--window-size=1280,900",
	}, extra...)
	cmd := exec.CommandContext(ctx, bin, append(args, url)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "chromium: %s", stderr.String())
	return stdout.Bytes()
}

// sampleServer serves the sample dump's page; each request's dump counts one more completed call
// of the llm-api limiter, so that a refreshed page can be told from the first.
func sampleServer(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := hits.Add(1)
		d := sampleDump()
		for i, st := range d.Limiters[0].Stats {
			if st.Name == "completed" {
				d.Limiters[0].Stats[i].Value += n
			}
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		assert.NoError(t, inspect.WriteHTML(w, d))
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// The page in a real browser: a screenshot that is a picture, not a blank page, and a DOM with
// the tree — nested scopes inside their parent, the stuck subtask, the limiters — which has been
// refreshed by the page itself.
func TestHTMLInABrowser(t *testing.T) {
	bin := chromium(t)
	srv, hits := sampleServer(t)
	url := srv.URL + "/debug/loom?format=html"

	dir := os.Getenv("INSPECT_SCREENSHOT_DIR") // to keep the picture and look at it
	if dir == "" {
		dir = t.TempDir()
	}
	shot := filepath.Join(dir, "inspect-page.png")
	headless(t, bin, url, "--screenshot="+shot)
	raw, err := os.ReadFile(shot)
	require.NoError(t, err)
	img, err := png.Decode(bytes.NewReader(raw))
	require.NoError(t, err, "the screenshot is a PNG")
	b := img.Bounds()
	assert.GreaterOrEqual(t, b.Dx(), 1000)
	assert.GreaterOrEqual(t, b.Dy(), 700)
	colours, dominant := palette(img)
	assert.Greater(t, colours, 50, "a page with text and bars has many colours")
	assert.Less(t, dominant, 0.9, "no single colour covers the page")
	t.Logf("screenshot %s: %dx%d, %d colours, the most common one on %.0f%%", shot, b.Dx(), b.Dy(), colours, 100*dominant)

	before := hits.Load()
	dom := string(headless(t, bin, url, "--dump-dom", "--virtual-time-budget=7000"))
	for _, want := range []string{`data-scope="42"`, `data-scope="43"`, `data-scope="57"`, `data-scope="60"`,
		`class="tag">stuck?`, `data-limiter="llm-api"`, `data-limiter="payments"`, "113 waiting"} {
		assert.Contains(t, dom, want)
	}
	parent, child, next := strings.Index(dom, `data-scope="42"`), strings.Index(dom, `data-scope="43"`), strings.Index(dom, `data-scope="57"`)
	assert.True(t, parent < child && child < next, "scope 43 is nested in scope 42")
	// The page fetched itself again on its timer and replaced the tree with the new dump.
	assert.GreaterOrEqual(t, hits.Load()-before, int64(2), "the page refreshed itself")
	assert.NotContains(t, dom, fmt.Sprintf("completed <b>%d</b>", 9950+before+1), "the first dump was replaced")
}

// The handler's own page, of live scopes, in the browser.
func TestHandlerPageInABrowser(t *testing.T) {
	bin := chromium(t)
	enable(t, inspect.Scopes)
	lim := regtest.NewLimiter(1, "live-limiter")
	s := regtest.Open(t.Context(), regtest.Options{Name: "live-root"})
	release, opened := make(chan struct{}), make(chan struct{})
	var child *regtest.Scope
	s.Go(func(ctx context.Context) error {
		child = regtest.Open(ctx, regtest.Options{Name: "live-child"})
		child.Go(regtest.Block(nil, release))
		close(opened)
		return lim.Do(ctx, func(context.Context) error { <-release; return nil })
	})
	<-opened
	srv := httptest.NewServer(inspect.Handler())
	defer srv.Close()
	dom := string(headless(t, bin, srv.URL+"/?format=html", "--dump-dom"))
	root, kid := strings.Index(dom, `<span class="name">live-root</span>`), strings.Index(dom, `<span class="name">live-child</span>`)
	assert.True(t, root >= 0 && kid > root, "the child scope is under its parent")
	assert.Contains(t, dom, `data-limiter="live-limiter"`)
	close(release)
	require.NoError(t, child.Join())
	require.NoError(t, s.Join())
}

// palette returns how many distinct colours img has and the share of the most common one.
func palette(img image.Image) (int, float64) {
	counts := map[uint32]int{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			counts[r>>8<<16|g>>8<<8|bl>>8]++
		}
	}
	most := 0
	for _, n := range counts {
		most = max(most, n)
	}
	return len(counts), float64(most) / float64(b.Dx()*b.Dy())
}
