package registry

import (
	"fmt"
	"os"
	"runtime/trace"
	"strings"
	"sync/atomic"
)

// Features is a set of inspection features, a bit each.
type Features uint32

const (
	// Scopes records every scope opened while it is on, with its running subtasks.
	Scopes Features = 1 << iota
	// Labels gives every subtask and every limiter task pprof goroutine labels.
	Labels

	// All is every feature.
	All = Scopes | Labels
)

// EnvVar names the environment variable read at start-up: a comma-separated list of features
// ("scopes", "labels", or "all") to enable.
const EnvVar = "LOOM_INSPECT"

var features atomic.Uint32

// Enable turns the features in f on.
func Enable(f Features) { features.Or(uint32(f)) }

// Disable turns the features in f off. Scopes already recorded stay until they are joined.
func Disable(f Features) { features.And(^uint32(f)) }

// Enabled reports whether every feature in f is on.
func Enabled(f Features) bool { return Features(features.Load())&f == f }

// Current returns the features that are on.
func Current() Features { return Features(features.Load()) }

// Active reports whether a scope being opened must call [Open]: some feature is on, or a
// runtime/trace recording is running. It is the whole cost of inspection when nothing is on.
func Active() bool { return features.Load() != 0 || trace.IsEnabled() }

// LabelsOn reports whether [Labels] is on: one atomic load.
func LabelsOn() bool { return features.Load()&uint32(Labels) != 0 }

// ParseFeatures parses a LOOM_INSPECT value: feature names separated by commas, case and
// surrounding spaces ignored, empty items skipped. It returns the features named and, in order, the
// items it did not recognize.
func ParseFeatures(s string) (f Features, unknown []string) {
	for item := range strings.SplitSeq(s, ",") {
		switch name := strings.ToLower(strings.TrimSpace(item)); name {
		case "":
		case "scopes":
			f |= Scopes
		case "labels":
			f |= Labels
		case "all":
			f |= All
		default:
			unknown = append(unknown, strings.TrimSpace(item))
		}
	}
	return f, unknown
}

func init() {
	v, ok := os.LookupEnv(EnvVar)
	if !ok {
		return
	}
	f, unknown := ParseFeatures(v)
	// A typo must not stop a service from starting, nor go unnoticed: say so once, on stderr.
	for _, u := range unknown {
		fmt.Fprintf(os.Stderr, "loom: %s: unknown feature %q (want scopes, labels or all)\n", EnvVar, u)
	}
	Enable(f)
}
