package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/audit"
	"github.com/appserver/appserver/internal/hub"
	"github.com/appserver/appserver/internal/principal"
	"github.com/appserver/appserver/internal/turns"
)

// session is one MCP session: an mcp.Server of its own (its tool handlers
// close over the session) and a hub subscriber of the threads its calls
// run on.
//
// Lock order: session.mu before call.mu.
type session struct {
	s    *Server
	id   hub.ConnID
	who  principal.Principal
	name string // thread originator
	srv  *mcp.Server
	done chan struct{} // closed by close: running calls interrupt their turns

	mu     sync.Mutex
	ss     *mcp.ServerSession
	conn   *eventConn
	calls  map[string]*call                    // running calls by thread id
	asks   map[*hub.Request]context.CancelFunc // elicitations in flight
	closed bool
	wg     sync.WaitGroup // tool calls and elicitations
}

func newSession(s *Server, who principal.Principal) *session {
	sess := &session{
		s: s, id: s.hub.NewConnID(), who: who, name: who.ClientName(s.cfg.ClientName),
		done:  make(chan struct{}),
		calls: map[string]*call{}, asks: map[*hub.Request]context.CancelFunc{},
	}
	sess.srv = mcp.NewServer(&mcp.Implementation{Name: "appserver", Title: "Codex", Version: s.cfg.Version},
		&mcp.ServerOptions{SupportedProtocolVersions: protocolVersions, Logger: s.log})
	sess.srv.AddTool(codexTool(), sess.codex)
	sess.srv.AddTool(codexReplyTool(), sess.codexReply)
	s.hub.Attach(sess.id, sess, hub.AttachOptions{})
	return sess
}

// actor is who the session acts for, as the audit log names it: its
// principal, through the MCP door ("mcp" and the session's id).
func (sess *session) actor() audit.Actor {
	return audit.Actor{Principal: sess.who.Name(), Client: "mcp#" + strconv.FormatUint(uint64(sess.id), 10)}
}

func (sess *session) setConn(c *eventConn) {
	sess.mu.Lock()
	sess.conn = c
	sess.mu.Unlock()
}

func (sess *session) setSession(ss *mcp.ServerSession) {
	sess.mu.Lock()
	sess.ss = ss
	sess.mu.Unlock()
}

func (sess *session) serverSession() *mcp.ServerSession {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	return sess.ss
}

func (sess *session) caller() turns.Caller {
	return turns.Caller{Conn: sess.id, ClientName: sess.name, Principal: sess.who}
}

// close ends the session: running calls interrupt their turns and answer,
// then the session leaves its threads and the hub. It tolerates being
// called twice.
func (sess *session) close() {
	sess.mu.Lock()
	if sess.closed {
		sess.mu.Unlock()
		return
	}
	sess.closed = true
	close(sess.done)
	sess.mu.Unlock()
	sess.wg.Wait()
	sess.s.hub.Detach(sess.id)
}

// elicits reports whether the host declared elicitation support.
func (sess *session) elicits() bool {
	ss := sess.serverSession()
	if ss == nil {
		return false
	}
	ip := ss.InitializeParams()
	return ip != nil && ip.Capabilities != nil && ip.Capabilities.Elicitation != nil
}

// begin registers a call on a thread; a thread runs one call of a session
// at a time.
func (sess *session) begin(ctx context.Context, req *mcp.CallToolRequest, threadID string) (*call, error) {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if sess.closed {
		return nil, fmt.Errorf("the MCP session is closing")
	}
	if _, busy := sess.calls[threadID]; busy {
		return nil, fmt.Errorf("thread %s is already running a codex call of this session; wait for it to finish", threadID)
	}
	c := newCall(sess, ctx, req, threadID)
	sess.calls[threadID] = c
	sess.wg.Add(1)
	return c, nil
}

// end unregisters a call. The session stays subscribed to nothing: the
// thread may unload, and codex-reply subscribes again.
func (sess *session) end(c *call) {
	sess.mu.Lock()
	delete(sess.calls, c.threadID)
	sess.mu.Unlock()
	if _, err := sess.s.mgr.Unsubscribe(sess.caller(), api.ThreadUnsubscribeParams{ThreadID: c.threadID}); err != nil {
		sess.s.log.Debug("mcp: unsubscribe", "thread", c.threadID, "err", err)
	}
	sess.wg.Done()
}

func (sess *session) callOf(threadID string) *call {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	return sess.calls[threadID]
}

// Notify implements hub.Subscriber: the running call on the thread, if
// any, gets the notification.
func (sess *session) Notify(n *hub.Notification) {
	thread, _, ok := threadOf(n)
	if !ok {
		return
	}
	if c := sess.callOf(thread); c != nil {
		c.push(n)
	}
}

