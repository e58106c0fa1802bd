// Package stdiobridge is the coordinator's MCP endpoint for clients that
// only speak stdio (`gridcity mcp --stdio`). The bridge is an MCP server on
// stdin/stdout whose tools, resources and prompts are the coordinator's,
// each forwarded over Streamable HTTP with the token. Nothing but MCP
// messages reaches stdout; a coordinator that is down or goes away becomes
// an isError result (tools) or a JSON-RPC error (resources, prompts), and
// the next call connects again.
//
// Both eras of MCP are spoken on stdio: clients that initialize (2025-11-25,
// 2025-06-18, 2025-03-26) and stateless ones (2026-07-28: server/discover,
// the version and capabilities in each request's _meta). The session with
// the coordinator is the bridge's own, in whichever era the coordinator
// offers, so the two sides' protocol _meta never cross.
package stdiobridge

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const (
	// DefaultEndpoint is where `gridcity serve` listens unless told otherwise.
	DefaultEndpoint = "http://127.0.0.1:4600/mcp"
	// connectTimeout bounds one attempt to open a session with the coordinator.
	connectTimeout = 10 * time.Second
	// streamEndGrace: a call whose response stream ended without the
	// response is given up after this long. The coordinator keeps no event
	// store, so such a stream is never resumed and the call would wait for
	// ever.
	streamEndGrace = 3 * time.Second
	// statelessVersion is MCP's stateless revision: no initialize, no
	// session, per-request _meta.
	statelessVersion = "2026-07-28"
)

// Config says where the bridge connects. An empty Endpoint or Token is
// asked of FindEndpoint or FindToken on every connection attempt, so that
// a bridge started before `gridcity serve` finds it once it runs.
type Config struct {
	Endpoint string
	Token    string
	// Client is sent as X-Agent-Client: shown on approval cards and in the
	// audit log (default: the stdio client's clientInfo name, "NAME (stdio)", else "stdio").
	Client string
	// Version is the bridge's serverInfo.version.
	Version string
	// FindEndpoint returns the coordinator's endpoint when Endpoint is
	// empty (default: DefaultEndpoint).
	FindEndpoint func() string
	// FindToken returns a token, and where it came from for messages, when
	// Token is empty.
	FindToken func(ctx context.Context) (token, from string, err error)
	// DrainTimeout bounds the wait, once stdin has closed, for the answers
	// to requests still in flight (default DefaultDrainTimeout).
	DrainTimeout time.Duration

	// What the coordinator's own MCP server says of itself, so that the
	// bridge answers as it does before the coordinator is reached (main
	// takes them from mcpserver): its instructions, what it offers an
	// operate token (listed by name until the coordinator answers; calling
	// one says what is wrong), and the middleware that answers a handler's
	// panic with an error rather than a broken stream.
	Instructions string
	Offline      Listing
	Recover      mcp.Middleware
}

// Listing is what an MCP server offers.
type Listing struct {
	Tools             []*mcp.Tool
	Resources         []*mcp.Resource
	ResourceTemplates []*mcp.ResourceTemplate
	Prompts           []*mcp.Prompt
}

// target is one resolved connection: where, with what, and where the
// token came from (for messages).
type target struct {
	endpoint, token, tokenFrom string
}

// Bridge serves one stdio client.
type Bridge struct {
	cfg    Config
	logger *slog.Logger
	server *mcp.Server
	client *mcp.Client

	mu   sync.Mutex // one connection attempt at a time
	cs   *mcp.ClientSession
	at   target // of cs, or of the last attempt
	down bool   // the last attempt failed (and was logged)

	listMu sync.Mutex
	shown  map[string][]byte // what the stdio side offers: JSON by kind and name

	// stdio is the client's session, for forwarding progress notifications.
	stdio atomic.Pointer[mcp.ServerSession]
	// logLevel is the level the client set (logging/setLevel), passed on
	// to each session with the coordinator.
	logLevel atomic.Value
}

