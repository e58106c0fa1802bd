// Package flatyaml reads the YAML of a small settings file: one mapping whose
// values are scalars or lists of scalars, as /etc/gridcity/agent.yaml is. It
// replaces a general YAML library, whose code (and the regexp and time
// parsing it pulls in) took a quarter of a megabyte of the agent's binary,
// and so of its resident memory.
//
// What it reads means what go.yaml.in/yaml/v3 makes of it when decoding into
// string, bool and []string fields (the tests hold it to that); what it does
// not read (anchors, tags, block scalars, nested mappings, multi-line plain
// or quoted scalars, tabs outside quotes, an indented top-level mapping) is
// an error naming the line, never a different value.
package flatyaml

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Value is a key's value: a scalar, or a list when IsList.
type Value struct {
	Line   int
	Null   bool   // nothing, ~ or null, unquoted
	Quoted bool   // 'single' or "double" quoted
	Text   string // the scalar, unquoted and unescaped
	IsList bool
	List   []Value
}

// Field is one key of the mapping and its value, in file order.
type Field struct {
	Key   string
	Value Value
}

// Parse reads the document in b. An empty document (nothing, or only
// comments) has no fields.
func Parse(b []byte) ([]Field, error) {
	if !utf8.Valid(b) {
		return nil, errors.New("not UTF-8 text")
	}
	s := strings.TrimPrefix(string(b), "\ufeff")
	line := 1
	for i, r := range s {
		switch {
		case r == '\n':
			line++
		case !printable(r):
			return nil, fmt.Errorf("line %d: control character %U", line, r)
		case r == '\r' && !strings.HasPrefix(s[i+1:], "\n"), r == 0x85, r == 0x2028, r == 0x2029:
			// Line breaks to YAML, which this reader does not take.
			return nil, fmt.Errorf("line %d: line break %U is not supported: end lines with \n", line, r)
		}
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSuffix(l, "\r")
	}
	p := &parser{lines: lines}
	return p.document()
}

// printable is YAML's c-printable: the characters a YAML file may hold.
func printable(r rune) bool {
	return r == '\t' || r == '\n' || r == '\r' || r >= 0x20 && r <= 0x7e || r == 0x85 ||
		r >= 0xa0 && r <= 0xd7ff || r >= 0xe000 && r <= 0xfffd || r >= 0x10000 && r <= utf8.MaxRune
}

type parser struct {
	lines []string
	i     int // the next line
}

func (p *parser) errorf(line int, format string, args ...any) error {
	return fmt.Errorf("line %d: "+format, append([]any{line}, args...)...)
}

// unsupported is what a line holds that this reader does not take, though it
// may be YAML.
func (p *parser) unsupported(line int, what string) error {
	return p.errorf(line, "%s is not supported here: write key: value, key: [a, b] or a list of \"- item\" lines", what)
}

// blank reports whether a line holds nothing but spaces and a comment.
func blank(l string) bool {
	t := strings.TrimLeft(l, " ")
	return t == "" || t[0] == '#'
}

func indent(l string) int { return len(l) - len(strings.TrimLeft(l, " ")) }

// marker reports whether l is a document marker (--- or ...) alone, or
// followed by a comment.
func marker(l, m string) bool {
	if !strings.HasPrefix(l, m) {
		return false
	}
	rest := l[len(m):]
	return rest == "" || blank(rest) && rest[0] == ' '
}

func (p *parser) document() ([]Field, error) {
	var fields []Field
	seen := map[string]int{}
	started := false // past a --- or the first key
	for p.i < len(p.lines) {
		n, l := p.i+1, p.lines[p.i]
		if blank(l) {
			p.i++
			continue
		}
		switch {
		case marker(l, "---"):
			if started {
				return nil, p.unsupported(n, "a second document")
			}
			started = true
			p.i++
			continue
		case marker(l, "..."):
			if !started {
				return nil, p.errorf(n, "a document end (...) before any document")
			}
			for _, l := range p.lines[p.i+1:] {
				if !blank(l) {
					return nil, p.unsupported(n, "a second document")
				}
			}
			return fields, nil
		case l[0] == '%':
			return nil, p.unsupported(n, "a directive")
		case indent(l) > 0:
			return nil, p.unsupported(n, "an indented line here")
		}
		started = true
		key, rest, err := p.key(n, l)
		if err != nil {
			return nil, err
		}
		if first, dup := seen[key]; dup {
			return nil, p.errorf(n, "%s is given twice (first on line %d)", key, first)
		}
		seen[key] = n
		p.i++
		v, err := p.value(n, rest)
		if err != nil {
			return nil, err
		}
		fields = append(fields, Field{Key: key, Value: v})
	}
	return fields, nil
}

