package doctor

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gridcity/gridcity/lib/probe"
)

// maxName bounds a name that came from a host (a unit, a container, a
// process); reasons are bounded by probe.Clean.
const maxName = 128

// maxItems bounds the lists spelled out in a detail or an evidence line.
const maxItems = 5

// q quotes a name that came from a host: cleaned, bounded and quoted, so
// that it reads as data wherever it appears.
func q(s string) string { return strconv.Quote(clip(probe.Clean(s), maxName)) }

// qr quotes a reason: an error text from a probe or an agent.
func qr(s string) string { return strconv.Quote(probe.Clean(s)) }

// clip cuts s to at most n bytes on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// list joins items, spelling out at most maxItems.
func list(items []string) string { return joinSome(items, ", ") }

// joinSome joins items with sep, spelling out at most maxItems: a rung's
// detail is one line, however many disks a host has.
func joinSome(items []string, sep string) string {
	if len(items) <= maxItems {
		return strings.Join(items, sep)
	}
	return strings.Join(items[:maxItems], sep) + fmt.Sprintf("%sand %d more", sep, len(items)-maxItems)
}

// ago says how long before now t was, roughly.
func ago(now, t time.Time) string {
	switch d := now.Sub(t); {
	case t.IsZero():
		return "at an unknown time"
	case d < time.Second:
		return "just now"
	default:
		return dur(d) + " ago"
	}
}

// dur is a duration, roughly, in the largest unit that fits.
func dur(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h", int(d.Hours()))
	}
	return fmt.Sprintf("%d d", int(d.Hours()/24))
}

// plural is "1 socket" or "2 sockets".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// stamp is an absolute time for evidence.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// size is a byte count in binary units.
func size(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// ms is a latency for a detail.
func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 1, 64) + " ms"
}

// pct formats a percentage without decimals, never rounding a not-quite-full
// disk up to 100%.
func pct(p float64) string {
	if p >= 99.5 && p < 100 {
		return "99%"
	}
	return strconv.FormatFloat(p, 'f', 0, 64) + "%"
}
