package prometheus

import (
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"

	"github.com/goloom/loom/exporters/internal/kept"
	"github.com/goloom/loom/internal/registry"
)

// NewCollector returns a Collector of every named limiter, fleet semaphore and recorded scope of
// the process (see the package documentation for the metrics). Register it on any registry,
// once per registry: each scrape reads loom's registry afresh, so every collector shows the same
// numbers. It is safe for concurrent scrapes.
func NewCollector() prometheus.Collector { return &collector{} }

// A collector keeps, between scrapes, the series of each name it exported at the last one, so
// that a scrape makes no label pair, nor a sample whose value has not changed, for a name it
// already knew; a name absent from a scrape is forgotten. mu serializes the scrapes of one
// collector and guards the rest.
type collector struct {
	mu    sync.Mutex
	names kept.Names[*named]
}

// A named is what a collector keeps of one name of one family: the label pairs and the last
// sample of each metric of the family's table (nil for a stat the record lacked).
type named struct {
	labels  [][]*dto.LabelPair // never changed once made: the samples share them
	samples []*sample          // each immutable once sent: a Gather's result may point into it
}

// A metric is one series per name: the stat it reads, of the kind it is.
type metric struct {
	desc    *prometheus.Desc
	kind    prometheus.ValueType
	stat    string // the Stats field, in lowerCamelCase, as the registry names it
	outcome string // for loom_limiter_calls_total, the outcome label's value
}

// The label of each family: the limiter's, the semaphore's or the scopes' name.
const (
	limiterLabel   = "limiter"
	semaphoreLabel = "semaphore"
	scopeLabel     = "scope"
	outcomeLabel   = "outcome"
)

func gauge(name, stat, label, help string) metric {
	return metric{prometheus.NewDesc(name, help, []string{label}, nil), prometheus.GaugeValue, stat, ""}
}

func counter(name, stat, label, help string) metric {
	return metric{prometheus.NewDesc(name, help, []string{label}, nil), prometheus.CounterValue, stat, ""}
}

var callsDesc = prometheus.NewDesc("loom_limiter_calls_total",
	"Calls of a limiter that have ended, by outcome: completed (returned nil), failed (any other error: the task's own, a panic, a Goexit), rejected (no slot: acquire timeout, too many waiting, closed, or the fleet unavailable), timed_out (the task timeout fired), cancelled (the caller's context or Future was cancelled).",
	[]string{limiterLabel, outcomeLabel}, nil)

func calls(stat, outcome string) metric {
	return metric{callsDesc, prometheus.CounterValue, stat, outcome}
}

// limiterMetrics are the series of each limiter name, from limiter.Stats.
var limiterMetrics = []metric{
	gauge("loom_limiter_in_flight", "inFlight", limiterLabel, "Slots of a limiter held now: tasks running, overrunning ones included."),
	gauge("loom_limiter_waiting", "waiting", limiterLabel, "Calls of a limiter waiting for a slot now: blocked Do and Call callers and queued Submits."),
	gauge("loom_limiter_limit", "limit", limiterLabel, "The most tasks a limiter runs at once; WithAdaptive moves it."),
	gauge("loom_limiter_rate_waiting", "rateWaiting", limiterLabel, "Calls of a limiter waiting for a token of its WithRate now."),
	calls("cancelled", "cancelled"), // in the order of the outcome label's values (see collect)
	calls("completed", "completed"),
	calls("failed", "failed"),
	calls("rejected", "rejected"),
	calls("timedOut", "timed_out"),
	counter("loom_limiter_panics_total", "panicked", limiterLabel, "Panics in a limiter's tasks, whichever outcome their call was counted in."),
	counter("loom_limiter_limit_changes_total", "limitChanges", limiterLabel, "Moves of a limiter's limit by WithAdaptive."),
}

// semaphoreMetrics are the series of each fleet semaphore name, from fleet.Stats.
var semaphoreMetrics = []metric{
	gauge("loom_fleet_capacity", "capacity", semaphoreLabel, "The permits a fleet semaphore admits across every process of the fleet."),
	gauge("loom_fleet_permits_held", "held", semaphoreLabel, "Permits (summed weight) a fleet semaphore of this process holds now, leased or degraded."),
	gauge("loom_fleet_waiting", "waiting", semaphoreLabel, "Acquire calls of a fleet semaphore of this process that have not returned yet."),
	counter("loom_fleet_acquired_total", "acquired", semaphoreLabel, "Permits a fleet semaphore granted: leased ones and, while the backend was down, degraded ones."),
	counter("loom_fleet_leases_lost_total", "leasesLost", semaphoreLabel, "Permits of a fleet semaphore whose lease was lost while held."),
	counter("loom_fleet_unavailable_total", "unavailable", semaphoreLabel, "Acquire calls of a fleet semaphore that met an unreachable backend."),
	counter("loom_fleet_degraded_total", "degraded", semaphoreLabel, "Permits a fleet semaphore granted without a lease (FailOpen or Degrade), also counted in acquired."),
	counter("loom_fleet_round_trips_total", "roundTrips", semaphoreLabel, "Calls of a fleet semaphore into its backend: acquires, renewals, releases, subscriptions."),
}

