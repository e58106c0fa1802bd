package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// --log-format json (or GRIDCITY_LOG_FORMAT): one JSON object per event
// with time, level and msg; an unknown format stops serve before it
// starts, naming the flag, the variable and the formats.
func TestLogFormat(t *testing.T) {
	var buf bytes.Buffer
	logger, err := newLogger(&buf, "info", "json")
	if err != nil {
		t.Fatal(err)
	}
	logger.Info("coordinator ready", "mcp", "http://127.0.0.1:4600/mcp")
	logger.Warn("two\nlines", "err", "a \"quoted\" error")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines for two events: %q", len(lines), buf.String())
	}
	for _, l := range lines {
		var ev map[string]any
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("log line %q is not JSON: %v", l, err)
		}
		if ev["time"] == nil || ev["level"] == nil || ev["msg"] == nil {
			t.Errorf("log line %q lacks time, level or msg", l)
		}
	}
	t.Setenv("GRIDCITY_LOG_FORMAT", "xml")
	err = run(context.Background(), []string{"serve", "--data", t.TempDir()}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "GRIDCITY_LOG_FORMAT") || !strings.Contains(err.Error(), "text or json") {
		t.Fatalf("serve with GRIDCITY_LOG_FORMAT=xml: %v; want a refusal naming the variable and the formats", err)
	}
}
