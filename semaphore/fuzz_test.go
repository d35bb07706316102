package semaphore_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"

	"github.com/goloom/loom/semaphore"
)

// model is the semaphore as DESIGN.md describes it, one step at a time.
type model struct {
	fair       bool
	capacity   int64
	avail      int64
	queue      []int // waiter ids, in arrival order
	n          map[int]int64
	outcome    map[int]string // "granted", "invalid", "cancelled" once decided
	newOutcome []int
}

func (m *model) decide(id int, outcome string) {
	m.outcome[id] = outcome
	m.newOutcome = append(m.newOutcome, id)
}

func (m *model) fits(n int64) bool {
	return n <= m.capacity && m.avail >= n && (!m.fair || len(m.queue) == 0)
}

// serve grants from the head of the queue while the head fits.
func (m *model) serve() {
	for len(m.queue) > 0 {
		id := m.queue[0]
		if m.n[id] > m.capacity {
			m.queue = m.queue[1:]
			m.decide(id, "invalid")
			continue
		}
		if m.avail < m.n[id] {
			return
		}
		m.avail -= m.n[id]
		m.queue = m.queue[1:]
		m.decide(id, "granted")
	}
}

// FuzzSemaphore drives a random sequence of operations, decoded from the input two bytes at a
// time, against both the semaphore and the model, and checks after every step that they agree on
// each waiter's outcome, Available, Waiting and Capacity.
func FuzzSemaphore(f *testing.F) {
	f.Add([]byte{0, 0, 3, 0, 3, 0, 1, 0, 2, 0})
	f.Add([]byte{1, 0, 2, 0, 3, 0, 1, 0, 4, 1, 2, 0, 2, 0})
	f.Add([]byte{0, 0, 4, 0, 4, 0, 1, 1, 0, 4, 5, 2, 3, 2})
	f.Add([]byte{0, 0, 3, 0, 1, 0, 3, 2, 4, 3, 1, 0, 2, 0, 2, 1})
	f.Add([]byte{1, 3, 2, 0, 1, 0, 4, 0, 5, 3, 2, 0, 0, 2})
	f.Fuzz(func(t *testing.T, input []byte) {
		if len(input) == 0 || len(input) > 200 {
			return
		}
		synctest.Test(t, func(t *testing.T) {
			fair := input[0]%2 == 0
			var opts []semaphore.Option
			if !fair {
				opts = append(opts, semaphore.Unfair())
			}
			const initial = 4
			s := semaphore.New(initial, opts...)
			m := &model{fair: fair, capacity: initial, avail: initial, n: map[int]int64{}, outcome: map[int]string{}}

			type waiter struct {
				cancel context.CancelFunc
				err    chan error
				done   bool // its result has been checked
			}
			var waiters []waiter
			var holders []int64 // permits held, per successful acquire
			defer func() {
				for _, w := range waiters {
					w.cancel()
				}
			}()

			for i := 1; i+1 < len(input); i += 2 {
				op, arg := input[i]%6, int64(input[i+1])
				m.newOutcome = m.newOutcome[:0]
				switch op {
				case 0: // Acquire that may block
					n := arg % 5
					id := len(waiters)
					ctx, cancel := context.WithCancel(t.Context())
					w := waiter{cancel: cancel, err: make(chan error, 1)}
					waiters = append(waiters, w)
					go func() { w.err <- s.Acquire(ctx, n) }()
					m.n[id] = n
					switch {
					case n > m.capacity:
						m.decide(id, "invalid")
					case n == 0 || m.fits(n):
						m.avail -= n
						m.decide(id, "granted")
					default:
						m.queue = append(m.queue, id)
					}
				case 1: // cancel a waiter
					if len(waiters) == 0 {
						continue
					}
					id := int(arg) % len(waiters)
					waiters[id].cancel()
					if k := slices.Index(m.queue, id); k >= 0 {
						m.queue = slices.Delete(m.queue, k, k+1)
						m.decide(id, "cancelled")
						if k == 0 {
							m.serve()
						}
					}
				case 2: // Release what one holder holds
					if len(holders) == 0 {
						continue
					}
					k := int(arg) % len(holders)
					n := holders[k]
					holders = slices.Delete(holders, k, k+1)
					s.Release(n)
					m.avail += n
					m.serve()
				case 3, 5: // TryAcquire, or AcquireTimeout with d <= 0
					n := arg % 5
					want := n <= m.capacity && (n == 0 || m.fits(n))
					var got bool
					if op == 3 {
						got = s.TryAcquire(n)
					} else {
						err := s.AcquireTimeout(t.Context(), n, 0)
						got = err == nil
						if !got && n <= m.capacity && !errors.Is(err, semaphore.ErrTimeout) {
							t.Fatalf("step %d: AcquireTimeout(%d, 0) = %v, want ErrTimeout", i, n, err)
						}
					}
					if got != want {
						t.Fatalf("step %d: immediate acquire of %d = %v, model says %v (avail %d, queue %v)",
							i, n, got, want, m.avail, m.queue)
					}
					if got {
						m.avail -= n
						holders = append(holders, n)
					}
				case 4: // SetCapacity
					c := arg % 7
					s.SetCapacity(c)
					m.avail += c - m.capacity
					m.capacity = c
					kept := m.queue[:0]
					for _, id := range m.queue {
						if m.n[id] > c {
							m.decide(id, "invalid")
						} else {
							kept = append(kept, id)
						}
					}
					m.queue = kept
					m.serve()
				}
				synctest.Wait() // every waiter has settled: blocked in the queue, or returned

				for id := range waiters {
					w := &waiters[id]
					if w.done {
						continue
					}
					if len(w.err) == 0 {
						if _, decided := m.outcome[id]; decided {
							t.Fatalf("step %d: waiter %d still blocked, model says %s", i, id, m.outcome[id])
						}
						continue
					}
					err := <-w.err
					want, decided := m.outcome[id]
					if !decided {
						t.Fatalf("step %d: waiter %d returned %v, model says it is queued", i, id, err)
					}
					var got string
					switch {
					case err == nil:
						got = "granted"
						holders = append(holders, m.n[id])
					case errors.Is(err, semaphore.ErrInvalidWeight):
						got = "invalid"
					case errors.Is(err, context.Canceled):
						got = "cancelled"
					default:
						t.Fatalf("step %d: waiter %d: unexpected error %v", i, id, err)
					}
					if got != want {
						t.Fatalf("step %d: waiter %d %s, model says %s", i, id, got, want)
					}
					w.done = true
				}
				if s.Available() != m.avail || s.Waiting() != len(m.queue) || s.Capacity() != m.capacity {
					t.Fatalf("step %d: Available %d Waiting %d Capacity %d, model %d %d %d", i,
						s.Available(), s.Waiting(), s.Capacity(), m.avail, len(m.queue), m.capacity)
				}
			}
			// Drain: cancel every waiter still queued, give back every permit; all must be free.
			for _, w := range waiters {
				w.cancel()
			}
			synctest.Wait()
			for id, w := range waiters {
				if w.done {
					continue
				}
				if err := <-w.err; err == nil {
					holders = append(holders, m.n[id])
				}
			}
			for _, n := range holders {
				s.Release(n)
			}
			if s.Available() != s.Capacity() || s.Waiting() != 0 {
				t.Fatalf("at rest: Available %d, Capacity %d, Waiting %d", s.Available(), s.Capacity(), s.Waiting())
			}
		})
	})
}
