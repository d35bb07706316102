package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goloom/loom/exporters/prometheus/internal/promtest"
	"github.com/goloom/loom/internal/testutil"
)

var (
	dashboardSVG = flag.String("dashboard-svg", "", "write the dashboard's picture to this file (docs/metrics-dashboard.svg)")
	picturePhase = flag.Duration("dashboard-phase", time.Second, "length of each load phase for the dashboard's picture")
)

// The dashboard's JSON model, as far as the picture needs it.
type dashboardModel struct {
	Title  string       `json:"title"`
	Panels []modelPanel `json:"panels"`
}

type modelPanel struct {
	Type        string `json:"type"`
	Title       string `json:"title"`
	GridPos     struct{ H, W, X, Y int }
	FieldConfig struct {
		Defaults struct {
			Unit string `json:"unit"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
	Targets []struct {
		Expr         string `json:"expr"`
		LegendFormat string `json:"legendFormat"`
	} `json:"targets"`
	Panels []modelPanel `json:"panels"`
}

// TestDashboardOnRealData runs the program with -serve under its five phases of load while a
// real Prometheus server scrapes it, then evaluates every query of the Grafana dashboard over
// the load with query_range: each must return data. It renders the panels with those results
// as an SVG (a picture of what Grafana would show, drawn here, since no Grafana runs here), and
// with -dashboard-svg writes it to a file:
//
//	go test -run TestDashboardOnRealData -dashboard-phase 12s -dashboard-svg "$PWD/../../../docs/metrics-dashboard.svg" .
func TestDashboardOnRealData(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "grafana", "loom.json"))
	require.NoError(t, err)
	var model dashboardModel
	require.NoError(t, json.Unmarshal(raw, &model))

	alone(t)
	addr := promtest.FreeAddr(t)
	prom := promtest.Start(t, addr)
	version, err := prom.Version()
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	out := &testutil.SyncBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, out, []string{"-serve", "-addr", addr, "-phase", picturePhase.String()}) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()

	// The start of each phase, as the program announces it.
	var marks []mark
	phaseLine := regexp.MustCompile(`(?m)^phase (\w+) `)
	for {
		o := out.String()
		for _, m := range phaseLine.FindAllStringSubmatch(o, -1)[len(marks):] {
			marks = append(marks, mark{T: time.Now(), Label: m[1]})
		}
		if strings.Contains(o, "phases done") {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the program ended: %v\n%s", err, o)
		case <-time.After(5 * time.Millisecond):
		}
	}
	require.Len(t, marks, len(phases))
	start, end := marks[0].T, time.Now()

	// Prometheus has stored the end of the load once a sample at or after it is in.
	require.Eventually(t, func() bool {
		got, err := prom.Query(`timestamp(loom_limiter_limit{limiter="backend"})`)
		require.NoError(t, err)
		return len(got) == 1 && got[0].Samples[0].V >= float64(end.UnixMilli())/1000
	}, 60*time.Second, 50*time.Millisecond, "Prometheus never scraped the end of the load; its log:\n%s", prom.Log())

	step := max(end.Sub(start)/150, promtest.ScrapeEvery)
	window := max(5*promtest.ScrapeEvery, 2*step).Round(100 * time.Millisecond)
	vars := strings.NewReplacer("$limiter", ".*", "$semaphore", ".*", "$scope", ".*", "$__rate_interval", window.String())
	pic := picture{
		Title: model.Title,
		Subtitle: fmt.Sprintf("Drawn by TestDashboardOnRealData (exporters/prometheus/example) from the query_range results of a real Prometheus %s, "+
			"for the queries of grafana/loom.json, over %v of the example's load. Not a Grafana screenshot.", version, end.Sub(start).Round(time.Second)),
		Start: start, End: end, Marks: marks,
	}
	var walk func([]modelPanel)
	walk = func(ps []modelPanel) {
		for _, p := range ps {
			dp := drawnPanel{Title: p.Title, Row: p.Type == "row", Unit: p.FieldConfig.Defaults.Unit,
				X: p.GridPos.X, Y: p.GridPos.Y, W: p.GridPos.W, H: p.GridPos.H}
			for _, tg := range p.Targets {
				series, err := prom.QueryRange(vars.Replace(tg.Expr), start, end, step)
				require.NoError(t, err, "%s: %s", p.Title, tg.Expr)
				require.NotEmpty(t, series, "%s: %s returned nothing (%v to %v step %v)", p.Title, vars.Replace(tg.Expr), start, end, step)
				for _, s := range series {
					l := line{Legend: legend(tg.LegendFormat, s.Metric)}
					defined := 0
					for _, smp := range s.Samples {
						l.Points = append(l.Points, point{smp.T, smp.V})
						if !math.IsNaN(smp.V) {
							defined++
						}
					}
					assert.GreaterOrEqual(t, defined, 2, "%s: %s: %s has %d values", p.Title, tg.Expr, l.Legend, defined)
					dp.Lines = append(dp.Lines, l)
				}
			}
			pic.Panels = append(pic.Panels, dp)
			walk(p.Panels)
		}
	}
	walk(model.Panels)

	var svg bytes.Buffer
	require.NoError(t, renderSVG(&svg, pic))
	checkSVG(t, svg.Bytes(), pic)
	if *dashboardSVG != "" {
		require.NoError(t, os.WriteFile(*dashboardSVG, svg.Bytes(), 0o644))
		t.Logf("wrote %s (%d bytes)", *dashboardSVG, svg.Len())
	}
}

// legend fills a Grafana legend format, {{label}} standing for the series' label.
func legend(format string, labels map[string]string) string {
	return regexp.MustCompile(`\{\{\s*(\w+)\s*\}\}`).ReplaceAllStringFunc(format, func(m string) string {
		return labels[strings.Trim(m, "{} ")]
	})
}

// checkSVG checks that the picture is well-formed XML with a line drawn for every series, and
// the title of every panel.
func checkSVG(t *testing.T, svg []byte, pic picture) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(svg))
	paths, texts := 0, map[string]bool{}
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err, "well-formed SVG")
		switch el := tok.(type) {
		case xml.StartElement:
			if el.Name.Local == "path" {
				paths++
			}
		case xml.CharData:
			texts[string(el)] = true
		}
	}
	lines := 0
	for _, p := range pic.Panels {
		lines += len(p.Lines)
		assert.True(t, texts[p.Title], "the picture shows the title %q", p.Title)
	}
	assert.Equal(t, lines, paths, "a path for every series")
}
