package mcpserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// /mcp speaks two eras of MCP on one endpoint, as the 2026-07-28
// revision's versioning page lets a dual-era server do:
//
//   - modern (2026-07-28): every request stands alone. It names its
//     protocol version in the MCP-Protocol-Version header and in its
//     _meta, with the client's capabilities (and, optionally, its
//     clientInfo); there is no initialize, no Mcp-Session-Id and no GET
//     stream, and server/discover says what the server speaks. Any
//     coordinator can answer any such request.
//   - legacy (2025-11-25, 2025-06-18, 2025-03-26): the client sends
//     initialize, gets an Mcp-Session-Id and sends it with every later
//     request of the session.
//
// go-sdk v1.8.0 serves each era with its own StreamableHTTPHandler (one
// stateless, one stateful) but not both from one: a stateful handler
// refuses modern requests ("this server is stateful") and its
// server/discover leaves 2026-07-28 out, while a stateless one never
// opens a session. So eraRouter picks the handler per request. It also
// answers, as JSON-RPC errors, the protocol faults the SDK answers as
// plain text: a body that is not JSON, a legacy request that needs a
// session and has none, and a call the SDK refuses inside a session
// (an unknown method above all).

// modernVersion is the first revision without sessions (SEP-2575).
const modernVersion = "2026-07-28"

const (
	protocolVersionHeader = "Mcp-Protocol-Version"
	sessionIDHeader       = "Mcp-Session-Id"
)

// sdkServerMethods are the requests go-sdk v1.8.0's server answers (its
// serverMethodInfos), so that a call of any other method is known to be
// unknown. A method missing here is still served: the SDK is asked first
// and only its refusal is rewritten (see legacyCall); a test sends each
// one in a session to keep the list honest.
var sdkServerMethods = []string{
	"initialize", "ping", "server/discover",
	"tools/list", "tools/call",
	"resources/list", "resources/templates/list", "resources/read", "resources/subscribe", "resources/unsubscribe",
	"prompts/list", "prompts/get",
	"completion/complete", "logging/setLevel", "subscriptions/listen",
}

// eraRouter sends each request to the handler of its era.
type eraRouter struct {
	legacy, modern http.Handler
}

// newEraRouter builds both handlers over the same servers: getServer picks
// the server of the caller's token scope for a request or a new session.
func newEraRouter(getServer func(*http.Request) *mcp.Server, opts mcp.StreamableHTTPOptions) eraRouter {
	legacy := opts
	modern := opts
	modern.Stateless = true
	// A modern request's POST is its whole life: when the client hangs
	// up, the call is cancelled (the spec's cancellation for this era).
	modern.PropagateRequestCancellation = true
	return eraRouter{
		legacy: mcp.NewStreamableHTTPHandler(getServer, &legacy),
		modern: mcp.NewStreamableHTTPHandler(getServer, &modern),
	}
}

func (e eraRouter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		if r.Header.Get(sessionIDHeader) != "" {
			e.legacy.ServeHTTP(w, r) // a session's GET stream or its DELETE
			return
		}
		// Without a session, GET and DELETE belong to no era: the modern
		// handler answers 405 with Allow: POST, as the 2026-07-28 revision
		// says and as 2025-11-25 allows for a server without a GET stream.
		e.modern.ServeHTTP(w, r)
		return
	}
	msg, err := peek(r)
	if err != nil {
		writeRPCError(w, http.StatusBadRequest, nil, jsonrpc.CodeParseError,
			"the body is not a JSON-RPC message: "+err.Error()+"; send one JSON-RPC 2.0 request per POST")
		return
	}
	switch {
	case msg.modern(r):
		e.modern.ServeHTTP(w, r)
	case r.Header.Get(sessionIDHeader) != "":
		if msg.call() && !msg.batch {
			e.legacyCall(w, r, msg)
			return
		}
		e.legacy.ServeHTTP(w, r)
	case msg.initialize:
		e.legacy.ServeHTTP(w, r)
	default:
		// The 2025 revisions: "Servers that require a session ID SHOULD
		// respond to requests without an Mcp-Session-Id header (other than
		// initialization) with HTTP 400 Bad Request."
		writeRPCError(w, http.StatusBadRequest, msg.id, jsonrpc.CodeInvalidRequest, fmt.Sprintf(
			"%s needs a session and this request has no %s header: a %s client starts with initialize and sends the session id it gets back with every later request; "+
				"a %s client sends %s: %s and the _meta fields %q and %q instead, with no session",
			msg.describe(), sessionIDHeader, "2025-11-25, 2025-06-18 or 2025-03-26", modernVersion, protocolVersionHeader, modernVersion,
			mcp.MetaKeyProtocolVersion, mcp.MetaKeyClientCapabilities))
	}
}

