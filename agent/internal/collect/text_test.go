package collect

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestClean(t *testing.T) {
	tests := []struct {
		in   string
		max  int
		want string
	}{
		{"nginx", 256, "nginx"},
		{"", 256, ""},
		{"ab\ncd\x1b[31m", 256, "ab?cd?[31m"},
		{"bad\xffutf8", 256, "bad\uFFFDutf8"},
		{"abcdef", 3, "abc"},
		{"aé", 2, "a"}, // é is two bytes: cut before it, not inside
		{"日本語", 7, "日本"},
		{"tab\there", 256, "tab?here"},
	}
	for _, tt := range tests {
		if got := clean(tt.in, tt.max); got != tt.want {
			t.Errorf("clean(%q, %d) = %q; want %q", tt.in, tt.max, got, tt.want)
		}
	}
}

func FuzzClean(f *testing.F) {
	for _, s := range []string{"nginx", "ab\ncd", "bad\xffutf8", "日本語", strings.Repeat("x", 300)} {
		f.Add(s, 16)
	}
	f.Fuzz(func(t *testing.T, s string, max int) {
		if max < 0 || max > 1<<16 {
			return
		}
		got := clean(s, max)
		if len(got) > max || !utf8.ValidString(got) || !fitText(got) {
			t.Fatalf("clean(%q, %d) = %q: longer than max, invalid UTF-8 or with control characters", s, max, got)
		}
	})
}

func TestLinesBounds(t *testing.T) {
	long := strings.Repeat("x", maxLine+10)
	tests := []struct {
		name     string
		in       string
		maxLines int
		want     []string
		limit    bool
	}{
		{"plain", "a\nb\n", 10, []string{"a", "b"}, false},
		{"no final newline", "a\nb", 10, []string{"a", "b"}, false},
		{"empty lines kept", "a\n\nb\n", 10, []string{"a", "", "b"}, false},
		{"overlong line passed over", "a\n" + long + "\nb\n", 10, []string{"a", "b"}, false},
		{"overlong last line", "a\n" + long, 10, []string{"a"}, false},
		{"line limit", "a\nb\nc\n", 2, []string{"a", "b"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newLineScanner(maxLine + 1)
			s.reset(strings.NewReader(tt.in), tt.maxLines)
			var got []string
			for line := range s.lines() {
				got = append(got, string(line))
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("got %q; want %q", got, tt.want)
			}
			if (s.err == errLineLimit) != tt.limit {
				t.Errorf("got err %v; want line limit %v", s.err, tt.limit)
			}
		})
	}
}

func TestFields(t *testing.T) {
	var buf [3][]byte
	tests := []struct {
		in   string
		want string
	}{
		{"a b c", "a|b|c"},
		{"  a\t b  ", "a|b"},
		{"a b c d e", "a|b|c d e"},
		{"", ""},
	}
	for _, tt := range tests {
		var got []string
		for _, f := range fields([]byte(tt.in), buf[:0]) {
			got = append(got, string(f))
		}
		if strings.Join(got, "|") != tt.want {
			t.Errorf("fields(%q) = %q; want %q", tt.in, got, tt.want)
		}
	}
}

func TestParseNumbers(t *testing.T) {
	uints := []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"0", 0, true},
		{"18446744073709551615", 1<<64 - 1, true},
		{"18446744073709551616", 0, false},
		{"12a", 0, false},
		{"", 0, false},
		{"-1", 0, false},
	}
	for _, tt := range uints {
		if got, ok := parseUint([]byte(tt.in)); got != tt.want || ok != tt.ok {
			t.Errorf("parseUint(%q) = %d, %v; want %d, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
	hexes := []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"0A", 10, true},
		{"ffffffff", 0xffffffff, true},
		{"0100007F", 0x0100007F, true},
		{"g0", 0, false},
		{"11112222333344445", 0, false},
	}
	for _, tt := range hexes {
		if got, ok := parseHex([]byte(tt.in)); got != tt.want || ok != tt.ok {
			t.Errorf("parseHex(%q) = %d, %v; want %d, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestPercent(t *testing.T) {
	tests := []struct{ part, whole, want float64 }{
		{1, 3, 33.33},
		{2, 3, 66.67},
		{5, 0, 0},
		{7, 5, 100},
		{-1, 5, 0},
	}
	for _, tt := range tests {
		if got := percent(tt.part, tt.whole); got != tt.want {
			t.Errorf("percent(%v, %v) = %v; want %v", tt.part, tt.whole, got, tt.want)
		}
	}
}
