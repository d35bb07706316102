// Package redistest starts throw-away redis-server processes for tests, and a TCP proxy that
// delays or cuts the traffic to one. A server listens on a free loopback port, keeps its files in
// a temporary directory, persists nothing unless the test asks for it (by default --save ""
// --appendonly no; [Persistent] and [AOF] turn on RDB snapshots or an append-only file), and is
// killed when the test ends; no test ever talks to a Redis it did not start. A test can freeze
// a server (SIGSTOP), restart it with or without its files, and put an older copy of its files
// back, so that it comes back with a state that went back in time.
//
// A crash is SIGKILL ([Server.Kill], and every restart); the end of a test stops the server
// gracefully ([Server.Stop]: SIGTERM, as an operator's shutdown), so that a server run under a
// profiler writes its output. $REDIS_SERVER may name a wrapper for that, e.g. a script that runs
// exec valgrind --tool=callgrind redis-server "$@".
//
// Without a redis-server binary (on PATH, or named by $REDIS_SERVER), the tests that need one
// skip with a message saying how to install it; with CI=true they fail instead, so that CI never
// passes by skipping them.
package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Install is how to get redis-server on the Debian and Ubuntu machines the tests run on.
const Install = "apt-get update && apt-get install -y redis-server"

// Binary returns the path of the redis-server binary. Without one it skips tb, or fails it when
// the environment variable CI is "true".
func Binary(tb testing.TB) string {
	tb.Helper()
	if p := os.Getenv("REDIS_SERVER"); p != "" {
		return p
	}
	p, err := exec.LookPath("redis-server")
	if err == nil {
		return p
	}
	msg := "redis-server not found; to run the Redis tests install it (" + Install + ") or set REDIS_SERVER to its path"
	if os.Getenv("CI") == "true" {
		tb.Fatal(msg + " — CI=true: a missing server fails the run")
	}
	tb.Skip(msg)
	return ""
}

// A Server is a redis-server process of one test.
type Server struct {
	Addr string // host:port on loopback

	tb   testing.TB
	bin  string
	dir  string
	args []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// Start starts a redis-server on a free loopback port, with extra command-line args if any, and
// stops it (see [Server.Stop]) when tb ends. It skips or fails tb as [Binary] does when there is no binary.
func Start(tb testing.TB, args ...string) *Server {
	tb.Helper()
	s := &Server{tb: tb, bin: Binary(tb), dir: tb.TempDir(), args: args}
	var err error
	for range 5 { // a free port may be taken between our look and the server's bind
		s.Addr = "127.0.0.1:" + strconv.Itoa(freePort(tb))
		if err = s.start(); err == nil {
			tb.Cleanup(s.Stop)
			return s
		}
	}
	tb.Fatalf("redistest: cannot start redis-server: %v", err)
	return nil
}

func freePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("redistest: no free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (s *Server) logFile() string { return filepath.Join(s.dir, "redis.log") }

// start runs the server on s.Addr and waits until it answers PING.
func (s *Server) start() error {
	_, port, _ := net.SplitHostPort(s.Addr)
	args := append([]string{
		"--port", port, "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no",
		"--dir", s.dir, "--logfile", s.logFile(), "--daemonize", "no",
	}, s.args...)
	cmd := exec.Command(s.bin, args...)
	cmd.Dir = s.dir
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if ping(s.Addr) == nil {
			s.mu.Lock()
			s.cmd, s.exited = cmd, exited
			s.mu.Unlock()
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("redis-server exited at start: %s", s.tail())
		default:
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-exited
			return fmt.Errorf("redis-server did not answer within 10s: %s", s.tail())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// tail returns the last lines of the server's log, for error messages.
func (s *Server) tail() string {
	b, err := os.ReadFile(s.logFile())
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-3):], " | ")
}

func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return errors.New("redistest: PING answered " + strings.TrimSpace(line))
	}
	return nil
}

// Persistent are the arguments of a server that persists only when told: SAVE writes dump.rdb
// (no automatic snapshots, so a test decides what each snapshot holds), and a restart loads it.
var Persistent = []string{"--save", "", "--dbfilename", "dump.rdb"}

