package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/goloom/loom/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestHandler runs the demo and checks the three answers, and that the request ID bound by the
// middleware reached the forks (their log records), the backends (echoed in the reply) and the
// response header.
func TestHandler(t *testing.T) {
	var out bytes.Buffer
	// A generous deadline, so that a loaded machine does not turn the two fast cases into timeouts.
	require.NoError(t, run(t.Context(), &out, []string{"-timeout", "1s"}), out.String())
	got := out.String()
	for _, want := range []string{
		`-> 200 OK`, `"request_id":"r-1001"`, // the user service received the ID from a fork
		`-> 502 Bad Gateway`, `{"error":"users: 500 Internal Server Error: user store down","request_id":"r-1002"}`,
		`-> 504 Gateway Timeout`, `{"error":"scope: timed out","request_id":"r-1003"}`,
		`msg="users: failed" status=500 request_id=r-1002`,
		`msg="orders: call abandoned" cause="scope: timed out" request_id=r-1003`,
	} {
		assert.Contains(t, got, want)
	}
	// Every log record carries the ID of the request it belongs to.
	for _, line := range regexp.MustCompile(`(?m)^  log: .*$`).FindAllString(got, -1) {
		assert.Regexp(t, `request_id=r-100[1234]$`, line)
	}
	assert.Regexp(t, `(?m)^/profile/3\s+r-1003\s+504 Gateway Timeout`, got)
	// The dump taken while a request waits for the slow backend: its scope, with its deadline,
	// and the stuck call still running, each at the line of the code that opened or forked it.
	assert.Regexp(t, `(?m)^scope #\d+ "profile" FailFast joining \S+ deadline in \S+  handler/main.go:\d+  1 running, 1 succeeded$`, got)
	assert.Regexp(t, `(?m)^  #2 "orders" running \S+  handler/main.go:\d+$`, got)
}

// TestServe runs the service with -serve, calls it like a user would, and stops it.
func TestServe(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	var out testutil.SyncBuffer
	go func() { done <- run(ctx, &out, []string{"-serve", "-addr", "127.0.0.1:0"}) }()

	var url string
	require.Eventually(t, func() bool {
		m := regexp.MustCompile(`profile service on (http://\S+)`).FindStringSubmatch(out.String())
		if m != nil {
			url = m[1]
		}
		return m != nil
	}, 10*time.Second, 10*time.Millisecond)

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get(url + "/profile/1")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Regexp(t, `^gen-\d+$`, resp.Header.Get("X-Request-ID"), "an ID is made up when the client sends none")
	assert.Contains(t, string(body), `"request_id":"`+resp.Header.Get("X-Request-ID")+`"`)

	// /debug/loom answers with the dump, in each format.
	for format, contentType := range map[string]string{"": "text/plain; charset=utf-8", "json": "application/json", "html": "text/html; charset=utf-8"} {
		resp, err := (&http.Client{Transport: tr}).Get(url + "/debug/loom?format=" + format)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, resp.StatusCode, format)
		assert.Equal(t, contentType, resp.Header.Get("Content-Type"), format)
		if format == "json" {
			assert.Contains(t, string(body), `"formatVersion": 1`)
		}
	}

	cancel()
	require.NoError(t, <-done)
}
