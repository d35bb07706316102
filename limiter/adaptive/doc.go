// Package adaptive provides controllers that move a concurrency limit from what the limited
// calls observe — their round-trip times (RTT) and their drops, the errors that mean "the
// downstream is overloaded" — so that the limit finds the downstream's real capacity instead of
// being guessed.
//
// A [Controller] sees the calls one [Window] at a time: a summary of the calls that ended since
// the previous window closed (RTT percentiles, drops, the most calls in flight, the limit in
// force) and returns the next limit. A limiter calls it once per window, never per call, on the
// goroutine of the call that closed the window: there is no goroutine and no timer. RTT is
// measured on 1 call in k, with k chosen so that a window gets a few dozen samples, so the clock
// is read rarely however many calls there are.
//
// The built-ins, each a plain value whose zero fields mean the documented defaults:
//
//   - [AIMD]: loss-based. A window with drops multiplies the limit by Backoff; a full window
//     without drops adds 1 (after a slow start). It ignores latency.
//   - [Vegas]: queue-based. It estimates how many calls wait at the downstream from the window's
//     median RTT against a no-load baseline, and keeps that queue at a few calls.
//   - [Gradient]: ratio-based. It compares the window's median RTT (short) with a long-term RTT
//     and cuts the limit when short exceeds long by more than a tolerance.
//
// All three treat drops alike, since a drop is the downstream saying so outright: the limit is
// cut at once, to what the downstream actually served (see [Window].DropShare) when that is
// less than the controller's own step. They were designed, and are simulated, against the
// failures users report in the well-known adaptive limiters:
//
//   - The baseline must not drift up under a long overload, or the limiter stops shedding (the
//     queue allowance of Netflix's Gradient2; failsafe-go's baseline in a long incident). Vegas
//     and Gradient measure their baseline instead of averaging the windows they judge: now and
//     then they lower the limit by 15 % for a few windows and take the RTT there, below the knee.
//     No cut ever adds a queue allowance.
//   - One lucky fast call must not collapse the limit (Netflix's Vegas, whose no-load RTT is the
//     fastest call seen): baselines are medians of window medians, never a minimum.
//   - Ramp-up and recovery must be quick (Netflix's #35, Vector's ARC): all three start in slow
//     start and, after a run of cuts such as an outage, double the limit back towards where the
//     cuts began before growing step by step.
//   - Probing must not pin concurrency low (Envoy's minRTT measurement at min_concurrency): the
//     probes dip by 15 %, never below Min, and no built-in ever sets the limit below its Min.
//   - A downstream that became slower for good is not mistaken for a queue (which would sink the
//     limit to Min): when a cut does not bring the RTT down as a queue's would, a probe checks
//     whether less concurrency means less latency, and if not, the new RTT is the baseline and
//     the limit doubles back.
//
// A window that still carries calls admitted before the last cut ([Window.Draining]) is the old
// limit's, already answered: no built-in cuts twice for one overload.
//
// A controller that keeps state between windows (all the built-ins do, but for AIMD's slow start)
// is also a [Starter]: a limiter calls Start once and gets a controller of its own, so one value,
// such as adaptive.Gradient{Min: 4, Max: 200}, may configure any number of limiters. Update on
// the value itself is one step from a fresh state, for tests and custom wrappers.
//
// This package imports nothing of the module: a controller is plain arithmetic on a Window, and
// may be tested, fuzzed and simulated without a limiter.
package adaptive
