package runner

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	neturl "net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// maskAll is the masker fed in the given pieces, then ended.
func maskAll(m *masker, pieces ...[]byte) string {
	var out []byte
	for _, p := range pieces {
		out = append(out, m.write(p, false)...)
	}
	return string(append(out, m.write(nil, true)...))
}

func TestMasker(t *testing.T) {
	tests := []struct {
		name   string
		values []string
		in     string
		want   string
	}{
		{name: "no values", values: nil, in: "hunter22", want: "hunter22"},
		{name: "empty value ignored", values: []string{""}, in: "abc", want: "abc"},
		{name: "whole", values: []string{"hunter22"}, in: "hunter22", want: Mask},
		{name: "inside", values: []string{"hunter22"}, in: "pw=hunter22;", want: "pw=" + Mask + ";"},
		{name: "repeated", values: []string{"hunter22"}, in: "hunter22hunter22 hunter22", want: Mask + Mask + " " + Mask},
		{name: "near miss", values: []string{"hunter22"}, in: "hunter2 hunter2x hunter22", want: "hunter2 hunter2x " + Mask},
		{name: "overlapping self", values: []string{"aaaa"}, in: "aaaaaa", want: Mask + "aa"},
		{name: "two values", values: []string{"s3cret", "sudopw"}, in: "s3cret|sudopw|s3cret", want: Mask + "|" + Mask + "|" + Mask},
		{name: "longer value wins", values: []string{"abcd", "abcdef"}, in: "xabcdefx abcdx", want: "x" + Mask + "x " + Mask + "x"},
		{name: "short value", values: []string{"a"}, in: "banana", want: "b" + Mask + "n" + Mask + "n" + Mask},
		{name: "mask-like value not rescanned", values: []string{"**"}, in: "**", want: Mask},
		{name: "prefix at end", values: []string{"hunter22"}, in: "xx hunt", want: "xx hunt"},
		{name: "binary", values: []string{"\x00\xff\x01"}, in: "a\x00\xff\x01b", want: "a" + Mask + "b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vals := make([][]byte, len(tt.values))
			for i, v := range tt.values {
				vals[i] = []byte(v)
			}
			in := []byte(tt.in)
			if got := maskAll(newMasker(vals...), in); got != tt.want {
				t.Fatalf("one piece: got %q; want %q", got, tt.want)
			}
			// Every split into two pieces, and into three around every
			// pair of points, gives the same output.
			for i := 0; i <= len(in); i++ {
				if got := maskAll(newMasker(vals...), in[:i], in[i:]); got != tt.want {
					t.Fatalf("split at %d: got %q; want %q", i, got, tt.want)
				}
				for j := i; j <= len(in); j++ {
					if got := maskAll(newMasker(vals...), in[:i], in[i:j], in[j:]); got != tt.want {
						t.Fatalf("split at %d and %d: got %q; want %q", i, j, got, tt.want)
					}
				}
			}
			var bytewise [][]byte
			for i := range in {
				bytewise = append(bytewise, in[i:i+1])
			}
			if got := maskAll(newMasker(vals...), bytewise...); got != tt.want {
				t.Fatalf("byte by byte: got %q; want %q", got, tt.want)
			}
		})
	}
}

// TestMaskerNeverEmitsSecret checks the property that matters while the
// stream is still open: no prefix of what was passed on contains the
// value, at any split.
func TestMaskerNeverEmitsSecret(t *testing.T) {
	secret := []byte("correct horse")
	in := []byte("a correct horse, a correct hor, correct horsecorrect horse!")
	for i := 0; i <= len(in); i++ {
		m := newMasker(secret)
		var out []byte
		out = append(out, m.write(in[:i], false)...)
		out = append(out, m.write(in[i:], false)...)
		if bytes.Contains(out, secret) {
			t.Fatalf("split at %d: %q contains the secret", i, out)
		}
		out = append(out, m.write(nil, true)...)
		if bytes.Contains(out, secret) || bytes.Count(out, []byte(Mask)) != 3 {
			t.Fatalf("split at %d: got %q; want 3 masks and no secret", i, out)
		}
	}
}

