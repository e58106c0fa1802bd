package collect

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"iter"
	"math"
	"strings"
	"unicode/utf8"
)

// Bounds on text from the host. Nothing we parse comes near them; text that
// does is either not what we expect or hostile, and is cut or passed over.
const (
	// maxName bounds a name: unit, container, image, package, process,
	// device, mount point.
	maxName = 256
	// maxReason bounds a gap's reason.
	maxReason = 1024
	// maxLine bounds a line we parse; a longer one is passed over.
	maxLine = 4096
)

// clean makes host text fit to leave the agent: valid UTF-8, no control
// characters (which could forge lines in a log or a terminal), at most max
// bytes, cut on a rune boundary. Text that is already fit is returned as is,
// without allocating.
func clean(s string, max int) string {
	if len(s) <= max && fitText(s) {
		return s
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, s)
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// cleanBytes is clean for a field of a line, which must be copied anyway.
func cleanBytes(b []byte, max int) string {
	if len(b) > 4*max {
		// Spare converting a huge field only to cut it.
		b = b[:4*max]
	}
	return clean(string(b), max)
}

// fitText reports whether s is printable ASCII or valid UTF-8 without
// control characters.
func fitText(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == 0x7f {
			return false
		}
		if c >= utf8.RuneSelf {
			return utf8.ValidString(s[i:]) && !strings.ContainsFunc(s[i:], func(r rune) bool { return r < 0x20 || r == 0x7f })
		}
	}
	return true
}

// errLineLimit says a file had more lines than its parser reads.
var errLineLimit = errors.New("too many lines")

// lineScanner yields the lines of a reader without copying them, bounded in
// count and length. A line longer than maxLine is passed over whole: no
// field we read is that long. One scanner is kept per collector so that a
// sample reuses its buffer.
type lineScanner struct {
	br       *bufio.Reader
	maxLines int
	err      error
}

// newLineScanner makes a scanner with a read buffer of size bytes (at least
// maxLine, so every line we parse fits).
func newLineScanner(size int) *lineScanner {
	return &lineScanner{br: bufio.NewReaderSize(nil, max(size, maxLine+1))}
}

// reset points the scanner at r, reading at most maxLines lines of it.
func (s *lineScanner) reset(r io.Reader, maxLines int) {
	s.br.Reset(r)
	s.maxLines = maxLines
	s.err = nil
}

// lines yields each line without its newline. The slice is valid until the
// next one. After the loop, s.err holds a read error or errLineLimit.
func (s *lineScanner) lines() iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		n := 0
		skipping := false
		for {
			line, err := s.br.ReadSlice('\n')
			switch {
			case errors.Is(err, bufio.ErrBufferFull):
				skipping = true
				continue
			case skipping:
				// The tail of an overlong line.
				skipping = false
			case len(line) > 0:
				if n >= s.maxLines {
					s.err = errLineLimit
					return
				}
				n++
				if !yield(bytes.TrimSuffix(line, []byte{'\n'})) {
					return
				}
			}
			if err != nil {
				if err != io.EOF {
					s.err = err
				}
				return
			}
		}
	}
}

// linesOf yields the lines of data with the same bounds as a lineScanner:
// for tests and fuzzing of the parsers.
func linesOf(data []byte, maxLines int) iter.Seq[[]byte] {
	s := newLineScanner(maxLine + 1)
	s.reset(bytes.NewReader(data), maxLines)
	return s.lines()
}

// fields splits line on blanks into dst (reused), at most len(dst) fields;
// the last holds the rest of the line when there are more.
func fields(line []byte, dst [][]byte) [][]byte {
	dst = dst[:0]
	for len(dst) < cap(dst) {
		line = bytes.TrimLeft(line, " \t")
		if len(line) == 0 {
			break
		}
		if len(dst) == cap(dst)-1 {
			dst = append(dst, bytes.TrimRight(line, " \t"))
			break
		}
		i := bytes.IndexAny(line, " \t")
		if i < 0 {
			dst = append(dst, line)
			break
		}
		dst = append(dst, line[:i])
		line = line[i:]
	}
	return dst
}

// parseUint parses a decimal number without allocating.
func parseUint(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (math.MaxUint64-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// parseHex parses a hexadecimal number of up to 16 digits.
func parseHex(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 16 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		n = n<<4 | uint64(d)
	}
	return n, true
}

// satAdd adds without wrapping: hostile counters must not make a total
// smaller than its parts.
func satAdd(a, b uint64) uint64 {
	if a > math.MaxUint64-b {
		return math.MaxUint64
	}
	return a + b
}

// satMul multiplies without wrapping.
func satMul(a, b uint64) uint64 {
	if b != 0 && a > math.MaxUint64/b {
		return math.MaxUint64
	}
	return a * b
}

// percent returns part/whole in percent, clamped to [0, 100] and rounded to
// two decimals: more digits are noise on the wire and in an AI's context.
func percent(part, whole float64) float64 {
	if !(whole > 0) || !(part > 0) {
		return 0
	}
	p := part / whole * 100
	if p > 100 {
		p = 100
	}
	return math.Round(p*100) / 100
}
