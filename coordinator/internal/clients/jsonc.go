package clients

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// The clients' settings files are JSON, and several (VS Code, Zed, Gemini
// CLI) take JSON with comments and trailing commas. Decoding and re-encoding
// would drop the comments and reorder the user's keys, so the file is parsed
// into a tree that remembers where every value lies in the text, and edits
// are made to the text at those places.

// node is one JSON value and where it lies in the text.
type node struct {
	kind       byte // '{', '[', '"', '0' (number) or 'l' (true, false, null)
	start, end int  // the value's bytes: text[start:end]
	members    []member
	elems      []*node
}

// member is one "key": value pair of an object.
type member struct {
	key      string
	keyStart int // the key's opening quote
	val      *node
	comma    int // the ',' after the value, or -1
}

// find returns the object's member named key (the last one, as most parsers
// let a repeated key win), or nil.
func (n *node) find(key string) *member {
	for i := len(n.members) - 1; i >= 0; i-- {
		if n.members[i].key == key {
			return &n.members[i]
		}
	}
	return nil
}

// value returns the node as encoding/json would decode it (numbers as
// json.Number), for comparing with what is to be written.
func (n *node) value(text []byte) any {
	switch n.kind {
	case '{':
		m := make(map[string]any, len(n.members))
		for _, mb := range n.members {
			m[mb.key] = mb.val.value(text)
		}
		return m
	case '[':
		a := make([]any, 0, len(n.elems))
		for _, e := range n.elems {
			a = append(a, e.value(text))
		}
		return a
	case '0':
		return json.Number(text[n.start:n.end])
	}
	var v any
	_ = json.Unmarshal(text[n.start:n.end], &v) // checked by the parser
	return v
}

// SyntaxError says what is wrong in a settings file and where.
type SyntaxError struct {
	Line, Column int
	Msg          string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("line %d, column %d: %s", e.Line, e.Column, e.Msg)
}

type parser struct {
	text []byte
	pos  int
}

// parseJSONC parses JSON with // and /* */ comments and trailing commas. It
// returns a nil node for a file that holds no value (empty, blanks or only
// comments).
func parseJSONC(text []byte) (*node, error) {
	p := &parser{text: text}
	if err := p.skip(); err != nil {
		return nil, err
	}
	if p.pos == len(text) {
		return nil, nil
	}
	n, err := p.parseValue(0)
	if err != nil {
		return nil, err
	}
	if err := p.skip(); err != nil {
		return nil, err
	}
	if p.pos != len(text) {
		return nil, p.errorf(p.pos, "unexpected %s after the end of the top-level value", p.describe())
	}
	return n, nil
}

// errorf makes a SyntaxError at byte offset at.
func (p *parser) errorf(at int, format string, args ...any) error {
	line, col := 1, 1
	for i := 0; i < at && i < len(p.text); {
		r, size := utf8.DecodeRune(p.text[i:])
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
		i += size
	}
	return &SyntaxError{Line: line, Column: col, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) describe() string {
	if p.pos >= len(p.text) {
		return "end of file"
	}
	r, _ := utf8.DecodeRune(p.text[p.pos:])
	return fmt.Sprintf("%q", r)
}

// skip passes blanks and comments.
func (p *parser) skip() error {
	for p.pos < len(p.text) {
		switch c := p.text[p.pos]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			p.pos++
		case p.pos == 0 && bytes.HasPrefix(p.text, []byte("\uFEFF")):
			p.pos += 3 // a byte order mark, as some Windows editors write
		case c == '/' && p.pos+1 < len(p.text) && p.text[p.pos+1] == '/':
			for p.pos < len(p.text) && p.text[p.pos] != '\n' {
				p.pos++
			}
		case c == '/' && p.pos+1 < len(p.text) && p.text[p.pos+1] == '*':
			end := bytes.Index(p.text[p.pos+2:], []byte("*/"))
			if end < 0 {
				return p.errorf(p.pos, "comment /* is never closed")
			}
			p.pos += 2 + end + 2
		default:
			return nil
		}
	}
	return nil
}

const maxDepth = 200

