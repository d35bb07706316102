// Package registry is where scope and limiter record what package inspect shows — the open scopes
// with their running subtasks, and the named limiters — together with the feature switches and the
// pprof-label and runtime/trace helpers both use. scope and limiter import this package, never
// inspect: the hot path does not depend on the viewer.
//
// # Features
//
// [Scopes] records open scopes; [Labels] puts pprof labels on subtasks and limiter tasks. Both are
// off unless the LOOM_INSPECT environment variable names them when the program starts (it is read
// here, in this package's init, so a program that never imports inspect gets its labels and traces
// too), or [Enable] turns them on. A runtime/trace recording needs no switch: [Open] sees it.
//
// # Cost
//
// With every feature off and no trace recording, [Active] (one atomic load and trace.IsEnabled) is
// all a scope's Open pays, and a nil check of its [*Scope] all a fork pays. With Scopes on, a fork
// is counted with one atomic add that also gives it its place in fork order, kept in its [Task],
// eight bytes inside the subtask's own allocation (no allocation per fork); the subtask's
// goroutine claims a free slot of the scope's table of running subtasks with a CAS of that number
// and stores its start time and its function's entry there, and its completion clears the slot
// and counts the outcome. No mutex is taken and no pointer is written on any of these paths, so
// neither a lock nor a write barrier is paid. Sites are stored as program counters and resolved
// only when a dump is taken. Open's site costs a walk of frame pointers (about 270 ns less than
// runtime.Callers, which it falls back to where the walk is not checked to work), the function's
// entry a load from the func value (4 ns less than reflect): together about a tenth of what
// recording adds to a fork/join of 100 subtasks, see BenchmarkOpenSite and BenchmarkFuncPC.
//
// # Concurrency
//
// Every function here is safe for concurrent use. A dump locks one shard's list of open scopes at
// a time, only to copy its pointers (an Open or a Join of that shard may wait that long), and
// reads each scope's counters and slots with atomic loads, so it never holds up a fork or a
// completion.
package registry
