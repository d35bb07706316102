// Command handler is an HTTP service whose profile endpoint fans out to a user service and an
// orders service inside one scope, with a deadline for both:
//
//	s := scope.Open(r.Context(), scope.WithTimeout(300*time.Millisecond))
//	defer s.Close()
//	user := scope.Fork(s, fetchUser)
//	orders := scope.Fork(s, fetchOrders)
//	err := s.Join() // the first failure cancels the other call; the deadline cancels both
//
// A middleware binds the request ID as a scoped value; the forks read it to pass it on to the
// backends, and a log/slog handler adds it to every record logged with the request's context.
//
// Run alone, it starts the three services on loopback ports, sends three requests — one that
// succeeds, one where the user service fails, one where the orders service is too slow — prints
// what was logged and what came back, and exits (in about a second):
//
//	go run ./examples/handler
//
// With -serve it keeps the profile service running on -addr instead (Ctrl-C stops it):
//
//	go run ./examples/handler -serve -addr 127.0.0.1:8080
//	curl -H 'X-Request-ID: r-7' http://127.0.0.1:8080/profile/1
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/goloom/loom/inspect"
	"github.com/goloom/loom/scope"
	"github.com/goloom/loom/scopedvalue"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "handler:", err)
		os.Exit(1)
	}
}

// RequestID is bound by the middleware for the whole of a request, forks included.
var RequestID = scopedvalue.New[string]("request-id")

func run(ctx context.Context, w io.Writer, args []string) error {
	fs := flag.NewFlagSet("handler", flag.ContinueOnError)
	fs.SetOutput(w)
	serve := fs.Bool("serve", false, "keep the profile service running on -addr until interrupted")
	addr := fs.String("addr", "127.0.0.1:8080", "address of the profile service with -serve")
	timeout := fs.Duration("timeout", 300*time.Millisecond, "deadline of the profile endpoint's scope")
	if err := fs.Parse(args); err != nil {
		return err
	}

	// Package inspect records every open scope, for /debug/loom (in a service of your own, set
	// LOOM_INSPECT=scopes instead).
	inspect.Enable(inspect.Scopes)
	defer inspect.Disable(inspect.Scopes)

	// Log records go to out, each with the request ID of the context it was logged with.
	var logMu sync.Mutex
	logOut := &lockedWriter{mu: &logMu, w: w}
	logger := slog.New(requestIDHandler{slog.NewTextHandler(logOut, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey && len(groups) == 0 {
				return slog.Attr{} // keep the output short and stable
			}
			return a
		},
	})})

	users, err := start("127.0.0.1:0", http.HandlerFunc(userService))
	if err != nil {
		return err
	}
	defer users.close()
	orders, err := start("127.0.0.1:0", http.HandlerFunc(orderService))
	if err != nil {
		return err
	}
	defer orders.close()

	// One client for the backend calls, closed at the end so no connection outlives run.
	backendTransport := &http.Transport{MaxIdleConnsPerHost: 16}
	defer backendTransport.CloseIdleConnections()
	app := &profileService{
		client:  &http.Client{Transport: backendTransport},
		users:   users.url,
		orders:  orders.url,
		timeout: *timeout,
		log:     logger,
	}
	profileAddr := "127.0.0.1:0"
	if *serve {
		profileAddr = *addr
	}
	profile, err := start(profileAddr, withRequestID(app.routes()))
	if err != nil {
		return err
	}
	defer profile.close()

	if *serve {
		fmt.Fprintf(w, "profile service on %s (users on %s, orders on %s); Ctrl-C stops it\n", profile.url, users.url, orders.url)
		fmt.Fprintf(w, "  curl -H 'X-Request-ID: r-7' %s/profile/1   # 1: ok, 2: users fails, 3: orders is slow\n", profile.url)
		fmt.Fprintf(w, "  curl %s/debug/loom   # every open scope and its running subtasks (?format=json, ?format=html)\n", profile.url)
		<-ctx.Done()
		return nil
	}

	fmt.Fprintf(w, "profile service on %s; it fans out to users (%s) and orders (%s) in a scope with a %v deadline\n\n",
		profile.url, users.url, orders.url, *timeout)
	clientTransport := &http.Transport{}
	defer clientTransport.CloseIdleConnections()
	client := &http.Client{Transport: clientTransport}

	type result struct {
		path, id, status, body string
		took                   time.Duration
	}
	var results []result
	for i, path := range []string{"/profile/1", "/profile/2", "/profile/3"} {
		id := fmt.Sprintf("r-%d", 1001+i)
		fmt.Fprintf(w, "GET %s  X-Request-ID: %s\n", path, id)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, profile.url+path, nil)
		if err != nil {
			return err
		}
		req.Header.Set("X-Request-ID", id)
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		took := time.Since(start)
		logMu.Lock() // the handler's forks have returned, but keep the lines whole anyway
		fmt.Fprintf(w, "  -> %s in %v\n     %s\n\n", resp.Status, took.Round(time.Millisecond), bytes.TrimSpace(body))
		logMu.Unlock()
		results = append(results, result{path, resp.Header.Get("X-Request-ID"), resp.Status, string(bytes.TrimSpace(body)), took})
	}

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "request\tX-Request-ID back\tstatus\ttook\twhat happened")
	what := []string{
		"both backends answered; their replies echo the request ID",
		"users failed: the orders call was cancelled, the error returned",
		"orders too slow: the scope's deadline cancelled it (users had answered)",
	}
	for i, r := range results {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%s\n", r.path, r.id, r.status, r.took.Round(time.Millisecond), what[i])
	}
	tw.Flush()

	want := []int{http.StatusOK, http.StatusBadGateway, http.StatusGatewayTimeout}
	for i, r := range results {
		if !strings.HasPrefix(r.status, fmt.Sprint(want[i])) {
			return fmt.Errorf("%s answered %s, want %d", r.path, r.status, want[i])
		}
	}
	return showDump(ctx, &logMu, w, client, profile.url)
}