// New builds a bridge that offers, until the coordinator answers, what an
// operate token sees.
func New(ctx context.Context, cfg Config, logger *slog.Logger) (*Bridge, error) {
	if cfg.Endpoint != "" {
		ep, err := NormalizeEndpoint(cfg.Endpoint)
		if err != nil {
			return nil, err
		}
		cfg.Endpoint = ep
	}
	if cfg.DrainTimeout <= 0 {
		cfg.DrainTimeout = DefaultDrainTimeout
	}
	b := &Bridge{cfg: cfg, logger: logger, shown: map[string][]byte{}}
	// The SDK's own lines: warnings and errors only.
	sdkLog := slog.New(minLevel{logger.Handler(), slog.LevelWarn})
	b.server = mcp.NewServer(&mcp.Implementation{Name: "gridcity", Title: "gridcity fleet (stdio bridge)", Version: cfg.Version}, &mcp.ServerOptions{
		Instructions: cfg.Instructions,
		Logger:       sdkLog,
		Capabilities: &mcp.ServerCapabilities{
			Tools:     &mcp.ToolCapabilities{ListChanged: true},
			Resources: &mcp.ResourceCapabilities{ListChanged: true},
			Prompts:   &mcp.PromptCapabilities{ListChanged: true},
			// logging/setLevel is accepted (the SDK always does), so logging
			// is advertised, and the coordinator's messages passed on.
			Logging: &mcp.LoggingCapabilities{},
		},
		// Every version the SDK speaks, stateless 2026-07-28 (server/discover,
		// per-request _meta) and those with an initialize handshake, whatever
		// the coordinator speaks: the session with it is the bridge's own.
	})
	if cfg.Recover != nil {
		b.server.AddReceivingMiddleware(cfg.Recover) // a bug answers an error, never a broken stream
	}
	b.server.AddReceivingMiddleware(b.refreshLists, b.passSetLevel)
	resync := func(cs *mcp.ClientSession) {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
			defer cancel()
			if err := b.sync(ctx, cs); err != nil {
				b.logger.Warn("re-reading the coordinator's lists failed", "err", err)
			}
		}()
	}
	b.client = mcp.NewClient(&mcp.Implementation{Name: "gridcity-stdio-bridge", Version: cfg.Version}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(ctx context.Context, req *mcp.ProgressNotificationClientRequest) {
			// Progress tokens are the stdio client's own, passed through.
			if ss := b.stdio.Load(); ss != nil {
				ss.NotifyProgress(ctx, req.Params)
			}
		},
		ToolListChangedHandler:     func(_ context.Context, req *mcp.ToolListChangedRequest) { resync(req.Session) },
		ResourceListChangedHandler: func(_ context.Context, req *mcp.ResourceListChangedRequest) { resync(req.Session) },
		PromptListChangedHandler:   func(_ context.Context, req *mcp.PromptListChangedRequest) { resync(req.Session) },
		LoggingMessageHandler:      b.passLog,
		Logger:                     sdkLog,
	})
	// Until the coordinator answers, offer what an operate token sees: the
	// tools are listed by name, and calling one says what is wrong.
	b.apply(cfg.Offline)
	return b, nil
}

// Serve runs the MCP server on in and out until the client closes in.
func (b *Bridge) Serve(ctx context.Context, in io.Reader, out io.Writer) error {
	// Connect early, so that the first list is the coordinator's.
	go b.session(ctx)
	track := newInflight()
	stdin := &drainingReader{stop: ctx.Done(), in: bufio.NewReader(in), track: track, bound: b.cfg.DrainTimeout, logger: b.logger}
	stdout := &trackingWriter{out: out, track: track}
	err := b.server.Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(stdin), Writer: stdout})
	b.mu.Lock()
	cs := b.cs
	b.cs = nil
	b.mu.Unlock()
	if cs != nil {
		// Ending the session politely must not keep the process alive when
		// the coordinator does not answer.
		closed := make(chan struct{})
		go func() { cs.Close(); close(closed) }()
		select {
		case <-closed:
		case <-time.After(2 * time.Second):
		}
	}
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) || errors.Is(err, mcp.ErrConnectionClosed) {
		return nil
	}
	if stdout.failed.Load() {
		// The client stopped reading, as one that exits does (a stateless
		// client's subscriptions/listen, cancelled as it goes, is answered
		// to a closed pipe): with nobody to answer, the session is over.
		b.logger.Info("stdout closed: the client went away", "err", err)
		return nil
	}
	return err
}

