package prometheus_test

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	loomprom "github.com/goloom/loom/exporters/prometheus"
)

// DashboardFile is the Grafana dashboard of the collector's series.
const dashboardFile = "grafana/loom.json"

// A dashboard is what the test reads of a Grafana dashboard's JSON model.
type dashboard struct {
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	GridPos struct{ H, W, X, Y int } `json:"gridPos"`
	Targets []struct {
		RefID        string `json:"refId"`
		Expr         string `json:"expr"`
		LegendFormat string `json:"legendFormat"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	raw, err := os.ReadFile(dashboardFile)
	require.NoError(t, err)
	var d dashboard
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	require.NoError(t, dec.Decode(&d), "valid JSON")
	require.False(t, dec.More(), "one JSON value")
	return d
}

// exported returns the names of the metrics the collector describes.
func exported(t *testing.T) []string {
	t.Helper()
	ch := make(chan *prometheus.Desc, 100)
	loomprom.NewCollector().Describe(ch)
	close(ch)
	var names []string
	for d := range ch {
		m := regexp.MustCompile(`fqName: "([^"]+)"`).FindStringSubmatch(d.String())
		require.NotNil(t, m, d.String())
		names = append(names, m[1])
	}
	return names
}

var (
	metricName = regexp.MustCompile(`\bloom_[a-z_]+\b`)
	byClause   = regexp.MustCompile(`\bby \(([^)]*)\)`)
	matchers   = regexp.MustCompile(`\b(loom_[a-z_]+)\{([^}]*)\}`)
	matcher    = regexp.MustCompile(`([a-z_]+)\s*(=~|!~|!=|=)`)
)

// TestDashboard checks the dashboard's model: every panel is placed on the grid without overlap
// and queries the data source variable, every query names only metrics the collector exports,
// with their own labels, and every metric the collector exports is on some panel.
func TestDashboard(t *testing.T) {
	d := readDashboard(t)
	assert.NotEmpty(t, d.UID)
	assert.NotEmpty(t, d.Title)
	assert.Positive(t, d.SchemaVersion)
	names := exported(t)
	onPanels := map[string]bool{}
	var queries []string
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			q, _ := json.Marshal(v.Query)
			queries = append(queries, string(q))
		}
	}

	var placed []panel
	var walk func(ps []panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			placed = append(placed, p)
			if p.Type == "row" {
				walk(p.Panels)
				continue
			}
			assert.Equal(t, "timeseries", p.Type, p.Title)
			assert.NotEmpty(t, p.Title, "panel %d", p.ID)
			assert.Equal(t, "${datasource}", p.Datasource.UID, p.Title)
			require.NotEmpty(t, p.Targets, p.Title)
			var refs []string
			for _, tg := range p.Targets {
				refs = append(refs, tg.RefID)
				ms := metricName.FindAllString(tg.Expr, -1)
				require.NotEmpty(t, ms, "%s: %s names no loom metric", p.Title, tg.Expr)
				for _, m := range ms {
					assert.Contains(t, names, m, "%s: %s", p.Title, tg.Expr)
					onPanels[m] = true
				}
				checkLabels(t, p.Title, tg.Expr)
				queries = append(queries, tg.Expr)
			}
			slices.Sort(refs)
			assert.Equal(t, refs, slices.Compact(slices.Clone(refs)), "%s: refIds are distinct", p.Title)
		}
	}
	walk(d.Panels)
	for _, q := range queries {
		for _, m := range metricName.FindAllString(q, -1) {
			assert.Contains(t, names, m, q)
		}
	}
	for _, m := range names {
		assert.True(t, onPanels[m], "%s is on no panel", m)
	}

	// On Grafana's grid of 24 columns, each panel inside it, none overlapping another.
	ids := map[int]bool{}
	for i, a := range placed {
		assert.False(t, ids[a.ID], "two panels with id %d", a.ID)
		ids[a.ID] = true
		g := a.GridPos
		assert.True(t, g.W > 0 && g.H > 0 && g.X >= 0 && g.X+g.W <= 24 && g.Y >= 0, "%s at %+v", a.Title, g)
		for _, b := range placed[i+1:] {
			h := b.GridPos
			overlap := g.X < h.X+h.W && h.X < g.X+g.W && g.Y < h.Y+h.H && h.Y < g.Y+g.H
			assert.False(t, overlap, "%q %+v overlaps %q %+v", a.Title, g, b.Title, h)
		}
	}
}

// checkLabels checks that expr matches and groups each metric by labels it has.
func checkLabels(t *testing.T, title, expr string) {
	t.Helper()
	for _, m := range matchers.FindAllStringSubmatch(expr, -1) {
		for _, l := range matcher.FindAllStringSubmatch(m[2], -1) {
			assert.Contains(t, wantFamilies[m[1]], l[1], "%s: %s has no label %s", title, m[1], l[1])
		}
	}
	for _, by := range byClause.FindAllStringSubmatch(expr, -1) {
		for l := range strings.SplitSeq(by[1], ",") {
			for _, m := range metricName.FindAllString(expr, -1) {
				assert.Contains(t, wantFamilies[m], strings.TrimSpace(l), "%s: by (%s) of %s", title, by[1], m)
			}
		}
	}
}
