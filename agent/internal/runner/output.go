package runner

import "bytes"

// Mask replaces every occurrence of a secret in a command's output.
const Mask = "********"

// masker replaces the secret values in one stream as it is read. A value
// split across two reads is still found: the end of a read that could be
// the start of a value is held back until the next read (or the end of the
// stream) decides.
//
// Every non-empty value is masked, however short. The trade-off: a value of
// one to three bytes also matches unrelated output ("a" turns every a into
// Mask), which mangles the output and lets a reader guess the value from
// the context of the stars; leaving it unmasked would show it outright.
// The approval card is the place to warn about short secrets.
type masker struct {
	values [][]byte
	// held is the end of the previous read that may begin a value.
	held []byte
}

func newMasker(values ...[]byte) *masker {
	m := &masker{}
	for _, v := range values {
		if len(v) > 0 {
			m.values = append(m.values, v)
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
	for i < len(buf) {
		at, n := m.leftmost(buf[i:])
		if at < 0 {
			break
		}
		start := i + at
		if !final && m.longerMayFollow(buf[start:], n) {
			// A longer value may begin where this shorter one matched;
			// masking the shorter now would reveal the longer one's rest.
			hold = start
			break
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

// leftmost finds the earliest occurrence of any value in b, the longest
// value when several start at the same place.
func (m *masker) leftmost(b []byte) (at, n int) {
	at = -1
	for _, v := range m.values {
		j := bytes.Index(b, v)
		if j < 0 {
			continue
		}
		if at < 0 || j < at || (j == at && len(v) > n) {
			at, n = j, len(v)
		}
	}
	return at, n
}

// longerMayFollow reports whether rest, which starts with a match of n
// bytes, is also a proper prefix of a longer value.
func (m *masker) longerMayFollow(rest []byte, n int) bool {
	for _, v := range m.values {
		if len(v) > n && len(rest) < len(v) && bytes.HasPrefix(v, rest) {
			return true
		}
	}
	return false
}

// holdFrom returns where the longest suffix of buf[from:] that begins some
// value starts (len(buf) when none does). Only a suffix shorter than the
// longest value can still grow into a match.
func (m *masker) holdFrom(buf []byte, from int) int {
	longest := 0
	for _, v := range m.values {
		longest = max(longest, len(v))
	}
	for j := max(from, len(buf)-longest+1); j < len(buf); j++ {
		for _, v := range m.values {
			if len(buf)-j < len(v) && bytes.HasPrefix(v, buf[j:]) {
				return j
			}
		}
	}
	return len(buf)
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