// refreshLists connects before a list is answered (when not connected),
// which brings the lists in line with what the coordinator offers this
// token; while it is not answering, the last lists stay.
func (b *Bridge) refreshLists(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "tools/list", "resources/list", "resources/templates/list", "prompts/list":
			if ss, ok := req.GetSession().(*mcp.ServerSession); ok {
				b.stdio.Store(ss)
			}
			if _, _, err := b.session(ctx); err != nil {
				b.logger.Debug("answering "+method+" without the coordinator", "err", err)
			}
		}
		return next(ctx, method, req)
	}
}

// resolve finds the endpoint and token: the configured ones first, then
// what FindEndpoint and FindToken say.
func (b *Bridge) resolve(ctx context.Context) (target, error) {
	t := target{endpoint: b.cfg.Endpoint, token: b.cfg.Token, tokenFrom: "GRIDCITY_TOKEN"}
	if t.endpoint == "" {
		t.endpoint = DefaultEndpoint
		if b.cfg.FindEndpoint != nil {
			if ep := b.cfg.FindEndpoint(); ep != "" {
				t.endpoint = ep
			}
		}
	}
	if t.token == "" {
		if b.cfg.FindToken == nil {
			return t, errors.New("no MCP token: set GRIDCITY_TOKEN (and GRIDCITY_URL) to what `gridcity mcp` prints on the coordinator's host")
		}
		tok, from, err := b.cfg.FindToken(ctx)
		if err != nil {
			return t, err
		}
		t.token, t.tokenFrom = tok, from
	}
	return t, nil
}

// session returns the session with the coordinator, opening one (and
// syncing the lists) when there is none.
func (b *Bridge) session(ctx context.Context) (*mcp.ClientSession, target, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cs != nil {
		return b.cs, b.at, nil
	}
	t, err := b.resolve(ctx)
	if err != nil {
		b.failed("cannot connect to the coordinator", err)
		return nil, t, &bridgeError{err.Error()}
	}
	b.at = t
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	hc := &http.Client{Transport: &bridgeTransport{base: http.DefaultTransport, token: t.token, client: b.clientName}}
	cs, err := b.client.Connect(cctx, &mcp.StreamableClientTransport{Endpoint: t.endpoint, HTTPClient: hc}, nil)
	if err != nil {
		e := connectError(t, err, cctx.Err() != nil && ctx.Err() == nil)
		b.failed("cannot reach the coordinator", e)
		return nil, t, e
	}
	b.cs, b.down = cs, false
	go func() {
		// A session that ends (the coordinator went away and did not come
		// back, or ended it) is dropped; the next call opens a new one.
		cs.Wait()
		if b.drop(cs) {
			b.logger.Warn("the session with the coordinator ended; the next call reconnects", "endpoint", t.endpoint)
		}
	}()
	if err := b.sync(cctx, cs); err != nil {
		b.logger.Warn("reading the coordinator's lists failed", "err", err)
	}
	b.passLevel(cctx, cs)
	b.logger.Info("connected to the coordinator", "endpoint", t.endpoint, "token", t.tokenFrom, "client", b.clientName(),
		"protocol", cs.InitializeResult().ProtocolVersion)
	return cs, t, nil
}

// failed logs a failed connection attempt: as a warning the first time,
// then quietly until a connection succeeds. Called with b.mu held.
func (b *Bridge) failed(msg string, err error) {
	level := slog.LevelWarn
	if b.down {
		level = slog.LevelDebug
	}
	b.down = true
	b.logger.Log(context.Background(), level, msg+"; every call will say so, and try again", "err", err)
}

