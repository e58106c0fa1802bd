package stdiobridge

// The bridge advertises logging, as the coordinator does, and makes it
// real: a client's logging/setLevel is kept and passed on to every session
// with the coordinator, and the coordinator's log messages reach the
// client (the SDK drops those below the client's level).

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// passSetLevel keeps the level a client sets and passes it on.
func (b *Bridge) passSetLevel(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if method != "logging/setLevel" || err != nil {
			return res, err
		}
		if ss, ok := req.GetSession().(*mcp.ServerSession); ok {
			b.stdio.Store(ss)
		}
		if p, ok := req.GetParams().(*mcp.SetLoggingLevelParams); ok && p != nil {
			b.logLevel.Store(p.Level)
			b.mu.Lock()
			cs := b.cs
			b.mu.Unlock()
			if cs != nil {
				b.passLevel(ctx, cs)
			}
		}
		return res, nil
	}
}

// passLevel sets the client's level on a session with the coordinator,
// when the client set one and the coordinator offers logging in a
// session (the stateless revision has no logging/setLevel).
func (b *Bridge) passLevel(ctx context.Context, cs *mcp.ClientSession) {
	level, _ := b.logLevel.Load().(mcp.LoggingLevel)
	ir := cs.InitializeResult()
	if level == "" || ir == nil || ir.Capabilities == nil || ir.Capabilities.Logging == nil || ir.ProtocolVersion >= statelessVersion {
		return
	}
	if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: level}); err != nil {
		b.logger.Debug("passing the client's log level to the coordinator failed", "level", level, "err", err)
	}
}

// passLog hands a log message of the coordinator's to the client.
func (b *Bridge) passLog(ctx context.Context, req *mcp.LoggingMessageRequest) {
	if ss := b.stdio.Load(); ss != nil {
		ss.Log(ctx, req.Params)
	}
}