func (p *parser) parseValue(depth int) (*node, error) {
	if depth > maxDepth {
		return nil, p.errorf(p.pos, "nested deeper than %d levels", maxDepth)
	}
	if p.pos >= len(p.text) {
		return nil, p.errorf(p.pos, "a value is missing at the end of the file")
	}
	switch c := p.text[p.pos]; {
	case c == '{':
		return p.parseObject(depth)
	case c == '[':
		return p.parseArray(depth)
	case c == '"':
		start := p.pos
		if err := p.parseString(); err != nil {
			return nil, err
		}
		return &node{kind: '"', start: start, end: p.pos}, nil
	case c == '-' || c >= '0' && c <= '9':
		return p.parseNumber()
	default:
		for _, lit := range []string{"true", "false", "null"} {
			if bytes.HasPrefix(p.text[p.pos:], []byte(lit)) {
				start := p.pos
				p.pos += len(lit)
				return &node{kind: 'l', start: start, end: p.pos}, nil
			}
		}
		return nil, p.errorf(p.pos, "expected a value, found %s", p.describe())
	}
}

func (p *parser) parseObject(depth int) (*node, error) {
	n := &node{kind: '{', start: p.pos}
	open := p.pos
	p.pos++
	for {
		if err := p.skip(); err != nil {
			return nil, err
		}
		if p.pos >= len(p.text) {
			return nil, p.errorf(open, "object opened here is never closed")
		}
		if p.text[p.pos] == '}' {
			p.pos++
			n.end = p.pos
			return n, nil
		}
		if len(n.members) > 0 && n.members[len(n.members)-1].comma < 0 {
			return nil, p.errorf(p.pos, "expected ',' or '}' after an object member, found %s", p.describe())
		}
		if p.text[p.pos] != '"' {
			return nil, p.errorf(p.pos, "expected a quoted key or '}', found %s", p.describe())
		}
		keyStart := p.pos
		if err := p.parseString(); err != nil {
			return nil, err
		}
		var key string
		if err := json.Unmarshal(p.text[keyStart:p.pos], &key); err != nil {
			return nil, p.errorf(keyStart, "bad key: %v", err)
		}
		if err := p.skip(); err != nil {
			return nil, err
		}
		if p.pos >= len(p.text) || p.text[p.pos] != ':' {
			return nil, p.errorf(p.pos, "expected ':' after the key %q, found %s", key, p.describe())
		}
		p.pos++
		if err := p.skip(); err != nil {
			return nil, err
		}
		v, err := p.parseValue(depth + 1)
		if err != nil {
			return nil, err
		}
		m := member{key: key, keyStart: keyStart, val: v, comma: -1}
		if err := p.skip(); err != nil {
			return nil, err
		}
		if p.pos < len(p.text) && p.text[p.pos] == ',' {
			m.comma = p.pos
			p.pos++
		}
		n.members = append(n.members, m)
	}
}

func (p *parser) parseArray(depth int) (*node, error) {
	n := &node{kind: '[', start: p.pos}
	open := p.pos
	p.pos++
	comma := true
	for {
		if err := p.skip(); err != nil {
			return nil, err
		}
		if p.pos >= len(p.text) {
			return nil, p.errorf(open, "array opened here is never closed")
		}
		if p.text[p.pos] == ']' {
			p.pos++
			n.end = p.pos
			return n, nil
		}
		if !comma {
			return nil, p.errorf(p.pos, "expected ',' or ']' after an array element, found %s", p.describe())
		}
		v, err := p.parseValue(depth + 1)
		if err != nil {
			return nil, err
		}
		n.elems = append(n.elems, v)
		if err := p.skip(); err != nil {
			return nil, err
		}
		comma = p.pos < len(p.text) && p.text[p.pos] == ','
		if comma {
			p.pos++
		}
	}
}

func (p *parser) parseString() error {
	start := p.pos
	p.pos++
	for p.pos < len(p.text) {
		switch c := p.text[p.pos]; {
		case c == '"':
			p.pos++
			if !json.Valid(p.text[start:p.pos]) {
				return p.errorf(start, "bad string %s", p.text[start:p.pos])
			}
			return nil
		case c == '\\':
			p.pos += 2
		case c == '\n':
			return p.errorf(start, "string is not closed before the end of the line")
		default:
			p.pos++
		}
	}
	return p.errorf(start, "string is never closed")
}

func (p *parser) parseNumber() (*node, error) {
	start := p.pos
	for p.pos < len(p.text) && strings.IndexByte("+-0123456789.eE", p.text[p.pos]) >= 0 {
		p.pos++
	}
	if !json.Valid(p.text[start:p.pos]) {
		return nil, p.errorf(start, "bad number %s", p.text[start:p.pos])
	}
	return &node{kind: '0', start: start, end: p.pos}, nil
}