// drop forgets cs if it is the current session, and closes it.
func (b *Bridge) drop(cs *mcp.ClientSession) bool {
	b.mu.Lock()
	current := b.cs == cs
	if current {
		b.cs = nil
	}
	b.mu.Unlock()
	go cs.Close()
	return current
}

// sync reads the coordinator's lists and offers the same on stdio.
func (b *Bridge) sync(ctx context.Context, cs *mcp.ClientSession) error {
	var l Listing
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return err
		}
		l.Tools = append(l.Tools, t)
	}
	caps := cs.InitializeResult().Capabilities
	if caps != nil && caps.Resources != nil {
		for r, err := range cs.Resources(ctx, nil) {
			if err != nil {
				return err
			}
			l.Resources = append(l.Resources, r)
		}
		for r, err := range cs.ResourceTemplates(ctx, nil) {
			if err != nil {
				return err
			}
			l.ResourceTemplates = append(l.ResourceTemplates, r)
		}
	}
	if caps != nil && caps.Prompts != nil {
		for p, err := range cs.Prompts(ctx, nil) {
			if err != nil {
				return err
			}
			l.Prompts = append(l.Prompts, p)
		}
	}
	b.apply(l)
	return nil
}

// apply makes the stdio side offer exactly l, changing only what differs
// (each change sends the client a list_changed notification).
func (b *Bridge) apply(l Listing) {
	b.listMu.Lock()
	defer b.listMu.Unlock()
	want := map[string]func(){}
	add := func(key string, item any, register func()) {
		j, _ := json.Marshal(item)
		if bytes.Equal(b.shown[key], j) {
			want[key] = nil
			return
		}
		want[key] = func() {
			// A malformed item from the coordinator must not take the bridge down.
			defer func() {
				if r := recover(); r != nil {
					b.logger.Warn("cannot offer "+key, "err", r)
					delete(b.shown, key)
				}
			}()
			register()
			b.shown[key] = j
		}
	}
	for _, t := range l.Tools {
		add("tool "+t.Name, t, func() { b.server.AddTool(t, b.callTool) })
	}
	for _, r := range l.Resources {
		add("resource "+r.URI, r, func() { b.server.AddResource(r, b.readResource) })
	}
	for _, r := range l.ResourceTemplates {
		add("template "+r.URITemplate, r, func() { b.server.AddResourceTemplate(r, b.readResource) })
	}
	for _, p := range l.Prompts {
		add("prompt "+p.Name, p, func() { b.server.AddPrompt(p, b.getPrompt) })
	}
	for key := range b.shown {
		if _, ok := want[key]; ok {
			continue
		}
		kind, name, _ := strings.Cut(key, " ")
		switch kind {
		case "tool":
			b.server.RemoveTools(name)
		case "resource":
			b.server.RemoveResources(name)
		case "template":
			b.server.RemoveResourceTemplates(name)
		case "prompt":
			b.server.RemovePrompts(name)
		}
		delete(b.shown, key)
	}
	for _, register := range want {
		if register != nil {
			register()
		}
	}
}

func (b *Bridge) callTool(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	b.stdio.Store(req.Session)
	p := &mcp.CallToolParams{Meta: passMeta(req.Params.Meta), Name: req.Params.Name}
	if len(req.Params.Arguments) > 0 {
		p.Arguments = req.Params.Arguments
	}
	var res *mcp.CallToolResult
	err := b.forward(ctx, p.Name, func(ctx context.Context, cs *mcp.ClientSession) (err error) {
		res, err = cs.CallTool(ctx, p)
		return err
	})
	if be := (*bridgeError)(nil); errors.As(err, &be) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: be.msg}}}, nil
	}
	if err != nil {
		return nil, err
	}
	// A result of the bridge's own, so that the SDK marks it for the
	// client's era: the coordinator's result type and reserved _meta keys
	// (its serverInfo) describe the bridge's session, not the client's.
	return &mcp.CallToolResult{Meta: passMeta(res.Meta), Content: res.Content, StructuredContent: res.StructuredContent, IsError: res.IsError}, nil
}

