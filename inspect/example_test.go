package inspect_test

import (
	"expvar"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"time"

	"github.com/goloom/loom/inspect"
)

func ExampleEnable() {
	inspect.Enable(inspect.Scopes, inspect.Labels) // or LOOM_INSPECT=scopes,labels at start-up
	fmt.Println(inspect.Enabled(inspect.Scopes), inspect.Enabled(inspect.Labels))
	inspect.Disable(inspect.Labels)
	fmt.Println(inspect.Enabled(inspect.Scopes), inspect.Enabled(inspect.Labels))
	inspect.Disable(inspect.Scopes)
	// Output:
	// true true
	// true false
}

func ExampleSnapshot() {
	inspect.Enable(inspect.Scopes)
	defer inspect.Disable(inspect.Scopes)
	d := inspect.Snapshot() // every open scope opened since, and every named limiter
	fmt.Println(d.FormatVersion, d.Features, len(d.Scopes))
	// Output: 1 [scopes] 0
}

func ExampleDump_WriteText() {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	d := &inspect.Dump{
		Time:     now,
		Features: []string{"scopes"},
		Scopes: []*inspect.Scope{{
			ID: 42, Name: "profile", Policy: "FailFast", State: inspect.StateRunning,
			Site:     "/srv/app/api/profile.go:31",
			Opened:   now.Add(-1200 * time.Millisecond),
			Deadline: now.Add(800 * time.Millisecond),
			Counts:   inspect.Counts{Running: 1, Succeeded: 1},
			Running:  []inspect.Subtask{{Seq: 2, Site: "/srv/app/api/profile.go:35", Started: now.Add(-1200 * time.Millisecond)}},
		}},
		Limiters: []*inspect.Limiter{{
			Name:          "llm-api",
			Stats:         inspect.Stats{{Name: "limit", Value: 40}, {Name: "inFlight", Value: 40}, {Name: "waiting", Value: 113}, {Name: "overrunning", Value: 2}},
			OldestWaiting: 9.8,
		}},
	}
	if err := d.WriteText(os.Stdout); err != nil {
		fmt.Println(err)
	}
	// Output:
	// scope #42 "profile" FailFast running 1.2s deadline in 0.8s  api/profile.go:31  1 running, 1 succeeded
	//   #2 running 1.2s  api/profile.go:35
	// limiter "llm-api" limit 40  in flight 40  waiting 113 (oldest 9.8s)  overrunning 2
}

func ExampleHandler() {
	mux := http.NewServeMux()
	mux.Handle("/debug/loom", inspect.Handler()) // in a service: http.Handle("/debug/loom", ...)
	for _, target := range []string{"/debug/loom", "/debug/loom?format=json", "/debug/loom?format=html", "/debug/loom?format=xml"} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
		fmt.Println(rec.Code, rec.Header().Get("Content-Type"))
	}
	// Output:
	// 200 text/plain; charset=utf-8
	// 200 application/json
	// 200 text/html; charset=utf-8
	// 400 text/plain; charset=utf-8
}

func ExamplePublish() {
	inspect.Publish() // the dump is now the expvar "loom", at /debug/vars with the others
	fmt.Println(expvar.Get("loom") != nil)
	// Output: true
}

func ExampleStats_Get() {
	st := inspect.Stats{{Name: "limit", Value: 40}, {Name: "waiting", Value: 113}}
	n, ok := st.Get("waiting")
	fmt.Println(n, ok)
	// Output: 113 true
}

func ExampleFeature_String() {
	fmt.Println(inspect.Scopes, inspect.Labels, inspect.Scopes|inspect.Labels)
	// Output: scopes labels scopes|labels
}
