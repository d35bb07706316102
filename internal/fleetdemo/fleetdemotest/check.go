// Package fleetdemotest checks what the fleet example printed, for the tests of both of its
// commands.
package fleetdemotest

import (
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// CheckOutput reads the example's tables: without the fleet the API saw more than 40 calls in
// flight and answered 429s; through it, never more than 40 and no 429; each replica's counts add
// up.
func CheckOutput(t *testing.T, got string, replicas, calls int) {
	t.Helper()
	total := replicas * calls
	row := func(name string) []int {
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s`).FindStringSubmatch(got)
		require.NotNil(t, m, "no row %q in\n%s", name, got)
		var n []int
		for _, s := range m[1:] {
			v, err := strconv.Atoi(s)
			require.NoError(t, err)
			n = append(n, v)
		}
		return n // calls, 200 OK, 429, other errors, most in flight
	}

	alone := row("limiter.New(40)")
	assert.Equal(t, total, alone[0], "calls the API got without the fleet")
	assert.Equal(t, total, alone[1]+alone[2], "every call answered 200 or 429")
	assert.Positive(t, alone[2], "without the fleet, the API answers 429s")
	assert.Greater(t, alone[4], 40, "without the fleet, the API sees more than 40 in flight")

	shared := row("limiter.New(40, limiter.WithFleet(sem))")
	assert.Equal(t, []int{total, total, 0, 0}, shared[:4], "through the fleet: every call 200, no 429, no error")
	assert.LessOrEqual(t, shared[4], 40, "through the fleet: at most 40 in flight")
	assert.Positive(t, shared[4])

	perReplica := regexp.MustCompile(`(?m)^\d+\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+\d+\s+\d+\.\d$`).FindAllStringSubmatch(got, -1)
	require.Len(t, perReplica, replicas, got)
	c := strconv.Itoa(calls)
	for _, m := range perReplica {
		assert.Equal(t, []string{c, "0", c, c, "0"}, m[1:], "Completed, Rejected, Acquired, Released, LeasesLost")
	}
	assert.NotContains(t, got, "level=WARN", "no warning: no outage, no lease lost")
	assert.NotContains(t, got, "level=ERROR")
}
