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

// LimiterInfo is what a dump reads of a named limiter.
type LimiterInfo struct {
	// Stats is a struct (or a pointer to one) of integer fields, such as limiter.Stats: each
	// exported integer field becomes a stat named in lowerCamelCase (InFlight: "inFlight"), in
	// field order, so fields added later show up by themselves. A []Stat is taken as it is.
	Stats any
	// OldestWaiting is how long the longest-waiting call has waited; 0 if none waits.
	OldestWaiting time.Duration
}

// A Stat is one named number of a limiter.
type Stat struct {
	Name  string
	Value int64
}

// A LimiterRecord is a named limiter as a dump sees it.
type LimiterRecord struct {
	Name          string
	Stats         []Stat
	OldestWaiting time.Duration
}

type limiterEntry struct {
	id   uint64
	name string
	read func() (LimiterInfo, bool) // false once the limiter is gone
}

var limiters struct {
	sync.Mutex
	m map[uint64]*limiterEntry
}

var nextLimiterID atomic.Uint64

// AddLimiter lists a named limiter for dumps, whatever features are on, for as long as it is
// reachable: the registry holds it only through a weak pointer, and forgets it once it has been
// collected. info reads the limiter; it must not hold on to l itself — pass a method expression
// or a function of l alone, such as (*Limiter).inspectInfo — or the limiter would never be
// collected. info runs on the goroutine taking the dump, with nothing of the registry locked.
func AddLimiter[T any](l *T, name string, info func(*T) LimiterInfo) {
	if l == nil || info == nil {
		panic("registry: AddLimiter: nil limiter or info")
	}
	wp := weak.Make(l)
	e := &limiterEntry{id: nextLimiterID.Add(1), name: name}
	e.read = func() (LimiterInfo, bool) {
		p := wp.Value()
		if p == nil {
			return LimiterInfo{}, false
		}
		return info(p), true
	}
	limiters.Lock()
	if limiters.m == nil {
		limiters.m = make(map[uint64]*limiterEntry)
	}
	limiters.m[e.id] = e
	limiters.Unlock()
	runtime.AddCleanup(l, forgetLimiter, e.id)
}

func forgetLimiter(id uint64) {
	limiters.Lock()
	delete(limiters.m, id)
	limiters.Unlock()
}

// ListedLimiters returns the names of the limiters the registry lists, including those collected
// whose cleanup has not run yet: for tests that a collected limiter leaves nothing behind.
func ListedLimiters() []string {
	limiters.Lock()
	defer limiters.Unlock()
	names := make([]string, 0, len(limiters.m))
	for _, e := range limiters.m {
		names = append(names, e.name)
	}
	return names
}

// CollectLimiters reads every listed limiter that is still reachable, in the order they were
// made.
func CollectLimiters() []LimiterRecord {
	limiters.Lock()
	es := make([]*limiterEntry, 0, len(limiters.m))
	for _, e := range limiters.m {
		es = append(es, e)
	}
	limiters.Unlock()
	slices.SortFunc(es, func(a, b *limiterEntry) int { return cmp.Compare(a.id, b.id) })
	out := make([]LimiterRecord, 0, len(es))
	for _, e := range es {
		info, ok := e.read()
		if !ok {
			continue
		}
		out = append(out, LimiterRecord{Name: e.name, Stats: stats(info.Stats), OldestWaiting: max(info.OldestWaiting, 0)})
	}
	return out
}

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
	rt := rv.Type()
	var out []Stat
	for i := range rt.NumField() {
		f := rt.Field(i)
		if !f.IsExported() {
			continue
		}
		fv := rv.Field(i)
		var n int64
		switch fv.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			n = fv.Int()
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
			n = int64(min(fv.Uint(), math.MaxInt64))
		case reflect.Float32, reflect.Float64:
			n = int64(math.Round(fv.Float()))
		default:
			continue
		}
		out = append(out, Stat{Name: LowerCamel(f.Name), Value: n})
	}
	return out
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