// legacyCall serves one call in a legacy session. The SDK refuses a call
// it cannot take (an unknown method, missing params) with a plain-text
// 400, which clients report as a broken transport rather than as the
// call's error; that refusal becomes the call's JSON-RPC error, answered
// 200 like any other error of a live session. (A 404 would tell the
// client that its session is gone.) Everything else passes untouched.
func (e eraRouter) legacyCall(w http.ResponseWriter, r *http.Request, msg rpcPeek) {
	hw := &heldRefusal{ResponseWriter: w}
	e.legacy.ServeHTTP(hw, r)
	if !hw.held {
		return
	}
	h := w.Header()
	h.Del("X-Content-Type-Options")
	code, text := int64(jsonrpc.CodeInvalidRequest), strings.TrimSpace(hw.body.String())
	if !knownMethod(msg.method) {
		code = jsonrpc.CodeMethodNotFound
		text = fmt.Sprintf("method %q is not an MCP method this server answers; it answers %s", msg.method, strings.Join(sdkServerMethods, ", "))
	}
	writeRPCError(w, http.StatusOK, msg.id, code, text)
}

func knownMethod(m string) bool {
	for _, k := range sdkServerMethods {
		if k == m {
			return true
		}
	}
	return false
}

// heldRefusal passes a response through unless it is a plain-text 400
// (http.Error's), whose body it holds back for legacyCall to replace.
type heldRefusal struct {
	http.ResponseWriter
	held  bool
	wrote bool
	body  bytes.Buffer
}

func (h *heldRefusal) WriteHeader(code int) {
	if !h.wrote && code == http.StatusBadRequest && strings.HasPrefix(h.Header().Get("Content-Type"), "text/plain") {
		h.held, h.wrote = true, true
		return
	}
	h.wrote = true
	h.ResponseWriter.WriteHeader(code)
}

func (h *heldRefusal) Write(b []byte) (int, error) {
	if !h.wrote {
		h.WriteHeader(http.StatusOK)
	}
	if h.held {
		return h.body.Write(b)
	}
	return h.ResponseWriter.Write(b)
}

// Flush keeps a session's event stream flowing through the wrapper.
func (h *heldRefusal) Flush() {
	if !h.held {
		if f, ok := h.ResponseWriter.(http.Flusher); ok {
			f.Flush()
		}
	}
}

// Unwrap lets http.ResponseController reach the real writer.
func (h *heldRefusal) Unwrap() http.ResponseWriter { return h.ResponseWriter }

// writeRPCError answers a JSON-RPC error response in a JSON body; id is
// the request's id as sent (nil: null, for a message whose id is unknown).
func writeRPCError(w http.ResponseWriter, status int, id json.RawMessage, code int64, message string) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	body, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   jsonrpc.Error   `json:"error"`
	}{"2.0", id, jsonrpc.Error{Code: code, Message: message}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(body, '\n'))
}

// rpcPeek is what routing needs from a POST's JSON-RPC message (the first
// of a 2025-03-26 batch).
type rpcPeek struct {
	id         json.RawMessage
	method     string
	meta       string // _meta's protocol version, if any
	batch      bool
	initialize bool // initialize is in the message or the batch
}

// peek reads the body (the guard has already bounded it and holds it in
// memory) and puts it back for the SDK.
func peek(r *http.Request) (rpcPeek, error) {
	var p rpcPeek
	if r.Body == nil {
		return p, fmt.Errorf("the body is empty")
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return p, err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	type message struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	var msgs []message
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	switch {
	case len(trimmed) == 0:
		return p, fmt.Errorf("the body is empty")
	case trimmed[0] == '[':
		if err := json.Unmarshal(body, &msgs); err != nil {
			return p, err
		}
		if len(msgs) == 0 {
			return p, fmt.Errorf("the batch is empty")
		}
		p.batch = true
	default:
		var m message
		if err := json.Unmarshal(body, &m); err != nil {
			return p, err
		}
		msgs = []message{m}
	}
	p.id, p.method = msgs[0].ID, msgs[0].Method
	for _, m := range msgs {
		p.initialize = p.initialize || m.Method == "initialize"
	}
	var params struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(msgs[0].Params, &params) == nil {
		json.Unmarshal(params.Meta[mcp.MetaKeyProtocolVersion], &p.meta)
	}
	return p, nil
}

// modern reports whether the request is of the stateless era: it says so
// in its header or its _meta, or it asks server/discover, which only that
// era has (and whose answer names every version served here).
func (p rpcPeek) modern(r *http.Request) bool {
	return r.Header.Get(protocolVersionHeader) >= modernVersion || p.meta >= modernVersion || p.method == "server/discover"
}

// call reports whether the message is a request that expects an answer.
func (p rpcPeek) call() bool {
	return p.method != "" && len(p.id) > 0 && string(p.id) != "null"
}

func (p rpcPeek) describe() string {
	switch {
	case p.method == "":
		return "a JSON-RPC response"
	case p.call():
		return fmt.Sprintf("the request %q", p.method)
	default:
		return fmt.Sprintf("the notification %q", p.method)
	}
}
