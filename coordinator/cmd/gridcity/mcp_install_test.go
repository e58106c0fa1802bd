package main

import "testing"

func TestMCPEndpoint(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:4600": "http://127.0.0.1:4600/mcp",
		"0.0.0.0:4600":   "http://127.0.0.1:4600/mcp",
		"[::]:4600":      "http://127.0.0.1:4600/mcp",
		":4600":          "http://127.0.0.1:4600/mcp",
		"[::1]:4600":     "http://[::1]:4600/mcp",
		"10.0.0.5:4600":  "http://10.0.0.5:4600/mcp",
	} {
		if got := mcpEndpoint(runtimeInfo{HTTP: addr}); got != want {
			t.Errorf("mcpEndpoint(%s) = %s; want %s", addr, got, want)
		}
	}
	if got := mcpEndpoint(runtimeInfo{HTTP: "127.0.0.1:4600", TLS: true}); got != "https://127.0.0.1:4600/mcp" {
		t.Errorf("with TLS: %s", got)
	}
}
