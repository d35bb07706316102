// Package testutil holds helpers shared by the module's tests.
package testutil

import (
	"bytes"
	"sync"
)

// A SyncBuffer is a bytes.Buffer that one goroutine may write while another reads it, such as
// an example's output read by its test while the example still runs. The zero value is ready.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what has been written so far.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
