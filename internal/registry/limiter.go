package registry

import (
	"cmp"
	"math"
	"reflect"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"weak"
)

// LimiterInfo is what a dump or an exporter reads of a named limiter or a fleet semaphore, its
// configuration apart (see [AddLimiter]).
type LimiterInfo struct {
	// Stats is a struct (or a pointer to one) of integer fields, such as limiter.Stats: each
	// exported integer field becomes a stat named in lowerCamelCase (InFlight: "inFlight"), in
	// field order, so fields added later show up by themselves. A []Stat is taken as it is.
	Stats any
	// OldestWaiting is how long the longest-waiting call has waited; 0 if none waits.
	OldestWaiting time.Duration
	// PausedUntil is, for a fleet semaphore whose backend lost its data, when it admits again;
	// zero when it is not paused.
	PausedUntil time.Time
}

// A Stat is one named number of a limiter.
type Stat struct {
	Name  string
	Value int64
}

// A Setting is one named setting of a limiter's configuration, its value as text.
type Setting struct {
	Name, Value string
}

// A LimiterRecord is a named limiter (or fleet semaphore) as a dump sees it.
type LimiterRecord struct {
	Name          string
	Stats         []Stat
	OldestWaiting time.Duration
	Config        []Setting
	PausedUntil   time.Time
}

// A named list holds the limiters (or the fleet semaphores) that dumps and exporters read, each
// through a weak pointer: the registry never keeps one alive, and forgets it once it has been
// collected.
type namedList struct {
	sync.Mutex
	m map[uint64]*namedEntry
}

type namedEntry struct {
	id   uint64
	name string
	read func(config bool) (LimiterInfo, []Setting, bool) // false once the limiter is gone
}

var (
	limiters    namedList
	semaphores  namedList
	nextNamedID atomic.Uint64 // one sequence for both lists: the order things were made
)

// AddLimiter lists a named limiter for dumps and exporters, whatever features are on, for as
// long as it is reachable: the registry holds it only through a weak pointer, and forgets it once
// it has been collected. info reads the limiter's numbers; config, if not nil, how it was made,
// as an operator reads it: settings named in lowerCamelCase, each with its value as text, in the
// order to show them — "rate" "10/s", "burst" "20", "acquireTimeout" "30s", "taskTimeout"
// "5m0s", "maxWaiting" "100", "fleet" "llm-api", "fleetCapacity" "40", "lease" "15s", and any
// others; only the settings given, in a slice of its own at each call (the record keeps it). A
// dump reads both, an exporter only info: formatting the settings of 1,000 limiters at each
// scrape was two fifths of its Collect (exporters/prometheus's BenchmarkScrape). Neither may hold on to l itself — pass method expressions or functions of l
// alone, such as (*Limiter).inspectInfo — or the limiter would never be collected. They run on
// the goroutine taking the dump, with nothing of the registry locked.
func AddLimiter[T any](l *T, name string, info func(*T) LimiterInfo, config func(*T) []Setting) {
	if l == nil || info == nil {
		panic("registry: AddLimiter: nil limiter or info")
	}
	add(&limiters, l, name, info, config)
}

// AddSemaphore lists a fleet semaphore for dumps and exporters, as [AddLimiter] lists a limiter:
// through a weak pointer, with info and config read on the goroutine taking the dump.
func AddSemaphore[T any](s *T, name string, info func(*T) LimiterInfo, config func(*T) []Setting) {
	if s == nil || info == nil {
		panic("registry: AddSemaphore: nil semaphore or info")
	}
	add(&semaphores, s, name, info, config)
}

func add[T any](list *namedList, p *T, name string, info func(*T) LimiterInfo, config func(*T) []Setting) {
	wp := weak.Make(p)
	e := &namedEntry{id: nextNamedID.Add(1), name: name}
	e.read = func(withConfig bool) (LimiterInfo, []Setting, bool) {
		p := wp.Value()
		if p == nil {
			return LimiterInfo{}, nil, false
		}
		var set []Setting
		if withConfig && config != nil {
			set = config(p)
		}
		return info(p), set, true
	}
	list.Lock()
	if list.m == nil {
		list.m = make(map[uint64]*namedEntry)
	}
	list.m[e.id] = e
	list.Unlock()
	runtime.AddCleanup(p, list.forget, e.id)
}

func (list *namedList) forget(id uint64) {
	list.Lock()
	delete(list.m, id)
	list.Unlock()
}

