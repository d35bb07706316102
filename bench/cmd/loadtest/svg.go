package main

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"math"
	"strings"
	"time"
)

// series is one configuration's latency, drawn as three bars: p50, p95, p99.
type series struct {
	label string
	s     summary
}

// writeSVG draws a grouped bar chart of p50/p95/p99 per configuration on a logarithmic axis, with
// the standard library only.
func writeSVG(w io.Writer, title string, data []series) error {
	const (
		left, right, top, bottom = 70.0, 20.0, 50.0, 150.0
		plotH                    = 320.0
		groupW, barW             = 84.0, 20.0
	)
	var lo, hi time.Duration = time.Hour, 0
	for _, d := range data {
		for _, v := range []time.Duration{d.s.p50, d.s.p95, d.s.p99} {
			if v > 0 {
				lo, hi = min(lo, v), max(hi, v)
			}
		}
	}
	if hi == 0 {
		lo, hi = time.Millisecond, time.Second
	}
	// Decades of milliseconds around the data.
	minExp := math.Floor(math.Log10(max(ms(lo), 0.01)))
	maxExp := math.Ceil(math.Log10(max(ms(hi), 0.01)))
	if maxExp <= minExp {
		maxExp = minExp + 1
	}
	width := left + right + groupW*float64(max(len(data), 1))
	height := top + plotH + bottom
	y := func(d time.Duration) float64 {
		v := math.Log10(max(ms(d), math.Pow(10, minExp)))
		return top + plotH - (v-minExp)/(maxExp-minExp)*plotH
	}

	b := bufio.NewWriter(w)
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="11">`+"\n",
		width, height, width, height)
	p(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	p(`<text x="%.0f" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", left, html.EscapeString(title))

	// Grid lines and the axis labels, one per decade.
	for e := minExp; e <= maxExp; e++ {
		d := time.Duration(math.Pow(10, e) * float64(time.Millisecond))
		yy := y(d)
		p(`<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#ddd"/>`+"\n", left, yy, width-right, yy)
		p(`<text x="%.0f" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", left-6, yy, axisLabel(d))
	}
	p(`<text x="16" y="%.0f" transform="rotate(-90 16 %.0f)" text-anchor="middle">latency (log scale)</text>`+"\n",
		top+plotH/2, top+plotH/2)

	colors := [3]string{"#4c78a8", "#f58518", "#e45756"}
	names := [3]string{"p50", "p95", "p99"}
	for i, d := range data {
		x0 := left + groupW*float64(i) + (groupW-3*barW)/2
		for j, v := range []time.Duration{d.s.p50, d.s.p95, d.s.p99} {
			if v <= 0 {
				continue
			}
			yy := y(v)
			p(`<rect x="%.1f" y="%.1f" width="%.0f" height="%.1f" fill="%s"><title>%s %s: %v</title></rect>`+"\n",
				x0+barW*float64(j), yy, barW-2, top+plotH-yy, colors[j], html.EscapeString(d.label), names[j], roundDur(v))
		}
		// The label, rotated under the group.
		cx := left + groupW*float64(i) + groupW/2
		p(`<text x="%.1f" y="%.0f" transform="rotate(-40 %.1f %.0f)" text-anchor="end">%s</text>`+"\n",
			cx, top+plotH+14, cx, top+plotH+14, html.EscapeString(d.label))
	}
	p(`<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="black"/>`+"\n", left, top+plotH, width-right, top+plotH)
	// Legend.
	for j, name := range names {
		lx := left + 220 + float64(j)*60
		p(`<rect x="%.0f" y="30" width="10" height="10" fill="%s"/><text x="%.0f" y="39">%s</text>`+"\n", lx, colors[j], lx+14, name)
	}
	p("</svg>\n")
	return b.Flush()
}

func axisLabel(d time.Duration) string {
	switch {
	case d >= time.Second:
		return strings.TrimSuffix(fmt.Sprintf("%gs", d.Seconds()), ".0")
	case d >= time.Millisecond:
		return fmt.Sprintf("%gms", ms(d))
	default:
		return fmt.Sprintf("%gµs", float64(d)/float64(time.Microsecond))
	}
}

func roundDur(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Round(10 * time.Millisecond)
	}
	return d.Round(100 * time.Microsecond)
}
