package inspect

import (
	"fmt"
	"strings"

	"github.com/goloom/loom/internal/registry"
)

// A Feature is an inspection feature that can be turned on and off while the program runs.
// Features are bits: Scopes|Labels is both.
type Feature uint32

const (
	// Scopes records every scope opened while it is on, with its running subtasks, for
	// [Snapshot] and [Handler]. A scope opened while it is off never appears, even if it is
	// turned on later; one recorded stays until it is joined, even if it is turned off.
	Scopes = Feature(registry.Scopes)
	// Labels gives every subtask and limiter task started while it is on pprof goroutine labels:
	// loom.scope = the scope's name (or "scope"), loom.limiter = the limiter's name (or
	// "limiter"), on top of the labels of the context the scope or call was given. The values are
	// names, never ids, so a profile has as many as the program has names. A goroutine that a
	// labelled goroutine starts inherits its labels (Go's rule), for its whole life: see the
	// package doc for what to do about long-lived ones.
	Labels = Feature(registry.Labels)

	allFeatures = Scopes | Labels
)

// String returns the feature's name as LOOM_INSPECT spells it ("scopes", "labels"), names joined
// by "|" for several.
func (f Feature) String() string {
	var names []string
	if f&Scopes != 0 {
		names = append(names, "scopes")
	}
	if f&Labels != 0 {
		names = append(names, "labels")
	}
	if rest := f &^ allFeatures; rest != 0 || f == 0 {
		names = append(names, fmt.Sprintf("Feature(%d)", uint32(rest)))
	}
	return strings.Join(names, "|")
}

// Enable turns the given features on, from now on: scopes opened and subtasks started after it
// returns are recorded or labelled. It is safe to call at any time, from any goroutine. It panics
// for a Feature that is not Scopes, Labels or a combination of them.
func Enable(fs ...Feature) { registry.Enable(registry.Features(check("Enable", fs))) }

// Disable turns the given features off, from now on. Scopes recorded already stay in the dump
// until they are joined. It panics like [Enable] for an unknown Feature.
func Disable(fs ...Feature) { registry.Disable(registry.Features(check("Disable", fs))) }

// Enabled reports whether f is on (every feature in f, if it is several). It is false for a
// Feature that is not one of this package's.
func Enabled(f Feature) bool {
	return f&^allFeatures == 0 && registry.Enabled(registry.Features(f))
}

func check(op string, fs []Feature) Feature {
	var all Feature
	for _, f := range fs {
		if f&^allFeatures != 0 || f == 0 {
			panic(fmt.Sprintf("inspect: %s: unknown feature %v", op, f))
		}
		all |= f
	}
	return all
}