func TestMaskerHoldsOnlyPossiblePrefixes(t *testing.T) {
	m := newMasker([]byte("hunter22"))
	if got := m.write([]byte("progress 10%"), false); string(got) != "progress 10%" {
		t.Errorf("got %q; want all of it passed on at once", got)
	}
	if got := m.write([]byte(" next: hun"), false); string(got) != " next: " {
		t.Errorf("got %q; want the possible start held back", got)
	}
}

func TestRing(t *testing.T) {
	r := ring{buf: make([]byte, 5)}
	var all []byte
	for _, p := range []string{"ab", "c", "defg", "", "hijklmnop", "q"} {
		r.write([]byte(p))
		all = append(all, p...)
		for n := 0; n <= min(5, len(all)); n++ {
			if got, want := string(r.last(n)), string(all[len(all)-n:]); got != want {
				t.Fatalf("after %q, last(%d): got %q; want %q", p, n, got, want)
			}
		}
	}
}

// collect gathers chunks and checks the emit contract while doing so.
type collect struct {
	t      *testing.T
	chunks []Chunk
}

func (c *collect) emit(ch Chunk) {
	if len(ch.Data) == 0 || len(ch.Data) > ChunkBytes {
		c.t.Errorf("chunk of %d bytes; want 1..%d", len(ch.Data), ChunkBytes)
	}
	c.chunks = append(c.chunks, ch)
}

// segment is a run of forwarded bytes at an offset.
type segment struct {
	offset uint64
	data   string
}

// segments returns the forwarded bytes of one stream, contiguous chunks
// merged, and fails on an offset that goes back or overlaps.
func (c *collect) segments(s Stream) []segment {
	var segs []segment
	for _, ch := range c.chunks {
		if ch.Stream != s {
			continue
		}
		if n := len(segs); n > 0 {
			last := &segs[n-1]
			end := last.offset + uint64(len(last.data))
			if ch.Offset == end {
				last.data += string(ch.Data)
				continue
			}
			if ch.Offset < end {
				c.t.Fatalf("%s chunk at offset %d overlaps forwarded bytes up to %d", s, ch.Offset, end)
			}
		}
		segs = append(segs, segment{ch.Offset, string(ch.Data)})
	}
	return segs
}

// wantSegments is what a stream of in forwards: its first AuditBytes and
// then the last TailBytes of the rest.
func wantSegments(in string) []segment {
	if len(in) == 0 {
		return nil
	}
	if len(in) <= AuditBytes {
		return []segment{{0, in}}
	}
	n := min(TailBytes, len(in)-AuditBytes)
	if len(in)-n == AuditBytes {
		return []segment{{0, in}}
	}
	return []segment{{0, in[:AuditBytes]}, {uint64(len(in) - n), in[len(in)-n:]}}
}

func sameSegments(t *testing.T, got, want []segment) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("forwarded %d segments; want %d", len(got), len(want))
	}
	for i := range got {
		if got[i].offset != want[i].offset || got[i].data != want[i].data {
			t.Fatalf("segment %d: %d bytes at %d; want %d bytes at %d (or other bytes)", i, len(got[i].data), got[i].offset, len(want[i].data), want[i].offset)
		}
	}
}

func TestStream(t *testing.T) {
	pattern := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = "0123456789abcdefghijklmnopqrstuvwxyz"[i%36]
		}
		return b
	}
	tests := []struct {
		name  string
		total int
	}{
		{name: "empty", total: 0},
		{name: "short", total: 100},
		{name: "head plus tail exactly", total: HeadBytes + TailBytes},
		{name: "just over kept", total: HeadBytes + TailBytes + 1},
		{name: "audit exactly", total: AuditBytes},
		{name: "audit plus a little", total: AuditBytes + 7},
		{name: "well past audit", total: 3*AuditBytes + 12345},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := pattern(tt.total)
			c := &collect{t: t}
			s := newStream(Stdout, newMasker(), c.emit)
			for p := in; len(p) > 0; {
				n := min(len(p), 10000)
				s.read(p[:n])
				p = p[n:]
			}
			kept := s.finish()
			if s.total != uint64(tt.total) {
				t.Errorf("total %d; want %d", s.total, tt.total)
			}
			sameSegments(t, c.segments(Stdout), wantSegments(string(in)))
			want := in
			if tt.total > HeadBytes+TailBytes {
				want = append(append([]byte{}, in[:HeadBytes]...), in[tt.total-TailBytes:]...)
			}
			if !bytes.Equal(kept, want) {
				t.Errorf("kept %d bytes; want %d (head %d + tail)", len(kept), len(want), HeadBytes)
			}
		})
	}
}

