package command

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// checkVisible refuses field's value (the command, the reason or
// input.prompt) when it holds a character a person reading the approval
// card cannot see for what it is: the card must show exactly what runs, so
// that a person approves the bytes /bin/sh is given, or nothing. The classes come from Unicode's general
// categories and properties in Go's unicode tables (Unicode
// unicode.Version), not from a list of examples:
//
//   - Z* (Zs, Zl, Zp) other than U+0020, and every other White_Space
//     character but tab and newline: a browser draws U+00A0, U+2000–U+200A,
//     U+3000, U+2028, U+2029 … as an ordinary space or line break, yet the
//     shell does not split words on them, so `ls /tmp<U+00A0># ; touch x`
//     reads as ls and a comment and runs touch.
//   - Cc other than tab and newline: carriage return, backspace, escape
//     and the C1 controls rewrite or hide what was drawn before them.
//   - Cf, Bidi_Control, Join_Control: draw nothing (U+200B, U+2060, U+FEFF,
//     tags) or reorder and join what is around them (U+202E, U+2067).
//   - Other_Default_Ignorable_Code_Point and Variation_Selector: the rest of
//     Unicode's default-ignorable code points, which a renderer shows as
//     nothing, among them letters that are blank by design (the Hangul
//     fillers U+115F, U+1160, U+3164, U+FFA0).
//   - Co (private use): the glyph is whatever a font puts there.
//   - Cs (surrogates) and bytes that are not UTF-8: not characters; a
//     browser draws U+FFFD in their place, hiding which bytes they are.
//   - Unassigned code points (Cn) and Noncharacter_Code_Point: no font can
//     be trusted to draw them, and a later Unicode may make them anything,
//     including invisible.
//   - Blank graphic characters that no property marks: U+2800 BRAILLE
//     PATTERN BLANK and U+1D159 MUSICAL SYMBOL NULL NOTEHEAD are So and
//     drawn as empty space.
//   - Combining marks (M*) at the start of the text or whose base (the
//     nearest character before them that is not a mark) is ASCII: they
//     draw over the base, so a slash over a letter or a stroke through a
//     semicolon disguises shell syntax, and a leading mark attaches to
//     whatever the card draws before the text.
//
// What remains is visible, but not necessarily what it seems: a Cyrillic
// 'а' looks like a Latin 'a', and a right-to-left letter reorders the
// neutral characters around it. The card therefore draws every non-ASCII
// character, with the marks that follow it, in a highlighted box of its
// own that names its code points and keeps the text around it in order
// (internal/web/assets/app.js); a mark on a non-ASCII base stays inside
// that box.
func checkVisible(field, value string) error {
	u, found := unseen(value)
	if !found {
		return nil
	}
	return fmt.Errorf("%s holds %s at byte %d, %s; the approval card would not show it for what it is, so a person could approve something other than what runs: remove it, or write it as an ASCII escape (with printf, say)", field, u.what(), u.At, u.Why)
}

// blankGlyphs are graphic characters drawn as empty space that carry no
// property saying so.
var blankGlyphs = &unicode.RangeTable{
	R16: []unicode.Range16{{Lo: 0x2800, Hi: 0x2800, Stride: 1}},
	R32: []unicode.Range32{{Lo: 0x1D159, Hi: 0x1D159, Stride: 1}},
}

var unassigned = "unassigned in Unicode " + unicode.Version + ", so no font can be trusted to draw it"

// refusedRune says why r is refused wherever it stands, or "" when it may
// be shown. Combining marks depend on what precedes them: see unseen.
func refusedRune(r rune) string {
	switch {
	case r >= ' ' && r < 0x7f || r == '\t' || r == '\n':
		return "" // printable ASCII, tab and newline: most of every command
	case unicode.Is(unicode.Cs, r):
		return "a surrogate, which is not a character"
	case unicode.Is(unicode.Noncharacter_Code_Point, r):
		return "a noncharacter, which has no glyph"
	case unicode.Is(unicode.Cn, r):
		return unassigned
	case unicode.In(r, unicode.Z, unicode.White_Space):
		return "a space or line break other than U+0020, tab and newline: it looks like one, but the shell does not split words on it"
	case unicode.Is(unicode.Cc, r):
		return "a control character, which rewrites or hides what is drawn around it"
	case unicode.In(r, unicode.Cf, unicode.Bidi_Control, unicode.Join_Control, unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector):
		return "an invisible format character, which draws nothing or changes how the text around it is drawn"
	case unicode.Is(unicode.Co, r):
		return "a private-use character, whose glyph is whatever a font puts there"
	case unicode.Is(blankGlyphs, r):
		return "a character drawn as empty space"
	}
	return ""
}

// unseenChar is a refused character: its code point, or the byte that is
// not UTF-8, its byte offset and why it is refused.
type unseenChar struct {
	R    rune
	Byte int // -1 unless it is a byte that is not UTF-8
	At   int
	Why  string
}

func (u unseenChar) what() string {
	if u.Byte >= 0 {
		return fmt.Sprintf("byte 0x%02X", u.Byte)
	}
	return fmt.Sprintf("U+%04X", u.R)
}

// unseen finds the first character in s that a person cannot see for what
// it is.
func unseen(s string) (unseenChar, bool) {
	baseASCII := true // no base yet: a mark here starts the text
	for i, c := range s {
		if c == utf8.RuneError {
			if _, n := utf8.DecodeRuneInString(s[i:]); n == 1 {
				return unseenChar{c, int(s[i]), i, "which is not UTF-8"}, true
			}
		}
		if why := refusedRune(c); why != "" {
			return unseenChar{c, -1, i, why}, true
		}
		if unicode.Is(unicode.M, c) {
			if baseASCII {
				return unseenChar{c, -1, i, "a combining mark on an ASCII character or at the start, where it can draw over shell syntax"}, true
			}
			continue
		}
		baseASCII = c < utf8.RuneSelf
	}
	return unseenChar{}, false
}
