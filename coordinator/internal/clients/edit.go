package clients

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// Object is a JSON object that keeps its keys in the order given, so that an
// entry reads the way the client's docs show it (url before headers).
type Object []Field

// Field is one key of an Object.
type Field struct {
	Key   string
	Value any
}

// MarshalJSON writes the fields in order.
func (o Object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := marshal(f.Key)
		if err != nil {
			return nil, err
		}
		v, err := marshal(f.Value)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// marshal is json.Marshal without HTML escaping: URLs keep their & and <.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// render writes v as indented JSON whose lines after the first start with
// prefix, as it will sit in the file.
func render(v any, prefix, unit string) string {
	b, err := marshal(v)
	if err != nil {
		panic(fmt.Sprintf("clients: render %T: %v", v, err)) // entries are built from strings
	}
	var out bytes.Buffer
	_ = json.Indent(&out, b, prefix, unit)
	return out.String()
}

// normal returns v as encoding/json decodes it, to compare with a node's value.
func normal(v any) any {
	b, err := marshal(v)
	if err != nil {
		return nil
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var out any
	_ = d.Decode(&out)
	return out
}

// PathError says that a key on the way to the entry holds something other
// than an object, so the file is left alone.
type PathError struct {
	Line, Column int
	Path         string
	Found        string
}

func (e *PathError) Error() string {
	return fmt.Sprintf("line %d, column %d: %s is %s, not an object", e.Line, e.Column, e.Path, e.Found)
}

func kindName(k byte) string {
	switch k {
	case '[':
		return "an array"
	case '"':
		return "a string"
	case '0':
		return "a number"
	case 'l':
		return "true, false or null"
	}
	return "an object"
}

// setKey makes the value at path (a chain of object keys from the top) equal
// to v, editing only that place in the text: every other byte, comments
// included, stays as it was. It reports whether anything changed.
func setKey(text []byte, path []string, v any) ([]byte, bool, error) {
	root, err := parseJSONC(text)
	if err != nil {
		return nil, false, err
	}
	st := newStyle(text, root)
	if root == nil {
		// Nothing there yet (or only comments): the whole document is new.
		out := bytes.TrimRight(text, " \t\r\n")
		if len(out) > 0 {
			out = append(out, st.nl...)
		}
		out = append(out, st.render(nest(path, v), "")...)
		return append(out, st.nl...), true, nil
	}
	obj := root
	for i, key := range path {
		if obj.kind != '{' {
			p := &parser{text: text}
			se := p.errorf(obj.start, "").(*SyntaxError)
			where := "the file's top level"
			if i > 0 {
				where = `"` + strings.Join(path[:i], `" → "`) + `"`
			}
			return nil, false, &PathError{Line: se.Line, Column: se.Column, Path: where, Found: kindName(obj.kind)}
		}
		m := obj.find(key)
		if m == nil {
			return st.insert(obj, key, nest(path[i+1:], v)), true, nil
		}
		if i == len(path)-1 {
			if reflect.DeepEqual(m.val.value(text), normal(v)) {
				return text, false, nil
			}
			val := st.render(v, st.lineIndent(m.keyStart))
			return splice(text, m.val.start, m.val.end, val), true, nil
		}
		obj = m.val
	}
	panic("clients: setKey with an empty path")
}

// nest wraps v in one object per key: nest([a b], v) is {"a": {"b": v}}.
func nest(path []string, v any) any {
	for i := len(path) - 1; i >= 0; i-- {
		v = Object{{path[i], v}}
	}
	return v
}

func splice(text []byte, start, end int, s string) []byte {
	out := make([]byte, 0, len(text)-(end-start)+len(s))
	out = append(out, text[:start]...)
	out = append(out, s...)
	return append(out, text[end:]...)
}

// style is how the file is laid out, so that new text looks like the old.
type style struct {
	text []byte
	unit string // one level of indentation
	nl   string // "\n" or "\r\n"
}

func newStyle(text []byte, root *node) style {
	st := style{text: text, unit: "  ", nl: "\n"}
	if bytes.Contains(text, []byte("\r\n")) {
		st.nl = "\r\n"
	}
	// One level is the first member's indentation, when it starts a line.
	if root != nil && root.kind == '{' && len(root.members) > 0 {
		if ind, ok := st.ownLine(root.members[0].keyStart); ok && ind != "" {
			st.unit = ind
		}
	}
	return st
}

// render is render in the file's indentation and line ends.
func (st style) render(v any, prefix string) string {
	s := render(v, prefix, st.unit)
	if st.nl != "\n" {
		s = strings.ReplaceAll(s, "\n", st.nl)
	}
	return s
}

// lineIndent is the blanks that start the line holding offset at.
func (st style) lineIndent(at int) string {
	ls := bytes.LastIndexByte(st.text[:at], '\n') + 1
	i := ls
	for i < at && (st.text[i] == ' ' || st.text[i] == '\t') {
		i++
	}
	return string(st.text[ls:i])
}

// ownLine reports the indentation before offset at, and whether only blanks
// come before it on its line.
func (st style) ownLine(at int) (string, bool) {
	ind := st.lineIndent(at)
	ls := bytes.LastIndexByte(st.text[:at], '\n') + 1
	return ind, ls+len(ind) == at
}

// textEdit replaces text[at:end] with s.
type textEdit struct {
	at, end int
	s       string
}

// insert adds "key": v as the object's last member.
func (st style) insert(obj *node, key string, v any) []byte {
	text := st.text
	objIndent := st.lineIndent(obj.start)
	ind := objIndent + st.unit
	if len(obj.members) > 0 {
		if i, ok := st.ownLine(obj.members[0].keyStart); ok {
			ind = i
		}
	}
	k, _ := marshal(key)
	entry := string(k) + ": " + st.render(v, ind)
	closeAt := obj.end - 1 // the '}'

	if len(obj.members) == 0 {
		if _, ok := st.ownLine(closeAt); ok && bytes.LastIndexByte(text[:closeAt], '\n') > obj.start {
			// The '}' has a line of its own: the entry goes on the line before it.
			ls := bytes.LastIndexByte(text[:closeAt], '\n') + 1
			return splice(text, ls, ls, ind+entry+st.nl)
		}
		if len(bytes.TrimSpace(text[obj.start+1:closeAt])) == 0 {
			return splice(text, obj.start+1, closeAt, st.nl+ind+entry+st.nl+objIndent)
		}
		return splice(text, closeAt, closeAt, st.nl+ind+entry+st.nl+objIndent)
	}

	last := obj.members[len(obj.members)-1]
	after := last.val.end
	var edits []textEdit
	if last.comma >= 0 {
		after = last.comma + 1
	} else {
		edits = append(edits, textEdit{last.val.end, last.val.end, ","})
	}
	// Keep a comment that ends the last member's line on that line.
	q, lastNonBlank := after, after
	for q < len(text) {
		switch {
		case text[q] == ' ' || text[q] == '\t':
			q++
			continue
		case bytes.HasPrefix(text[q:], []byte("//")):
			for q < len(text) && text[q] != '\n' && text[q] != '\r' {
				q++
			}
			lastNonBlank = q
			continue
		case bytes.HasPrefix(text[q:], []byte("/*")):
			end := bytes.Index(text[q+2:], []byte("*/"))
			if end >= 0 && !bytes.ContainsAny(text[q:q+2+end], "\n") {
				q += 2 + end + 2
				lastNonBlank = q
				continue
			}
		}
		break
	}
	if q >= len(text) || text[q] == '\n' || text[q] == '\r' {
		edits = append(edits, textEdit{q, q, st.nl + ind + entry})
	} else {
		// Something follows on the same line (the '}' of a one-line object).
		edits = append(edits, textEdit{lastNonBlank, q, st.nl + ind + entry + st.nl + objIndent})
	}
	out := text
	for i := len(edits) - 1; i >= 0; i-- {
		out = splice(out, edits[i].at, edits[i].end, edits[i].s)
	}
	return out
}
