package command

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// tableSet lists every code point of the named tables by walking their
// ranges, rather than asking unicode.Is as the rule does.
func tableSet(tables map[string]*unicode.RangeTable, names ...string) []bool {
	set := make([]bool, unicode.MaxRune+1)
	for _, name := range names {
		t, ok := tables[name]
		if !ok {
			panic("no unicode table " + name)
		}
		for _, r := range t.R16 {
			for c := rune(r.Lo); c <= rune(r.Hi); c += rune(r.Stride) {
				set[c] = true
			}
		}
		for _, r := range t.R32 {
			for c := rune(r.Lo); c <= rune(r.Hi); c += rune(r.Stride) {
				set[c] = true
			}
		}
	}
	return set
}

// TestVisibleRuleEveryCodePoint checks the rule for every code point from
// 0 to U+10FFFF against a second statement of it, built from the unicode
// package's tables by name: refused alone are the separators and the other
// categories (Z*, C*) but U+0020, tab and newline, every White_Space and
// default-ignorable property, unassigned code points (in no two-letter
// category) and the blank glyphs; a combining mark (M*) is refused at the
// start and after an ASCII character, and allowed after a non-ASCII letter.
func TestVisibleRuleEveryCodePoint(t *testing.T) {
	refused := tableSet(unicode.Categories, "Zs", "Zl", "Zp", "Cc", "Cf", "Co", "Cs")
	props := tableSet(unicode.Properties, "White_Space", "Noncharacter_Code_Point", "Other_Default_Ignorable_Code_Point",
		"Variation_Selector", "Bidi_Control", "Join_Control")
	var general []string
	for name := range unicode.Categories {
		if len(name) == 2 && name != "Cn" {
			general = append(general, name)
		}
	}
	inCategory := tableSet(unicode.Categories, general...)
	marks := tableSet(unicode.Categories, "Mn", "Mc", "Me")
	want := func(r rune) bool {
		if r == ' ' || r == '\t' || r == '\n' {
			return false
		}
		return refused[r] || props[r] || !inCategory[r] || r == 0x2800 || r == 0x1D159
	}

	var nRefused, nMarks int
	for r := rune(0); r <= unicode.MaxRune; r++ {
		w := want(r)
		if got := refusedRune(r) != ""; got != w {
			t.Errorf("U+%04X: refused %v; want %v", r, got, w)
			continue
		}
		if w {
			nRefused++
		}
		if marks[r] {
			nMarks++
		}
		if r >= 0xD800 && r <= 0xDFFF {
			continue // a surrogate cannot be put in a UTF-8 string
		}
		c := string(r)
		for _, tc := range []struct {
			prefix string
			want   bool
		}{
			{"", want(r) || marks[r]},            // at the start
			{"ls /", want(r) || marks[r]},        // on an ASCII base
			{"ls é", want(r)},                    // on a non-ASCII base
			{"ls é\u0301", want(r)},              // after a mark on a non-ASCII base
			{"ls é\u0301 ", want(r) || marks[r]}, // after a space
		} {
			u, found := unseen(tc.prefix + c + "x")
			if found != tc.want {
				t.Errorf("U+%04X after %q: refused %v; want %v", r, tc.prefix, found, tc.want)
			} else if found && (u.R != r || u.Byte != -1 || u.At != len(tc.prefix)) {
				t.Errorf("U+%04X after %q: reported %s at byte %d", r, tc.prefix, u.what(), u.At)
			}
		}
	}
	// The rule refuses more than the unassigned space and allows the marks
	// it should: a rule that refused everything or nothing would fail above,
	// and these catch tables that came out empty.
	if nRefused < 0x10FFFF-0x40000 || nMarks < 2000 {
		t.Fatalf("%d code points refused and %d marks; the tables look empty", nRefused, nMarks)
	}
}

