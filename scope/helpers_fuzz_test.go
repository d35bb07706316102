package scope_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/goloom/loom/scope"
)

// FuzzHelpers drives Map, All and Race with random elements — each succeeds, fails, panics or
// calls runtime.Goexit after its own delay, or returns early when its context ends — under a
// random policy, limit and PanicsAsErrors, in a synctest bubble. Every delay is distinct (whole
// seconds plus 2^i microseconds, so no two events of a run can coincide), which makes the run's
// timeline a function of the input: a small event simulation of how Map's workers take elements
// predicts the result, the error and any re-panic, and the fuzzer checks the helper against it.
//
// Input: byte 0 picks the helper and policy, byte 1 the limit and PanicsAsErrors, each further
// byte one element (kind = b % 4, delay = 1 + b/4 % 4 seconds).
func FuzzHelpers(f *testing.F) {
	for _, seed := range [][]byte{
		{0, 0, 0, 4, 8},          // Map: every element succeeds
		{0, 0, 0, 1, 4},          // Map: a failure cancels the rest
		{1, 0, 1, 5, 0, 9},       // Map AwaitAll: every failure, in completion order
		{0, 2, 0, 4, 1, 8, 12},   // Map WithLimit(2): a failure stops the workers
		{1, 3, 2, 0, 6, 1},       // Map AwaitAll, limit, PanicsAsErrors
		{0, 1, 2, 0, 0},          // a panic, as an error
		{0, 0, 3, 4, 0},          // a Goexit is a failure
		{2, 0, 0, 4, 1, 8},       // All
		{3, 0, 1, 5, 4, 2},       // Race: the first success wins
		{3, 0, 1, 5, 9},          // Race: every failure
		{3, 0},                   // Race with no functions
		{0, 4, 2, 6, 3, 0, 1, 0}, // a panic re-panics
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 2 || len(data) > 14 {
			return
		}
		synctest.Test(t, func(t *testing.T) { runHelper(t, data) })
	})
}

type elemKind int

const (
	elemSucceed elemKind = iota
	elemFail
	elemPanic
	elemGoexit
)

type elem struct {
	i    int
	kind elemKind
	d    time.Duration
	err  error // for elemFail
}

