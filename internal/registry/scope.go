package registry

import (
	"context"
	"math/bits"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// Policy is a scope's policy, as a dump names it.
type Policy uint8

const (
	FailFast Policy = iota
	AwaitAll
	FirstSuccess
	CancelWhen
	Joiner // a custom scope.Joiner
)

var policyNames = [...]string{"FailFast", "AwaitAll", "FirstSuccess", "CancelWhen", "Joiner"}

func (p Policy) String() string {
	if int(p) < len(policyNames) {
		return policyNames[p]
	}
	return "Policy(" + strconv.Itoa(int(p)) + ")"
}

// Outcome is how a subtask ended. The values are those of scope.State.
type Outcome uint8

const (
	Succeeded Outcome = 1
	Failed    Outcome = 2
	Cancelled Outcome = 3
)

// Label keys, for pprof and for `go tool pprof -tagfocus`.
const (
	ScopeLabel   = "loom.scope"   // the scope's name, or "scope": a name, never an id (bounded cardinality)
	LimiterLabel = "loom.limiter" // the limiter's name, or "limiter"
)

// Trace names: a scope's task is named after the scope; these are the rest.
const (
	SubtaskRegion  = "loom.subtask"      // a subtask's run, in its scope's task
	WaitRegion     = "loom.limiter.wait" // a limiter call waiting for a slot
	ScopeCategory  = "loom.scope"        // logged on a scope's task at Open: "#ID"
	CancelCategory = "loom.cancel"       // logged on a scope's task when it is cancelled: the cause
)

// ScopeInfo is what Open records of a scope's options.
type ScopeInfo struct {
	Name   string
	Policy Policy
	Limit  int // 0 without WithLimit
}

// nextID numbers scopes: unique in the process and increasing, so parents sort before children.
var nextID atomic.Uint64

// A Scope is the registry's record of one scope, made by [Open]. A nil *Scope means "nothing to
// record": the scope calls none of the methods below.
//
// When the scope is recorded (Scopes was on at Open), [Scope.Context] is a context of the
// record's own: it answers for the scope's context, and lets a scope opened on it, or on anything
// derived from it (a limiter's task context, scoped-value bindings), find its parent.
//
// Fork, ForkAt, Refuse and Blocked may be called from any goroutine, Enter and Done on the
// subtask's, Joining and Leave by the owner; on a nil *Scope they do nothing, so that a scope
// need not check outside its hot paths (where a nil check of its own is the whole cost). None of them ever waits: the record is kept with
// atomic operations, and a dump reads it the same way.
type Scope struct {
	// Fixed at Open, and read by every start.
	inner   context.Context // the scope's own context, as given to Open
	base    context.Context // inner, plus the trace task and the pprof labels when there are any
	labels  context.Context // with Labels on at Open: what subtask goroutines set as their labels
	traced  *traced         // while a trace recorded at Open
	tracked bool            // Scopes was on at Open: the scope is listed, and ctx is its Context
	policy  Policy
	listed  bool // on its shard's list; guarded by the shard's mu
	left    bool // Leave has run; the owner's
	npcs    int32
	id      uint64
	name    string
	limit   int
	ctx     scopeContext
	parent  *Scope
	opened  int64 // monotonic, see now
	pcs     [openPCs]uintptr

	sprev, snext *Scope // guarded by the shard's mu

	// The running subtasks and the counts, made by the first fork: a scope that forks nothing
	// does not pay for them.
	hot atomic.Pointer[hot]

	joining atomic.Bool
}

// hot is the part of a scope's record that forks, starts and completions write, laid out so that
// they do not share cache lines needlessly: forks is the forking goroutine's, tab is read by every
// start, the slots are written by the subtasks in them.
type hot struct {
	// forks counts the forks so far (each one's seq; also those that never ran) in its low bits,
	// and the forks blocked on the scope's limit above them (blockedOne each). One word, so that a
	// blocked fork is counted in as blocked, and moved from blocked to admitted when it is handed
	// a slot, each in one atomic step: a dump sees it either blocked or not, never both.
	forks atomic.Uint64
	_     [cacheLine - 8]byte

	hotCounts
	_ [cacheLine - unsafe.Sizeof(hotCounts{})]byte

	first      table // the first tab, over firstSlots
	_          [cacheLine - unsafe.Sizeof(table{})]byte
	firstSlots [firstTable]slot
}

// hotCounts is the line of a hot that every start reads and the rarer completions write.
type hotCounts struct {
	// The running subtasks: each started one sits in a slot of tab until it completes (see
	// publish). Written by the subtasks themselves, with atomic operations only, so that neither a
	// start nor a completion ever waits, for a dump or for each other.
	tab atomic.Pointer[table]
	// Completions, indexed by Outcome, but for successes of started subtasks: those count in
	// their slots (see slot).
	done [4]atomic.Int64
}

const cacheLine = 64

const (
	blockedOne = 1 << 40        // one blocked fork, in hot.forks
	forkMask   = blockedOne - 1 // the count of forks, in hot.forks
)

var _ = [1]struct{}{}[unsafe.Offsetof(hot{}.firstSlots)%cacheLine+unsafe.Sizeof(hot{})%cacheLine+unsafe.Sizeof(slot{})*slotsPerLine%cacheLine]

// hotPart returns the scope's hot part, making it if need be.
func (e *Scope) hotPart() *hot {
	if h := e.hot.Load(); h != nil {
		return h
	}
	h := new(hot)
	h.first.init(h.firstSlots[:])
	h.tab.Store(&h.first)
	if e.hot.CompareAndSwap(nil, h) {
		return h
	}
	return e.hot.Load()
}

// traced is what a scope opened while a trace recorded keeps of it.
type traced struct {
	task    *trace.Task
	stopLog func() bool   // stops the AfterFunc that logs the cancellation on task
	logged  chan struct{} // closed once that AfterFunc has logged
}

// A table is a set of slots for running subtasks; its length is a power of two. When a subtask
// finds no free slot near its own, a table four times larger replaces it for later starts; the
// subtasks still in the old one stay there until they complete, and dumps scan both.
type table struct {
	slots []slot
	older *table
	shift uint // log2 of the number of cache lines the slots span
}

// slotsPerLine slots share a cache line.
const slotsPerLine = 2

// index returns the slot a subtask's seq picks: subtasks forked one after another usually start
// and complete at the same time, on different cores, so consecutive seqs pick slots on different
// cache lines; the seq picks the line, and then the slot in it.
func (tab *table) index(seq uintptr) uintptr {
	line := seq & (1<<tab.shift - 1)
	return line*slotsPerLine + (seq>>tab.shift)%slotsPerLine
}

func newTable(n int, older *table) *table {
	tab := &table{older: older}
	tab.init(make([]slot, n))
	return tab
}

func (tab *table) init(slots []slot) {
	tab.slots = slots
	tab.shift = uint(bits.TrailingZeros(uint(len(slots) / slotsPerLine)))
}

// A slot holds a running subtask, and counts the subtasks that succeeded in it: a success, the
// common completion, writes one cache line, the one its start wrote, not one all share.
//
// seq is the subtask's fork order (and name, see Task), stored by a CAS from 0 (the claim: seqs
// start at 1 and are unique in the scope, so a slot never holds the same one twice); then pc, then
// started (plus one, so that zero means "not stored yet"). The subtask leaving stores started back
// to zero, then seq, so a new subtask claims the slot only once the old one's start is gone: a dump
// that reads seq, then started, then pc, then seq again, and finds seq unchanged and started not
// zero, has read that subtask's start and pc (pc was stored before started); with started zero
// the subtask is starting or leaving, and the dump counts it without listing it. No pointer: a
// slot neither keeps a subtask alive nor costs a write barrier.
type slot struct {
	seq       atomic.Uint64
	started   atomic.Int64
	pc        atomic.Uintptr // the entry of the subtask's function
	succeeded atomic.Int64
}

const (
	firstTable = 16 // slots
	probes     = 8  // slots a start tries before it grows the table
)

// A Task is a subtask's place in its scope's record: its fork order, from 1. It lives inside the
// subtask's own allocation (scope.Subtask holds one), so recording a fork allocates nothing; its
// zero value is ready. It is written by Fork, before the subtask starts, and only read after; what
// else a dump shows of a running subtask is in its slot (see slot), and where that slot is, the
// Running its goroutine keeps. A Task records one fork at a time: reuse it only once Done has
// returned.
type Task struct {
	// seq is the fork order in its low bits (seqBits of them) and the fork's name, if it has
	// one, above: see Task.Name. A slot holds the same word.
	seq uint64
}

const (
	seqBits = 48
	seqMask = 1<<seqBits - 1
)

// Name names the fork of t, for a dump: call it before Fork (the name is kept through it). Names
// come from the program's code, so there are few: each is numbered once for the process, and the
// number lives in the Task's spare bits; past 65,535 distinct names a fork's name is dropped.
func (t *Task) Name(name string) {
	t.seq = t.seq&seqMask | uint64(nameNumber(name))<<seqBits
}

// names numbers the fork names the process has used, from 1.
var names struct {
	sync.Mutex
	byName map[string]uint16
	list   atomic.Pointer[[]string] // by number - 1; replaced, never changed, so a dump reads it without the lock
}

// nameNumber returns name's number, numbering it if it is new; 0 for "" and once every number
// has been given.
func nameNumber(name string) uint16 {
	if name == "" {
		return 0
	}
	names.Lock()
	defer names.Unlock()
	if n, ok := names.byName[name]; ok {
		return n
	}
	var list []string
	if p := names.list.Load(); p != nil {
		list = *p
	}
	if len(list) >= 1<<16-1 {
		return 0
	}
	if names.byName == nil {
		names.byName = make(map[string]uint16)
	}
	list = append(list[:len(list):len(list)], name)
	names.list.Store(&list)
	n := uint16(len(list))
	names.byName[name] = n
	return n
}

// forkName returns the name of a fork whose Task word is seq, or "".
func forkName(seq uint64) string {
	n := seq >> seqBits
	if n == 0 {
		return ""
	}
	return (*names.list.Load())[n-1]
}

// A Running is a started subtask's hold on its slot and its trace region, from Enter to Done. The
// goroutine that runs the subtask keeps it in a local variable, so a subtask is no larger for it.
// The zero Running stands for a fork that never started.
type Running struct {
	sl     *slot
	region *trace.Region
}

// Open records a scope, if anything is to be recorded, and returns its record; else nil. inner is
// the scope's own context: cancelled with the scope's cause, and done at the latest when Join
// returns. Call Open directly from scope.Open (or a function of loom's that opens scopes): the
// site recorded is the first frame above it that is not loom's own.
//
// With Scopes on, the scope is listed until [Scope.Leave], with its parent: the nearest recorded
// scope whose Context inner derives from. With Labels on, [Scope.Labels] holds its pprof labels;
// while a trace records, it is a trace task named after the scope.
func Open(inner context.Context, info ScopeInfo) *Scope {
	f := Features(features.Load())
	recording := trace.IsEnabled()
	if f == 0 && !recording {
		return nil
	}
	e := &Scope{inner: inner, base: inner, id: nextID.Add(1), name: info.Name, policy: info.Policy, limit: info.Limit}
	if f&Scopes != 0 {
		e.npcs = int32(callers(e.pcs[:]))
		e.opened = now()
		e.parent, _ = inner.Value(ctxKey{}).(*Scope)
		e.tracked = true
		e.ctx.e = e
	}
	if recording {
		ctx, task := trace.NewTask(e.base, e.labelName())
		e.base, e.traced = ctx, &traced{task: task, logged: make(chan struct{})}
		trace.Log(ctx, ScopeCategory, "#"+strconv.FormatUint(e.id, 10))
		e.traced.stopLog = context.AfterFunc(inner, e.logCancel)
	}
	if f&Labels != 0 {
		e.base = pprof.WithLabels(e.base, pprof.Labels(ScopeLabel, e.labelName()))
		e.labels = e.base
	}
	if e.tracked {
		list(e)
	}
	return e
}

func (e *Scope) labelName() string {
	if e.name == "" {
		return "scope"
	}
	return e.name
}

// logCancel logs the scope's cancellation, with its cause, on its trace task.
func (e *Scope) logCancel() {
	cause := "context canceled"
	if err := context.Cause(e.inner); err != nil {
		cause = err.Error()
	}
	trace.Log(e.base, CancelCategory, cause)
	close(e.traced.logged)
}

// Recorded reports whether the scope is listed for dumps (Scopes was on at Open), and so whether
// its subtasks need Tasks: scope.Map makes one per element only then. False for a nil Scope.
func (e *Scope) Recorded() bool { return e != nil && e.tracked }

// ID returns the scope's number, unique in the process.
func (e *Scope) ID() uint64 { return e.id }

// Context returns the context the scope hands out — Scope.Context and every subtask's: the
// record itself when the scope is recorded, else the scope's context with its trace task and
// labels.
func (e *Scope) Context() context.Context {
	if e.tracked {
		return &e.ctx
	}
	return e.base
}

// Fork records a subtask about to start. A nil t counts the fork without listing it (its Enter
// then takes nil too): the counts stay exact for a call site that has no Task to give. Call it
// after the fork is admitted (it has its slot, in a limited scope) and before the subtask's
// goroutine starts. It costs one atomic add: the subtask takes its place among the running ones in
// Enter, on its own goroutine, so the forking loop does nothing more.
func (e *Scope) Fork(t *Task) {
	if e == nil || !e.tracked {
		return
	}
	e.fork(t, 1)
}

// ForkBlocked is Fork for a fork that must wait for a slot of the scope's limit: it is counted
// in as blocked. Once it has its slot, whoever hands it over calls [Scope.Unblock] before the
// subtask starts; a fork that never gets one (the scope was cancelled meanwhile) is unblocked
// and then Done as Cancelled.
func (e *Scope) ForkBlocked(t *Task) {
	if e == nil || !e.tracked {
		return
	}
	e.fork(t, 1+blockedOne)
}

func (e *Scope) fork(t *Task, delta uint64) {
	seq := e.hotPart().forks.Add(delta) & forkMask
	if t != nil {
		t.seq = t.seq&^seqMask | seq // the name stays
	}
}

// Unblock moves a fork counted by ForkBlocked from blocked to admitted, in one atomic step.
func (e *Scope) Unblock() {
	if e == nil || !e.tracked {
		return
	}
	e.hot.Load().forks.Add(^uint64(blockedOne - 1)) // minus blockedOne; hot was made by ForkBlocked
}

// ForkAt is Fork for a call that runs without a Subtask of its own on a goroutine of the scope's
// (scope.Map's workers): t is the call's own Task (Map keeps one per element, in one slice), seq
// its place in fork order, from 1. Pair it with Enter and Done on the goroutine that runs it.
func (e *Scope) ForkAt(t *Task, seq int64) {
	if e == nil || !e.tracked {
		return
	}
	e.hotPart().forks.Add(1)
	if t != nil {
		t.seq = uint64(seq) // a call of Map has no name: one a worker reused loses its last
	}
}

// Refuse records a fork whose function never runs: Cancelled (forked on a cancelled scope) or
// Failed (a Joiner's OnFork refused it). It takes a place in fork order like any fork.
func (e *Scope) Refuse(o Outcome) {
	if e == nil || !e.tracked {
		return
	}
	h := e.hotPart()
	h.forks.Add(1) // the fork before its outcome: a dump never counts more done than forked
	h.done[o&3].Add(1)
}

// Enter runs on the subtask's goroutine, first: it puts the subtask among the running ones with
// its start and fn (the function passed to Fork or Go, a func value, for its site), sets the
// goroutine's pprof labels (with Labels on at Open) and, while a trace records, starts the
// subtask's region. It returns the subtask's Running, for Done, on the same goroutine, once the
// function has returned.
func (e *Scope) Enter(t *Task, fn any) Running {
	if e == nil {
		return Running{}
	}
	var r Running
	if e.tracked && t != nil {
		r.sl = e.hot.Load().publish(t.seq) // made by Fork, which came first
		r.sl.pc.Store(funcPC(fn))
		r.sl.started.Store(now() - e.opened + 1) // after pc: see slot
	}
	if e.labels != nil {
		pprof.SetGoroutineLabels(e.labels)
	}
	if e.traced != nil && trace.IsEnabled() {
		r.region = trace.StartRegion(e.base, SubtaskRegion)
	}
	return r
}

// publish puts the subtask of fork seq in a free slot, the one its seq picks or one of those the
// next few seqs pick, and returns it. Subtasks forked in a row mostly find their slot free (the subtask len(slots)
// forks earlier has usually completed), so a start is usually one load and one compare-and-swap.
// When the few slots tried are all taken, the table is too small for the scope's fan-out: a larger
// one replaces it.
func (h *hot) publish(seq uint64) *slot {
	for tab := h.tab.Load(); ; tab = h.grow(tab) {
		for k := range uintptr(probes) {
			if sl := &tab.slots[tab.index(uintptr(seq&seqMask)+k)]; sl.seq.Load() == 0 && sl.seq.CompareAndSwap(0, seq) {
				return sl
			}
		}
	}
}

// grow replaces tab, the table found too full, and returns the current table: the new one, or
// the one another start installed meanwhile.
func (h *hot) grow(tab *table) *table {
	next := newTable(4*len(tab.slots), tab)
	if h.tab.CompareAndSwap(tab, next) {
		return next
	}
	return h.tab.Load()
}

// Done records that a subtask has completed with outcome o: it leaves the running ones, and its
// region ends. Call it once for every fork recorded with Fork, ForkBlocked or ForkAt, on the
// goroutine that ran it, with the Running its Enter returned (the zero Running for one that never
// started), once the outcome is final and before the subtask stops counting for Join.
func (e *Scope) Done(r Running, o Outcome) {
	if e == nil {
		return
	}
	if r.region != nil {
		r.region.End()
	}
	if !e.tracked {
		return
	}
	h := e.hot.Load() // made by the fork, which came first
	if r.sl == nil {  // never started, or counted without a Task
		h.done[o&3].Add(1)
		return
	}
	r.sl.started.Store(0) // before seq: see slot
	r.sl.seq.Store(0)
	if o == Succeeded {
		r.sl.succeeded.Add(1)
	} else {
		h.done[o&3].Add(1)
	}
}

// Joining records that the owner waits in Join or Close.
func (e *Scope) Joining() {
	if e == nil || !e.tracked {
		return
	}
	e.joining.Store(true)
}

// Leave ends the record: the scope leaves the list and its trace task ends. Call it once Join or
// Close has finished waiting, before it returns, and before the scope's context is released (so
// that the release is not logged as a cancellation). Calling it again does nothing.
func (e *Scope) Leave() {
	if e == nil {
		return
	}
	if e.tracked {
		unlist(e)
	}
	if tr := e.traced; tr != nil && !e.left {
		if !tr.stopLog() {
			<-tr.logged // the cancellation is being logged: on the task, before it ends
		}
		tr.task.End()
	}
	e.left = true
}

// Labels returns the context whose pprof labels the scope's goroutines carry, or nil without.
func (e *Scope) Labels() context.Context {
	if e == nil {
		return nil
	}
	return e.labels
}

// ctxKey is the context key under which a recorded scope's context answers with its Scope.
type ctxKey struct{}

// scopeContext is a recorded scope's context: the scope's own, which also answers ctxKey. It lives
// inside the Scope, so handing it out allocates nothing.
type scopeContext struct{ e *Scope }

func (c *scopeContext) Deadline() (time.Time, bool) { return c.e.base.Deadline() }
func (c *scopeContext) Done() <-chan struct{}       { return c.e.base.Done() }
func (c *scopeContext) Err() error                  { return c.e.base.Err() }

func (c *scopeContext) Value(key any) any {
	if _, ok := key.(ctxKey); ok {
		return c.e
	}
	return c.e.base.Value(key)
}

func (c *scopeContext) String() string {
	return contextName(c.e.base) + ".WithLoomScope(#" + strconv.FormatUint(c.e.id, 10) + ")"
}

func contextName(c context.Context) string {
	if s, ok := c.(interface{ String() string }); ok {
		return s.String()
	}
	return "context"
}
