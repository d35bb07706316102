package adaptive

import "math"

// A baseline is the no-load RTT that Vegas and Gradient compare each window's median with. It
// is measured, not inferred from the windows the limit is judged by: a window a little past
// the knee looks healthy within the noise, and a baseline fed by such windows creeps up under
// a long overload until the limiter stops shedding (the drift users of Gradient2 and of
// failsafe-go's limiter report).
//
// So, every probeEvery healthy windows in which the limit binds (sooner at first), the
// controller probes: it lowers the limit to probeDip of its recent peak (never below Min,
// never to a floor like Envoy's min_concurrency; not at all when it is that low already),
// waits until the calls above it have drained and one more window has passed (so that no call
// admitted before the dip is measured), takes that window's median as a probe result and puts
// the limit back — unless the RTT fell about as much as the concurrency, as a queue's does: the
// limit was past the knee, so the lower limit stays, the result replaces the highest one kept
// and the next probe comes early; a limit and a baseline that started past the knee walk down
// to it (slowly: a probe's dip every dozen windows or so). At a limit near the knee, 85 % of it is below the knee, where
// the RTT is the no-load RTT (the controllers keep the limit within 1/0.85 of the knee, or a
// probe would measure a queue). The baseline is the median of the last three results (the mean
// of the first windows' medians counting as the first), so one lucky or unlucky probe cannot
// move it. Only a probe that the controller asked for because the RTT stayed higher than its
// cuts explain (see pressure) may replace it outright: if that probe finds the RTT below the
// limit risen by more than the tolerance, the downstream itself became slower, and the
// baseline is that result alone. The first probe comes when the limit first stops growing.
type baseline struct {
	value   float64    // nanoseconds; 0 until the first window with samples
	first   float64    // the median of the first window that counts (the second observed)
	seen    int        // windows observed
	warm    int        // windows averaged into value before the first probe
	results [3]float64 // the latest probe results, a ring
	n, next int

	recent  float64 // the recent RTT at the limit in force: an average of the last windows
	before  float64 // recent when the probe began
	dip     float64 // the probe's limit over the limit it began from
	peak    float64 // the highest recent limit, decaying by 1 % a window
	since   int     // healthy full windows since the last probe ended
	probes  int     // probes done
	probing bool    // the limit is dipped
	forced  float64 // the RTT that made the controller ask for this probe; 0 for a scheduled one
	settled int     // windows of the probe that were not draining
	restore float64 // the limit to return to
}

const (
	probeEvery = 50   // healthy full windows between probes
	probeDip   = 0.85 // the probe's limit, as a fraction of the limit
	warmup     = 8    // windows averaged before the first probe
	// earlyProbes is how many probes come sooner than probeEvery (10, 20 and 40 windows apart)
	// after the start or a rebase.
	earlyProbes = 3
	// risen is how much higher than the baseline a probe result must be to replace it at once.
	risen = 1.15
	// proportional is how close to the dip the RTT's fall must be to be a queue's.
	proportional = 1.02
)

// observe feeds the median of a window that is not a probe's into recent, and into the
// baseline while there is no probe result yet. The very first window is used only until a
// second one comes: it holds the calls that ended first, the fast ones.
func (b *baseline) observe(rtt float64) {
	if b.recent == 0 {
		b.recent = rtt
	}
	b.recent += (rtt - b.recent) / 4
	if b.seen++; b.n > 0 || b.warm >= warmup {
		return
	}
	if b.seen == 2 {
		b.warm, b.value, b.first = 0, 0, rtt
	}
	b.warm++
	b.value += (rtt - b.value) / float64(b.warm)
}

// record adds a probe result and reports whether it replaced the baseline as a rise. Only a
// probe asked for by an unexplained RTT (trigger, 0 for a scheduled probe) may, and only if
// dipping the limit did not bring the RTT down: then the RTT is the downstream's, not a queue.
func (b *baseline) record(rtt, trigger float64) (rose bool) {
	switch {
	case trigger > 0 && b.value > 0 && rtt > b.value*risen && rtt*unexplained >= trigger:
		// One window's median is the baseline now: probe again soon (10, 20, 40 windows).
		b.n, b.next, b.probes = 0, 0, 0
		rose = true
	case b.n == 0 && b.value > 0: // the first probe: the windows before it count as a result
		b.results[0], b.n, b.next = b.value, 1, 1
	}
	b.results[b.next] = rtt
	b.next = (b.next + 1) % len(b.results)
	b.n = min(b.n+1, len(b.results))
	b.median()
	return rose
}

