package inspect_test

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"io"
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

	"github.com/goloom/loom/fleet"
	"github.com/goloom/loom/inspect"
	"github.com/goloom/loom/internal/registry/regtest"
	"github.com/goloom/loom/limiter"
	"github.com/goloom/loom/scope"
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

// loadedService is a service under load, as the README's picture shows it: forty requests in one
// handler (two named calls each, one through a rate-limited limiter that holds a queue, a nested
// scope), a checkout stuck past its deadline behind a call that ignores its context, a fleet
// semaphore the limiter shares. It returns the server of its /debug/loom and a function that
// ends it all.
func loadedService(t *testing.T) (*httptest.Server, func()) {
	t.Helper()
	enable(t, inspect.Scopes)
	mem := fleet.NewMemory()
	sem := fleet.New(mem, "llm-fleet", 40, fleet.WithLease(15*time.Second))
	api := limiter.New(8, limiter.WithName("llm-api"), limiter.WithRate(50, 10),
		limiter.WithAcquireTimeout(30*time.Second), limiter.WithTaskTimeout(5*time.Minute), limiter.WithFleet(sem))
	release := make(chan struct{})
	started := make(chan struct{}, 200)
	park := func(ctx context.Context) error { started <- struct{}{}; <-release; return nil }
	var scopes []*scope.Scope
	for range 40 {
		s := scope.Open(context.Background(), scope.WithName("profile"), scope.WithTimeout(time.Hour))
		s.GoNamed("user", park)
		s.GoNamed("recommend", func(ctx context.Context) error {
			return api.Do(ctx, func(ctx context.Context) error { return park(ctx) })
		})
		s.Go(func(ctx context.Context) error {
			c := scope.Open(ctx, scope.WithName("avatar"), scope.AwaitAll())
			c.Go(park)
			return c.Join()
		})
		scopes = append(scopes, s)
		time.Sleep(10 * time.Millisecond) // spreads the requests' ages, for the picture; nothing waits on it
	}
	checkout := scope.Open(context.Background(), scope.WithName("checkout"), scope.WithTimeout(10*time.Millisecond))
	checkout.GoNamed("payment", func(context.Context) error { started <- struct{}{}; <-release; return nil }) // ignores ctx
	require.Eventually(t, func() bool { return api.Stats().Waiting == 32 }, 10*time.Second, time.Millisecond)
	for range 40 + 40 + 8 + 1 { // users, avatars, the calls in flight, the payment
		<-started
	}
	require.Eventually(t, func() bool { return checkout.Context().Err() != nil }, 10*time.Second, time.Millisecond)
	srv := httptest.NewServer(inspect.Handler())
	return srv, func() {
		srv.Close()
		close(release)
		for _, s := range scopes {
			require.NoError(t, s.Join())
		}
		require.ErrorIs(t, checkout.Join(), scope.ErrTimeout)
		require.NoError(t, sem.Close())
	}
}

// The page of a service under load, in a real browser: the forty requests are one card with
// their count, which lists them when opened; the stuck checkout stands out; the limiter shows its
// settings and the calls its rate holds back; the fleet semaphore has its card. The screenshot is
// the one the docs show (INSPECT_SCREENSHOT_DIR keeps it).
func TestPageUnderLoadInABrowser(t *testing.T) {
	bin := chromium(t)
	srv, stop := loadedService(t)
	defer stop()
	dir := os.Getenv("INSPECT_SCREENSHOT_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	shot := filepath.Join(dir, "inspect-page-under-load.png")
	url := srv.URL + "/debug/loom?format=html"
	headless(t, bin, url, "--screenshot="+shot, "--window-size=1280,1100")
	raw, err := os.ReadFile(shot)
	require.NoError(t, err)
	img, err := png.Decode(bytes.NewReader(raw))
	require.NoError(t, err)
	colours, dominant := palette(img)
	assert.Greater(t, colours, 50)
	assert.Less(t, dominant, 0.9)
	t.Logf("screenshot %s: %dx%d", shot, img.Bounds().Dx(), img.Bounds().Dy())

	dom := string(headless(t, bin, url, "--dump-dom", "--virtual-time-budget=3000"))
	for _, want := range []string{
		`<span class="count">40 ×</span>`, `<summary>the 40 scopes</summary>`,
		`<span class="count">40 ×</span><span class="id">`, `<span class="name">avatar</span>`,
		`<span class="name">checkout</span>`, `class="tag">stuck?`,
		`<dt>rate</dt><dd>50/s</dd>`, `<dt>acquire timeout</dt><dd>30s</dd>`, `<dt>fleet</dt><dd>llm-fleet</dd>`,
		"32 waiting", "held back by the rate", `data-semaphore="llm-fleet"`,
		"bars: share of the scope", `id="status">live, every 2 s`,
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("the page has no %q", want)
		}
	}
}

