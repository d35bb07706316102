package otel

import (
	"context"
	"errors"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/goloom/loom/exporters/internal/kept"
	"github.com/goloom/loom/internal/registry"
)

// ScopeName is the instrumentation scope of the meter Register uses.
const ScopeName = "github.com/goloom/loom/exporters/otel"

// Register creates loom's instruments on a meter of mp (see the package documentation) and the
// callback that observes them all, and returns that callback's registration: Unregister stops
// the observations. Call it once per MeterProvider. It returns an error if mp is nil or an
// instrument cannot be created; the callback is safe for concurrent collections.
func Register(mp metric.MeterProvider) (metric.Registration, error) {
	_, reg, err := register(mp)
	return reg, err
}

// register is Register, which returns the exporter too.
func register(mp metric.MeterProvider) (*exporter, metric.Registration, error) {
	if mp == nil {
		return nil, nil, errors.New("otel: Register: nil MeterProvider")
	}
	m := mp.Meter(ScopeName)
	e := &exporter{}
	made := map[string]metric.Int64Observable{} // the calls' outcomes share one instrument
	var all []metric.Observable
	for _, f := range families {
		for _, in := range f.instruments {
			obs, ok := made[in.name]
			if !ok {
				var err error
				if obs, err = in.create(m); err != nil {
					return nil, nil, err
				}
				made[in.name] = obs
				all = append(all, obs)
			}
			e.instruments = append(e.instruments, obs)
		}
	}
	reg, err := m.RegisterCallback(e.observe, all...)
	return e, reg, err
}

// An instrument is one of loom's numbers: the stat it reads, of the kind it is.
type instrument struct {
	name, unit, desc string
	kind             kind
	stat             string // the Stats field, in lowerCamelCase, as the registry names it
	outcome          string // for loom.limiter.calls, the loom.limiter.outcome attribute's value
}

type kind uint8

const (
	counter       kind = iota // a monotonic total
	upDownCounter             // a count of things present now, which adds up across series
	gauge                     // a value that does not add up
)

// create makes the instrument on m.
func (in instrument) create(m metric.Meter) (metric.Int64Observable, error) {
	unit, desc := metric.WithUnit(in.unit), metric.WithDescription(in.desc)
	switch in.kind {
	case counter:
		return m.Int64ObservableCounter(in.name, unit, desc)
	case upDownCounter:
		return m.Int64ObservableUpDownCounter(in.name, unit, desc)
	default:
		return m.Int64ObservableGauge(in.name, unit, desc)
	}
}

// A family is the instruments of one kind of thing, with the attribute that names it.
type family struct {
	attr        attribute.Key
	instruments []instrument
}

const outcomeAttr = attribute.Key("loom.limiter.outcome")

func calls(stat, outcome string) instrument {
	return instrument{"loom.limiter.calls", "{call}",
		"Calls of a limiter that have ended, by outcome: completed (returned nil), failed (any other error: the task's own, a panic, a Goexit), rejected (no slot: acquire timeout, too many waiting, closed, or the fleet unavailable), timed_out (the task timeout fired), cancelled (the caller's context or Future was cancelled).",
		counter, stat, outcome}
}