func (b *Bridge) readResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	var res *mcp.ReadResourceResult
	err := b.forward(ctx, "reading "+req.Params.URI, func(ctx context.Context, cs *mcp.ClientSession) (err error) {
		res, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{Meta: passMeta(req.Params.Meta), URI: req.Params.URI})
		return err
	})
	if err != nil {
		return nil, rpcError(err)
	}
	return &mcp.ReadResourceResult{Meta: passMeta(res.Meta), Cacheable: res.Cacheable, Contents: res.Contents}, nil // as callTool
}

func (b *Bridge) getPrompt(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	var res *mcp.GetPromptResult
	err := b.forward(ctx, "prompt "+req.Params.Name, func(ctx context.Context, cs *mcp.ClientSession) (err error) {
		res, err = cs.GetPrompt(ctx, &mcp.GetPromptParams{Meta: passMeta(req.Params.Meta), Name: req.Params.Name, Arguments: req.Params.Arguments})
		return err
	})
	if err != nil {
		return nil, rpcError(err)
	}
	return &mcp.GetPromptResult{Meta: passMeta(res.Meta), Description: res.Description, Messages: res.Messages}, nil // as callTool
}

// passMeta is the _meta to pass on: the client's own keys (its progress
// token above all), without the protocol's reserved ones
// (io.modelcontextprotocol/…: version, capabilities, identity), which
// describe one side's session and not the other's. The same holds for the
// coordinator's answers on their way back.
func passMeta(m mcp.Meta) mcp.Meta {
	var out mcp.Meta
	for k, v := range m {
		if strings.HasPrefix(k, "io.modelcontextprotocol/") {
			continue
		}
		if out == nil {
			out = mcp.Meta{}
		}
		out[k] = v
	}
	return out
}

// rpcError turns the bridge's own failures into JSON-RPC errors, for the
// methods that have no isError result.
func rpcError(err error) error {
	if be := (*bridgeError)(nil); errors.As(err, &be) {
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: be.msg}
	}
	return err
}

// bridgeError is a failure of the bridge or of its link to the
// coordinator, with a message that says what to do.
type bridgeError struct{ msg string }

func (e *bridgeError) Error() string { return e.msg }

// forward runs f on the session with the coordinator, connecting first
// when there is none. The coordinator's own answers, errors included, pass
// through unchanged. A request that cannot have reached it (no connection,
// or a session it no longer knows because it restarted, and no POST of it
// answered otherwise) is sent once more on a new session; one that may
// have reached it is not, so that run_command is never asked twice behind
// the model's back.
func (b *Bridge) forward(ctx context.Context, what string, f func(context.Context, *mcp.ClientSession) error) error {
	for attempt := 1; ; attempt++ {
		cs, t, err := b.session(ctx)
		if err != nil {
			return err
		}
		w := &callWatch{}
		cctx, cancel := context.WithCancelCause(ctx)
		w.cancel = cancel
		err = f(context.WithValue(cctx, callWatchKey{}, w), cs)
		cause := context.Cause(cctx)
		w.stop()
		cancel(nil)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err() // the client cancelled
		}
		var se *statusError
		if errors.As(err, &se) {
			return statusMessage(t, se)
		}
		if rpc := (*jsonrpc.Error)(nil); errors.As(err, &rpc) && !transportCode(rpc.Code) &&
			!errors.Is(err, mcp.ErrSessionMissing) && !errors.Is(err, mcp.ErrConnectionClosed) {
			return rpc // the coordinator's answer
		}
		b.drop(cs)
		if attempt == 1 && !w.mayHaveArrived() && notDelivered(err) {
			b.logger.Info("the request did not reach the coordinator; sending it again on a new session", "call", what, "err", err)
			continue
		}
		if !errors.Is(cause, context.Canceled) && cause != nil {
			err = cause
		}
		b.logger.Warn("lost the coordinator during a call", "call", what, "endpoint", t.endpoint, "err", err)
		msg := fmt.Sprintf("the coordinator at %s stopped answering during %s: is `gridcity serve` running? (%s; the next call reconnects)", t.endpoint, what, short(err))
		if what == "run_command" {
			msg += " The request may have reached it: ask the user to look at the gridcity app before asking again."
		}
		return &bridgeError{msg}
	}
}

