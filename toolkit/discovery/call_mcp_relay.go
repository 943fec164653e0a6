//nolint:staticcheck // MCP's logging and sampling are deprecated in 2026-07-28 and still served: relaying them is the point here.
package discovery

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// modernProtocol is the first MCP protocol version of the stateless era,
// whose requests carry the log level in _meta and whose servers ask for
// input with input_required results.
const modernProtocol = "2026-07-28"

// progressToken is the token of every call an MCPCaller makes: each call
// has a session (or a connection) of its own, so one token is enough to
// tell the call's progress from anything else.
const progressToken = "toolplane-call"

// clientOptions are the SDK client's options for one call: handlers only
// for what the caller asked to receive, so that the client declares no
// capability it cannot serve.
func (m *MCPCaller) clientOptions() *mcp.ClientOptions {
	o := &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}}
	if m.KeepInputRequests {
		o.MultiRoundTrip = &mcp.MultiRoundTripOptions{Disabled: true}
	}
	if m.Progress != nil {
		o.ProgressNotificationHandler = func(ctx context.Context, r *mcp.ProgressNotificationClientRequest) {
			if r.Params != nil && r.Params.ProgressToken == progressToken {
				m.Progress(ctx, r.Params)
			}
		}
	}
	if m.Log != nil && m.LogLevel != "" {
		o.LoggingMessageHandler = func(ctx context.Context, r *mcp.LoggingMessageRequest) {
			if r.Params != nil {
				m.Log(ctx, r.Params)
			}
		}
	}
	if m.Elicit != nil {
		o.ElicitationHandler = func(ctx context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			if r.Params == nil {
				return nil, fmt.Errorf("discovery: an elicitation without params")
			}
			return m.Elicit(ctx, r.Params)
		}
	}
	if m.Sample != nil {
		o.CreateMessageHandler = func(ctx context.Context, r *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			if r.Params == nil {
				return nil, fmt.Errorf("discovery: a sampling request without params")
			}
			return m.Sample(ctx, r.Params)
		}
	}
	return o
}

// prepare asks the connected server cs for what the caller wants to
// receive during the call of p: a progress token in p's _meta, and the log
// level, in _meta for a 2026-07-28 server and with logging/setLevel for a
// 2025 one (which keeps it in the session the call runs in).
func (m *MCPCaller) prepare(ctx context.Context, cs *mcp.ClientSession, p *mcp.CallToolParams) {
	meta := mcp.Meta{}
	for k, v := range p.Meta {
		meta[k] = v
	}
	delete(meta, "progressToken")
	delete(meta, mcp.MetaKeyLogLevel)
	if m.Progress != nil {
		meta["progressToken"] = progressToken
	}
	if m.Log != nil && m.LogLevel != "" {
		if ir := cs.InitializeResult(); ir != nil && ir.ProtocolVersion >= modernProtocol {
			meta[mcp.MetaKeyLogLevel] = m.LogLevel
		} else if ir != nil && ir.Capabilities != nil && ir.Capabilities.Logging != nil {
			// A server that refuses the level sends no logs; the call
			// goes on without them.
			_ = cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: m.LogLevel})
		}
	}
	p.Meta = nil
	if len(meta) > 0 {
		p.Meta = meta
	}
}
