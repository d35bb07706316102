package inspect_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/inspect"
	"github.com/goloom/loom/internal/registry/regtest"
)

func serve(method, target string) *http.Response {
	rec := httptest.NewRecorder()
	inspect.Handler().ServeHTTP(rec, httptest.NewRequest(method, target, nil))
	return rec.Result()
}

func body(t *testing.T, r *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(r.Body)
	require.NoError(t, err)
	return string(b)
}

func TestHandlerFormats(t *testing.T) {
	enable(t, inspect.Scopes)
	s := regtest.Open(t.Context(), regtest.Options{Name: "served"})
	release := make(chan struct{})
	s.Go(regtest.Block(nil, release))
	defer func() { close(release); require.NoError(t, s.Join()) }()

	tests := []struct {
		give        string
		contentType string
		contains    string
	}{
		{"/debug/loom", "text/plain; charset=utf-8", `"served" FailFast running`},
		{"/debug/loom?format=text", "text/plain; charset=utf-8", `"served" FailFast running`},
		{"/debug/loom?format=", "text/plain; charset=utf-8", `"served"`},
		{"/debug/loom?format=json", "application/json", `"name": "served"`},
		{"/debug/loom?format=html", "text/html; charset=utf-8", `<span class="name">served</span>`},
		{"/debug/loom?format=html&refresh=123", "text/html; charset=utf-8", "<!DOCTYPE html>"},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			r := serve(http.MethodGet, tt.give)
			assert.Equal(t, http.StatusOK, r.StatusCode)
			assert.Equal(t, tt.contentType, r.Header.Get("Content-Type"))
			assert.Equal(t, "no-store", r.Header.Get("Cache-Control"))
			assert.Contains(t, body(t, r), tt.contains)
		})
	}
	var d inspect.Dump
	require.NoError(t, json.Unmarshal([]byte(body(t, serve(http.MethodGet, "/?format=json"))), &d))
	assert.Equal(t, 1, d.FormatVersion)
	assert.Equal(t, "served", find(t, &d, "served").Name)
}

func TestHandlerHead(t *testing.T) {
	for _, format := range []string{"", "?format=json", "?format=html"} {
		r := serve(http.MethodHead, "/debug/loom"+format)
		assert.Equal(t, http.StatusOK, r.StatusCode, format)
		assert.NotEmpty(t, r.Header.Get("Content-Type"))
		assert.NotEqual(t, "0", r.Header.Get("Content-Length"), "the length of the body GET would get")
		assert.Empty(t, body(t, r), format)
	}
}

func TestHandlerRejects(t *testing.T) {
	for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch, http.MethodOptions, "BREW"} {
		r := serve(method, "/debug/loom")
		assert.Equal(t, http.StatusMethodNotAllowed, r.StatusCode, method)
		assert.Equal(t, "GET, HEAD", r.Header.Get("Allow"))
		assert.True(t, strings.HasPrefix(body(t, r), "inspect: method "+method+" not allowed"))
	}
	for give, want := range map[string]string{
		"/?format=xml":              `inspect: unknown format "xml"; want text, json or html`,
		"/?format=JSON":             `inspect: unknown format "JSON"`,
		"/?format=json&format=html": "inspect: 2 formats asked for",
		"/?format=%zz":              "inspect: bad query",
		"/?format=html;x":           "inspect: bad query",
	} {
		r := serve(http.MethodGet, give)
		assert.Equal(t, http.StatusBadRequest, r.StatusCode, give)
		assert.Contains(t, body(t, r), want, give)
	}
}
