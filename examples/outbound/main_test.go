package main

import (
	"bytes"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestOutbound runs the example with fewer callers. run fails by itself if a limiter let a 429
// through or more than its limit in flight; here we also read the printed tables.
func TestOutbound(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(t.Context(), &out, []string{"-callers", "200", "-latency", "5ms", "-rate-callers", "20"}), out.String())
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

	// The rate-limited API: 10 starts per second, bursts of 10.
	rated := regexp.MustCompile(`(?m)^through limiter\.New\(10, limiter\.WithRate\(10, 10\)\)\s+(\d+)\s+(\d+)\s+(\d+)\s+([\d.]+)/s\s`).FindStringSubmatch(got)
	require.NotNil(t, rated, got)
	assert.Equal(t, []string{"20", "0", "0"}, rated[1:4], "every call answered 200, no 429")
	rate, err := strconv.ParseFloat(rated[4], 64)
	require.NoError(t, err)
	assert.LessOrEqual(t, rate, 11.0, "after the burst, about 10 starts per second, never much more")
	assert.GreaterOrEqual(t, rate, 5.0)

	burst := regexp.MustCompile(`(?m)^straight to the API\s+(\d+)\s+(\d+)\s+0\s+[\d,.]+/s\s`).FindStringSubmatch(got)
	require.NotNil(t, burst, got)
	ok, _ = strconv.Atoi(burst[1])
	tooMany, _ = strconv.Atoi(burst[2])
	assert.Equal(t, 20, ok+tooMany)
	assert.GreaterOrEqual(t, ok, 10, "the API lets a burst of 10 through")
	assert.Positive(t, tooMany, "and refuses the rest of an unprotected burst")

	assert.Regexp(t, `(?m)^10\s+0\s+0\s+0\s+20\s+20\s+0\s+0\s+0\s+0$`, got, "rate limiter's Stats: all 20 completed, none waiting")
}

// TestRateAPI checks the rate-limited API's own bucket on a made-up clock: a burst of 10, then one
// call per 100 ms, with the jitter it forgives and no more.
func TestRateAPI(t *testing.T) {
	api := newRateAPI(10, 10, 50*time.Millisecond)
	t0 := time.Unix(1000, 0)
	for i := range 10 {
		assert.True(t, api.admit(t0), "burst call %d", i)
	}
	assert.False(t, api.admit(t0), "the 11th at once is refused")
	assert.False(t, api.admit(t0.Add(40*time.Millisecond)), "60 ms early: beyond the jitter")
	assert.True(t, api.admit(t0.Add(60*time.Millisecond)), "40 ms early: within the jitter")
	assert.False(t, api.admit(t0.Add(100*time.Millisecond)), "a refused call took no token: the next one is due at 200 ms")
	assert.True(t, api.admit(t0.Add(200*time.Millisecond)))
	assert.True(t, api.admit(t0.Add(10*time.Second)), "a second of quiet refills the bucket")
	for i := range 9 {
		assert.True(t, api.admit(t0.Add(10*time.Second)), "refilled burst call %d", i+2)
	}
	assert.False(t, api.admit(t0.Add(10*time.Second)), "never more than the burst")
	assert.Equal(t, "10.0/s", func() string {
		api.reset()
		for i := range 20 {
			api.admit(t0.Add(time.Duration(max(0, i-9)) * 100 * time.Millisecond))
		}
		return api.startRate()
	}())
}

func TestOutboundRejectsBadFlags(t *testing.T) {
	var out bytes.Buffer
	require.Error(t, run(t.Context(), &out, []string{"-limit", "0"}))
	require.Error(t, run(t.Context(), &out, []string{"-rate", "0"}))
	require.Error(t, run(t.Context(), &out, []string{"-rate-callers", "0"}))
}

func TestCommas(t *testing.T) {
	for give, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -1000: "-1,000"} {
		assert.Equal(t, want, commas(give))
	}
}