// key splits "key: rest" and returns the key, unquoted.
func (p *parser) key(n int, l string) (key, rest string, err error) {
	if l[0] == '"' || l[0] == '\'' {
		key, rest, err = p.quoted(n, l)
		if err != nil {
			return "", "", err
		}
		if !strings.HasPrefix(rest, ":") {
			return "", "", p.errorf(n, "a key wants a colon after it")
		}
		rest = rest[1:]
	} else {
		if strings.ContainsRune("-?:,[]{}#&*!|>@`", rune(l[0])) {
			return "", "", p.unsupported(n, fmt.Sprintf("a line starting with %q", l[0]))
		}
		i := strings.Index(l, ":")
		for i >= 0 && i+1 < len(l) && l[i+1] != ' ' {
			j := strings.Index(l[i+1:], ":")
			if j < 0 {
				i = -1
				break
			}
			i += 1 + j
		}
		if i < 0 {
			return "", "", p.errorf(n, "want key: value")
		}
		key, rest = l[:i], l[i+1:]
		if strings.Contains(key, " #") || strings.ContainsRune(key, '\t') {
			return "", "", p.errorf(n, "want key: value")
		}
		key = strings.TrimRight(key, " ")
	}
	if rest != "" && rest[0] != ' ' {
		return "", "", p.errorf(n, "want a space after the colon")
	}
	return key, rest, nil
}

// value reads what follows a key's colon (rest) and, for a list or a value
// on the lines below, those lines.
func (p *parser) value(n int, rest string) (Value, error) {
	t := strings.TrimLeft(rest, " ")
	if t == "" || t[0] == '#' {
		// Nothing on the key's line: a list of "- item" lines, or null.
		return p.blockList(n)
	}
	if t[0] == '[' {
		return p.flowList(n, t)
	}
	v, after, err := p.scalar(n, t, false)
	if err != nil {
		return Value{}, err
	}
	if !blank(after) {
		return Value{}, p.errorf(n, "unexpected %q after the value", strings.TrimSpace(after))
	}
	return v, p.noContinuation(n)
}

// noContinuation refuses lines indented under a finished value: YAML would
// fold them into it (or make a mapping of them).
func (p *parser) noContinuation(n int) error {
	for j := p.i; j < len(p.lines); j++ {
		l := p.lines[j]
		if blank(l) {
			continue
		}
		if indent(l) > 0 {
			return p.unsupported(j+1, "a value continued on an indented line")
		}
		break
	}
	return nil
}

func (p *parser) blockList(n int) (Value, error) {
	v := Value{Line: n, Null: true}
	itemIndent := -1
	for p.i < len(p.lines) {
		l := p.lines[p.i]
		if blank(l) {
			p.i++
			continue
		}
		in := indent(l)
		t := l[in:]
		if !(t == "-" || strings.HasPrefix(t, "- ")) {
			if in > 0 {
				return Value{}, p.unsupported(p.i+1, "a nested mapping or a value below its key")
			}
			break
		}
		if itemIndent < 0 {
			itemIndent = in
			v = Value{Line: n, IsList: true, List: []Value{}}
		} else if in != itemIndent {
			return Value{}, p.unsupported(p.i+1, "a list item indented unlike the first")
		}
		m := p.i + 1
		p.i++
		item := strings.TrimLeft(t[1:], " ")
		if item == "" || item[0] == '#' {
			v.List = append(v.List, Value{Line: m, Null: true})
		} else {
			if item[0] == '[' || item[0] == '-' && (len(item) == 1 || item[1] == ' ') {
				return Value{}, p.unsupported(m, "a list in a list")
			}
			e, after, err := p.scalar(m, item, false)
			if err != nil {
				return Value{}, err
			}
			if !blank(after) {
				return Value{}, p.errorf(m, "unexpected %q after the item", strings.TrimSpace(after))
			}
			v.List = append(v.List, e)
		}
		// Lines indented under an item would continue it.
		for j := p.i; j < len(p.lines); j++ {
			if blank(p.lines[j]) {
				continue
			}
			if indent(p.lines[j]) > itemIndent {
				return Value{}, p.unsupported(j+1, "an item continued on an indented line")
			}
			break
		}
	}
	return v, nil
}