// transportCode reports whether a JSON-RPC error code is one the SDK uses
// for its own connection failures (client or server closing, rejected by
// the transport) rather than one the coordinator answered with.
func transportCode(code int64) bool { return code >= -32005 && code <= -32003 }

// notDelivered reports whether err is one of the failures that can happen
// before a request reaches the coordinator: a session it no longer knows,
// a session already closed, no connection. Whether this request's POST
// was answered is asked of its callWatch too.
func notDelivered(err error) bool {
	return errors.Is(err, mcp.ErrSessionMissing) || errors.Is(err, mcp.ErrConnectionClosed) || isDial(err)
}

func isDial(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// connectError says why a session could not be opened, and what to do.
func connectError(t target, err error, timedOut bool) *bridgeError {
	var se *statusError
	switch {
	case errors.As(err, &se):
		return statusMessage(t, se)
	case timedOut:
		return &bridgeError{fmt.Sprintf("the coordinator at %s is not answering: is `gridcity serve` running? (no answer within %s; the next call tries again)", t.endpoint, connectTimeout)}
	}
	return &bridgeError{fmt.Sprintf("the coordinator at %s is not answering: is `gridcity serve` running? (%s; the next call tries again)", t.endpoint, short(err))}
}

func statusMessage(t target, se *statusError) *bridgeError {
	switch se.code {
	case http.StatusUnauthorized:
		return &bridgeError{fmt.Sprintf("the coordinator at %s refused the token from %s (%s): set GRIDCITY_TOKEN to a token that `gridcity mcp` or `gridcity token create NAME` prints", t.endpoint, t.tokenFrom, se.text)}
	case http.StatusTooManyRequests:
		return &bridgeError{fmt.Sprintf("the coordinator at %s is rate limiting this token (%s): wait a moment, then retry", t.endpoint, se.text)}
	case http.StatusNotFound:
		return &bridgeError{fmt.Sprintf("%s answered 404: no MCP endpoint there; set GRIDCITY_URL to the endpoint `gridcity mcp` prints", t.endpoint)}
	}
	return &bridgeError{fmt.Sprintf("the coordinator at %s refused the request: HTTP %d: %s", t.endpoint, se.code, se.text)}
}

// short keeps the part of a transport error a person can act on.
func short(err error) string {
	var op *net.OpError
	var ue *url.Error
	switch {
	case errors.Is(err, errStreamBroke):
		return errStreamBroke.Error()
	case errors.Is(err, errStreamEnded):
		return errStreamEnded.Error()
	case errors.As(err, &op):
		return op.Error()
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "the connection closed"
	case errors.As(err, &ue):
		return ue.Err.Error()
	}
	return err.Error()
}

// NormalizeEndpoint accepts the coordinator's address with or without /mcp.
func NormalizeEndpoint(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("GRIDCITY_URL (--url) %q is not an http(s) URL: use the endpoint `gridcity mcp` prints, e.g. %s", s, DefaultEndpoint)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/mcp"
	}
	return u.String(), nil
}

// statusError is a refusal by the coordinator's guard (401, 403, 413,
// 429), with the reason it gave.
type statusError struct {
	code int
	text string
}

func (e *statusError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.code, e.text) }

// bridgeTransport adds the token and client name to every request, turns
// the guard's refusals into errors that carry its reason, and watches the
// response streams of calls.
type bridgeTransport struct {
	base   http.RoundTripper
	token  string
	client func() string
}

// clientName is the name approval cards show for this client: --client
// when given, else the name the stdio client gave itself (its clientInfo),
// marked as coming through the bridge, else "stdio".
func (b *Bridge) clientName() string {
	if b.cfg.Client != "" {
		return b.cfg.Client
	}
	if ss := b.stdio.Load(); ss != nil {
		if p := ss.InitializeParams(); p != nil && p.ClientInfo != nil {
			if name := headerSafe(p.ClientInfo.Name, 48); name != "" {
				return name + " (stdio)"
			}
		}
	}
	return "stdio"
}