// showDump asks /debug/loom what the service is doing while a request waits for the slow orders
// backend, and prints the dump: the request's scope, its deadline, and the stuck call, still
// running, with its age and the line of the function that was forked. It writes under logMu: the
// slow request's handler logs to w meanwhile.
func showDump(ctx context.Context, logMu *sync.Mutex, w io.Writer, client *http.Client, url string) error {
	logMu.Lock()
	fmt.Fprintf(w, "\nGET /debug/loom while GET /profile/3 waits for the orders backend:\n\n")
	logMu.Unlock()
	slow := make(chan error, 1)
	go func() {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/profile/3", nil)
		if err != nil {
			slow <- err
			return
		}
		req.Header.Set("X-Request-ID", "r-1004")
		resp, err := client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			err = resp.Body.Close()
		}
		slow <- err
	}()
	get := func() (string, error) {
		resp, err := client.Get(url + "/debug/loom")
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return string(body), err
	}
	// Wait until the users call has come back and only the orders call runs, then let it be
	// stuck a while: it is the old running subtask of the dump.
	for {
		dump, err := get()
		if err != nil {
			return err
		}
		if strings.Contains(dump, `"profile"`) && strings.Contains(dump, "1 running, 1 succeeded") {
			break
		}
		if err := sleep(ctx, time.Millisecond); err != nil {
			return err
		}
	}
	if err := sleep(ctx, 150*time.Millisecond); err != nil {
		return err
	}
	dump, err := get()
	if err != nil {
		return err
	}
	logMu.Lock()
	fmt.Fprint(w, dump)
	logMu.Unlock()
	if err := <-slow; err != nil {
		return err
	}
	if !strings.Contains(dump, "1 running, 1 succeeded") {
		return fmt.Errorf("the dump does not show the stuck orders call:\n%s", dump)
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ---- the profile service ----

type User struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	RequestID string `json:"request_id"` // what the user service received, to show the propagation
}

type Order struct {
	ID    int    `json:"id"`
	Item  string `json:"item"`
	Total int    `json:"total_cents"`
}

type Profile struct {
	User   User    `json:"user"`
	Orders []Order `json:"orders"`
}

type profileService struct {
	client        *http.Client
	users, orders string
	timeout       time.Duration
	log           *slog.Logger
}

func (p *profileService) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /profile/{id}", p.profile)
	mux.Handle("/debug/loom", inspect.Handler()) // what the service is doing: ?format=text|json|html
	return mux
}