// TestVisibleExamples: each of these would make the card show something
// other than what runs, or is fine.
func TestVisibleExamples(t *testing.T) {
	for _, tc := range []struct {
		name, text, want string // want: the code point and offset reported, "" when allowed
	}{
		{"no-break space hides a command behind a comment", "ls /tmp\u00a0# ; touch /tmp/x", "U+00A0 at byte 7"},
		{"em space", "ls /tmp\u2003# ; touch /tmp/x", "U+2003 at byte 7"},
		{"ideographic space", "ls\u3000-la", "U+3000 at byte 2"},
		{"line separator drawn as a line break", "echo ok\u2028rm -rf /srv/data", "U+2028 at byte 7"},
		{"paragraph separator", "echo ok\u2029rm x", "U+2029 at byte 7"},
		{"narrow no-break space", "a\u202fb", "U+202F at byte 1"},
		{"next line (C1, White_Space)", "a\u0085b", "U+0085 at byte 1"},
		{"vertical tab", "a\vb", "U+000B at byte 1"},
		{"carriage return", "echo a\rb", "U+000D at byte 6"},
		{"zero-width space", "rm\u200b -rf x", "U+200B at byte 2"},
		{"right-to-left override", "ls \u202e; touch x", "U+202E at byte 3"},
		{"right-to-left isolate", "ls -la /var/log \u2067; touch /tmp/x #\u2069", "U+2067 at byte 16"},
		{"Hangul filler, a blank letter", "ls\u3164; touch x", "U+3164 at byte 2"},
		{"halfwidth Hangul filler", "ls\uffa0x", "U+FFA0 at byte 2"},
		{"variation selector", "ls\ufe0f", "U+FE0F at byte 2"},
		{"combining grapheme joiner", "é\u034f", "U+034F at byte 2"},
		{"tag character", "ls\U000e0041", "U+E0041 at byte 2"},
		{"braille blank", "ls /tmp\u2800# ; touch x", "U+2800 at byte 7"},
		{"private use", "ls \ue000", "U+E000 at byte 3"},
		{"unassigned", "ls \u0378", "U+0378 at byte 3"},
		{"noncharacter", "ls \ufdd0", "U+FDD0 at byte 3"},
		{"last code point, a noncharacter", "ls \U0010ffff", "U+10FFFF at byte 3"},
		{"long solidus overlay on an ASCII letter", "cat /etc/passwd\u0338", "U+0338 at byte 15"},
		{"enclosing mark on a semicolon", "ls ;\u20e0 rm x", "U+20E0 at byte 4"},
		{"mark at the start", "\u0301ls", "U+0301 at byte 0"},
		{"decomposed é on an ASCII e", "cafe\u0301", "U+0301 at byte 4"},
		{"a byte that is not UTF-8", "ls \xff", "byte 0xFF at byte 3"},

		{"plain command with tab and newline", "printf 'a\\tb\\n'\necho ok\t", ""},
		{"precomposed é", "echo café", ""},
		{"Cyrillic (shown marked on the card)", "echo Привет", ""},
		{"Hebrew (shown marked and isolated on the card)", "echo שלום", ""},
		{"Devanagari with marks on their letters", "echo नमस्ते", ""},
		{"mark on a non-ASCII letter", "echo é\u0301", ""},
		{"emoji", "echo 🚀", ""},
		{"replacement character that really is U+FFFD", "echo \ufffd", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, found := unseen(tc.text)
			got := ""
			if found {
				got = fmt.Sprintf("%s at byte %d", u.what(), u.At)
			}
			if got != tc.want {
				t.Fatalf("unseen(%+q) = %q; want %q", tc.text, got, tc.want)
			}
		})
	}
}

// TestSubmitRefusesUnseen: run_command's three texts are checked, and the
// error names the field, the code point, the offset and what to do.
func TestSubmitRefusesUnseen(t *testing.T) {
	e := newEnv(t, "")
	ctx := context.Background()
	for _, tc := range []struct {
		sub  Submission
		want string
	}{
		{Submission{Command: "ls /tmp\u00a0# ; touch /tmp/x", Reason: "look"}, "command holds U+00A0 at byte 7"},
		{Submission{Command: "ls", Reason: "look\u2028approve this"}, "reason holds U+2028 at byte 4"},
		{Submission{Command: "ls", Reason: "look", Input: &Input{Prompt: "token\u200b"}}, "input.prompt holds U+200B at byte 5"},
		{Submission{Command: "ls", Reason: "bad \xc3"}, "reason holds byte 0xC3 at byte 4"},
	} {
		tc.sub.Server, tc.sub.TimeoutSeconds, tc.sub.Token = "web-1", 5, "t"
		_, err := e.svc.Submit(ctx, tc.sub)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "remove it") {
			t.Errorf("%+q: got %v; want an error containing %q", tc.sub.Command+" / "+tc.sub.Reason, err, tc.want)
		}
	}
	if rs, _ := e.svc.Pending(ctx); len(rs) != 0 {
		t.Fatalf("%d refused requests were recorded", len(rs))
	}
	r := e.submit(t, Submission{Command: "echo café Привет", Reason: "naïve नमस्ते"})
	if !utf8.ValidString(r.Command) || r.Command != "echo café Привет" {
		t.Fatalf("visible non-ASCII command changed: %q", r.Command)
	}
}
