package main

import (
	"bytes"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestOutbound runs the example with fewer callers. run fails by itself if the limiter let a 429
// through or more than its limit in flight; here we also read the printed tables.
func TestOutbound(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(t.Context(), &out, []string{"-callers", "200", "-latency", "5ms"}), out.String())
	got := out.String()

	limited := regexp.MustCompile(`(?m)^through limiter\.New\(10, \.\.\.\)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s`).FindStringSubmatch(got)
	require.NotNil(t, limited, got)
	assert.Equal(t, []string{"200", "0", "0"}, limited[1:4], "every call answered 200, no 429")
	maxInFlight, err := strconv.Atoi(limited[4])
	require.NoError(t, err)
	assert.LessOrEqual(t, maxInFlight, 10)

	unprotected := regexp.MustCompile(`(?m)^straight to the API\s+(\d+)\s+(\d+)\s`).FindStringSubmatch(got)
	require.NotNil(t, unprotected, got)
	ok, _ := strconv.Atoi(unprotected[1])
	tooMany, _ := strconv.Atoi(unprotected[2])
	assert.Equal(t, 200, ok+tooMany)

	assert.Regexp(t, `(?m)^10\s+0\s+0\s+0\s+200\s+200\s+0\s+0\s+0\s+0\s+0$`, got, "Stats: all 200 completed")
}

func TestOutboundRejectsBadFlags(t *testing.T) {
	var out bytes.Buffer
	require.Error(t, run(t.Context(), &out, []string{"-limit", "0"}))
}

func TestCommas(t *testing.T) {
	for give, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -1000: "-1,000"} {
		assert.Equal(t, want, commas(give))
	}
}
