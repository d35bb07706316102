package contract_test

import (
	"bytes"
	"fmt"
	"runtime"
	"strconv"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// catch runs f and returns what it panicked with, or nil.
func catch(f func()) (r any) {
	defer func() { r = recover() }()
	f()
	return nil
}

// panicMsg runs f and returns its panic value as text and whether it panicked.
func panicMsg(f func()) (string, bool) {
	panicked := true
	var r any
	func() {
		defer func() { r = recover() }()
		f()
		panicked = false
	}()
	if !panicked {
		return "", false
	}
	return fmt.Sprint(r), true
}

// goid returns the id of the calling goroutine, parsed from its stack header.
func goid() uint64 {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	buf = bytes.TrimPrefix(buf, []byte("goroutine "))
	buf = buf[:bytes.IndexByte(buf, ' ')]
	id, err := strconv.ParseUint(string(buf), 10, 64)
	if err != nil {
		panic(err)
	}
	return id
}

// isSame reports whether two errors are the identical value (==), not merely alike.
func isSame(a, b error) bool { return a == b }