// TestStreamMasksAcrossAuditBoundary puts the secret across the point where
// forwarding stops: the forwarded part and the tail together must read as
// the masked stream.
func TestStreamMasksAcrossAuditBoundary(t *testing.T) {
	secret := "hunter22"
	in := strings.Repeat("x", AuditBytes-3) + secret + strings.Repeat("y", 100)
	c := &collect{t: t}
	s := newStream(Stderr, newMasker([]byte(secret)), c.emit)
	for p := []byte(in); len(p) > 0; {
		n := min(len(p), 4096)
		s.read(p[:n])
		p = p[n:]
	}
	kept := s.finish()
	want := strings.Repeat("x", AuditBytes-3) + Mask + strings.Repeat("y", 100)
	sameSegments(t, c.segments(Stderr), wantSegments(want))
	if s.total != uint64(len(want)) {
		t.Errorf("total %d; want %d (the masked length)", s.total, len(want))
	}
	if strings.Contains(string(kept), secret) || !strings.Contains(string(kept), Mask+"yyy") {
		t.Errorf("kept tail %q; want the mask and no secret", kept[len(kept)-120:])
	}
}

func TestSecretMasks(t *testing.T) {
	const secret = "pa55?w/rd>~é!" // has bytes base64 and URLs encode differently
	s := []byte(secret)
	std, url64 := base64.StdEncoding, base64.URLEncoding
	raw := func(e *base64.Encoding) *base64.Encoding { return e.WithPadding(base64.NoPadding) }
	nl := append([]byte(secret), '\n')
	// inStream is what base64 prints for the secret between other bytes.
	inStream := func(e *base64.Encoding, before, after string) string {
		return e.EncodeToString([]byte(before + secret + after))
	}
	tests := []struct {
		name, secret, in string
		// want is in with Mask for every "#".
		want string
	}{
		{name: "literal", in: "pw=" + secret + ";", want: "pw=#;"},
		{name: "echo with a line break", in: secret + "\n", want: "#\n"},
		{name: "rev, by character", in: "!é~>dr/w?55ap\n", want: "#\n"},
		{name: "reversed bytes", in: string(reversed(s)), want: "#"},
		{name: "hex", in: hex.EncodeToString(s) + "\n", want: "#\n"},
		{name: "hex upper", in: strings.ToUpper(hex.EncodeToString(s)), want: "#"},
		{name: "hex of echo", in: hex.EncodeToString(nl), want: "#0a"},
		{name: "base64", in: std.EncodeToString(s) + "\n", want: "#\n"},
		{name: "base64 of echo", in: std.EncodeToString(nl) + "\n", want: "#\n"},
		{name: "base64 unpadded", in: raw(std).EncodeToString(s) + ".", want: "#."},
		{name: "base64url", in: url64.EncodeToString(s), want: "#"},
		{name: "base64url of echo", in: url64.EncodeToString(nl), want: "#"},
		{name: "base64url unpadded", in: raw(url64).EncodeToString(nl), want: "#"},
		{name: "percent-encoded query", in: "?p=" + neturl.QueryEscape(secret) + "&", want: "?p=#&"},
		{name: "percent-encoded path", in: "/" + neturl.PathEscape(secret) + "/", want: "/#/"},
		{name: "multi-line secret, one line", secret: "-----BEGIN-----\r\nline two of it\r\n-----END-----", in: "x line two of it\n", want: "x #\n"},
		{name: "multi-line secret, whole", secret: "first line\nsecond line", in: "<first line\nsecond line>", want: "<#>"},
		{name: "short secret not masked", secret: "abc", in: "abc cba 616263 YWJj", want: "abc cba 616263 YWJj"},
		{name: "four bytes masked", secret: "1234", in: "1234 4321 31323334", want: "# # #"},
	}
	// A secret inside a longer base64 stream, at each alignment.
	for a, before := range []string{"", "u", "us", "use", "user"} {
		// (The stream that is the secret alone, or with a line break, is
		// masked whole: cases above.)
		for _, after := range []string{"x", "~\n", "xyz!"} {
			for _, e := range []*base64.Encoding{std, url64} {
				enc := inStream(e, before, after)
				lo, hi := (8*len(before)+5)/6, 8*(len(before)+len(secret))/6
				tests = append(tests, struct{ name, secret, in, want string }{
					name: fmt.Sprintf("base64 stream at offset %d, %d after", a, len(after)),
					in:   enc, want: enc[:lo] + "#" + enc[hi:]})
			}
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sec := secret
			if tt.secret != "" {
				sec = tt.secret
			}
			want := strings.ReplaceAll(tt.want, "#", Mask)
			in := []byte(tt.in)
			if got := maskAll(newMasker(secretMasks([]byte(sec))...), in); got != want {
				t.Fatalf("got %q; want %q", got, want)
			}
			for i := range in {
				if got := maskAll(newMasker(secretMasks([]byte(sec))...), in[:i], in[i:]); got != want {
					t.Fatalf("split at %d: got %q; want %q", i, got, want)
				}
			}
		})
	}
}

