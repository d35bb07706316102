package main

import (
	"bytes"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/goloom/loom/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// tiny shrinks every experiment far below -quick, so that all five run in a few seconds even
// with -race; the shape of the output is what is checked, not the figures.
var tiny = []string{
	"-quick", "-progress=false",
	"-tasks", "1000", "-workers", "50", "-block", "20ms",
	"-clients", "100", "-duration", "400ms", "-cpu", "500us",
	"-dbapi-clients", "100", "-dbapi-duration", "400ms",
	"-parked", "5000",
	"-jobs", "200", "-query", "10ms", "-poolwait", "300ms",
}

func TestLoadtestAllExperiments(t *testing.T) {
	svg := filepath.Join(t.TempDir(), "latency.svg")
	var out, errOut bytes.Buffer
	require.NoError(t, run(t.Context(), &out, &errOut, append(tiny, "-svg", svg)), out.String())
	got := out.String()

	for _, want := range []string{
		"== blocking: ", "== spike: ", "== dbapi: ", "== parked: ", "== pool: ",
		// each names the article it reproduces
		"after the article 자바 스레드만 알던 개발자가 가상 스레드를 파헤쳐 봤습니다 (A developer who only knew Java threads digs into virtual threads)",
		"after the article [Java 21] 가상 스레드(Virtual Threads) 사용기 ([Java 21] Using virtual threads)",
		// the articles' figures, beside ours
		"wall time (s)              ~50                   ~1-2",
		"I/O throughput (req/s)  651.68                1,625.67",
		"I/O p95 (ms)            908.46                315.55",
		"CPU throughput (req/s)  11.31                 10.55",
		"p99 (ms)            ~3,000               ~160",
		"article: bytes per virtual thread",
		"limiter, queued jobs (Submit)",
		"latency chart written to " + svg,
	} {
		assert.Contains(t, got, want)
	}
	// parked: one row per step, bytes per subtask at least a goroutine's 2 KiB stack... or close.
	rows := regexp.MustCompile(`(?m)^(1,000|2,000|3,000|4,000|5,000)\s+\d+\s+([\d,]+)\s+([\d,]+)\s+\d+\s+-$`).FindAllStringSubmatch(got, -1)
	assert.Len(t, rows, 5, "five steps of parked subtasks")
	// pool: through the limiter no job hits the pool's timeout.
	assert.Regexp(t, `(?m)^limiter, a goroutine per job \(Do\)\s+200\s+0\s`, got)
	assert.Regexp(t, `(?m)^limiter, queued jobs \(Submit\)\s+200\s+0\s`, got)
	assert.Empty(t, errOut.String(), "no progress line with -progress=false, and no log noise")

	// The chart is well-formed SVG with three bars for each of the 11 configurations.
	f, err := os.Open(svg)
	require.NoError(t, err)
	defer f.Close()
	bars := 0
	dec := xml.NewDecoder(f)
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		if el, ok := tok.(xml.StartElement); ok && el.Name.Local == "rect" {
			for _, a := range el.Attr {
				if a.Name.Local == "fill" && a.Value != "white" {
					bars++
				}
			}
		}
	}
	assert.Equal(t, 11*3+3, bars, "11 configurations x (p50, p95, p99), plus the legend's 3 swatches")
}

func TestLoadtestOneExperiment(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(t.Context(), &out, io.Discard, append(tiny, "-exp", "parked")), out.String())
	assert.Contains(t, out.String(), "== parked: ")
	assert.NotContains(t, out.String(), "== blocking: ")
}

func TestLoadtestFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-exp", "nope"},
		{"-exp", "blocking,"},
		{"-scale", "-1"},
		{"-tasks", "0"},
		{"extra"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			assert.Error(t, run(t.Context(), io.Discard, io.Discard, args))
		})
	}
}

// -quick and -scale change the defaults but not the flags given explicitly.
func TestScaleKeepsExplicitFlags(t *testing.T) {
	c := defaults()
	c.quick()
	assert.Equal(t, 10_000, c.tasks)
	assert.Equal(t, 100_000, c.parked)
	c.scale(0.5)
	assert.Equal(t, 5_000, c.tasks)
	assert.Equal(t, 1500*time.Millisecond, c.duration)
}

func TestProgressLine(t *testing.T) {
	var buf testutil.SyncBuffer
	p := &progress{w: &buf, on: true, delay: time.Millisecond, every: time.Millisecond}
	stop := p.track("blocking pool", func() string { return "12/34 done" })
	require.Eventually(t, func() bool { return strings.Contains(buf.String(), "[blocking pool] 12/34 done") },
		10*time.Second, time.Millisecond)
	stop()
	assert.True(t, strings.HasSuffix(buf.String(), "\r"), "the line is cleared at the end")

	quiet := &progress{w: &buf, on: false}
	quiet.track("x", func() string { t.Fatal("called"); return "" })()
}

func TestSummarize(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	s := summarize(d)
	assert.Equal(t, 50*time.Millisecond, s.p50)
	assert.Equal(t, 95*time.Millisecond, s.p95)
	assert.Equal(t, 99*time.Millisecond, s.p99)
	assert.Equal(t, 100*time.Millisecond, s.worst)
	assert.Equal(t, 50500*time.Microsecond, s.mean)
	assert.Equal(t, summary{}, summarize(nil))
}

func TestNum(t *testing.T) {
	assert.Equal(t, "1,625.67", num(1625.669, 2))
	assert.Equal(t, "12,000", num(11999.6, 0))
	assert.Equal(t, "-3.5", num(-3.5, 1))
	assert.Equal(t, "999", num(999, 0))
}
