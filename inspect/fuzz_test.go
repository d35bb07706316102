package inspect_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/inspect"
)

// FuzzHandlerQuery: whatever the method and query, the handler answers 200, 400 or 405 as the
// format rules say, never panics, and a 200 is the format asked for.
func FuzzHandlerQuery(f *testing.F) {
	for _, seed := range []struct{ method, query string }{
		{"GET", ""}, {"GET", "format=text"}, {"GET", "format=json"}, {"HEAD", "format=html"},
		{"GET", "format=xml"}, {"GET", "format=json&format=json"}, {"GET", "format=%zz"},
		{"GET", "format=html;x=1"}, {"POST", "format=json"}, {"GET", "x=1&format=&y"},
		{"GET", "format=%6Aso%6E"}, {"get", "format=text"}, {"GET", "format=text\x00"},
	} {
		f.Add(seed.method, seed.query)
	}
	h := inspect.Handler()
	f.Fuzz(func(t *testing.T, method, query string) {
		req := &http.Request{Method: method, URL: &url.URL{Path: "/debug/loom", RawQuery: query}, Header: http.Header{}}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)

		want, format := http.StatusOK, "text"
		q, err := url.ParseQuery(query)
		switch {
		case method != http.MethodGet && method != http.MethodHead:
			want = http.StatusMethodNotAllowed
		case err != nil || len(q["format"]) > 1:
			want = http.StatusBadRequest
		case len(q["format"]) == 1 && q["format"][0] != "":
			format = q["format"][0]
			if format != "text" && format != "json" && format != "html" {
				want = http.StatusBadRequest
			}
		}
		require.Equal(t, want, rec.Code, "%s ?%s: %s", method, query, rec.Body)
		if want != http.StatusOK {
			return
		}
		ct := map[string]string{"text": "text/plain; charset=utf-8", "json": "application/json", "html": "text/html; charset=utf-8"}[format]
		require.Equal(t, ct, rec.Header().Get("Content-Type"))
		if method == http.MethodHead {
			require.Zero(t, rec.Body.Len())
		} else if format == "json" {
			var d inspect.Dump
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &d))
			require.Equal(t, 1, d.FormatVersion)
		}
	})
}

// FuzzRenderDump: any dump that decodes from JSON (a tool may hand one over) renders as text and
// as a page without panicking or failing, and encodes back.
func FuzzRenderDump(f *testing.F) {
	sample, err := json.Marshal(sampleDump())
	require.NoError(f, err)
	f.Add(sample)
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"scopes":[{"id":1,"children":[{"id":2,"deadline":"2000-01-01T00:00:00Z","state":"cancelled","cause":"x\ny"}],"running":[{"seq":-1,"started":"9999-12-31T23:59:59Z"}]}]}`))
	f.Add([]byte(`{"limiters":[{"name":"\u003c/script\u003e","stats":{"limit":0,"inFlight":-5,"waiting":9223372036854775807},"oldestWaiting":1e308}]}`))
	f.Add([]byte(`{"time":"0001-01-01T00:00:00Z","scopes":[null]}`))
	f.Add([]byte(`{"scopes":[{"id":1,"name":"a","running":[{"seq":2,"name":"u\u001b[2J"}]},{"id":2,"name":"a","running":[{"seq":2,"name":"u\u001b[2J"}]}],` +
		`"limiters":[{"name":"l","config":{"rate":"1/s","burst":"x\r"},"stats":{"rateWaiting":3}}],` +
		`"semaphores":[{"name":"s","stats":{"capacity":-1},"config":{"lease":"\u202e"},"pausedUntil":"2000-01-01T00:00:00Z"}],"groups":[{"count":-3}]}`))
	f.Add([]byte(`{"limiters":[null],"semaphores":[null]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var d inspect.Dump
		if json.Unmarshal(data, &d) != nil {
			return
		}
		dropNil(&d.Scopes)
		var b bytes.Buffer
		require.NoError(t, d.WriteText(&b))
		b.Reset()
		require.NoError(t, inspect.WriteHTML(&b, &d))
		_, err := json.Marshal(&d)
		require.NoError(t, err)
	})
}

// dropNil removes null scopes, which JSON can hold and a Dump never does.
func dropNil(ss *[]*inspect.Scope) {
	out := (*ss)[:0]
	for _, s := range *ss {
		if s != nil {
			dropNil(&s.Children)
			out = append(out, s)
		}
	}
	*ss = out
}
