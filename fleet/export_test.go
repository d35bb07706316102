package fleet

// RenewNow renews every lease of s at once, on the caller's goroutine, as the worker would when
// it is time; tests race it against Release.
func RenewNow(s *Semaphore) {
	s.mu.Lock()
	s.renewNow = true
	s.mu.Unlock()
	s.renew()
}

// Flush sends the pending releases of s now, on the caller's goroutine.
func Flush(s *Semaphore) { s.flush() }

// Entries returns how many waiters' entries s maps by lease ID, and how many waiters its line
// holds.
func Entries(s *Semaphore) (entries, line int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byID), len(s.line)
}