// Request implements hub.Subscriber: an approval of a thread with a
// running call is asked of the host through elicitation, if the host can
// be asked; otherwise the session does not take it, and the request waits
// for another client or fails as with no client at all.
func (sess *session) Request(r *hub.Request, _ int64) bool {
	if r.Kind != hub.KindApproval || !sess.elicits() {
		return false
	}
	sess.mu.Lock()
	defer sess.mu.Unlock()
	c := sess.calls[r.ThreadID]
	// A call whose context ended is answering: its host cancelled it and
	// its turn is being interrupted. Taken, the request would fail to be
	// asked at once and go back to the hub, which would offer it here
	// again, over and over, until the interrupt settled it.
	if c == nil || sess.closed || c.ctx.Err() != nil {
		return false
	}
	ctx, cancel := context.WithCancel(c.ctx)
	sess.asks[r] = cancel
	sess.wg.Add(1)
	go func() {
		defer sess.wg.Done()
		defer cancel()
		res, err := c.ask(ctx, r)
		// Before the hub hears of it, which may offer the request here
		// again and record a new elicitation.
		sess.mu.Lock()
		delete(sess.asks, r)
		sess.mu.Unlock()
		switch {
		case err == nil:
			r.AnswerAs(sess.id, sess.actor(), res, nil)
		case ctx.Err() != nil:
			// Withdrawn (settled elsewhere), or the call or session is
			// ending: this session no longer holds the request.
			r.Lost(sess.id)
		default:
			// The host answered with an error, as a websocket client may:
			// the approval fails. Lost would have the hub offer it to this
			// session again at once, and the host be asked in a loop.
			r.AnswerAs(sess.id, sess.actor(), nil, err)
		}
	}()
	return true
}

// Settled implements hub.Subscriber: an elicitation still open for a
// request answered elsewhere (or withdrawn) is cancelled, which tells the
// host to dismiss it.
func (sess *session) Settled(r *hub.Request) {
	sess.mu.Lock()
	cancel := sess.asks[r]
	delete(sess.asks, r)
	sess.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// errorResult is an isError result with clear text; with a thread, its
// structuredContent names it so the host can continue it.
func errorResult(threadID string, err error) *mcp.CallToolResult {
	msg := err.Error()
	var ae *apperr.Error
	if errors.As(err, &ae) {
		msg = apperr.MessageOf(err)
	}
	res := &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
	if threadID != "" {
		res.StructuredContent = toolResult{ThreadID: threadID, Content: msg}
	}
	return res
}

// textResult is a successful call's result.
func textResult(threadID, text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: text}},
		StructuredContent: toolResult{ThreadID: threadID, Content: text},
	}
}

// codex serves the `codex` tool: a new thread, then its first turn.
func (sess *session) codex(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a codexArgs
	if err := decodeArgs(req.Params.Arguments, &a, true); err != nil {
		return errorResult("", err), nil
	}
	text, err := prompt(a.Prompt)
	if err != nil {
		return errorResult("", err), nil
	}
	p, err := a.threadStart()
	if err != nil {
		return errorResult("", err), nil
	}
	res, after, err := sess.s.mgr.StartThread(ctx, sess.caller(), p)
	if err != nil {
		return errorResult("", fmt.Errorf("Failed to start Codex session: %s", apperr.MessageOf(err))), nil
	}
	if after != nil {
		after()
	}
	c, err := sess.begin(ctx, req, res.Thread.ID)
	if err != nil {
		return errorResult(res.Thread.ID, err), nil
	}
	defer sess.end(c)
	c.emit(ctx, "", &sessionConfiguredMsg{
		Type: "session_configured", SessionID: res.Thread.ID, ThreadID: res.Thread.ID,
		Model: res.Model, ModelProvider: res.ModelProvider, ApprovalPolicy: res.ApprovalPolicy,
		SandboxPolicy: res.Sandbox, Cwd: res.Cwd, ReasoningEffort: res.ReasoningEffort,
	}, "session_configured")
	return c.run(ctx, text), nil
}

// codexReply serves `codex-reply`: the next turn of a thread.
func (sess *session) codexReply(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a replyArgs
	if err := decodeArgs(req.Params.Arguments, &a, false); err != nil {
		return errorResult("", err), nil
	}
	text, err := prompt(a.Prompt)
	if err != nil {
		return errorResult("", err), nil
	}
	id, err := a.thread()
	if err != nil {
		return errorResult("", err), nil
	}
	th, err := sess.s.mgr.ReadThread(ctx, api.ThreadReadParams{ThreadID: id})
	if err != nil || !sess.who.Sees(th.Thread) {
		if err == nil || apperr.Is(err, apperr.NotFound) || apperr.Is(err, apperr.Invalid) {
			// Another principal's thread is as unknown as a missing one.
			return errorResult("", fmt.Errorf("unknown threadId %q: no such thread (start one with the codex tool)", id)), nil
		}
		return errorResult("", fmt.Errorf("reading thread %s: %s", id, apperr.MessageOf(err))), nil
	}
	c, err := sess.begin(ctx, req, th.Thread.ID)
	if err != nil {
		return errorResult(th.Thread.ID, err), nil
	}
	defer sess.end(c)
	return c.run(ctx, text), nil
}

// requestIDOf is the JSON-RPC id of a tools/call request (see
// requestIDKey), or nil.
func requestIDOf(req *mcp.CallToolRequest) any {
	v, ok := req.Params.Meta[requestIDKey]
	if !ok {
		return nil
	}
	if f, ok := v.(float64); ok && f == float64(int64(f)) {
		return int64(f)
	}
	return v
}

// idString is a request id as the reference's event ids spell it.
func idString(id any) string {
	switch v := id.(type) {
	case string:
		return v
	case nil:
		return ""
	}
	b, _ := json.Marshal(id)
	return string(b)
}
