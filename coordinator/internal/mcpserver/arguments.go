package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// addTool adds a typed tool whose input schema every client can read and
// whose wrong arguments are answered in words a model can act on.
//
// The schema go-sdk infers for an optional pointer or slice argument is
// the union ["null", T]; Gemini's function declarations cannot express a
// union (and Inspector --strict warns), so the served schema says T: a
// client leaves an optional argument out rather than sending null.
//
// The SDK checks the arguments against the schema before the handler
// runs, and reports a mismatch as a validator's trace ("validating root:
// validating /properties/limit: type: <invalid reflect.Value> has type
// "null", want "integer"" for {"limit": null}). checkArguments answers
// first with the argument's name, the type it takes and what to do; the
// SDK's own check stays behind it for anything else.
func addTool[In, Out any](s *mcp.Server, t *mcp.Tool, h mcp.ToolHandlerFor[In, Out]) {
	schema := inputSchema[In]()
	t.InputSchema = schema
	s.AddReceivingMiddleware(checkArguments(t.Name, schema))
	mcp.AddTool(s, t, h)
}

// inputSchema infers In's schema without "or null" anywhere in it.
func inputSchema[In any]() *jsonschema.Schema {
	s, err := jsonschema.For[In](nil)
	if err != nil {
		panic(fmt.Sprintf("input schema of %T: %v", *new(In), err))
	}
	dropNull(s)
	return s
}

// dropNull turns every ["null", T] type union in s into T.
func dropNull(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	if len(s.Types) == 2 && slices.Contains(s.Types, "null") {
		other := s.Types[0]
		if other == "null" {
			other = s.Types[1]
		}
		s.Types, s.Type = nil, other
	}
	dropNull(s.Items)
	for _, p := range s.Properties {
		dropNull(p)
	}
}

// checkArguments answers a call of the named tool whose arguments do not
// fit its schema with an isError result saying which argument is wrong
// and why, before the SDK's validator sees them.
func checkArguments(tool string, schema *jsonschema.Schema) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/call" {
				if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok && p.Name == tool {
					if problems := argumentProblems(schema, p.Arguments); len(problems) > 0 {
						return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{
							Text: fmt.Sprintf("%s was not called: %s.", tool, strings.Join(problems, "; ")),
						}}}, nil
					}
				}
			}
			return next(ctx, method, req)
		}
	}
}

// argumentProblems lists, in words, how raw (a call's arguments) does not
// fit schema: wrong types (null included), unknown and missing arguments.
func argumentProblems(schema *jsonschema.Schema, raw json.RawMessage) []string {
	var v any = map[string]any{}
	if len(bytes.TrimSpace(raw)) > 0 && string(bytes.TrimSpace(raw)) != "null" {
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		if err := d.Decode(&v); err != nil {
			return []string{"the arguments are not valid JSON: " + err.Error()}
		}
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return []string{"the arguments must be a JSON object of named arguments, not " + describeValue(v)}
	}
	var out []string
	checkObject("", schema, obj, &out)
	return out
}

func checkObject(prefix string, s *jsonschema.Schema, obj map[string]any, out *[]string) {
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		p, ok := s.Properties[k]
		if !ok {
			if s.AdditionalProperties != nil && s.AdditionalProperties.Not != nil {
				*out = append(*out, fmt.Sprintf("there is no argument %q (the arguments%s are %s)", prefix+k, of(prefix), propertyNames(s)))
			}
			continue
		}
		checkValue(prefix+k, p, obj[k], !slices.Contains(s.Required, k), out)
	}
	for _, r := range s.Required {
		if _, ok := obj[r]; !ok {
			*out = append(*out, fmt.Sprintf("argument %q is missing: it takes %s%s", prefix+r, expected(s.Properties[r]), about(s.Properties[r])))
		}
	}
}

func checkValue(path string, s *jsonschema.Schema, v any, optional bool, out *[]string) {
	if s == nil {
		return
	}
	types := s.Types
	if s.Type != "" {
		types = []string{s.Type}
	}
	if len(types) > 0 && !slices.ContainsFunc(types, func(t string) bool { return isType(v, t) }) {
		msg := fmt.Sprintf("argument %q must be %s, not %s", path, expected(s), describeValue(v))
		if v == nil && optional {
			msg += ": leave it out instead"
		}
		*out = append(*out, msg)
		return
	}
	switch v := v.(type) {
	case map[string]any:
		checkObject(path+".", s, v, out)
	case []any:
		for i, e := range v {
			checkValue(fmt.Sprintf("%s[%d]", path, i), s.Items, e, false, out)
		}
	}
}

// isType reports whether the JSON value v (decoded with UseNumber) is of
// the JSON Schema type t.
func isType(v any, t string) bool {
	switch v := v.(type) {
	case nil:
		return t == "null"
	case bool:
		return t == "boolean"
	case string:
		return t == "string"
	case json.Number:
		if t == "number" {
			return true
		}
		if t != "integer" {
			return false
		}
		if _, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			return true
		}
		f, err := v.Float64()
		return err == nil && f == float64(int64(f))
	case []any:
		return t == "array"
	case map[string]any:
		return t == "object"
	}
	return false
}

// expected says what a schema takes: "an integer", "an array of strings",
// "an object with prompt, secret".
func expected(s *jsonschema.Schema) string {
	if s == nil {
		return "a value"
	}
	t := s.Type
	if t == "" && len(s.Types) > 0 {
		t = strings.Join(s.Types, " or ")
	}
	switch t {
	case "string":
		return "a string"
	case "integer":
		return "an integer"
	case "number":
		return "a number"
	case "boolean":
		return "true or false"
	case "array":
		if s.Items != nil {
			return "an array of " + strings.TrimPrefix(strings.TrimPrefix(expected(s.Items), "an "), "a ") + "s"
		}
		return "an array"
	case "object":
		if len(s.Properties) > 0 {
			return "an object with " + propertyNames(s)
		}
		return "an object"
	case "":
		return "a value"
	}
	return t
}

// about is a property's description, for a missing argument.
func about(s *jsonschema.Schema) string {
	if s == nil || s.Description == "" {
		return ""
	}
	return " (" + s.Description + ")"
}

func of(prefix string) string {
	if prefix == "" {
		return ""
	}
	return " of " + strings.TrimSuffix(prefix, ".")
}

func propertyNames(s *jsonschema.Schema) string {
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// describeValue names a JSON value's type, with a short quote of it.
func describeValue(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return fmt.Sprintf("%t", v)
	case string:
		q := v
		if len([]rune(q)) > 40 {
			q = string([]rune(q)[:40]) + "…"
		}
		return fmt.Sprintf("a string (%q)", q)
	case json.Number:
		return "the number " + v.String()
	case []any:
		return fmt.Sprintf("an array of %d", len(v))
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}
