package redisfleet_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/goloom/loom/fleet/fleetdriver"
	"github.com/goloom/loom/fleet/fleettest"
	"github.com/goloom/loom/fleet/redisfleet"
	"github.com/goloom/loom/fleet/redisfleet/internal/redistest"
)

// The Redis backend passes the conformance kit on a real redis-server, faults included: every
// process has a client of its own; Restart kills the server and starts it without its data,
// Rewind restarts it from an RDB snapshot taken earlier, Freeze stops it with SIGSTOP.
func TestRedisConformance(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Persistent...)
	admin := srv.Client()
	fleettest.TestBackend(t, fleettest.Harness{
		Process: func(*testing.T) fleetdriver.Backend { return redisfleet.New(srv.Client()) },
		Restart: func(t *testing.T) {
			_ = os.Remove(filepath.Join(srv.Dir(), "dump.rdb"))
			srv.Restart()
		},
		Rewind: func(t *testing.T) func() {
			if err := admin.Save(t.Context()).Err(); err != nil {
				t.Fatal(err)
			}
			older := srv.CopyFiles()
			return func() { srv.RestartFrom(older) }
		},
		Freeze: func(*testing.T) func() {
			srv.Signal(syscall.SIGSTOP)
			return func() { srv.Signal(syscall.SIGCONT) }
		},
	})
}
