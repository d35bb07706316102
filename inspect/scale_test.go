package inspect_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/inspect"
	"github.com/goloom/loom/scope"
)

// openMany opens n scopes as a busy service has them: handlers of ten kinds, each scope with a
// parked subtask (some with a nested scope), and a tenth of them cancelled. It returns a function
// that releases and joins them all.
func openMany(t testing.TB, n int) (done func()) {
	t.Helper()
	release := make(chan struct{})
	started := make(chan struct{}, n)
	var scopes []*scope.Scope
	for i := range n {
		opts := []scope.Option{scope.WithName(fmt.Sprintf("handler-%d", i%10))}
		if i%3 == 0 {
			opts = append(opts, scope.AwaitAll())
		}
		s := scope.Open(context.Background(), opts...)
		if i%4 == 0 {
			s.GoNamed("with-child", func(ctx context.Context) error {
				c := scope.Open(ctx, scope.WithName("child"))
				c.Go(func(context.Context) error { started <- struct{}{}; <-release; return nil })
				return c.Join()
			})
		} else {
			s.GoNamed("call", func(context.Context) error { started <- struct{}{}; <-release; return nil })
		}
		scopes = append(scopes, s)
	}
	for range n {
		<-started
	}
	return func() {
		close(release)
		for _, s := range scopes {
			if err := s.Join(); err != nil {
				t.Error(err)
			}
		}
	}
}

// "A page with 10,000 open scopes renders in under a second and stays under 1 MB": the page
// groups identical scopes and lists at most a few of each group, so its size is bounded by the
// program's kinds of scope, not by the requests in flight (BenchmarkPage10k measures the time).
// The text is as short; JSON keeps every scope.
func TestPageOf10kScopesIsSmall(t *testing.T) {
	enable(t, inspect.Scopes)
	n := 10_000
	if raceEnabled {
		n = 2_000
	}
	done := openMany(t, n)
	defer done()
	srv := httptest.NewServer(inspect.Handler())
	defer srv.Close()
	size := func(query string) int {
		resp, err := http.Get(srv.URL + query)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return len(body)
	}
	html, text, json := size("/?format=html"), size("/"), size("/?format=json")
	t.Logf("%d scopes: html %d KB, text %d KB, json %d KB", n+n/4, html>>10, text>>10, json>>10)
	assert.Less(t, html, 1<<20, "the page stays under 1 MB")
	assert.Less(t, text, 64<<10, "the text is grouped too")
	assert.Greater(t, json, n*200, "JSON keeps every scope")
}

// BenchmarkPage10k: the page (snapshot and rendering) of 10,000 open scopes.
func BenchmarkPage10k(b *testing.B) {
	enable(b, inspect.Scopes)
	done := openMany(b, 10_000)
	defer done()
	h := inspect.Handler()
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/?format=html", nil))
		if w.Code != http.StatusOK {
			b.Fatal(w.Code)
		}
		b.ReportMetric(float64(w.Body.Len()), "bytes/page")
	}
}