// names returns the names the list holds, including those collected whose cleanup has not run
// yet.
func (list *namedList) names() []string {
	list.Lock()
	defer list.Unlock()
	names := make([]string, 0, len(list.m))
	for _, e := range list.m {
		names = append(names, e.name)
	}
	return names
}

// collect reads every entry that is still reachable, in the order they were made, and their
// configuration if config.
func (list *namedList) collect(config bool) []LimiterRecord {
	list.Lock()
	es := make([]*namedEntry, 0, len(list.m))
	for _, e := range list.m {
		es = append(es, e)
	}
	list.Unlock()
	slices.SortFunc(es, func(a, b *namedEntry) int { return cmp.Compare(a.id, b.id) })
	out := make([]LimiterRecord, 0, len(es))
	for _, e := range es {
		info, set, ok := e.read(config)
		if !ok {
			continue
		}
		out = append(out, LimiterRecord{Name: e.name, Stats: stats(info.Stats), OldestWaiting: max(info.OldestWaiting, 0),
			Config: set, PausedUntil: info.PausedUntil})
	}
	return out
}

// ListedLimiters returns the names of the limiters the registry lists, including those collected
// whose cleanup has not run yet: for tests that a collected limiter leaves nothing behind.
func ListedLimiters() []string { return limiters.names() }

// CollectLimiters reads every listed limiter that is still reachable, in the order they were
// made: what a dump shows.
func CollectLimiters() []LimiterRecord { return limiters.collect(true) }

// CollectLimiterStats is [CollectLimiters] without the configuration (each record's Config is
// nil): what an exporter reads at each scrape.
func CollectLimiterStats() []LimiterRecord { return limiters.collect(false) }

// ListedSemaphores is [ListedLimiters] for the fleet semaphores.
func ListedSemaphores() []string { return semaphores.names() }

// CollectSemaphores reads every listed fleet semaphore that is still reachable, in the order they
// were made: what a dump shows.
func CollectSemaphores() []LimiterRecord { return semaphores.collect(true) }

// CollectSemaphoreStats is [CollectSemaphores] without the configuration: what an exporter reads.
func CollectSemaphoreStats() []LimiterRecord { return semaphores.collect(false) }

// stats turns a stats struct into named numbers.
func stats(v any) []Stat {
	if s, ok := v.([]Stat); ok {
		return slices.Clone(s)
	}
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return nil
		}
		rv = rv.Elem()
	}
	if rv.Kind() != reflect.Struct {
		return nil
	}
	fields := statFieldsOf(rv.Type())
	out := make([]Stat, len(fields))
	for i, f := range fields {
		fv := rv.Field(f.index)
		var n int64
		switch fv.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			n = fv.Int()
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
			n = int64(min(fv.Uint(), math.MaxInt64))
		default: // a float: statFieldsOf keeps only numbers
			n = int64(math.Round(fv.Float()))
		}
		out[i] = Stat{Name: f.name, Value: n}
	}
	return out
}

// A statField is an exported numeric field of a stats struct, and its name in a dump.
type statField struct {
	index int
	name  string
}

// statFields caches, per struct type, its exported numeric fields in order: a scrape of 1,000
// limiters reads one type 1,000 times, and resolving the fields and their lowerCamelCase names
// each time was most of its cost (BenchmarkCollectLimiters: 2.4 ms → 0.5 ms, 16,002 → 2,002
// allocations).
var statFields sync.Map // reflect.Type → []statField

func statFieldsOf(rt reflect.Type) []statField {
	if fs, ok := statFields.Load(rt); ok {
		return fs.([]statField)
	}
	var fs []statField
	for i := range rt.NumField() {
		f := rt.Field(i)
		if !f.IsExported() {
			continue
		}
		switch f.Type.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
			reflect.Float32, reflect.Float64:
			fs = append(fs, statField{index: i, name: LowerCamel(f.Name)})
		}
	}
	statFields.Store(rt, fs)
	return fs
}

// LowerCamel turns an exported Go name into lowerCamelCase: InFlight "inFlight", TimedOut
// "timedOut", ID "id", RTTMin "rttMin".
func LowerCamel(name string) string {
	r := []rune(name)
	n := 0
	for n < len(r) && unicode.IsUpper(r[n]) {
		n++
	}
	switch {
	case n == 0:
		return name
	case n == 1 || n == len(r):
		// One capital, or all capitals: lower them all.
	default:
		n-- // the last capital starts the next word: RTTMin is rtt + Min
	}
	for i := range n {
		r[i] = unicode.ToLower(r[i])
	}
	return string(r)
}