// AOF are the arguments of a server with an append-only file, fsynced every second (Redis's
// appendfsync default), as production runs it.
var AOF = []string{"--appendonly", "yes", "--appendfsync", "everysec", "--appenddirname", "aof"}

// Signal sends sig to the server process: SIGSTOP freezes it (its clients wait until their own
// timeouts, its connections stay open), SIGCONT lets it go on.
func (s *Server) Signal(sig syscall.Signal) {
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd != nil {
		_ = cmd.Process.Signal(sig)
	}
}

// Dir returns the server's data directory.
func (s *Server) Dir() string { return s.dir }

// CopyFiles copies the server's data files (dump.rdb and the aof directory, whichever exist) to
// a new directory and returns it: what a backup, or an older snapshot, holds.
func (s *Server) CopyFiles() string {
	s.tb.Helper()
	dst := s.tb.TempDir()
	for _, name := range []string{"dump.rdb", "aof"} {
		if err := copyTree(filepath.Join(s.dir, name), filepath.Join(dst, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.tb.Fatalf("redistest: copy %s: %v", name, err)
		}
	}
	return dst
}

// RestartFrom kills the server and starts it again on the same address with the data files of
// from (a directory from CopyFiles): a restart with a state that went back in time, as a restore
// from an older RDB snapshot, or an AOF that lost its tail.
func (s *Server) RestartFrom(from string) {
	s.tb.Helper()
	s.Kill()
	for _, name := range []string{"dump.rdb", "aof"} {
		_ = os.RemoveAll(filepath.Join(s.dir, name))
		if err := copyTree(filepath.Join(from, name), filepath.Join(s.dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.tb.Fatalf("redistest: restore %s: %v", name, err)
		}
	}
	s.Restart()
}

// copyTree copies a file, or a directory of files, from src to dst.
func copyTree(src, dst string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		b, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := copyTree(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// Kill kills the server with SIGKILL and waits for it to exit: it loses every key it has not
// persisted. Killing a server that is not running does nothing.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd, s.exited = nil, nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-exited
}

// stopWait bounds how long Stop waits for a graceful exit (a server under valgrind writes its
// profile first) before it kills the server.
const stopWait = time.Minute

// Stop ends the server as an operator would: SIGCONT (in case it is frozen), then SIGTERM, on
// which Redis exits cleanly (saving only if it was told to, as a shutdown does); after stopWait
// it is killed. A server run under a profiler (valgrind) writes its output on the way out. Stop
// waits for the exit; stopping a server that is not running does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd, s.exited = nil, nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGCONT)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(stopWait):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-exited
	}
}

// Restart kills the server and starts a new one on the same address and directory: without
// persistence, a restart with data loss; with it, the server loads what its files hold.
func (s *Server) Restart() {
	s.tb.Helper()
	s.Kill()
	var err error
	for range 50 { // the port is normally free at once; give the kernel a moment if not
		if err = s.start(); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.tb.Fatalf("redistest: cannot restart redis-server on %s: %v", s.Addr, err)
}

// Options returns client options for the server: ctx deadlines reach the network
// (ContextTimeoutEnabled), and the client's own timeouts are long enough for a loaded machine
// (10 s): a test that wants an unreachable Redis to show sooner sets its own.
func (s *Server) Options() *redis.Options {
	return &redis.Options{
		Addr:                  s.Addr,
		ContextTimeoutEnabled: true,
		DialTimeout:           5 * time.Second,
		ReadTimeout:           10 * time.Second,
		WriteTimeout:          10 * time.Second,
	}
}

// Client returns a client of the server (of Options, changed by each edit), closed when the test
// ends.
func (s *Server) Client(edits ...func(*redis.Options)) *redis.Client {
	o := s.Options()
	for _, e := range edits {
		e(o)
	}
	c := redis.NewClient(o)
	s.tb.Cleanup(func() { _ = c.Close() })
	return c
}
