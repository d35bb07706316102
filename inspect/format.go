package inspect

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
)

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// age formats a duration the way the text and the page show ages: 35µs, 42ms, 0.8s, 12.3s,
// 3m07s, 2h05m, 3d04h. Negative durations are shown as zero.
func age(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d/time.Microsecond)
	case d < 100*time.Millisecond:
		return fmt.Sprintf("%dms", d/time.Millisecond)
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", d/time.Minute, d%time.Minute/time.Second)
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%02dm", d/time.Hour, d%time.Hour/time.Minute)
	default:
		return fmt.Sprintf("%dd%02dh", d/(24*time.Hour), d%(24*time.Hour)/time.Hour)
	}
}

// shortSite keeps the last directory and the file of a file:line site: api/profile.go:31.
func shortSite(site string) string {
	slash := strings.LastIndexByte(site, '/')
	if slash < 0 {
		return site
	}
	if prev := strings.LastIndexByte(site[:slash], '/'); prev >= 0 {
		return site[prev+1:]
	}
	return site
}

// quote writes a string from the program for a terminal: quoted, with every character that is not
// printable escaped, as Go quotes strings ("a\rb" stays one line, "\x1b[2J" clears nothing).
func quote(s string) string { return strconv.Quote(s) }

// siteText is a site's short form for the text: bare when every character of it is printable and
// none is a space, a quote or a backslash, else quoted like a name.
func siteText(site string) string {
	short := shortSite(site)
	for _, r := range short {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) || r == '"' || r == '\\' {
			return quote(short)
		}
	}
	return short
}

// firstLine returns the first line of s, cut to at most n runes: a panic's cause carries its
// stack, which belongs in the JSON, not on one line of text.
func firstLine(s string, n int) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func secondsToDuration(s float64) time.Duration {
	if s <= 0 {
		return 0
	}
	if s > float64(1<<62)/float64(time.Second) {
		return 1 << 62
	}
	return time.Duration(s * float64(time.Second))
}
