package clients

import (
	"strings"
	"testing"
)

func TestSetKey(t *testing.T) {
	path := []string{"servers", "gridcity"}
	v := Object{{"url", "http://h/mcp"}}
	tests := []struct {
		name, in, want string
	}{
		{"empty file", "", "{\n  \"servers\": {\n    \"gridcity\": {\n      \"url\": \"http://h/mcp\"\n    }\n  }\n}\n"},
		{"only comments", "// nothing yet\n", "// nothing yet\n{\n  \"servers\": {\n    \"gridcity\": {\n      \"url\": \"http://h/mcp\"\n    }\n  }\n}\n"},
		{"empty object", "{}\n", "{\n  \"servers\": {\n    \"gridcity\": {\n      \"url\": \"http://h/mcp\"\n    }\n  }\n}\n"},
		{"empty object on lines", "{\n}\n", "{\n  \"servers\": {\n    \"gridcity\": {\n      \"url\": \"http://h/mcp\"\n    }\n  }\n}\n"},
		{"one-line object", `{"a": 1}`, "{\"a\": 1,\n  \"servers\": {\n    \"gridcity\": {\n      \"url\": \"http://h/mcp\"\n    }\n  }\n}"},
		{"trailing comma kept", "{\n  \"a\": 1,\n}\n", "{\n  \"a\": 1,\n  \"servers\": {\n    \"gridcity\": {\n      \"url\": \"http://h/mcp\"\n    }\n  }\n}\n"},
		{"comment stays on its line", "{\n  \"a\": 1 // one\n}\n", "{\n  \"a\": 1, // one\n  \"servers\": {\n    \"gridcity\": {\n      \"url\": \"http://h/mcp\"\n    }\n  }\n}\n"},
		{"tabs", "{\n\t\"servers\": {\n\t\t\"x\": {}\n\t}\n}\n", "{\n\t\"servers\": {\n\t\t\"x\": {},\n\t\t\"gridcity\": {\n\t\t\t\"url\": \"http://h/mcp\"\n\t\t}\n\t}\n}\n"},
		{"crlf", "{\r\n    \"a\": true\r\n}\r\n", "{\r\n    \"a\": true,\r\n    \"servers\": {\r\n        \"gridcity\": {\r\n            \"url\": \"http://h/mcp\"\r\n        }\r\n    }\r\n}\r\n"},
		{"replace keeps neighbours", "{\"servers\": {\"gridcity\": 3, \"b\": 2}}", "{\"servers\": {\"gridcity\": {\n  \"url\": \"http://h/mcp\"\n}, \"b\": 2}}"},
		{"unchanged", "{\"servers\": {\"gridcity\": {\"url\": \"http://h/mcp\"}}}", "{\"servers\": {\"gridcity\": {\"url\": \"http://h/mcp\"}}}"},
		{"byte order mark", "\uFEFF{}", "\uFEFF{\n  \"servers\": {\n    \"gridcity\": {\n      \"url\": \"http://h/mcp\"\n    }\n  }\n}"},
		{"comment inside empty object", "{\"servers\": { /* none */ }}", "{\"servers\": { /* none */ \n  \"gridcity\": {\n    \"url\": \"http://h/mcp\"\n  }\n}}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, changed, err := setKey([]byte(tt.in), path, v)
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tt.want {
				t.Errorf("got\n%q\nwant\n%q", out, tt.want)
			}
			if changed != (tt.in != tt.want) {
				t.Errorf("changed = %v", changed)
			}
			if _, err := parseJSONC(out); err != nil {
				t.Errorf("the result does not parse: %v", err)
			}
		})
	}
}

func TestSetKeyRefuses(t *testing.T) {
	tests := []struct{ in, want string }{
		{`[]`, `line 1, column 1: the file's top level is an array, not an object`},
		{`{"servers": null}`, `line 1, column 13: "servers" is true, false or null, not an object`},
		{"{\n  \"a\": 1,,\n}", `line 2, column 10: expected a quoted key or '}', found ','`},
		{`{"a": "b`, `line 1, column 7: string is never closed`},
		{`{"a": 01}`, `line 1, column 7: bad number 01`},
		{`{"a": 1} {}`, `line 1, column 10: unexpected '{' after the end of the top-level value`},
		{`{"a" 1}`, `line 1, column 6: expected ':' after the key "a", found '1'`},
		{`[1 2]`, `line 1, column 4: expected ',' or ']' after an array element, found '2'`},
		{"{\"é\": tru}", `line 1, column 7: expected a value, found 't'`},
	}
	for _, tt := range tests {
		out, _, err := setKey([]byte(tt.in), []string{"servers", "gridcity"}, "x")
		if err == nil || err.Error() != tt.want {
			t.Errorf("setKey(%s) = %q, %v; want error %s", tt.in, out, err, tt.want)
		}
	}
}

func TestParseDeep(t *testing.T) {
	deep := strings.Repeat("[", 500) + strings.Repeat("]", 500)
	if _, err := parseJSONC([]byte(deep)); err == nil || !strings.Contains(err.Error(), "nested deeper") {
		t.Errorf("parse of 500 nested arrays: %v", err)
	}
}
