package stdiobridge

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

// A stateless (2026-07-28) client over stdio: no initialize; each request
// carries its version and capabilities in _meta, and server/discover says
// what the bridge offers.
func TestStdioBridgeStatelessClient(t *testing.T) {
	t.Parallel()
	forEachCoordinator(t, 300*time.Millisecond, func(t *testing.T, c *testCoordinator) {
		c.start()
		r := startRaw(t, Config{Endpoint: c.endpoint(), Token: operateToken, Client: "stdio-test"})
		const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`

		r.send(t, `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{%s}}`, meta)
		a := r.answer(t, 1)
		var disc struct {
			SupportedVersions []string                   `json:"supportedVersions"`
			Capabilities      map[string]json.RawMessage `json:"capabilities"`
			Instructions      string                     `json:"instructions"`
			Meta              map[string]json.RawMessage `json:"_meta"`
		}
		if a.Error != nil || json.Unmarshal(a.Result, &disc) != nil {
			t.Fatalf("server/discover: %+v %s", a.Error, a.Result)
		}
		for _, v := range []string{"2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"} {
			if !slices.Contains(disc.SupportedVersions, v) {
				t.Errorf("server/discover supports %v; want %s among them", disc.SupportedVersions, v)
			}
		}
		for _, capability := range []string{"tools", "resources", "prompts", "logging"} {
			if _, ok := disc.Capabilities[capability]; !ok {
				t.Errorf("server/discover capabilities %s lack %s", a.Result, capability)
			}
		}
		if !strings.Contains(string(disc.Meta["io.modelcontextprotocol/serverInfo"]), "stdio bridge") || disc.Instructions == "" {
			t.Errorf("server/discover: %s; want the bridge's serverInfo and instructions", a.Result)
		}

		r.send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{%s}}`, meta)
		a = r.answer(t, 2)
		var list struct{ Tools []struct{ Name string } }
		if a.Error != nil || json.Unmarshal(a.Result, &list) != nil || len(list.Tools) < 8 {
			t.Fatalf("tools/list: %+v %.300s", a.Error, a.Result)
		}

		r.send(t, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{%s,"name":"list_servers","arguments":{}}}`, meta)
		a = r.answer(t, 3)
		var call struct {
			IsError           bool   `json:"isError"`
			ResultType        string `json:"resultType"`
			StructuredContent struct{ Rows []struct{ Name string } }
			Meta              map[string]json.RawMessage `json:"_meta"`
		}
		if a.Error != nil || json.Unmarshal(a.Result, &call) != nil || call.IsError || len(call.StructuredContent.Rows) != 1 || call.StructuredContent.Rows[0].Name != "web-1" {
			t.Fatalf("tools/call list_servers: %+v %.300s\nlog:\n%s", a.Error, a.Result, r.log.String())
		}
		if call.ResultType != "complete" || !strings.Contains(string(call.Meta["io.modelcontextprotocol/serverInfo"]), "stdio bridge") {
			t.Errorf("tools/call: resultType %q, _meta %s; want complete, and the bridge as the server", call.ResultType, call.Meta)
		}

		// Logging is per request in this revision: logging/setLevel is gone.
		r.send(t, `{"jsonrpc":"2.0","id":4,"method":"logging/setLevel","params":{%s,"level":"info"}}`, meta)
		if a = r.answer(t, 4); a.Error == nil || a.Error.Code != -32601 {
			t.Errorf("logging/setLevel in the stateless revision: %+v; want -32601", a.Error)
		}

		// A stream of list changes lasts until the client goes: closing
		// stdin ends the bridge without waiting for it.
		r.send(t, `{"jsonrpc":"2.0","id":5,"method":"subscriptions/listen","params":{%s,"notifications":{"toolsListChanged":true}}}`, meta)
		r.stdin.Close()
		r.rest(t, 10*time.Second) // DefaultDrainTimeout is 50 s
		if err := <-r.served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
}

// A legacy client's answers carry nothing of the stateless revision, even
// when the coordinator behind the bridge speaks it.
func TestStdioBridgeLegacyClientGetsLegacyAnswers(t *testing.T) {
	t.Parallel()
	c := newTestCoordinator(t, 300*time.Millisecond)
	c.stateless = true
	c.start()
	r := startRaw(t, Config{Endpoint: c.endpoint(), Token: operateToken})
	r.initialize(t, "2025-06-18")
	r.send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"list_servers","arguments":{}}}`)
	a := r.answer(t, 2)
	if a.Error != nil || strings.Contains(string(a.Result), "resultType") || strings.Contains(string(a.Result), "io.modelcontextprotocol/") {
		t.Errorf("tools/call for a 2025-06-18 client: %+v %.300s; want a result without resultType or the protocol's _meta keys", a.Error, a.Result)
	}
	r.send(t, `{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"gridcity://servers/web-1"}}`)
	if a = r.answer(t, 3); a.Error != nil || strings.Contains(string(a.Result), "resultType") || strings.Contains(string(a.Result), "io.modelcontextprotocol/") {
		t.Errorf("resources/read for a 2025-06-18 client: %+v %.300s", a.Error, a.Result)
	}
}