// The families, in the order the callback reads them: limiters, fleet semaphores, scopes.
var families = []family{
	{"loom.limiter.name", []instrument{
		{"loom.limiter.in_flight", "{call}", "Slots of a limiter held now: tasks running, overrunning ones included.", upDownCounter, "inFlight", ""},
		{"loom.limiter.waiting", "{call}", "Calls of a limiter waiting for a slot now: blocked Do and Call callers and queued Submits.", upDownCounter, "waiting", ""},
		{"loom.limiter.limit", "{call}", "The most tasks a limiter runs at once; WithAdaptive moves it.", upDownCounter, "limit", ""},
		{"loom.limiter.rate_waiting", "{call}", "Calls of a limiter waiting for a token of its WithRate now.", upDownCounter, "rateWaiting", ""},
		calls("completed", "completed"),
		calls("failed", "failed"),
		calls("rejected", "rejected"),
		calls("timedOut", "timed_out"),
		calls("cancelled", "cancelled"),
		{"loom.limiter.panics", "{panic}", "Panics in a limiter's tasks, whichever outcome their call was counted in.", counter, "panicked", ""},
		{"loom.limiter.limit_changes", "{change}", "Moves of a limiter's limit by WithAdaptive.", counter, "limitChanges", ""},
	}},
	{"loom.fleet.name", []instrument{
		{"loom.fleet.capacity", "{permit}", "The permits a fleet semaphore admits across every process of the fleet.", gauge, "capacity", ""},
		{"loom.fleet.permits_held", "{permit}", "Permits (summed weight) a fleet semaphore of this process holds now, leased or degraded.", upDownCounter, "held", ""},
		{"loom.fleet.waiting", "{call}", "Acquire calls of a fleet semaphore of this process that have not returned yet.", upDownCounter, "waiting", ""},
		{"loom.fleet.acquired", "{permit}", "Permits a fleet semaphore granted: leased ones and, while the backend was down, degraded ones.", counter, "acquired", ""},
		{"loom.fleet.leases_lost", "{permit}", "Permits of a fleet semaphore whose lease was lost while held.", counter, "leasesLost", ""},
		{"loom.fleet.unavailable", "{call}", "Acquire calls of a fleet semaphore that met an unreachable backend.", counter, "unavailable", ""},
		{"loom.fleet.degraded", "{permit}", "Permits a fleet semaphore granted without a lease (FailOpen or Degrade), also counted in acquired.", counter, "degraded", ""},
		{"loom.fleet.round_trips", "{round_trip}", "Calls of a fleet semaphore into its backend: acquires, renewals, releases, subscriptions.", counter, "roundTrips", ""},
	}},
	{"loom.scope.name", []instrument{
		{"loom.scope.open", "{scope}", "Scopes of a name open now (recorded while inspect's Scopes is on; scope for a scope without a name).", upDownCounter, "open", ""},
		{"loom.scope.subtasks_running", "{subtask}", "Subtasks running now in the open scopes of a name; forks waiting for a WithLimit slot are not counted.", upDownCounter, "running", ""},
	}},
}

// largest are the stats that one name's records share rather than add up: a fleet's capacity.
var largest = []string{"capacity"}

// An exporter is one Register's callback, with the instruments of every family, in the order of
// the families' tables, and the attributes of each name it observed at the last collection: a
// collection makes attribute sets only for names it did not know, and a name absent from a
// collection is forgotten (making the 6,000 sets of 1,000 limiters at each collection was a
// fifth of it, BenchmarkCollect). mu serializes the collections and guards names.
type exporter struct {
	instruments []metric.Int64Observable

	mu    sync.Mutex
	names kept.Names[[]metric.ObserveOption] // per name, the attributes of each instrument of its family
}

func (e *exporter) observe(_ context.Context, o metric.Observer) error {
	counts := registry.CountScopes()
	scopes := make([]registry.LimiterRecord, len(counts))
	for i, c := range counts {
		scopes[i] = registry.LimiterRecord{Name: c.Name, Stats: []registry.Stat{{Name: "open", Value: c.Open}, {Name: "running", Value: c.Running}}}
	}
	recs := [][]registry.LimiterRecord{
		registry.SumByName(registry.CollectLimiterStats()),
		registry.SumByName(registry.CollectSemaphoreStats(), largest...),
		scopes,
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.names.Begin()
	instruments := e.instruments
	for i, f := range families {
		obs := instruments[:len(f.instruments)]
		instruments = instruments[len(f.instruments):]
		for _, r := range recs[i] {
			attrs := e.names.Get(kept.Key{Label: string(f.attr), Name: r.Name}, func() []metric.ObserveOption { return f.attributes(r.Name) })
			for j, in := range f.instruments {
				// A stat the record lacks is left out: the tests fail when one of the names
				// the table reads goes missing from limiter.Stats or fleet.Stats.
				if v, ok := r.Stat(in.stat); ok {
					o.ObserveInt64(obs[j], v, attrs[j])
				}
			}
		}
	}
	e.names.End()
	return nil
}

// attributes makes the attributes of each instrument of f for the name.
func (f family) attributes(name string) []metric.ObserveOption {
	attrs := make([]metric.ObserveOption, len(f.instruments))
	plain := metric.WithAttributeSet(attribute.NewSet(f.attr.String(name)))
	for j, in := range f.instruments {
		attrs[j] = plain
		if in.outcome != "" {
			attrs[j] = metric.WithAttributeSet(attribute.NewSet(f.attr.String(name), outcomeAttr.String(in.outcome)))
		}
	}
	return attrs
}
