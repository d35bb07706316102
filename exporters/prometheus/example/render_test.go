package main

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
	"time"
)

// What renderSVG draws: the dashboard's panels, laid out on its grid, each with the series its
// queries returned over one stretch of time, and marks at the times the load changed.
type (
	picture struct {
		Title, Subtitle string
		Start, End      time.Time
		Marks           []mark // vertical lines, such as the start of each phase
		Panels          []drawnPanel
	}
	mark struct {
		T     time.Time
		Label string
	}
	drawnPanel struct {
		Title      string
		Row        bool // a row's header: only its title is drawn
		Unit       string
		X, Y, W, H int // Grafana's grid: 24 columns, rows of 30 px
		Lines      []line
	}
	line struct {
		Legend string
		Points []point
	}
	point struct {
		T time.Time
		V float64 // NaN: no value (a gap)
	}
)

const (
	colWidth  = 60.0 // px per grid column: 1440 px wide
	rowHeight = 30.0 // px per grid row, as Grafana draws them
	headerH   = 64.0
)

// The colours of Grafana's dark theme and its classic palette.
var (
	palette  = []string{"#73bf69", "#f2cc0c", "#8ab8ff", "#ff780a", "#f2495c", "#5794f2", "#b877d9", "#705da0", "#37872d", "#fade2a"}
	bgColour = "#111217"
	panelBg  = "#181b1f"
	border   = "#2c3235"
	textMain = "#ccccdc"
	textDim  = "#8e8e9b"
	gridLine = "#2c3235"
)

// renderSVG writes the picture as a standalone SVG.
func renderSVG(w io.Writer, p picture) error {
	height := headerH
	for _, pn := range p.Panels {
		height = max(height, headerH+float64(pn.Y+pn.H)*rowHeight)
	}
	width := 24 * colWidth
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="Inter, Helvetica, Arial, sans-serif">`+"\n",
		width, height+8, width, height+8)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="%s"/>`+"\n", bgColour)
	fmt.Fprintf(&b, `<text x="12" y="26" font-size="18" fill="%s">%s</text>`+"\n", textMain, esc(p.Title))
	fmt.Fprintf(&b, `<text x="12" y="48" font-size="12" fill="%s">%s</text>`+"\n", textDim, esc(p.Subtitle))
	for _, pn := range p.Panels {
		x0 := float64(pn.X)*colWidth + 4
		y0 := headerH + float64(pn.Y)*rowHeight + 4
		w, h := float64(pn.W)*colWidth-8, float64(pn.H)*rowHeight-8
		if pn.Row {
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="15" font-weight="600" fill="%s">%s</text>`+"\n", x0+4, y0+17, textMain, esc(pn.Title))
			continue
		}
		drawPanel(&b, p, pn, x0, y0, w, h)
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func drawPanel(b *strings.Builder, p picture, pn drawnPanel, x0, y0, w, h float64) {
	fmt.Fprintf(b, `<g><rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" rx="3" fill="%s" stroke="%s"/>`+"\n", x0, y0, w, h, panelBg, border)
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="13" font-weight="500" fill="%s">%s</text>`+"\n", x0+10, y0+20, textMain, esc(pn.Title))

	// The plot, with room for the y axis's labels at the left and the legend below.
	legendRows := (len(pn.Lines) + 1) / 2
	px, py := x0+52, y0+32
	pw, ph := w-64, h-32-22-float64(legendRows)*16
	if ph < 20 {
		ph = 20
	}
	hi := 0.0
	for _, l := range pn.Lines {
		for _, pt := range l.Points {
			if !math.IsNaN(pt.V) && !math.IsInf(pt.V, 0) {
				hi = max(hi, pt.V)
			}
		}
	}
	top, step := niceScale(hi, pn.Unit)
	span := p.End.Sub(p.Start).Seconds()
	xOf := func(t time.Time) float64 { return px + pw*t.Sub(p.Start).Seconds()/span }
	yOf := func(v float64) float64 { return py + ph - ph*v/top }
	for v := 0.0; v <= top+step/2; v += step {
		y := yOf(v)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="1"/>`+"\n", px, y, px+pw, y, gridLine)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="10" text-anchor="end" fill="%s">%s</text>`+"\n", px-6, y+3, textDim, format(v, pn.Unit))
	}
	for _, m := range p.Marks {
		x := xOf(m.T)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-dasharray="3,3"/>`+"\n", x, py, x, py+ph, "#464c54")
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="10" fill="%s">%s</text>`+"\n", x+3, py+ph+13, textDim, esc(m.Label))
	}
	for i, l := range pn.Lines {
		colour := palette[i%len(palette)]
		var d strings.Builder
		pen := false
		for _, pt := range l.Points {
			if math.IsNaN(pt.V) || math.IsInf(pt.V, 0) {
				pen = false
				continue
			}
			cmd := "L"
			if !pen {
				cmd = "M"
			}
			fmt.Fprintf(&d, "%s%.1f,%.1f ", cmd, xOf(pt.T), yOf(pt.V))
			pen = true
		}
		if d.Len() > 0 {
			fmt.Fprintf(b, `<path d="%s" fill="none" stroke="%s" stroke-width="1.6" stroke-linejoin="round"/>`+"\n", strings.TrimSpace(d.String()), colour)
		}
		lx := x0 + 12 + float64(i%2)*(w/2)
		ly := py + ph + 30 + float64(i/2)*16
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="12" height="3" fill="%s"/>`+"\n", lx, ly-4, colour)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="11" fill="%s">%s</text>`+"\n", lx+17, ly, textMain, esc(l.Legend))
	}
	b.WriteString("</g>\n")
}

// niceScale returns the top of a y axis that shows hi, and the step between its grid lines: a
// round number (1, 2 or 5 times a power of ten), four steps or so.
func niceScale(hi float64, unit string) (top, step float64) {
	if hi <= 0 {
		if unit == "percentunit" {
			return 1, 0.25
		}
		return 1, 0.25
	}
	raw := hi / 4
	pow := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if step = m * pow; step >= raw {
			break
		}
	}
	return step * math.Ceil(hi/step), step
}

// format writes v in the panel's unit, as Grafana would: 0.25 → 25% for percentunit, 1200 →
// 1.2k, "/s" for reqps.
func format(v float64, unit string) string {
	switch unit {
	case "percentunit":
		return trim(fmt.Sprintf("%.1f", v*100)) + "%"
	case "reqps":
		return short(v) + "/s"
	default:
		return short(v)
	}
}

func short(v float64) string {
	switch {
	case v >= 1e6:
		return trim(fmt.Sprintf("%.1f", v/1e6)) + "M"
	case v >= 1e3:
		return trim(fmt.Sprintf("%.1f", v/1e3)) + "k"
	case v == math.Trunc(v):
		return fmt.Sprintf("%.0f", v)
	default:
		return trim(fmt.Sprintf("%.2f", v))
	}
}

func trim(s string) string {
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

func esc(s string) string { return html.EscapeString(s) }
