package inspect

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
)

// Handler returns an http.Handler that serves a fresh [Snapshot] on every request, for GET and
// HEAD; any other method gets 405 Method Not Allowed. The query parameter format chooses the
// form: "text" (the default: [Dump.WriteText], text/plain; charset=utf-8), "json" (the Dump,
// application/json) or "html" (a page that refreshes itself, for a browser: the scope tree with
// states coloured, the limiters' slots and queues as bars; no external assets). Any other format,
// several formats, or a query that does not parse gets 400 Bad Request. Other parameters are
// ignored. Responses are never cached.
//
//	http.Handle("/debug/loom", inspect.Handler())
//
// Mount it where only operators can reach it, like net/http/pprof: a dump names the code's
// files, and the causes of cancelled scopes.
func Handler() http.Handler { return handler{} }

type handler struct{}

func (handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "inspect: method "+r.Method+" not allowed (GET or HEAD)", http.StatusMethodNotAllowed)
		return
	}
	format, err := formatOf(r.URL.RawQuery)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var body bytes.Buffer
	d := Snapshot()
	switch format {
	case "text":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		err = d.WriteText(&body)
	case "json":
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(&body)
		enc.SetIndent("", "  ")
		err = enc.Encode(d)
	case "html":
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		err = writeHTML(&body, d)
	}
	if err != nil { // nothing written yet: the client gets an error, not half a dump
		w.Header().Del("Content-Type")
		http.Error(w, "inspect: "+err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", fmt.Sprint(body.Len()))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body.Bytes())
	}
}

// formatOf returns the format a request's raw query asks for: "text" when it names none.
func formatOf(rawQuery string) (string, error) {
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return "", fmt.Errorf("inspect: bad query: %w", err)
	}
	formats := q["format"]
	switch {
	case len(formats) > 1:
		return "", fmt.Errorf("inspect: %d formats asked for; want one of text, json, html", len(formats))
	case len(formats) == 0 || formats[0] == "":
		return "text", nil
	}
	switch f := formats[0]; f {
	case "text", "json", "html":
		return f, nil
	default:
		return "", fmt.Errorf("inspect: unknown format %q; want text, json or html", f)
	}
}
