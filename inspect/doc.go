// Package inspect shows what loom is doing in a running process: every open scope as a tree — its
// name, policy, age, deadline, state and cancellation cause, the site of its Open call, its
// running subtasks with their ages and fork sites, the forks blocked on its limit — and every
// named limiter with its queue and oldest waiter. It is Go's answer to Java's
// `jcmd <pid> Thread.dump_to_file -format=json`, with what that dump lacks.
//
//	inspect.Enable(inspect.Scopes)                // or LOOM_INSPECT=scopes at start-up
//	http.Handle("/debug/loom", inspect.Handler()) // text by default; ?format=json, ?format=html
//	d := inspect.Snapshot()                       // the same data as a value
//	d.WriteText(os.Stderr)
//
// # Features
//
// [Scopes] records the scopes opened while it is on; a scope opened while it is off never appears.
// [Labels] gives every subtask and every limiter task pprof goroutine labels (loom.scope = the
// scope's name, loom.limiter = the limiter's name: names, never ids, so that a profile has few
// values), so that `go tool pprof -tagfocus loom.scope=profile` splits CPU and goroutine profiles
// by scope or limiter. Both are off by default; the environment variable
// LOOM_INSPECT, a comma-separated list of "scopes", "labels" (or "all"), turns them on when the
// program starts, whether or not it imports this package. Named limiters are listed whatever the
// features. While a runtime/trace recording runs, each scope is also a trace task named after it,
// each subtask a region in it, each limiter wait a region "loom.limiter.wait", and a scope's
// cancellation is logged on its task with its cause.
//
// # Labels are inherited
//
// A goroutine starts with the labels of the goroutine that starts it (Go's rule, not loom's), and
// keeps them for its whole life. So a goroutine that a subtask starts and that outlives it — an
// HTTP transport dialling a connection for the subtask's request, a pool's worker, a cache's
// refresher — carries the scope's label long after the scope has closed, and a goroutine profile
// counts it under that scope. Start such goroutines outside the scope where you can (warm pools
// and clients up at start-up). Where you cannot, give them labels of their own at the go
// statement:
//
//	pprof.Do(context.Background(), pprof.Labels("component", "conn-pool"), func(context.Context) {
//		go pool.refill() // labelled component=conn-pool, not loom.scope
//	})
//
// pprof.Do sets the goroutine's labels to those of its ctx plus its own while the function runs,
// and puts the caller's back when it returns.
//
// # Cost
//
// scope and limiter never import this package: they record into an internal registry, and this
// package reads it. With every feature off, inspection costs an Open one atomic load and a check
// whether a trace is recording, and a fork one nil check. A [Snapshot] never holds up a fork or a
// completion, and leaves nothing behind.
//
// Every function here is safe for concurrent use.
package inspect
