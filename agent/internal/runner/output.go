package runner

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"net/url"
	"slices"
	"unicode/utf8"
)

// Mask replaces every occurrence of a secret in a command's output.
const Mask = "********"

// Bounds on what is masked (docs/security.md, "What is promised about a secret").
const (
	// MinMaskedSecret is the shortest secret that is masked. A value of one
	// to three bytes also matches unrelated output ("a" turns every a into
	// Mask), which mangles it, and the stars' places give the value away
	// anyway; such a secret is passed on as the command prints it.
	MinMaskedSecret = 4
	// minEncoded is the shortest transformed value masked: a base64 run of
	// fewer characters turns up by chance in ordinary output too often.
	// It drops only the unaligned base64 runs of a 4-byte secret.
	minEncoded = 6
	// maxTransformed bounds the secrets whose transforms are masked: each
	// transform is up to three times the secret's length, and the masker
	// holds back up to the longest one. A longer secret (a key file) is
	// masked literally and line by line.
	maxTransformed = 4 << 10
)

// secretMasks returns the values to mask for one secret: the secret, each
// of its lines, and the forms an ordinary command turns it into by accident
// (rev, base64, xxd -p, a URL). Nil for a secret shorter than
// MinMaskedSecret. The forms, all of the whole secret:
//
//   - reversed, byte by byte and (for UTF-8 text) character by character;
//   - hex, lower and upper case, as one run of digits;
//   - base64, standard and URL alphabets, with and without padding, of the
//     secret and of the secret with a trailing line break (echo | base64);
//     and, for a secret inside a longer base64 stream, the characters that
//     depend on the secret alone, at each of the three alignments a secret
//     can have in the stream (its offset modulo 3);
//   - percent-encoded, as a query value and as a path segment.
//
// The literal secret covers it with a trailing line break (or CR LF) too,
// and hex of it: those contain the secret's form. Each line of a multi-line
// secret (without its CR) is masked on its own when it is at least
// MinMaskedSecret long, so that part of a key file printed is masked too.
func secretMasks(secret []byte) [][]byte {
	if len(secret) < MinMaskedSecret {
		return nil
	}
	vals := [][]byte{secret}
	for line := range bytes.SplitSeq(secret, []byte("\n")) {
		if line = bytes.TrimSuffix(line, []byte("\r")); len(line) >= MinMaskedSecret {
			vals = append(vals, line)
		}
	}
	if len(secret) > maxTransformed {
		return dedupe(vals)
	}
	rev := slices.Clone(secret)
	slices.Reverse(rev)
	vals = append(vals, rev)
	if utf8.Valid(secret) {
		runes := []rune(string(secret))
		slices.Reverse(runes)
		vals = append(vals, []byte(string(runes)))
	}
	h := hex.EncodeToString(secret)
	vals = append(vals, []byte(h), bytes.ToUpper([]byte(h)))
	withNL := append(slices.Clone(secret), '\n')
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		raw := enc.WithPadding(base64.NoPadding)
		for _, v := range [][]byte{secret, withNL} {
			vals = append(vals, []byte(enc.EncodeToString(v)), []byte(raw.EncodeToString(v)))
		}
		for align := range 3 {
			if c := base64Core(raw, secret, align); len(c) >= minEncoded {
				vals = append(vals, c)
			}
		}
	}
	vals = append(vals, []byte(url.QueryEscape(string(secret))), []byte(url.PathEscape(string(secret))))
	return dedupe(vals)
}

// base64Core returns the characters of a base64 stream that depend on the
// secret alone when the secret starts at byte offset align (0–2, modulo 3)
// of the stream: character i holds bits 6i to 6i+5, and the secret's bits
// are 8·align to 8·(align+len)-1.
func base64Core(enc *base64.Encoding, secret []byte, align int) []byte {
	in := append(make([]byte, align, align+len(secret)), secret...)
	out := enc.EncodeToString(in)
	from, to := (8*align+5)/6, 8*(align+len(secret))/6
	return []byte(out[from:to])
}