// flowList reads [a, b, …] from t, the rest of line n, going on to the
// next lines until the closing bracket.
func (p *parser) flowList(n int, t string) (Value, error) {
	v := Value{Line: n, IsList: true, List: []Value{}}
	t = t[1:]
	if strings.HasPrefix(t, "#") {
		return Value{}, p.errorf(n, "want a space before a comment")
	}
	line := n
	wantItem := true // after [ or a comma
	for {
		t = strings.TrimLeft(t, " ")
		if t == "" || t[0] == '#' {
			// The list goes on on the next line, which must be indented.
			if p.i >= len(p.lines) {
				return Value{}, p.errorf(n, "the list has no closing ]")
			}
			next := p.lines[p.i]
			line = p.i + 1
			p.i++
			if !blank(next) && indent(next) == 0 {
				return Value{}, p.errorf(line, "the list of line %d goes on unindented", n)
			}
			t = next
			continue
		}
		switch t[0] {
		case ']':
			if !blank(t[1:]) {
				return Value{}, p.errorf(line, "unexpected %q after the list", strings.TrimSpace(t[1:]))
			}
			return v, p.noContinuation(line)
		case ',':
			if wantItem {
				return Value{}, p.errorf(line, "an empty item in the list")
			}
			wantItem = true
			t = t[1:]
			if strings.HasPrefix(t, "#") {
				return Value{}, p.errorf(line, "want a space before a comment")
			}
			continue
		case '[', '{':
			return Value{}, p.unsupported(line, "a list or mapping in a list")
		}
		if !wantItem {
			return Value{}, p.errorf(line, "want a comma between items")
		}
		e, after, err := p.scalar(line, t, true)
		if err != nil {
			return Value{}, err
		}
		v.List = append(v.List, e)
		wantItem = false
		t = after
	}
}

// scalar reads a scalar at the start of t and returns what follows it.
func (p *parser) scalar(n int, t string, inFlow bool) (Value, string, error) {
	switch t[0] {
	case '"', '\'':
		s, rest, err := p.quoted(n, t)
		if err != nil {
			return Value{}, "", err
		}
		if rest != "" && rest[0] != ' ' && !(inFlow && (rest[0] == ',' || rest[0] == ']')) {
			return Value{}, "", p.errorf(n, "unexpected %q after the quoted value", rest)
		}
		return Value{Line: n, Quoted: true, Text: s}, rest, nil
	case '&', '*', '!', '|', '>', '%', '@', '`', '{', '}', '[', ']', ',', '#':
		return Value{}, "", p.unsupported(n, fmt.Sprintf("a value starting with %q", t[0]))
	case '-', '?', ':':
		if len(t) == 1 || t[1] == ' ' || inFlow {
			return Value{}, "", p.unsupported(n, fmt.Sprintf("a value starting with %q", t[0]))
		}
	}
	// A plain scalar ends at a comment (" #"), at the end of the line or,
	// in a list, at a comma or bracket.
	end := len(t)
	for i := 0; i < len(t); i++ {
		c := t[i]
		if c == '\t' {
			return Value{}, "", p.unsupported(n, "a tab")
		}
		if c == '#' && t[i-1] == ' ' {
			end = i
			break
		}
		if c == ':' && (inFlow || i+1 == len(t) || t[i+1] == ' ') {
			return Value{}, "", p.unsupported(n, "a colon in an unquoted value (quote it)")
		}
		if inFlow && strings.ContainsRune(",[]{}", rune(c)) {
			end = i
			break
		}
		if inFlow && strings.ContainsRune("?&*!|>'\"%@`", rune(c)) {
			// YAML's flow lists read some of these apart from the item.
			return Value{}, "", p.unsupported(n, fmt.Sprintf("%q in an unquoted list item (quote it)", c))
		}
	}
	s := strings.TrimRight(t[:end], " ")
	v := Value{Line: n, Text: s}
	switch s {
	case "~", "null", "Null", "NULL":
		v.Null, v.Text = true, ""
	}
	return v, t[end:], nil
}