// headerSafe is s with only printable characters, at most n of them: a
// client's own name, fit for a header.
func headerSafe(s string, n int) string {
	s = strings.TrimSpace(strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return -1
	}, s))
	if r := []rune(s); len(r) > n {
		s = string(r[:n])
	}
	return s
}

func (t *bridgeTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+t.token)
	r.Header.Set("X-Agent-Client", t.client())
	w, _ := r.Context().Value(callWatchKey{}).(*callWatch)
	if w != nil {
		w.resumed() // a stream resumed: its response may still come
	}
	resp, err := t.base.RoundTrip(r)
	if w != nil && r.Method == http.MethodPost {
		w.posted(resp, err)
	}
	if err != nil {
		return nil, err
	}
	switch {
	case resp.StatusCode == http.StatusUnauthorized, resp.StatusCode == http.StatusForbidden,
		resp.StatusCode == http.StatusRequestEntityTooLarge, resp.StatusCode == http.StatusTooManyRequests,
		// Without a session, a 404 means no MCP endpoint at that URL.
		resp.StatusCode == http.StatusNotFound && r.Header.Get("Mcp-Session-Id") == "":
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		resp.Body.Close()
		return nil, &statusError{code: resp.StatusCode, text: strings.TrimSpace(string(body))}
	}
	if w != nil && resp.StatusCode == http.StatusOK {
		resp.Body = &watchedBody{ReadCloser: resp.Body, w: w}
	}
	return resp, nil
}

// callWatch follows the HTTP requests of one forwarded call. It ends the
// call when its response stream breaks (the SDK would wait for a response
// that can no longer come), and it knows whether the call may have reached
// the coordinator's handler, which decides whether it may be sent again.
type callWatch struct {
	cancel  context.CancelCauseFunc
	mu      sync.Mutex
	timer   *time.Timer
	arrived bool
}

// posted notes the outcome of one of the call's POSTs: only a refused dial
// and a 404 for an unknown session (or the guard's refusals) prove that no
// handler saw it.
func (w *callWatch) posted(resp *http.Response, err error) {
	maybe := false
	switch {
	case err != nil:
		maybe = !isDial(err)
	case resp.StatusCode == http.StatusNotFound, resp.StatusCode == http.StatusUnauthorized, resp.StatusCode == http.StatusForbidden,
		resp.StatusCode == http.StatusRequestEntityTooLarge, resp.StatusCode == http.StatusTooManyRequests:
	default:
		maybe = true
	}
	w.mu.Lock()
	w.arrived = w.arrived || maybe
	w.mu.Unlock()
}

func (w *callWatch) mayHaveArrived() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.arrived
}

type callWatchKey struct{}

var (
	errStreamBroke = errors.New("its response stream broke")
	errStreamEnded = errors.New("its response stream ended without the response")
)

func (w *callWatch) broken(err error) { w.cancel(fmt.Errorf("%w: %w", errStreamBroke, err)) }

func (w *callWatch) ended() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timer == nil {
		w.timer = time.AfterFunc(streamEndGrace, func() { w.cancel(errStreamEnded) })
	}
}

func (w *callWatch) resumed() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
}

func (w *callWatch) stop() { w.resumed() }

type watchedBody struct {
	io.ReadCloser
	w *callWatch
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	switch {
	case err == io.EOF:
		b.w.ended()
	case err != nil && !errors.Is(err, context.Canceled):
		b.w.broken(err)
	}
	return n, err
}

// minLevel passes on records at min or above.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (m minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= m.min && m.Handler.Enabled(ctx, l)
}

func (m minLevel) WithAttrs(a []slog.Attr) slog.Handler {
	return minLevel{m.Handler.WithAttrs(a), m.min}
}

func (m minLevel) WithGroup(g string) slog.Handler { return minLevel{m.Handler.WithGroup(g), m.min} }
