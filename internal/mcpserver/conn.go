package mcpserver

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// requestIDKey is the _meta key under which a tools/call request carries
// its own JSON-RPC id to the tool handler: codex/event names the request
// it belongs to, and the go-sdk does not hand the id to handlers.
const requestIDKey = "io.appserver/requestId"

// eventTransport connects a transport and keeps its connection for the
// session, which writes codex/event notifications to it.
type eventTransport struct {
	inner mcp.Transport
	sess  *session
}

// Connect implements mcp.Transport.
func (t *eventTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	ec := &eventConn{Connection: c}
	t.sess.setConn(ec)
	return ec, nil
}

// SupportsProtocolVersion implements mcp.ProtocolVersionSupporter as the
// inner transport does.
func (t *eventTransport) SupportsProtocolVersion(v string) bool {
	if s, ok := t.inner.(mcp.ProtocolVersionSupporter); ok {
		return s.SupportsProtocolVersion(v)
	}
	return true
}

// eventConn is a connection that writes notifications the go-sdk does not
// know and tells tool handlers their request id.
type eventConn struct {
	mcp.Connection
}

// Read implements mcp.Connection: a tools/call request gets its id under
// _meta[requestIDKey].
func (c *eventConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if err != nil {
		return msg, err
	}
	if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() && req.Method == "tools/call" {
		var params map[string]json.RawMessage
		if json.Unmarshal(req.Params, &params) == nil && params != nil {
			meta := map[string]json.RawMessage{}
			_ = json.Unmarshal(params["_meta"], &meta)
			if id, err := json.Marshal(req.ID.Raw()); err == nil {
				meta[requestIDKey] = id
				if m, err := json.Marshal(meta); err == nil {
					params["_meta"] = m
					if p, err := json.Marshal(params); err == nil {
						req.Params = p
					}
				}
			}
		}
	}
	return msg, nil
}

// notify writes a notification. ctx must be the tool handler's: over
// streamable HTTP it says which request's stream carries it.
func (c *eventConn) notify(ctx context.Context, method string, params any) error {
	p, err := json.Marshal(params)
	if err != nil {
		return err
	}
	return c.Write(ctx, &jsonrpc.Request{Method: method, Params: p})
}
