package sim

import (
	"fmt"
	"html"
	"strings"
	"time"
)

// The geometry of an SVG chart: one panel per trace, stacked, sharing the time axis.
const (
	svgWidth   = 900
	svgPanel   = 210 // height of one panel
	svgLeft    = 56  // room for the y labels
	svgRight   = 20
	svgTop     = 46 // room for the title and the legend
	svgGap     = 34 // between panels: the panel's title
	svgBottom  = 34 // room for the time labels
	plotWidth  = svgWidth - svgLeft - svgRight
	plotHeight = svgPanel - svgGap
)

// SVG draws traces of one scenario as an SVG chart, one panel each, titled by its label: the
// hidden capacity (grey, dashed), the limit after each window (blue) and the most calls in
// flight in each window (orange), over time. It uses the standard library only, and the same
// traces always give the same bytes.
func SVG(title string, labels []string, traces []*Trace) []byte {
	if len(labels) != len(traces) || len(traces) == 0 {
		panic("sim: SVG: one label per trace, at least one trace")
	}
	height := svgTop + len(traces)*svgPanel + svgBottom
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		svgWidth, height, svgWidth, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="18" font-size="15" font-weight="bold">%s</text>`+"\n", svgLeft, html.EscapeString(title))
	legend := []struct{ color, dash, name string }{
		{"#999999", "6 4", "hidden capacity C"}, {"#1f77b4", "", "limit"}, {"#ff7f0e", "", "most calls in flight"},
	}
	for i, l := range legend {
		x := svgLeft + i*190
		fmt.Fprintf(&b, `<line x1="%d" y1="34" x2="%d" y2="34" stroke="%s" stroke-width="2" stroke-dasharray="%s"/>`, x, x+24, l.color, l.dash)
		fmt.Fprintf(&b, `<text x="%d" y="38">%s</text>`+"\n", x+30, l.name)
	}
	duration := traces[0].Scenario.Duration
	for i, tr := range traces {
		panel(&b, svgTop+i*svgPanel+svgGap, labels[i], tr, duration)
	}
	// The time axis, under the last panel.
	base := svgTop + len(traces)*svgPanel
	for _, t := range ticks(duration) {
		x := svgLeft + float64(plotWidth)*float64(t)/float64(duration)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%v</text>`+"\n", x, base+16, t)
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">simulated time</text>`+"\n", svgLeft+plotWidth/2, base+30)
	b.WriteString("</svg>\n")
	return []byte(b.String())
}

// panel draws one trace with its plot area's top at top.
func panel(b *strings.Builder, top int, label string, tr *Trace, duration time.Duration) {
	peak := 1
	for _, s := range tr.Scenario.Capacity {
		peak = max(peak, s.N)
	}
	for _, r := range tr.Records {
		peak = max(peak, r.Next, r.Window.MaxInFlight)
	}
	ymax := float64(peak) * 1.1
	x := func(t time.Duration) float64 { return svgLeft + float64(plotWidth)*float64(t)/float64(duration) }
	y := func(v int) float64 { return float64(top+plotHeight) - float64(plotHeight)*float64(v)/ymax }

	fmt.Fprintf(b, `<text x="%d" y="%d" font-weight="bold">%s</text>`+"\n", svgLeft, top-10, html.EscapeString(label))
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#cccccc"/>`+"\n", svgLeft, top, plotWidth, plotHeight)
	for _, v := range yticks(peak) {
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eeeeee"/>`, svgLeft, y(v), svgLeft+plotWidth, y(v))
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end">%d</text>`+"\n", svgLeft-6, y(v)+4, v)
	}

	// The capacity, a step function of time.
	var pts []string
	for i, s := range tr.Scenario.Capacity {
		end := duration
		if i+1 < len(tr.Scenario.Capacity) {
			end = tr.Scenario.Capacity[i+1].At
		}
		pts = append(pts, fmt.Sprintf("%.1f,%.1f %.1f,%.1f", x(s.At), y(s.N), x(end), y(s.N)))
	}
	fmt.Fprintf(b, `<polyline fill="none" stroke="#999999" stroke-width="2" stroke-dasharray="6 4" points="%s"/>`+"\n", strings.Join(pts, " "))

	// In flight per window, then the limit in force, a step function changing at each window.
	pts = pts[:0]
	for _, r := range tr.Records {
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(r.At), y(r.Window.MaxInFlight)))
	}
	fmt.Fprintf(b, `<polyline fill="none" stroke="#ff7f0e" stroke-width="1" points="%s"/>`+"\n", strings.Join(pts, " "))
	pts = pts[:0]
	limit, at := tr.Scenario.Start, time.Duration(0)
	for _, r := range tr.Records {
		pts = append(pts, fmt.Sprintf("%.1f,%.1f %.1f,%.1f", x(at), y(limit), x(r.At), y(limit)))
		limit, at = r.Next, r.At
	}
	pts = append(pts, fmt.Sprintf("%.1f,%.1f %.1f,%.1f", x(at), y(limit), x(duration), y(limit)))
	fmt.Fprintf(b, `<polyline fill="none" stroke="#1f77b4" stroke-width="1.5" points="%s"/>`+"\n", strings.Join(pts, " "))
}

// ticks returns about ten round moments in [0, d].
func ticks(d time.Duration) []time.Duration {
	step := time.Second
	for _, s := range []time.Duration{time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 20 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute} {
		step = s
		if d/s <= 10 {
			break
		}
	}
	var out []time.Duration
	for t := time.Duration(0); t <= d; t += step {
		out = append(out, t)
	}
	return out
}

// yticks returns about five round values in [0, peak].
func yticks(peak int) []int {
	step := 1
	for _, s := range []int{1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000} {
		step = s
		if peak/s <= 5 {
			break
		}
	}
	var out []int
	for v := 0; v <= peak; v += step {
		out = append(out, v)
	}
	return out
}
