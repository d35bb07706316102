package registry

import (
	"runtime"
	"strconv"
	"strings"
	"sync"
	"unsafe"
)

// openPCs is how many return addresses Open keeps: enough to climb out of loom's own frames
// above it — the deepest chain is scope's helper that calls Open, scope's open, scope.Open,
// scope.Map, scope.All, then the user's — with two to spare. Inlined frames take none.
const openPCs = 8

// useFP says whether callers walks frame pointers. runtime.Callers costs a few hundred
// nanoseconds, more than the whole budget of a recorded Open; following frame pointers costs a
// few nanoseconds per frame. It is set at init, once callers has been checked on a known stack.
var useFP bool

func init() { useFP = haveFP && fpWorks() }

// callers fills pcs with return addresses, starting with the one into the caller of its caller
// (for Open: the frame that called Open), and returns how many it wrote. The addresses are
// physical frames; runtime.CallersFrames expands the inlined calls in them.
//
//go:noinline
func callers(pcs []uintptr) int {
	if !useFP {
		return runtime.Callers(3, pcs) // runtime.Callers, callers, its caller
	}
	// Every Go function on amd64 and arm64 saves its caller's frame pointer where its own frame
	// pointer points, with the return address just above (the runtime's execution tracer walks
	// the same chain): the frames form a chain that ends with nil at the goroutine's first frame. Only Go frames lie between here and our caller's caller, and we stop after
	// len(pcs) of them. The pointers stay unsafe.Pointer so that a stack move would adjust them;
	// nothing here can move the stack, though: no call, no allocation.
	fp := getfp()               // callers' frame
	fp = *(*unsafe.Pointer)(fp) // our caller's frame
	n := 0
	for n < len(pcs) && fp != nil {
		pcs[n] = *(*uintptr)(unsafe.Add(fp, unsafe.Sizeof(uintptr(0))))
		fp = *(*unsafe.Pointer)(fp)
		n++
	}
	return n
}

// fpWorks checks the frame-pointer walk on a stack it knows: probeCallers, called from here,
// must see a return address into fpWorks first.
//
//go:noinline
func fpWorks() bool {
	var pcs [2]uintptr
	useFP = true
	n := probeCallers(pcs[:])
	useFP = false
	if n < 2 {
		return false
	}
	self, _, _, _ := runtime.Caller(0)
	f := runtime.FuncForPC(pcs[0] - 1)
	return f != nil && f.Entry() == runtime.FuncForPC(self).Entry()
}

//go:noinline
func probeCallers(pcs []uintptr) int { return callers(pcs) }

// funcPC returns the entry address of the function fn holds (0 for a nil one): what
// reflect.Value.Pointer returns, without its checks, for it runs on every fork. fn must hold a
// func value. An interface holding one holds the func value itself, a pointer to its closure (or
// to a static one), whose first word is the code's entry.
func funcPC(fn any) uintptr {
	closure := (*[2]unsafe.Pointer)(unsafe.Pointer(&fn))[1]
	if closure == nil {
		return 0
	}
	return *(*uintptr)(closure)
}

// loomPackages are the packages whose frames are not a site: a scope opened by scope.Map has the
// site of the code that called Map.
var loomPackages = []string{
	"github.com/goloom/loom/scope",
	"github.com/goloom/loom/scopedvalue",
	"github.com/goloom/loom/semaphore",
	"github.com/goloom/loom/limiter",
	"github.com/goloom/loom/limiter/adaptive",
	"github.com/goloom/loom/fleet",
	"github.com/goloom/loom/inspect",
}

// isLoomFrame reports whether function (as runtime.Frame.Function names it) belongs to one of
// loom's library packages or to its internal ones, not counting their tests or the examples.
func isLoomFrame(function string) bool {
	pkg := packageOf(function)
	if strings.HasSuffix(pkg, "_test") {
		return false
	}
	if strings.HasPrefix(pkg, "github.com/goloom/loom/internal/") {
		return true
	}
	for _, p := range loomPackages {
		if pkg == p {
			return true
		}
	}
	return false
}

// packageOf returns the import path of a function named like "path/to/pkg.(*T).Method[...]".
func packageOf(function string) string {
	slash := strings.LastIndexByte(function, '/')
	if dot := strings.IndexByte(function[slash+1:], '.'); dot >= 0 {
		return function[:slash+1+dot]
	}
	return function
}

// sites caches resolved sites: a process has few distinct call sites, and each dump needs many.
var sites struct {
	sync.Mutex
	open map[[openPCs]uintptr]string
	fn   map[uintptr]string
}

// maxCachedSites bounds each cache; past it the cache starts over.
const maxCachedSites = 4096

// openSite returns "file:line" of the first frame in pcs that is not loom's own (the last frame
// if all are).
func openSite(pcs [openPCs]uintptr, n int) string {
	sites.Lock()
	s, ok := sites.open[pcs]
	sites.Unlock()
	if ok {
		return s
	}
	s = resolveOpen(pcs[:n])
	sites.Lock()
	if sites.open == nil || len(sites.open) >= maxCachedSites {
		sites.open = make(map[[openPCs]uintptr]string)
	}
	sites.open[pcs] = s
	sites.Unlock()
	return s
}

func resolveOpen(pcs []uintptr) string {
	if len(pcs) == 0 {
		return "unknown"
	}
	frames := runtime.CallersFrames(pcs)
	var last runtime.Frame
	for {
		f, more := frames.Next()
		if f.Function != "" {
			last = f
			if !isLoomFrame(f.Function) {
				return f.File + ":" + strconv.Itoa(f.Line)
			}
		}
		if !more {
			break
		}
	}
	if last.Function == "" {
		return "unknown"
	}
	return last.File + ":" + strconv.Itoa(last.Line)
}

// fnSite returns "file:line" of the function whose entry is pc: for a function literal, the line
// of its func keyword. A method value passed as a function (s.Go(x.fetch)) resolves to a
// compiler-made wrapper without a file; its site is then the method's name.
func fnSite(pc uintptr) string {
	if pc == 0 {
		return "unknown"
	}
	sites.Lock()
	s, ok := sites.fn[pc]
	sites.Unlock()
	if ok {
		return s
	}
	s = resolveFn(pc)
	sites.Lock()
	if sites.fn == nil || len(sites.fn) >= maxCachedSites {
		sites.fn = make(map[uintptr]string)
	}
	sites.fn[pc] = s
	sites.Unlock()
	return s
}

func resolveFn(pc uintptr) string {
	f := runtime.FuncForPC(pc)
	if f == nil {
		return "unknown"
	}
	file, line := f.FileLine(pc)
	if file == "" || strings.HasPrefix(file, "<") {
		return strings.TrimSuffix(f.Name(), "-fm")
	}
	return file + ":" + strconv.Itoa(line)
}