// profile fetches the user and their orders at once; the first failure cancels the other call
// and the scope's deadline bounds both.
func (p *profileService) profile(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	ctx := r.Context()
	p.log.InfoContext(ctx, "profile: fan out", "user", id)

	s := scope.Open(ctx, scope.WithTimeout(p.timeout), scope.WithName("profile"))
	defer s.Close()
	// Named forks: a dump (GET /debug/loom) shows "users" and "orders" beside their sites.
	user := scope.ForkNamed(s, "users", func(ctx context.Context) (User, error) {
		var u User
		return u, p.get(ctx, "users", p.users+"/users/"+id, &u)
	})
	orders := scope.ForkNamed(s, "orders", func(ctx context.Context) ([]Order, error) {
		var o []Order
		return o, p.get(ctx, "orders", p.orders+"/orders?user="+id, &o)
	})
	if err := s.Join(); err != nil {
		status := http.StatusBadGateway
		if errors.Is(err, scope.ErrTimeout) {
			status = http.StatusGatewayTimeout
		}
		p.log.WarnContext(ctx, "profile: failed", "status", status, "err", err,
			"users", user.State(), "orders", orders.State())
		writeJSON(w, status, map[string]string{"error": err.Error(), "request_id": RequestID.Get(ctx)})
		return
	}
	p.log.InfoContext(ctx, "profile: done", "orders", len(orders.Get()))
	writeJSON(w, http.StatusOK, Profile{User: user.Get(), Orders: orders.Get()})
}

// get calls a backend, passing the request ID on, and decodes its JSON reply into v.
func (p *profileService) get(ctx context.Context, service, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("X-Request-ID", RequestID.Get(ctx)) // bound by the middleware, seen in the fork
	p.log.DebugContext(ctx, "calling", "service", service)
	resp, err := p.client.Do(req)
	if err != nil {
		// Cancelled by a failing sibling or by the deadline: say which, from the scope's cause.
		p.log.InfoContext(ctx, service+": call abandoned", "cause", context.Cause(ctx))
		return fmt.Errorf("%s: %w", service, context.Cause(ctx))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		p.log.InfoContext(ctx, service+": failed", "status", resp.StatusCode)
		return fmt.Errorf("%s: %s: %s", service, resp.Status, bytes.TrimSpace(msg))
	}
	p.log.InfoContext(ctx, service+": ok")
	return json.NewDecoder(resp.Body).Decode(v)
}

// withRequestID binds the request's X-Request-ID (or a new one) as a scoped value for the rest of
// the request and echoes it in the response.
func withRequestID(next http.Handler) http.Handler {
	var n atomic.Int64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-ID")
		if id == "" {
			id = fmt.Sprintf("gen-%d", n.Add(1))
		}
		w.Header().Set("X-Request-ID", id)
		ctx := scopedvalue.Where(RequestID, id).Context(r.Context())
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// requestIDHandler adds the request ID bound in a record's context to the record.
type requestIDHandler struct{ slog.Handler }

func (h requestIDHandler) Handle(ctx context.Context, r slog.Record) error {
	if id, ok := RequestID.Lookup(ctx); ok {
		r.AddAttrs(slog.String("request_id", id))
	}
	return h.Handler.Handle(ctx, r)
}

func (h requestIDHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return requestIDHandler{h.Handler.WithAttrs(attrs)}
}

func (h requestIDHandler) WithGroup(name string) slog.Handler {
	return requestIDHandler{h.Handler.WithGroup(name)}
}

// ---- the backends ----

// userService knows users 1 and 3; for user 2 its store is down.
func userService(w http.ResponseWriter, r *http.Request) {
	id := strings.TrimPrefix(r.URL.Path, "/users/")
	switch id {
	case "2":
		http.Error(w, "user store down", http.StatusInternalServerError)
	default:
		writeJSON(w, http.StatusOK, User{ID: id, Name: map[string]string{"1": "Ada", "3": "Grace"}[id],
			RequestID: r.Header.Get("X-Request-ID")})
	}
}

// orderService answers at once, except for user 3, whose orders take 2s (or until the caller
// goes away), and user 2, whose orders take 50ms so the user service fails first.
func orderService(w http.ResponseWriter, r *http.Request) {
	user := r.URL.Query().Get("user")
	delay := map[string]time.Duration{"2": 50 * time.Millisecond, "3": 2 * time.Second}[user]
	if delay > 0 {
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return // the caller gave up
		}
	}
	writeJSON(w, http.StatusOK, []Order{{ID: 7, Item: "keyboard", Total: 4900}, {ID: 9, Item: "mouse", Total: 1900}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// ---- plumbing ----

type server struct {
	url string
	srv *http.Server
}

// start serves h on addr in the background.
func start(addr string, h http.Handler) (*server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &server{url: "http://" + ln.Addr().String(), srv: &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// close stops the server and waits for its handlers.
func (s *server) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
}

// lockedWriter keeps concurrent log records from interleaving with each other and with the
// responses printed by run.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := io.WriteString(l.w, "  log: "); err != nil {
		return 0, err
	}
	return l.w.Write(p)
}
