package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// No tool's input schema has a type union anywhere (["null", "object"]
// for an optional argument): Gemini's function declarations cannot
// express one and Inspector --strict warns about it.
func TestInputSchemasHaveNoTypeUnions(t *testing.T) {
	l, err := ListTools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var walk func(tool, path string, s any)
	walk = func(tool, path string, s any) {
		switch s := s.(type) {
		case map[string]any:
			if ty, ok := s["type"]; ok {
				if _, single := ty.(string); !single {
					t.Errorf("%s: %s has type %v; want one type", tool, path, ty)
				}
			}
			for k, v := range s {
				walk(tool, path+"/"+k, v)
			}
		case []any:
			for i, v := range s {
				walk(tool, fmt.Sprintf("%s/%d", path, i), v)
			}
		}
	}
	for _, tl := range l.Tools {
		b, _ := json.Marshal(tl.InputSchema)
		var s any
		json.Unmarshal(b, &s)
		walk(tl.Name, "inputSchema", s)
	}
}

// wrongValue is a value of another type than the schema's.
func wrongValue(typ string) any {
	switch typ {
	case "string":
		return 42
	case "integer", "number":
		return "ten"
	case "boolean":
		return "yes"
	case "array":
		return "cpu"
	}
	return "x"
}

var typeWords = map[string]string{"string": "a string", "integer": "an integer", "number": "a number", "boolean": "true or false", "array": "an array", "object": "an object"}

// Every argument of every tool, sent as null or as a value of the wrong
// type, is refused with a message naming the argument and the type it
// takes, never the validator's "<invalid reflect.Value>".
func TestWrongArgumentsAreNamed(t *testing.T) {
	e := newEnv(t, DefaultGuardConfig())
	cs := e.client(t, e.token)
	ctx := context.Background()
	listed, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range listed.Tools {
		b, _ := json.Marshal(tl.InputSchema)
		var schema struct {
			Properties map[string]struct {
				Type string `json:"type"`
			} `json:"properties"`
		}
		json.Unmarshal(b, &schema)
		names := make([]string, 0, len(schema.Properties))
		for n := range schema.Properties {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, name := range names {
			typ := schema.Properties[name].Type
			for _, v := range []any{nil, wrongValue(typ)} {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tl.Name, Arguments: map[string]any{name: v}})
				if err != nil {
					t.Fatalf("%s {%q: %v}: %v", tl.Name, name, v, err)
				}
				text := ""
				if len(res.Content) > 0 {
					text = res.Content[0].(*mcp.TextContent).Text
				}
				want := fmt.Sprintf("argument %q must be %s", name, typeWords[typ])
				if !res.IsError || res.StructuredContent != nil || !strings.Contains(text, want) || strings.Contains(text, "reflect") || strings.Contains(text, "validating") {
					t.Errorf("%s {%q: %#v}: %q; want an error saying %s", tl.Name, name, v, text, want)
				}
			}
		}
	}
}

// The other ways arguments go wrong are named too: a missing required
// argument with what it takes, an unknown one with the tool's arguments,
// a nested one by its path, and arguments that are not an object.
func TestArgumentProblemsInWords(t *testing.T) {
	e := newEnv(t, DefaultGuardConfig())
	cs := e.client(t, e.token)
	for _, tc := range []struct {
		tool string
		args any
		want []string
	}{
		{"run_command", map[string]any{"server": "web-1", "comand": "id", "reason": "r", "timeout_seconds": 5, "input": map[string]any{"prompt": 3}},
			[]string{`there is no argument "comand" (the arguments are command, input, reason, risky, server, timeout_seconds)`,
				`argument "input.prompt" must be a string, not the number 3`,
				`argument "command" is missing: it takes a string (the shell command to run`}},
		{"run_command", map[string]any{"server": "web-1", "command": "id", "reason": "r", "timeout_seconds": 2.5},
			[]string{`argument "timeout_seconds" must be an integer, not the number 2.5`}},
		{"run_command", map[string]any{"server": "web-1", "command": "id", "reason": "r", "timeout_seconds": 5, "input": nil},
			[]string{`argument "input" must be an object with prompt, secret, not null: leave it out instead`}},
		{"get_metrics", map[string]any{"target": "web-1", "metrics": []any{"cpu", 7}},
			[]string{`argument "metrics[1]" must be a string, not the number 7`}},
		{"list_servers", []any{1}, []string{"the arguments must be a JSON object of named arguments, not an array"}},
	} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tc.tool, Arguments: tc.args})
		if err != nil {
			t.Fatalf("%s %v: %v", tc.tool, tc.args, err)
		}
		text := res.Content[0].(*mcp.TextContent).Text
		if !res.IsError || !strings.HasPrefix(text, tc.tool+" was not called: ") {
			t.Errorf("%s %v: %q; want an error", tc.tool, tc.args, text)
		}
		for _, w := range tc.want {
			if !strings.Contains(text, w) {
				t.Errorf("%s %v: %q; want it to say %s", tc.tool, tc.args, text, w)
			}
		}
	}
	// Whole numbers written as decimals are integers, as JSON Schema says.
	res, out := callJSON(t, cs, "run_command", map[string]any{"server": "web-3", "command": "id", "reason": "r", "timeout_seconds": json.Number("5.0")})
	if !res.IsError || out.Status != "" || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, `unknown server "web-3"`) {
		t.Errorf("timeout_seconds 5.0: %+v; want it to reach the tool", res)
	}
}
