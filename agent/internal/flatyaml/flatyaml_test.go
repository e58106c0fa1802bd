package flatyaml

import (
	"reflect"
	"testing"
)

// The forms a settings file uses read as the fields and values they say.
func TestParse(t *testing.T) {
	in := "# agent settings\n---\nname: web-1   # this server\nrunAs: 'root'\ncommands: \"no\"\nauthLogs:\n  - /var/log/auth.log\n  -\nprobes: [a, \"b\\u00e9\",]\ndistrict:\n"
	got, err := Parse([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Field{
		{"name", Value{Line: 3, Text: "web-1"}},
		{"runAs", Value{Line: 4, Quoted: true, Text: "root"}},
		{"commands", Value{Line: 5, Quoted: true, Text: "no"}},
		{"authLogs", Value{Line: 6, IsList: true, List: []Value{{Line: 7, Text: "/var/log/auth.log"}, {Line: 8, Null: true}}}},
		{"probes", Value{Line: 9, IsList: true, List: []Value{{Line: 9, Text: "a"}, {Line: 9, Quoted: true, Text: "bé"}}}},
		{"district", Value{Line: 10, Null: true}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v;\nwant %+v", got, want)
	}
}

func TestValues(t *testing.T) {
	if s, set, err := (Value{Text: "x"}).String(); s != "x" || !set || err != nil {
		t.Errorf("String of x: got %q, %v, %v", s, set, err)
	}
	if _, set, err := (Value{Null: true}).String(); set || err != nil {
		t.Errorf("String of null: got set %v, %v; want unset", set, err)
	}
	for text, want := range map[string]bool{"true": true, "FALSE": false, "yes": true, "Off": false, "y": true} {
		if b, set, err := (Value{Text: text}).Bool(); b != want || !set || err != nil {
			t.Errorf("Bool of %s: got %v, %v, %v; want %v", text, b, set, err, want)
		}
	}
	if _, _, err := (Value{Text: "true", Quoted: true}).Bool(); err == nil {
		t.Error(`Bool of "true" (quoted): no error; yaml/v3 refuses a quoted true for a bool`)
	}
	if l, err := (Value{IsList: true, List: []Value{{Text: "a"}, {Null: true}, {Text: "b"}}}).Strings(); err != nil || !reflect.DeepEqual(l, []string{"a", "b"}) {
		t.Errorf("Strings: got %q, %v; want [a b]", l, err)
	}
	if l, err := (Value{Null: true}).Strings(); l != nil || err != nil {
		t.Errorf("Strings of null: got %q, %v; want nil", l, err)
	}
}