func dedupe(vals [][]byte) [][]byte {
	var out [][]byte
	for _, v := range vals {
		if !slices.ContainsFunc(out, func(o []byte) bool { return bytes.Equal(o, v) }) {
			out = append(out, v)
		}
	}
	return out
}

// masker replaces the secret values in one stream as it is read. A value
// split across two reads is still found: the end of a read that could be
// the start of a value is held back until the next read (or the end of the
// stream) decides, so a read is held back by less than the longest value.
//
// Every non-empty value is masked, however short; secretMasks decides
// which values a secret gives.
type masker struct {
	values [][]byte
	// longest is the length of the longest value.
	longest int
	// borders[k] is the KMP failure table of values[k]: borders[k][i] is
	// the length of the longest proper prefix of values[k][:i+1] that is
	// also its suffix.
	borders [][]int
	// next[k] is where values[k] next occurs in the buffer of the current
	// write, at or after the scan position; -1 when it does not occur
	// again, -2 when not looked for yet. Remembered, it keeps a scan that
	// finds many matches linear rather than quadratic.
	next []int
	// held is the end of the previous read that may begin a value.
	held []byte
}

func newMasker(values ...[]byte) *masker {
	m := &masker{}
	for _, v := range values {
		if len(v) > 0 {
			m.values = append(m.values, v)
			m.longest = max(m.longest, len(v))
			m.borders = append(m.borders, borders(v))
		}
	}
	return m
}

// write returns the masked output that is safe to pass on so far. With
// final set (the stream ended) nothing is held back.
func (m *masker) write(p []byte, final bool) []byte {
	if len(m.values) == 0 {
		return p
	}
	buf := make([]byte, 0, len(m.held)+len(p))
	buf = append(append(buf, m.held...), p...)
	out := make([]byte, 0, len(buf))
	i := 0
	hold := -1
	m.next = m.next[:0]
	for range m.values {
		m.next = append(m.next, -2)
	}
	for i < len(buf) {
		start, n := m.leftmost(buf, i)
		if start < 0 {
			break
		}
		// A longer value may begin at or before this match and end past
		// what was read (values overlap: a line of the secret is inside
		// the secret); masking this one now would pass on the longer
		// one's other bytes, so the next read decides. Only a value that
		// starts in the last longest-1 bytes can be unfinished.
		if !final && start > len(buf)-m.longest {
			if h := m.holdFrom(buf, i); h <= start {
				hold = h
				break
			}
		}
		out = append(out, buf[i:start]...)
		out = append(out, Mask...)
		i = start + n
	}
	if hold < 0 {
		hold = len(buf)
		if !final {
			hold = m.holdFrom(buf, i)
		}
	}
	out = append(out, buf[i:hold]...)
	m.held = append(m.held[:0:0], buf[hold:]...)
	return out
}

// leftmost finds the earliest occurrence of any value in buf at or after
// i, the longest value when several start at the same place; -1 when none.
func (m *masker) leftmost(buf []byte, i int) (at, n int) {
	at = -1
	for k, v := range m.values {
		if m.next[k] == -2 || (m.next[k] >= 0 && m.next[k] < i) {
			m.next[k] = -1
			if j := bytes.Index(buf[i:], v); j >= 0 {
				m.next[k] = i + j
			}
		}
		if j := m.next[k]; j >= 0 && (at < 0 || j < at || (j == at && len(v) > n)) {
			at, n = j, len(v)
		}
	}
	return at, n
}

