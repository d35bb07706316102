package promtest_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/goloom/loom/exporters/prometheus/internal/promtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A server started on a target nobody serves scrapes it and stores up == 0; a bad query is an
// error, not an empty result.
func TestStartAndQuery(t *testing.T) {
	s := promtest.Start(t, promtest.FreeAddr(t))
	var up []promtest.Series
	require.Eventually(t, func() bool {
		var err error
		up, err = s.Query(`up{job="loom"}`)
		require.NoError(t, err)
		return len(up) == 1
	}, 60*time.Second, 50*time.Millisecond, s.Log())
	assert.Equal(t, 0.0, up[0].Samples[0].V)
	assert.Equal(t, "loom", up[0].Metric["job"])

	end := time.Now()
	rng, err := s.QueryRange(`up{job="loom"}`, end.Add(-time.Minute), end, time.Second)
	require.NoError(t, err)
	require.Len(t, rng, 1)
	assert.NotEmpty(t, rng[0].Samples)

	v, err := s.Version()
	require.NoError(t, err)
	assert.Regexp(t, `^\d+\.\d+`, v)

	_, err = s.Query(`rate(up[`)
	assert.Error(t, err)
}