// quoted reads a single- or double-quoted scalar at the start of t, which
// must end on the same line.
func (p *parser) quoted(n int, t string) (string, string, error) {
	q := t[0]
	var b strings.Builder
	for i := 1; i < len(t); i++ {
		c := t[i]
		switch {
		case c == q && q == '\'' && i+1 < len(t) && t[i+1] == '\'':
			b.WriteByte('\'')
			i++
		case c == q:
			return b.String(), t[i+1:], nil
		case c == '\\' && q == '"':
			if i+1 == len(t) {
				return "", "", p.unsupported(n, "a quoted value continued on the next line")
			}
			r, width, err := unescape(t[i+1:])
			if err != nil {
				return "", "", p.errorf(n, "%v", err)
			}
			b.WriteString(r)
			i += width
		case c == '\t' || c >= ' ' && c != 0x7f || c >= 0x80:
			b.WriteByte(c)
		default:
			return "", "", p.errorf(n, "control character %q in a quoted value", c)
		}
	}
	return "", "", p.unsupported(n, "a quoted value continued on the next line")
}

// unescape decodes the escape after a backslash in a double-quoted scalar
// and returns it and the bytes it took.
func unescape(s string) (string, int, error) {
	simple := map[byte]string{
		'0': "\x00", 'a': "\a", 'b': "\b", 't': "\t", '\t': "\t", 'n': "\n", 'v': "\v",
		'f': "\f", 'r': "\r", 'e': "\x1b", ' ': " ", '"': "\"", '/': "/", '\\': "\\",
		'N': "\u0085", '_': "\u00a0", 'L': "\u2028", 'P': "\u2029",
	}
	if r, ok := simple[s[0]]; ok {
		return r, 1, nil
	}
	digits := map[byte]int{'x': 2, 'u': 4, 'U': 8}[s[0]]
	if digits == 0 || len(s) < 1+digits {
		return "", 0, fmt.Errorf("unknown escape \\%c in a quoted value", s[0])
	}
	code, err := strconv.ParseUint(s[1:1+digits], 16, 32)
	if err != nil {
		return "", 0, fmt.Errorf("bad escape \\%s in a quoted value", s[:1+digits])
	}
	if code > utf8.MaxRune || code >= 0xd800 && code <= 0xdfff {
		return "", 0, fmt.Errorf("escape \\%s is not a character", s[:1+digits])
	}
	return string(rune(code)), 1 + digits, nil
}

// String returns a scalar for a string setting; set is false for null,
// which leaves the setting as it was.
func (v Value) String() (s string, set bool, err error) {
	switch {
	case v.IsList:
		return "", false, fmt.Errorf("line %d: want a single value, not a list", v.Line)
	case v.Null:
		return "", false, nil
	}
	return v.Text, true, nil
}

// Bool returns a scalar for a bool setting: true or false (any case, as
// YAML 1.2 reads them), or yes/no, on/off, y/n, which YAML 1.1 read and
// go.yaml.in/yaml/v3 still takes for a bool; set is false for null.
func (v Value) Bool() (b, set bool, err error) {
	switch {
	case v.IsList:
		return false, false, fmt.Errorf("line %d: want true or false, not a list", v.Line)
	case v.Null:
		return false, false, nil
	}
	if !v.Quoted {
		switch v.Text {
		case "true", "True", "TRUE":
			return true, true, nil
		case "false", "False", "FALSE":
			return false, true, nil
		}
	}
	switch v.Text {
	case "y", "Y", "yes", "Yes", "YES", "on", "On", "ON":
		return true, true, nil
	case "n", "N", "no", "No", "NO", "off", "Off", "OFF":
		return false, true, nil
	}
	return false, false, fmt.Errorf("line %d: want true or false, not %q", v.Line, v.Text)
}

// Strings returns a list for a list setting: null gives nil, and a null
// item is left out.
func (v Value) Strings() ([]string, error) {
	switch {
	case v.Null:
		return nil, nil
	case !v.IsList:
		return nil, fmt.Errorf("line %d: want a list ([a, b] or \"- item\" lines), not %q", v.Line, v.Text)
	}
	out := make([]string, 0, len(v.List))
	for _, e := range v.List {
		if !e.Null {
			out = append(out, e.Text)
		}
	}
	return out, nil
}
