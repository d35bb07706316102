// Package otel exports loom's numbers as OpenTelemetry metrics: every named limiter, every fleet
// semaphore and, while inspect's Scopes feature is on, the open scopes and their running
// subtasks by scope name, as observable instruments of a MeterProvider.
//
//	reg, err := loomotel.Register(otel.GetMeterProvider()) // or your SDK's MeterProvider
//	defer reg.Unregister()
//
// The instruments are read by one callback, when a reader collects, and at no other time: a
// limiter call, a fork or an Acquire costs the same with them as without, and Register starts no
// goroutine. Attribute values are names — a limiter's WithName, a fleet semaphore's name, a
// scope's WithName — never ids, so the number of series is fixed by the code. Limiters without
// a name are not exported.
//
// # Instruments
//
// Limiters, with attribute loom.limiter.name: loom.limiter.in_flight, loom.limiter.waiting,
// loom.limiter.rate_waiting and loom.limiter.limit ({call}, UpDownCounters),
// loom.limiter.calls ({call}, a Counter, with loom.limiter.outcome one of completed, failed,
// rejected, timed_out and cancelled), loom.limiter.panics ({panic}) and
// loom.limiter.limit_changes ({change}), Counters. Fleet semaphores, with loom.fleet.name:
// loom.fleet.capacity ({permit}, a Gauge: the bound the fleet shares, which does not add up
// across processes), loom.fleet.permits_held ({permit}) and loom.fleet.waiting ({call}),
// UpDownCounters, and the Counters loom.fleet.acquired ({permit}), loom.fleet.leases_lost
// ({permit}), loom.fleet.unavailable ({call}), loom.fleet.degraded ({permit}) and
// loom.fleet.round_trips ({round_trip}). Scopes, with loom.scope.name: loom.scope.open ({scope})
// and loom.scope.subtasks_running ({subtask}), UpDownCounters. Each is the limiter's or
// semaphore's Stats field of the same meaning, and the Prometheus exporter's metric of the same
// name (exporters/prometheus).
//
// # One name, several limiters
//
// Two limiters (or fleet semaphores) of one name are one series, their sum; loom.fleet.capacity
// is the largest of theirs. A limiter or semaphore that was garbage collected leaves the next
// collection. A scope name, once seen, stays at 0 when none of its scopes is open.
package otel
