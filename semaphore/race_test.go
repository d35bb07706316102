package semaphore_test

import (
	"context"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/semaphore"
)

// These tests run real interleavings many times over: each one failed on an earlier core within a
// fraction of a second, under -race and without it. They do not use synctest: the races they look
// for are between goroutines running at once on different cores.

// flip keeps switching the capacity between a and b until stop is closed; the returned channel is
// closed once it has stopped, with the capacity at b.
func flip(s *semaphore.Semaphore, a, b int64, stop <-chan struct{}) <-chan struct{} {
	flipped := make(chan struct{})
	go func() {
		defer close(flipped)
		for {
			select {
			case <-stop:
				return
			default:
				s.SetCapacity(a)
				s.SetCapacity(b)
			}
		}
	}()
	return flipped
}

// "A Release(n) by a holder of n permits never panics and never loses a permit, whatever
// SetCapacity does concurrently." The release used to add to the state word and only then read
// the capacity, so a whole shrink could land between the two and turn a legitimate release into
// "released more than held", with the permit subtracted on that path.
func TestReleaseRacingShrinkKeepsEveryPermit(t *testing.T) {
	modes(t, func(t *testing.T, opts ...semaphore.Option) {
		sem := semaphore.New(100, opts...)
		stop := make(chan struct{})
		flipped := flip(sem, 1, 100, stop)
		for range 100_000 {
			if err := sem.Acquire(t.Context(), 1); err != nil {
				close(stop)
				<-flipped
				t.Fatal(err)
			}
			sem.Release(1) // must never panic: we hold exactly one
		}
		close(stop)
		<-flipped
		require.Equal(t, int64(100), sem.Capacity())
		require.Equal(t, int64(100), sem.Available(), "no permit lost")
		require.Equal(t, 0, sem.Waiting())
	})
}

// An over-release is still refused while the capacity moves.
func TestOverReleaseStillPanicsWhileCapacityMoves(t *testing.T) {
	sem := semaphore.New(10)
	stop := make(chan struct{})
	flipped := flip(sem, 5, 10, stop)
	for range 1000 {
		require.PanicsWithValue(t, "semaphore: released more than held", func() { sem.Release(11) })
	}
	close(stop)
	<-flipped
	assert.Equal(t, int64(10), sem.Available(), "a refused release leaves the count as it was")
}

// "A waiter whose n exceeds the capacity at the moment it would queue gets ErrInvalidWeight at
// once, also when a shrink lands between its first check and its queueing." The weight check
// used to happen only before the lock, so an Acquire(5) racing SetCapacity(2) could end up queued
// behind a waiter for 2, waiting until the head left or forever.
func TestAcquireRacingShrinkNeverQueuesAnImpossibleRequest(t *testing.T) {
	modes(t, func(t *testing.T, opts ...semaphore.Option) {
		for i := range 3000 {
			sem := semaphore.New(10, opts...)
			require.NoError(t, sem.Acquire(t.Context(), 10))
			ctx, cancel := context.WithCancel(t.Context())
			head := make(chan error, 1)
			go func() { head <- sem.Acquire(ctx, 2) }()
			for sem.Waiting() == 0 {
				runtime.Gosched()
			}
			big := make(chan error, 1)
			shrunk := make(chan struct{})
			start := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { defer wg.Done(); <-start; big <- sem.Acquire(ctx, 5) }()
			go func() { <-start; sem.SetCapacity(2); close(shrunk) }()
			close(start)
			<-shrunk
			// From here on the capacity is 2: the Acquire of 5 must return ErrInvalidWeight (if it
			// had queued before the shrink, the shrink failed it), never be queued behind the head.
			for len(big) == 0 && sem.Waiting() < 2 {
				runtime.Gosched()
			}
			if len(big) == 0 {
				waiting := sem.Waiting()
				cancel()
				wg.Wait()
				t.Fatalf("round %d: Acquire(5) queued after a shrink to capacity 2 (Waiting %d)", i, waiting)
			}
			wg.Wait()
			require.ErrorIs(t, <-big, semaphore.ErrInvalidWeight)
			cancel()
			require.ErrorIs(t, <-head, context.Canceled)
			require.Equal(t, 0, sem.Waiting())
		}
	})
}

// "In fair mode TryAcquire fails from the moment a waiter starts to queue: no arrival may take a
// free permit while the first waiter is being enqueued." The first waiter used to be counted in
// Waiting before the state word said that someone was queued, so a holder that saw it waiting,
// gave its permit back and at once tried to take it again could overtake it. (The Release pulls
// the state word into the holder's cache, which delays the waiter's own update of it: that is
// what makes the window wide enough to hit.)
func TestFairTryAcquireNeverOvertakesAWaiterBeingQueued(t *testing.T) {
	sem := semaphore.New(1)
	for i := range 20_000 {
		require.NoError(t, sem.Acquire(t.Context(), 1))
		res := make(chan error, 1)
		go func() { res <- sem.Acquire(t.Context(), 1) }()
		for sem.Waiting() == 0 { // the waiter is counted: from now on it is first in line
		}
		sem.Release(1)
		if sem.TryAcquire(1) {
			sem.Release(1)
			<-res
			t.Fatalf("round %d: a fair TryAcquire took the permit ahead of a queued waiter", i)
		}
		require.NoError(t, <-res)
		sem.Release(1)
	}
	require.Equal(t, int64(1), sem.Available())
	require.Equal(t, 0, sem.Waiting())
}