func reversed(b []byte) []byte {
	r := bytes.Clone(b)
	for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
		r[i], r[j] = r[j], r[i]
	}
	return r
}

// secretForms is every form of secret that the masker promises to mask,
// worked out here independently of secretMasks: the list in docs/security.md.
func secretForms(secret []byte, rng *rand.Rand) [][]byte {
	if len(secret) < MinMaskedSecret {
		return nil
	}
	forms := [][]byte{secret}
	for _, line := range strings.Split(string(secret), "\n") {
		if line = strings.TrimSuffix(line, "\r"); len(line) >= MinMaskedSecret {
			forms = append(forms, []byte(line))
		}
	}
	if len(secret) > maxTransformed {
		return forms
	}
	forms = append(forms, reversed(secret), []byte(hex.EncodeToString(secret)), []byte(strings.ToUpper(hex.EncodeToString(secret))))
	if utf8.Valid(secret) {
		r := []rune(string(secret))
		slices.Reverse(r)
		forms = append(forms, []byte(string(r)))
	}
	nl := append(bytes.Clone(secret), '\n')
	for _, e := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		forms = append(forms, []byte(e.EncodeToString(secret)), []byte(e.EncodeToString(nl)))
		// Inside a stream: random bytes around the secret; the characters
		// that hold only the secret's bits.
		before := make([]byte, rng.IntN(7))
		after := make([]byte, rng.IntN(4))
		for i := range before {
			before[i] = byte(rng.IntN(256))
		}
		for i := range after {
			after[i] = byte(rng.IntN(256))
		}
		enc := e.EncodeToString(slices.Concat(before, secret, after))
		lo, hi := (8*len(before)+5)/6, 8*(len(before)+len(secret))/6
		if hi-lo >= minEncoded {
			forms = append(forms, []byte(enc[lo:hi]))
		}
	}
	return append(forms, []byte(neturl.QueryEscape(string(secret))), []byte(neturl.PathEscape(string(secret))))
}

// FuzzMaskSecret streams output made of filler and forms of a secret,
// cut into random reads, and checks that no form of the secret gets
// through, and that the cut changes nothing.
func FuzzMaskSecret(f *testing.F) {
	f.Add([]byte("hunter22"), []byte("some output\n"), uint64(1))
	f.Add([]byte("pa55?w/rd>~é!"), []byte("ab"), uint64(2))
	f.Add([]byte("1234"), []byte("12341234"), uint64(3))
	f.Add([]byte("aaaaaaa"), []byte("aaaa"), uint64(4))
	f.Add([]byte("line one\nline two\r\n"), []byte("\n"), uint64(5))
	f.Add([]byte("\x00\xff\xfe\x80binary"), []byte{0xff}, uint64(6))
	f.Fuzz(maskProperty)
}