// median sets value from the results kept.
func (b *baseline) median() {
	s := b.results[:b.n]
	switch b.n {
	case 1:
		b.value = s[0]
	case 2:
		b.value = (s[0] + s[1]) / 2
	default: // the median of three
		b.value = math.Max(math.Min(s[0], s[1]), math.Min(math.Max(s[0], s[1]), s[2]))
	}
}

// track follows the recent peak of the limit; the controllers call it once a window.
func (b *baseline) track(limit float64) { b.peak = math.Max(limit, b.peak*0.99) }

// start begins a probe from limit and returns the limit to probe at. A scheduled probe (trigger 0) goes to probeDip of the recent peak, or stays at
// limit when that is already low enough (after a cut), then only holding the limit to measure.
// A probe asked for by an unexplained RTT (trigger) always dips below limit: it must tell
// whether less concurrency means less latency. A dip that Min prevents starts no probe.
func (b *baseline) start(limit, trigger float64, bounds bounds) float64 {
	top := math.Max(b.peak, limit)
	if trigger > 0 {
		top = limit
	}
	at := limit
	if target := math.Floor(top * probeDip); target < limit {
		if at = bounds.clampF(target); at >= limit {
			return limit
		}
	}
	b.probing, b.forced, b.settled, b.restore = true, trigger, 0, limit
	b.before, b.dip = b.recent, at/limit
	return at
}

// probe runs a window of a probe in progress and returns the limit to use: the dipped one
// while the window is draining, has no samples or is the first settled one; the next window is
// measured, ends the probe and restores the limit. rose reports a result that replaced the
// baseline as a rise.
func (b *baseline) probe(w Window, limit float64) (next float64, rose bool) {
	if w.Draining() || rttOf(w) == 0 {
		return limit, false
	}
	if b.settled++; b.settled < 2 {
		return limit, false
	}
	b.probing, b.since = false, 0
	rtt := rttOf(w)
	if b.dip < 1 && b.before > 0 && rtt <= b.before*b.dip*proportional && b.n > 0 {
		// The RTT fell as much as the concurrency, as a queue's does: the limit was past the
		// knee. Keep the lower limit, and let the result replace the highest one kept, so that
		// a baseline taken too high comes down after two such probes (and one noisy probe near
		// the knee moves it little); the next probe comes early.
		hi := 0
		for i := range b.results[:b.n] {
			if b.results[i] > b.results[hi] {
				hi = i
			}
		}
		b.results[hi] = rtt
		b.median()
		b.probes = 0
		return limit, false
	}
	rose = b.record(rtt, b.forced)
	if !rose {
		b.probes = min(b.probes+1, earlyProbes)
	}
	return b.restore, rose
}

// maybeProbe counts a healthy full window and starts a probe from limit when one is due: it
// returns the dipped limit, or limit unchanged. The first probe comes as soon as the limit
// stops growing (grew false) after the first windows: the knee is near, and the windows before
// it, if the limit started above the knee, were not no-load ones. The next ones come sooner
// than probeEvery too, in windows that did not grow.
func (b *baseline) maybeProbe(limit float64, grew bool, bounds bounds) float64 {
	b.since++
	// The first probes come sooner (10, 20, 40 windows apart), but not while the limit is
	// still growing: a baseline taken from the first windows is only as good as the limit they
	// ran at, and a ramp is not to be interrupted.
	due := b.since >= probeEvery
	if !grew && (b.n == 0 && b.warm >= warmup || b.probes < earlyProbes && b.since >= 10<<b.probes) {
		due = true
	}
	if due {
		return b.start(limit, 0, bounds)
	}
	return limit
}

// abort ends a probe without a result: a drop took over. The limit is not restored.
func (b *baseline) abort() {
	if b.probing {
		b.probing, b.since = false, 0
	}
}
