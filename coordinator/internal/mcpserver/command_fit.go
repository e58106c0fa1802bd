package mcpserver

import (
	"fmt"
	"regexp"
	"strconv"
	"unicode/utf8"

	"github.com/gridcity/gridcity/coordinator/internal/fleetview"
)

// A command's result keeps the first 8 KB and the last 24 KB of each
// stream. Two full streams of bytes that JSON escapes (quotes, control
// characters, <, > and &, which take six characters each) are far over the
// answer budget, so fitResult cuts the streams further, from the middle,
// until the whole answer fits: a quarter of a stream's share for its head,
// the rest for its tail, as the agent's own trim does.

// commandBudget leaves room under fleetview.ArgsBudget for the envelope the SDK
// wraps around the structured content in the text content.
const commandBudget = fleetview.ArgsBudget - 1000

// leftOut is the marker command.Output puts between a stream's head and
// tail; fitStream keeps the form and adds what it cuts to the count.
var leftOut = regexp.MustCompile(`\n\[… (\d+) bytes left out …\]\n`)

// fitResult cuts out's streams, and at worst its command's echo, so that
// its JSON is within commandBudget; Truncated counts every byte left out.
func fitResult(out *CommandResult) {
	if fleetview.JSONSize(out) <= commandBudget {
		return
	}
	if out.Command != "" {
		// The command is what the AI sent and the person approved; a
		// command of 16 KB of escaped characters is echoed in part.
		rest := *out
		rest.Stdout, rest.Stderr, rest.Command = "", "", ""
		if fleetview.JSONSize(&rest)+escapedLen(out.Command) > commandBudget/4 {
			out.Command, _ = fitStream(out.Command, 0, commandBudget/4-fleetview.JSONSize(&rest))
		}
	}
	rest := *out
	rest.Stdout, rest.Stderr = "", ""
	avail := max(commandBudget-fleetview.JSONSize(&rest)-64, 0) // 64: a Truncated it may gain
	outLen, errLen := escapedLen(out.Stdout), escapedLen(out.Stderr)
	// The smaller stream keeps what it needs up to half; the other gets
	// the rest.
	outShare, errShare := avail/2, avail/2
	if outLen < outShare {
		outShare, errShare = outLen, avail-outLen
	} else if errLen < errShare {
		errShare, outShare = errLen, avail-errLen
	}
	var outCut, errCut int64
	if out.Truncated != nil {
		outCut, errCut = out.Truncated.Stdout, out.Truncated.Stderr
	}
	out.Stdout, outCut = fitStream(out.Stdout, outCut, outShare)
	out.Stderr, errCut = fitStream(out.Stderr, errCut, errShare)
	if outCut > 0 || errCut > 0 {
		out.Truncated = &Truncated{Stdout: outCut, Stderr: errCut}
	}
}

// fitStream cuts text, whose omitted bytes are already left out, to at
// most budget characters of JSON: its first quarter and its last three
// quarters around a marker counting every byte left out. It returns the
// text and the new count.
func fitStream(text string, omitted int64, budget int) (string, int64) {
	if escapedLen(text) <= budget {
		return text, omitted
	}
	head, tail := text, ""
	if loc := leftOut.FindStringSubmatchIndex(text); loc != nil {
		head, tail = text[:loc[0]], text[loc[1]:]
	} else {
		tail = head[len(head)/2:]
		for !utf8.RuneStart(tail[0]) && len(tail) > 1 {
			tail = tail[1:]
		}
		head = head[:len(head)-len(tail)]
	}
	room := max(budget-escapedLen(fmt.Sprintf("\n[… %d bytes left out …]\n", omitted+int64(len(text)))), 0)
	keptHead := prefixWithin(head, room/4)
	keptTail := suffixWithin(tail, room-escapedLen(keptHead))
	omitted += int64(len(head)-len(keptHead)) + int64(len(tail)-len(keptTail))
	return keptHead + "\n[… " + strconv.FormatInt(omitted, 10) + " bytes left out …]\n" + keptTail, omitted
}

// escapedLen is the length of s as a JSON string's contents.
func escapedLen(s string) int {
	n := 0
	for i, r := range s {
		size := utf8.RuneLen(r)
		if r == utf8.RuneError {
			_, size = utf8.DecodeRuneInString(s[i:])
		}
		n += runeEscapedLen(r, size)
	}
	return n
}

// runeEscapedLen is the length of one rune as JSON writes it.
func runeEscapedLen(r rune, size int) int {
	switch {
	case r == '"' || r == '\\' || r == '\n' || r == '\r' || r == '\t' || r == '\b' || r == '\f':
		return 2
	case r < 0x20 || r == '<' || r == '>' || r == '&' || r == '\u2028' || r == '\u2029' || r == utf8.RuneError && size == 1:
		return 6
	}
	return size
}

// prefixWithin is the longest prefix of s, whole runes, whose JSON is
// within n characters.
func prefixWithin(s string, n int) string {
	used := 0
	for i, r := range s {
		size := utf8.RuneLen(r)
		if r == utf8.RuneError {
			_, size = utf8.DecodeRuneInString(s[i:])
		}
		used += runeEscapedLen(r, size)
		if used > n {
			return s[:i]
		}
	}
	return s
}

// suffixWithin is the longest suffix of s, whole runes, whose JSON is
// within n characters.
func suffixWithin(s string, n int) string {
	used := 0
	for i := len(s); i > 0; {
		r, size := utf8.DecodeLastRuneInString(s[:i])
		used += runeEscapedLen(r, size)
		if used > n {
			return s[i:]
		}
		i -= size
	}
	return s
}
