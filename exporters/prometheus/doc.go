// Package prometheus exports loom's numbers to Prometheus: every named limiter, every fleet
// semaphore and, while inspect's Scopes feature is on, the open scopes and their running
// subtasks by scope name.
//
//	reg := prometheus.NewRegistry() // or prometheus.DefaultRegisterer
//	reg.MustRegister(loomprom.NewCollector())
//
// The collector reads loom's registry when it is scraped and at no other time: a limiter call,
// a fork or an Acquire costs the same with it as without, and it starts no goroutine. Label
// values are names — a limiter's WithName, a fleet semaphore's name, a scope's WithName — never
// ids, so the number of series is fixed by the code. Limiters without a name are not exported.
//
// # Names
//
// Limiters, labelled limiter: loom_limiter_in_flight, loom_limiter_waiting, loom_limiter_limit,
// loom_limiter_rate_waiting (gauges), loom_limiter_calls_total{outcome} with outcome one of
// completed, failed, rejected, timed_out and cancelled, loom_limiter_panics_total,
// loom_limiter_limit_changes_total (counters). Fleet semaphores, labelled semaphore:
// loom_fleet_capacity, loom_fleet_permits_held, loom_fleet_waiting (gauges),
// loom_fleet_acquired_total, loom_fleet_leases_lost_total, loom_fleet_unavailable_total,
// loom_fleet_degraded_total, loom_fleet_round_trips_total (counters). Scopes, labelled scope:
// loom_scopes_open, loom_subtasks_running (gauges). Each is the limiter's or semaphore's Stats
// field of the same meaning, read at the scrape.
//
// # One name, several limiters
//
// Two limiters (or fleet semaphores) of one name are one series, their sum: in flight, waiting,
// limits and calls add up. loom_fleet_capacity is the exception: the bound every semaphore of a
// name shares across the fleet, it is the largest of theirs. When one of them is garbage
// collected its numbers leave the sum, which Prometheus reads as a counter reset. A limiter or
// semaphore that was collected leaves the next scrape. A scope name, once seen, stays at 0 when
// none of its scopes is open.
package prometheus