// holdFrom returns where the longest suffix of buf[from:] that begins some
// value starts (len(buf) when none does). Only a suffix shorter than the
// longest value can still grow into a match.
func (m *masker) holdFrom(buf []byte, from int) int {
	hold := len(buf)
	for k, v := range m.values {
		// Run the value's KMP automaton over the bytes a proper prefix of
		// it could start in; its final state is the longest such prefix
		// that ends buf: linear, where trying every start was quadratic.
		b, q := m.borders[k], 0
		for _, c := range buf[max(from, len(buf)-len(v)+1):] {
			for q > 0 && v[q] != c {
				q = b[q-1]
			}
			if v[q] == c {
				q++
			}
			if q == len(v) {
				q = b[q-1]
			}
		}
		if q > 0 {
			hold = min(hold, len(buf)-q)
		}
	}
	return hold
}

// borders returns the KMP failure table of v.
func borders(v []byte) []int {
	b := make([]int, len(v))
	for i, q := 1, 0; i < len(v); i++ {
		for q > 0 && v[i] != v[q] {
			q = b[q-1]
		}
		if v[i] == v[q] {
			q++
		}
		b[i] = q
	}
	return b
}

// ring keeps the last len(buf) bytes written to it.
type ring struct {
	buf  []byte
	next int    // where the next byte goes
	n    uint64 // bytes written in all
}

func (r *ring) write(p []byte) {
	if len(p) >= len(r.buf) {
		copy(r.buf, p[len(p)-len(r.buf):])
		r.next = 0
	} else {
		k := copy(r.buf[r.next:], p)
		copy(r.buf, p[k:])
		r.next = (r.next + len(p)) % len(r.buf)
	}
	r.n += uint64(len(p))
}

// last returns a copy of the last n bytes written (n at most len(buf) and
// at most what was written).
func (r *ring) last(n int) []byte {
	out := make([]byte, 0, n)
	start := (r.next - n + len(r.buf)) % len(r.buf)
	if start+n <= len(r.buf) {
		return append(out, r.buf[start:start+n]...)
	}
	out = append(out, r.buf[start:]...)
	return append(out, r.buf[:n-(len(r.buf)-start)]...)
}

// stream turns one of a command's outputs into chunks: masked first, then
// the first AuditBytes forwarded as read, then only the last TailBytes kept
// and forwarded at the end. Offsets and totals count the masked stream, the
// one the coordinator sees, so that chunks line up and a secret's length
// cannot be read off a difference.
type stream struct {
	which Stream
	mask  *masker
	emit  func(Chunk)
	total uint64
	head  []byte
	tail  ring
}

func newStream(which Stream, m *masker, emit func(Chunk)) *stream {
	return &stream{which: which, mask: m, emit: emit, tail: ring{buf: make([]byte, TailBytes)}}
}

// read takes the next bytes the command wrote.
func (s *stream) read(p []byte) { s.take(s.mask.write(p, false)) }

func (s *stream) take(p []byte) {
	if room := HeadBytes - len(s.head); room > 0 {
		s.head = append(s.head, p[:min(room, len(p))]...)
	}
	if s.total < AuditBytes {
		n := int(min(uint64(len(p)), AuditBytes-s.total))
		s.forward(s.total, p[:n])
	}
	s.tail.write(p)
	s.total += uint64(len(p))
}

// forward emits p, which starts at offset, in chunks of at most ChunkBytes,
// each in its own allocation so the receiver may keep it.
func (s *stream) forward(offset uint64, p []byte) {
	for len(p) > 0 {
		n := min(len(p), ChunkBytes)
		s.emit(Chunk{Stream: s.which, Offset: offset, Data: bytes.Clone(p[:n])})
		offset += uint64(n)
		p = p[n:]
	}
}

// finish flushes what the masker held, forwards the tail that went past
// AuditBytes, and returns the output kept for the journal: the first
// HeadBytes and the last TailBytes (the whole output when it is no longer).
func (s *stream) finish() []byte {
	s.take(s.mask.write(nil, true))
	if s.total > AuditBytes {
		n := int(min(uint64(TailBytes), s.total-AuditBytes))
		s.forward(s.total-uint64(n), s.tail.last(n))
	}
	rest := int(min(uint64(TailBytes), s.total-uint64(len(s.head))))
	return append(bytes.Clone(s.head), s.tail.last(rest)...)
}
