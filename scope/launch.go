package scope

import "unsafe"

// A launch is a forked subtask laid out behind the func value that starts its goroutine, so that
// a fork allocates once: `go st.start()` allocates a closure for the method value st.start beside
// the subtask, and that second allocation was a fifth of a fork's cost (see BenchmarkForkJoin's
// start=closure rows, which run the fallback below).
//
// A func value is a pointer to a closure, whose first word is the code the call jumps to, with
// the closure pointer in hand. The closure of a method value x.start, where x is an interface
// value, is that word — the code of one wrapper the compiler makes for the interface's method —
// and then x itself (its type word and its data word), which the wrapper loads through the
// closure pointer and calls start on. A launch is such a closure with the subtask behind it: code
// is the wrapper's, x holds &sub. The go statement reads code once, as it starts the goroutine;
// the wrapper then reads x. (An interface's method value, because the wrapper of a generic type's
// method value may keep more than its receiver in its closure.)
//
// No spec promises that layout, though the compiler has used it since Go 1.1: launchWorks checks
// it at init on a method value of each kind of subtask, and goStart falls back to `go x.start()`
// if it does not hold. TestLaunch starts subtasks of several kinds and sizes through launches, and
// fails if the layout changes under them.
type launch[S any] struct {
	code uintptr // the code of starter's start method-value wrapper
	x    starter // &sub
	sub  S
}

// A starter is a forked subtask, as its goroutine starts it.
type starter interface{ start() }

// launchCode is the code of a method value of starter.start; 0 when method values are not laid
// out as a launch expects (see launchWorks).
var launchCode = launchWorks()

// goStart starts the goroutine of sub, a forked subtask: through its launch, or, if method values
// are not laid out as launch expects, as `go x.start()`.
func (l *launch[S]) goStart(x starter) {
	if launchCode == 0 {
		go x.start()
		return
	}
	l.code, l.x = launchCode, x
	p := unsafe.Pointer(l)
	f := *(*func())(unsafe.Pointer(&p))
	go f()
}

// launchWorks returns the code of a method value of starter.start, if the closures of such
// method values, for both kinds of forked subtask, hold the code and then the interface value, as
// a launch does; else 0.
func launchWorks() uintptr {
	type closure struct {
		code uintptr
		x    [2]unsafe.Pointer
	}
	var code uintptr
	for _, x := range []starter{new(Subtask[int]), new(goTask)} {
		f := x.start
		c := *(**closure)(unsafe.Pointer(&f))
		if c.x != *(*[2]unsafe.Pointer)(unsafe.Pointer(&x)) || code != 0 && c.code != code {
			return 0
		}
		code = c.code
	}
	return code
}