// overflowCheck is a script the tests add to the page: it writes, into a <pre id="overflow">,
// each element that is wider than its box or reaches past the window's right edge, or "none".
const overflowCheck = `<script>
window.addEventListener("load", function () {
  var bad = [], w = document.documentElement.clientWidth;
  if (document.documentElement.scrollWidth > w) { bad.push("page " + document.documentElement.scrollWidth + " > " + w); }
  document.querySelectorAll(".card, .limiter, .task, .head, .counts, .row, .summary, header").forEach(function (e) {
    var r = e.getBoundingClientRect();
    if (e.scrollWidth > e.clientWidth + 1) { bad.push(e.className + " scrolls " + e.scrollWidth + " > " + e.clientWidth); }
    if (r.right > w + 0.5) { bad.push(e.className + " ends at " + r.right + " > " + w); }
  });
  var p = document.createElement("pre");
  p.id = "overflow";
  p.textContent = (bad.length ? bad.join("\n") : "none") + " (width " + w + ")";
  document.body.appendChild(p);
});
</script>`

// withScript serves h's pages with script added before </body>.
func withScript(h http.Handler, script string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		body := strings.Replace(rec.Body.String(), "</body>", script+"</body>", 1)
		w.Header().Set("Content-Type", rec.Header().Get("Content-Type"))
		_, _ = io.WriteString(w, body)
	})
}

// framed is a page that shows url in an iframe width pixels wide (headless Chromium's window is at
// least 500 px wide: the frame is the phone), and copies the frame's <pre id="overflow"> into its
// own once the check in the frame has run.
func framed(url string, width int) string {
	return fmt.Sprintf(`<!DOCTYPE html><html><body style="margin:0">
<iframe id="f" src="%s" style="width:%dpx;height:900px;border:0"></iframe>
<pre id="overflow">not checked</pre>
<script>
(function poll() {
  var d = document.getElementById("f").contentDocument, p = d && d.getElementById("overflow");
  if (p) { document.getElementById("overflow").textContent = p.textContent; } else { setTimeout(poll, 20); }
})();
</script></body></html>`, url, width)
}

// Regression (issue 21): at 420 px a subtask row overflowed its card. In a phone-sized frame
// nothing of the page is wider than its box, nor than the frame.
func TestPageAt420px(t *testing.T) {
	bin := chromium(t)
	_, stop := loadedService(t)
	defer stop()
	mux := http.NewServeMux()
	mux.Handle("/page", withScript(inspect.Handler(), overflowCheck))
	for _, width := range []int{420, 360} {
		mux.HandleFunc(fmt.Sprintf("/frame%d", width), func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = io.WriteString(w, framed("/page?format=html", width))
		})
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, width := range []int{420, 360} {
		dom := string(headless(t, bin, fmt.Sprintf("%s/frame%d", srv.URL, width), "--dump-dom", "--virtual-time-budget=1000"))
		start := strings.Index(dom, `<pre id="overflow">`)
		require.GreaterOrEqual(t, start, 0, "the frame's page")
		end := strings.Index(dom[start:], "</pre>")
		assert.Equal(t, fmt.Sprintf(`<pre id="overflow">none (width %d)`, width), dom[start:start+end], "at %d px", width)
	}
}

// Regression (issue 21): with JavaScript off the page said "live, every 2 s" and showed a pause
// button that did nothing. Without JavaScript it says what it does — it reloads itself every 5 s —
// and has no button; with JavaScript it is live and the button is there.
func TestPageWithoutJavaScript(t *testing.T) {
	bin := chromium(t)
	srv := httptest.NewServer(inspect.Handler())
	defer srv.Close()
	// No script of the page runs under this policy, as with JavaScript off (which headless
	// Chromium's --dump-dom cannot do: it reads the page through script).
	noScripts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "script-src 'none'")
		inspect.Handler().ServeHTTP(w, r)
	}))
	defer noScripts.Close()
	off := string(headless(t, bin, noScripts.URL+"/?format=html", "--dump-dom", "--virtual-time-budget=500"))
	assert.Contains(t, off, `<span id="status">reloads itself every 5 s (JavaScript is off)</span>`)
	assert.Contains(t, off, `<button id="toggle" type="button" hidden="">pause</button>`)
	on := string(headless(t, bin, srv.URL+"/?format=html", "--dump-dom", "--virtual-time-budget=500"))
	assert.Contains(t, on, `<span id="status">live, every 2 s</span>`)
	assert.Contains(t, on, `<button id="toggle" type="button">pause</button>`)
}