// maskProperty is FuzzMaskSecret's check for one secret, filler and seed.
func maskProperty(t *testing.T, secret, filler []byte, seed uint64) {
	t.Helper()
	{
		if len(secret) > 512 || len(filler) > 4096 {
			return
		}
		// Mask bytes next to a secret that has one could spell it.
		secret = bytes.ReplaceAll(secret, []byte("*"), []byte("x"))
		rng := rand.New(rand.NewPCG(seed, uint64(len(secret))))
		forms := secretForms(secret, rng)
		var in []byte
		for range 1 + rng.IntN(8) {
			cut := rng.IntN(len(filler) + 1)
			in = append(in, filler[:cut]...)
			if len(forms) > 0 {
				in = append(in, forms[rng.IntN(len(forms))]...)
			}
		}
		in = append(in, filler...)
		whole := maskAll(newMasker(secretMasks(secret)...), in)
		var pieces [][]byte
		for rest := in; len(rest) > 0; {
			n := 1 + rng.IntN(min(len(rest), 1+rng.IntN(64)))
			pieces = append(pieces, rest[:n])
			rest = rest[n:]
		}
		got := maskAll(newMasker(secretMasks(secret)...), pieces...)
		if got != whole {
			t.Fatalf("read in %d pieces: %q; in one: %q", len(pieces), got, whole)
		}
		for _, form := range forms {
			if strings.Contains(got, string(form)) {
				t.Fatalf("secret %q: form %q passed through in %q", secret, form, got)
			}
		}
	}
}

// TestMaskSecretRandom runs the fuzz property on random secrets every time
// the tests run, not only under go test -fuzz.
func TestMaskSecretRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 10))
	for i := range 2000 {
		secret := make([]byte, rng.IntN(40))
		alphabet := "ab\n=+/_-01"
		if i%2 == 0 {
			alphabet = ""
		}
		for j := range secret {
			if alphabet != "" {
				secret[j] = alphabet[rng.IntN(len(alphabet))]
			} else {
				secret[j] = byte(rng.IntN(256))
			}
		}
		filler := []byte(strings.Repeat("ab=\n", rng.IntN(5)))
		maskProperty(t, secret, filler, rng.Uint64())
	}
}

// BenchmarkMaskSecret is the masking cost per byte of output for a 16-byte
// secret, the secret alone and with every form, read in 32 KiB and in
// 64-byte pieces.
func BenchmarkMaskSecret(b *testing.B) {
	in := bytes.Repeat([]byte("a line of ordinary output, 0123456789abcdef=+/\n"), 1<<15)
	secret := []byte("c0rrect-h0rse/99")
	for name, masks := range map[string][][]byte{"literal": {secret}, "forms": secretMasks(secret)} {
		for _, size := range []int{32 << 10, 64} {
			b.Run(name+"/"+strconv.Itoa(size), func(b *testing.B) {
				b.SetBytes(int64(len(in)))
				for b.Loop() {
					m := newMasker(masks...)
					for p := in; len(p) > 0; {
						n := min(size, len(p))
						m.write(p[:n], false)
						p = p[n:]
					}
					m.write(nil, true)
				}
			})
		}
	}
}

// BenchmarkMaskRepeats is the worst case for the hold-back: a long secret of
// one byte repeated, in output of that byte (each position starts a prefix
// of every value), read in 4 KiB pieces.
func BenchmarkMaskRepeats(b *testing.B) {
	in := bytes.Repeat([]byte("a"), 1<<20)
	masks := secretMasks(bytes.Repeat([]byte("a"), maxTransformed))
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		m := newMasker(masks...)
		for p := in; len(p) > 0; p = p[min(4096, len(p)):] {
			m.write(p[:min(4096, len(p))], false)
		}
		m.write(nil, true)
	}
}