// scopeMetrics are the series of each scope name, from the registry's counts by name.
var scopeMetrics = []metric{
	gauge("loom_scopes_open", "open", scopeLabel, "Scopes of a name open now (recorded while inspect's Scopes is on; scope for a scope without a name)."),
	gauge("loom_subtasks_running", "running", scopeLabel, "Subtasks running now in the open scopes of a name; forks waiting for a WithLimit slot are not counted."),
}

// largest are the stats that one name's records share rather than add up (see the package
// documentation).
var largest = []string{"capacity"}

// Describe sends the descriptions of every metric: the collector is checked, so a registry
// refuses another collector that exports the same names.
func (*collector) Describe(ch chan<- *prometheus.Desc) {
	for _, ms := range [][]metric{limiterMetrics, semaphoreMetrics, scopeMetrics} {
		for i, m := range ms {
			if i == 0 || m.desc != ms[i-1].desc { // the calls share one
				ch <- m.desc
			}
		}
	}
}

// Collect reads the registry: every named limiter and fleet semaphore still reachable, and the
// recorded scopes, one series per name.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	limiters := registry.SumByName(registry.CollectLimiterStats())
	semaphores := registry.SumByName(registry.CollectSemaphoreStats(), largest...)
	counts := registry.CountScopes()
	scopes := make([]registry.LimiterRecord, len(counts))
	for i, sc := range counts {
		scopes[i] = registry.LimiterRecord{Name: sc.Name, Stats: []registry.Stat{{Name: "open", Value: sc.Open}, {Name: "running", Value: sc.Running}}}
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	c.names.Begin()
	c.collect(ch, limiterMetrics, limiterLabel, limiters)
	c.collect(ch, semaphoreMetrics, semaphoreLabel, semaphores)
	c.collect(ch, scopeMetrics, scopeLabel, scopes)
	c.names.End()
}

// collect sends the samples of each record, sorted by name. A stat the record lacks is left out:
// the tests fail when one of the names the tables read goes missing from limiter.Stats or
// fleet.Stats.
//
// The samples of each family go out in the order of their label values, the order in which a
// Gather sorts them (names here, then the outcome of a call, by the table's order): sorting
// what is sorted costs it one pass, against a quarter of a Gather of 1,000 limiters made in an
// order other than their names' (BenchmarkScrape).
func (c *collector) collect(ch chan<- prometheus.Metric, ms []metric, label string, recs []registry.LimiterRecord) {
	slices.SortFunc(recs, func(a, b registry.LimiterRecord) int { return strings.Compare(a.Name, b.Name) })
	for _, r := range recs {
		n := c.names.Get(kept.Key{Label: label, Name: r.Name}, func() *named { return newNamed(ms, label, r.Name) })
		for i, m := range ms {
			v, ok := r.Stat(m.stat)
			if !ok {
				continue
			}
			s := n.samples[i]
			if s == nil || s.value != float64(v) {
				s = newSample(m, n.labels[i], float64(v))
				n.samples[i] = s
			}
			ch <- s
		}
	}
}

// newNamed makes the label pairs of the name of a family of metrics ms, and no sample yet.
func newNamed(ms []metric, label, name string) *named {
	pair := &dto.LabelPair{Name: proto.String(label), Value: proto.String(name)}
	n := &named{labels: make([][]*dto.LabelPair, len(ms)), samples: make([]*sample, len(ms))}
	for i, m := range ms {
		n.labels[i] = []*dto.LabelPair{pair}
		if m.outcome != "" { // "limiter" < "outcome": sorted by name, as label pairs must be
			n.labels[i] = append(n.labels[i], &dto.LabelPair{Name: proto.String(outcomeLabel), Value: proto.String(m.outcome)})
		}
	}
	return n
}

// A sample is one series' value at a scrape: a prometheus.Metric that writes itself from what it
// holds, as a const metric does, and like one never changes once made. Gather copies into the
// dto.Metric it gives Write only pointers (the labels, the gauge or the counter), and treats the
// label pairs as immutable (registry.go: "We cannot sort dtoMetric.Label in place as it is
// immutable by contract"); a const metric shares its own in the same way with every Gather. So
// the next scrape sends the same sample again when the value has not changed, and a scrape
// allocates only the samples of the values that have.
type sample struct {
	desc    *prometheus.Desc
	labels  []*dto.LabelPair // shared with the other samples of the name and metric
	value   float64
	gauge   *dto.Gauge // exactly one of gauge and counter is set, and points at value
	counter *dto.Counter
}

func newSample(m metric, labels []*dto.LabelPair, v float64) *sample {
	s := &sample{desc: m.desc, labels: labels, value: v}
	if m.kind == prometheus.CounterValue {
		s.counter = &dto.Counter{Value: &s.value}
	} else {
		s.gauge = &dto.Gauge{Value: &s.value}
	}
	return s
}

func (s *sample) Desc() *prometheus.Desc { return s.desc }

func (s *sample) Write(m *dto.Metric) error {
	m.Label, m.Gauge, m.Counter = s.labels, s.gauge, s.counter
	return nil
}