func (e elem) run(ctx context.Context) (int, error) {
	select {
	case <-time.After(e.d):
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	switch e.kind {
	case elemFail:
		return 0, e.err
	case elemPanic:
		panic(fmt.Sprintf("panic-%d", e.i))
	case elemGoexit:
		runtime.Goexit()
	}
	return e.i, nil
}

// helperModel is what the simulation predicts.
type helperModel struct {
	won      int   // Race: the winner, or -1
	failures []int // in completion order (failures, Goexits, and panics when they are errors)
	panics   []int // in completion order
}

// simulate runs the timeline: workers take elements in index order as they free up (Map with a
// limit; one worker per element otherwise, and for Race); a completion that ends the scope —
// FailFast's failure, Race's success, any panic — discards every element still running.
func simulate(elems []elem, workers int, failFast, firstSuccess, panicsAsErrors bool) helperModel {
	m := helperModel{won: -1}
	ends := map[int]time.Duration{} // running element -> when it completes
	next := 0
	start := func(at time.Duration) {
		if next < len(elems) {
			ends[next] = at + elems[next].d
			next++
		}
	}
	for range workers {
		start(0)
	}
	for len(ends) > 0 {
		i, at := -1, time.Duration(0)
		for k, e := range ends {
			if i < 0 || e < at {
				i, at = k, e
			}
		}
		delete(ends, i)
		end := false
		switch elems[i].kind {
		case elemFail, elemGoexit:
			m.failures = append(m.failures, i)
			end = failFast
		case elemPanic:
			m.panics = append(m.panics, i)
			if panicsAsErrors {
				m.failures = append(m.failures, i)
			}
			end = true
		case elemSucceed:
			if firstSuccess {
				m.won, end = i, true
			}
		}
		if end {
			clear(ends) // they see the context done and return: discarded
			next = len(elems)
		}
		start(at)
	}
	return m
}

func runHelper(t *testing.T, data []byte) {
	mode, flags := data[0]%4, data[1]
	panicsAsErrors := flags&1 != 0 && mode < 2 // All and Race take no options
	limit := int(flags>>1) % 4                 // 0: no limit
	awaitAll := mode == 1
	var elems []elem
	for i, b := range data[2:] {
		e := elem{i: i, kind: elemKind(b % 4), d: time.Duration(1+int(b/4)%4)*time.Second + time.Duration(1<<i)*time.Microsecond}
		e.err = fmt.Errorf("fail-%d", i)
		elems = append(elems, e)
	}
	fns := make([]func(context.Context) (int, error), len(elems))
	for i, e := range elems {
		fns[i] = e.run
	}

	workers := len(elems)
	if mode < 2 && limit > 0 {
		workers = min(workers, limit)
	}
	m := simulate(elems, workers, !awaitAll && mode != 3, mode == 3, panicsAsErrors)

	var out []int
	var v int
	var err error
	r := catch(func() {
		switch mode {
		case 0, 1:
			var opts []scope.Option
			if awaitAll {
				opts = append(opts, scope.AwaitAll())
			}
			if limit > 0 {
				opts = append(opts, scope.WithLimit(limit))
			}
			if panicsAsErrors {
				opts = append(opts, scope.PanicsAsErrors())
			}
			out, err = scope.Map(t.Context(), elems, func(ctx context.Context, e elem) (int, error) { return e.run(ctx) }, opts...)
		case 2:
			out, err = scope.All(t.Context(), fns...)
		case 3:
			v, err = scope.Race(t.Context(), fns...)
		}
	})
	where := fmt.Sprintf("mode %d, limit %d, PanicsAsErrors %v, elements %v", mode, limit, panicsAsErrors, elems)

	// A panic re-panics, unless it is an error.
	if len(m.panics) > 0 && !panicsAsErrors {
		pe, ok := r.(*scope.PanicError)
		if !ok || pe.Value != fmt.Sprintf("panic-%d", m.panics[0]) {
			t.Fatalf("%s: recovered %v, want the first panic, of element %d", where, r, m.panics[0])
		}
		return
	}
	if r != nil {
		t.Fatalf("%s: unexpected panic %v", where, r)
	}

	// The error: the policy's, then (PanicsAsErrors) every panic not in it.
	errOf := func(i int) string {
		switch elems[i].kind {
		case elemFail:
			return elems[i].err.Error()
		case elemGoexit:
			return scope.ErrGoexit.Error()
		}
		return fmt.Sprintf("panic-%d", i)
	}
	var want []string
	switch {
	case mode == 3 && m.won >= 0:
	case mode == 3 && len(m.failures) == 0:
		want = append(want, scope.ErrNoSubtasks.Error())
	case awaitAll || mode == 3:
		for _, i := range m.failures {
			want = append(want, errOf(i))
		}
	case len(m.failures) > 0:
		want = append(want, errOf(m.failures[0]))
	}
	for _, i := range m.panics {
		if s := errOf(i); !slices.Contains(want, s) {
			want = append(want, s)
		}
	}
	var got []string
	if err != nil {
		for _, e := range unwrapAll(err) {
			var pe *scope.PanicError
			if errors.As(e, &pe) {
				got = append(got, fmt.Sprint(pe.Value))
			} else {
				got = append(got, e.Error())
			}
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%s: error %v, want %v", where, got, want)
	}

	// The values.
	switch {
	case mode == 3:
		if m.won >= 0 && v != m.won {
			t.Fatalf("%s: Race returned %d, want the first success, %d", where, v, m.won)
		}
	case err != nil:
		if out != nil {
			t.Fatalf("%s: a non-nil slice with an error", where)
		}
	default:
		if len(out) != len(elems) {
			t.Fatalf("%s: %d results for %d elements", where, len(out), len(elems))
		}
		for i := range out {
			if out[i] != i {
				t.Fatalf("%s: out[%d] = %d", where, i, out[i])
			}
		}
	}
}
