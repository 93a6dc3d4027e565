package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/hub"
)

// call is one running codex or codex-reply call: it starts a turn on its
// thread and forwards the thread's notifications, which the session's hub
// subscriber queues here (it must not block), as codex/event until the
// turn ends.
type call struct {
	sess     *session
	ctx      context.Context // the tools/call request's: cancelled by notifications/cancelled
	threadID string
	reqID    any // the tools/call request id
	eventID  string
	progress any // the caller's progressToken, or nil

	mu     sync.Mutex
	turnID string
	queue  []event
	wake   chan struct{} // a token when queue is not empty
	steps  float64       // progress notifications sent
	last   *string       // the turn's last agent message
}

func newCall(sess *session, ctx context.Context, req *mcp.CallToolRequest, threadID string) *call {
	id := requestIDOf(req)
	return &call{
		sess: sess, ctx: ctx, threadID: threadID, reqID: id, eventID: idString(id),
		progress: req.Params.GetProgressToken(), wake: make(chan struct{}, 1),
	}
}

// event is a notification of the call's thread as the call forwards it:
// encoded when it is published, since the turn goes on changing the items
// it carries.
type event struct {
	turnID    string
	msgs      []json.RawMessage
	types     []string
	agentText *string   // a completed agent message
	end       *api.Turn // the turn ended: id, status and error only
}

func newEvent(n *hub.Notification) (event, bool) {
	_, turn, ok := threadOf(n)
	if !ok {
		return event{}, false
	}
	ev := event{turnID: turn}
	switch p := n.Params.(type) {
	case api.TurnCompletedNotification:
		ev.end = &api.Turn{ID: p.Turn.ID, Status: p.Turn.Status, Error: p.Turn.Error}
		return ev, true
	case api.ItemCompletedNotification:
		if m, ok := p.Item.Body.(*api.AgentMessageItem); ok {
			text := m.Text
			ev.agentText = &text
		}
	}
	for _, msg := range msgsOf(n) {
		b, err := json.Marshal(msg)
		if err != nil {
			continue
		}
		ev.msgs = append(ev.msgs, b)
		ev.types = append(ev.types, msgType(msg))
	}
	return ev, true
}

func (c *call) push(n *hub.Notification) {
	ev, ok := newEvent(n)
	if !ok {
		return
	}
	c.mu.Lock()
	c.queue = append(c.queue, ev)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *call) take() []event {
	c.mu.Lock()
	defer c.mu.Unlock()
	q := c.queue
	c.queue = nil
	return q
}

// emit sends one codex/event, and MCP progress for every event but
// deltas when the caller asked for progress.
func (c *call) emit(ctx context.Context, id string, msg any, typ string) {
	c.sess.mu.Lock()
	conn := c.sess.conn
	ss := c.sess.ss
	c.sess.mu.Unlock()
	if conn == nil {
		return
	}
	err := conn.notify(ctx, methodCodexEvent, eventParams{
		Meta: eventMeta{RequestID: c.reqID, ThreadID: c.threadID}, ID: id, Msg: msg,
	})
	if err != nil {
		c.sess.s.log.Debug("mcp: codex/event", "thread", c.threadID, "err", err)
	}
	if c.progress == nil || ss == nil {
		return
	}
	if typ == "agent_message_delta" {
		return
	}
	c.mu.Lock()
	c.steps++
	step := c.steps
	c.mu.Unlock()
	_ = ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: c.progress, Progress: step, Message: typ})
}

// msgType is the type tag of a msg (not a hot path: once per event).
func msgType(msg any) string {
	b, err := json.Marshal(msg)
	if err != nil {
		return ""
	}
	var t struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(b, &t)
	return t.Type
}

// run starts the turn and forwards its events until it ends; it answers
// with the turn's last agent message.
func (c *call) run(ctx context.Context, prompt string) *mcp.CallToolResult {
	mgr := c.sess.s.mgr
	c.mu.Lock() // the turn id is known before any of its notifications
	res, after, err := mgr.StartTurn(ctx, c.sess.caller(), api.TurnStartParams{
		ThreadID: c.threadID,
		Input:    api.List[api.UserInput]{{Type: api.UserInputText, Text: prompt}},
	})
	if err == nil {
		c.turnID = res.Turn.ID
	}
	c.mu.Unlock()
	if err != nil {
		return errorResult(c.threadID, fmt.Errorf("Failed to start the turn: %s", apperr.MessageOf(err)))
	}
	if after != nil {
		after()
	}
	// The host cancelling the call and the session ending both interrupt
	// the turn; the call then answers once the turn has ended.
	cancelled, closing := ctx.Done(), c.sess.done
	var giveUp <-chan time.Time
	stop := func() {
		cancelled, closing = nil, nil
		c.interrupt()
		t := time.NewTimer(c.sess.s.cfg.InterruptWait)
		giveUp = t.C
	}
	for {
		select {
		case <-c.wake:
			for _, ev := range c.take() {
				if turn, ended := c.forward(ctx, ev); ended {
					return c.result(turn)
				}
			}
		case <-cancelled:
			stop()
		case <-closing:
			stop()
		case <-giveUp:
			return errorResult(c.threadID, errors.New("the call was cancelled; its turn was interrupted but had not ended"))
		}
	}
}

// interrupt stops the call's turn (cancellation or the session ending).
func (c *call) interrupt() {
	after, err := c.sess.s.mgr.InterruptTurn(context.Background(), api.TurnInterruptParams{ThreadID: c.threadID, TurnID: c.turnID})
	if err != nil {
		c.sess.s.log.Debug("mcp: interrupt", "thread", c.threadID, "err", err)
		return
	}
	if after != nil {
		after()
	}
}

// forward sends the codex/events of one event of the call's turn; it
// reports the turn when the event ended it.
func (c *call) forward(ctx context.Context, ev event) (api.Turn, bool) {
	if ev.turnID != c.turnID {
		return api.Turn{}, false
	}
	if ev.end != nil {
		end := endMsg(*ev.end, c.last)
		c.emit(ctx, c.eventID, end, msgType(end))
		return *ev.end, true
	}
	if ev.agentText != nil {
		c.last = ev.agentText
	}
	for i, msg := range ev.msgs {
		c.emit(ctx, c.eventID, msg, ev.types[i])
	}
	return api.Turn{}, false
}

// result is the call's answer once its turn ended.
func (c *call) result(turn api.Turn) *mcp.CallToolResult {
	switch turn.Status {
	case api.TurnFailed:
		return errorResult(c.threadID, fmt.Errorf("Codex turn failed: %s", turnError(turn)))
	case api.TurnInterrupted:
		return errorResult(c.threadID, errors.New("Codex turn was interrupted"))
	}
	text := ""
	if c.last != nil {
		text = *c.last
	}
	return textResult(c.threadID, text)
}

// approvalDecisions map the reference's ReviewDecision values, which hosts
// written for it put in the elicitation's content, onto ours.
var approvalDecisions = map[string]string{
	"approved":                   api.DecisionAccept,
	"approved_for_session":       api.DecisionAcceptForSession,
	"denied":                     api.DecisionDecline,
	"abort":                      api.DecisionCancel,
	api.DecisionAccept:           api.DecisionAccept,
	api.DecisionAcceptForSession: api.DecisionAcceptForSession,
	api.DecisionDecline:          api.DecisionDecline,
	api.DecisionCancel:           api.DecisionCancel,
}

// ask asks the host to approve a command or a patch through elicitation
// and returns the approval's answer: accept, decline and cancel mean what
// they mean on the websocket (cancel also interrupts the turn).
func (c *call) ask(ctx context.Context, r *hub.Request) (json.RawMessage, error) {
	kind, msg, ev := "exec-approval", "", approvalRequestMsg{Type: "exec_approval_request"}
	params := r.Params
	switch p := params.(type) { // the tools pass pointers or values
	case *api.CommandExecutionRequestApprovalParams:
		params = *p
	case *api.FileChangeRequestApprovalParams:
		params = *p
	}
	switch p := params.(type) {
	case api.CommandExecutionRequestApprovalParams:
		cmd, cwd := "", ""
		if p.Command != nil {
			cmd = *p.Command
		}
		if p.Cwd != nil {
			cwd = *p.Cwd
		}
		msg = fmt.Sprintf("Allow Codex to run `%s` in `%s`?", cmd, cwd)
		ev.CallID, ev.TurnID, ev.Command, ev.Cwd, ev.Reason = p.ItemID, p.TurnID, p.Command, p.Cwd, p.Reason
	case api.FileChangeRequestApprovalParams:
		kind = "patch-approval"
		msg = "Allow Codex to apply proposed code changes?"
		if p.Reason != nil && *p.Reason != "" {
			msg = fmt.Sprintf("%s\n\n%s", *p.Reason, msg)
		}
		ev = approvalRequestMsg{Type: "apply_patch_approval_request", CallID: p.ItemID, TurnID: p.TurnID, Reason: p.Reason}
	default:
		return nil, fmt.Errorf("unsupported request %s", r.Method)
	}
	c.emit(c.ctx, c.eventID, ev, ev.Type)
	c.sess.mu.Lock()
	ss := c.sess.ss
	c.sess.mu.Unlock()
	res, err := ss.Elicit(ctx, &mcp.ElicitParams{
		Message:         msg,
		RequestedSchema: json.RawMessage(`{"type":"object","properties":{}}`),
		Meta: mcp.Meta{
			"threadId": c.threadID, "codex_elicitation": kind, "codex_mcp_tool_call_id": c.eventID,
			"codex_call_id": ev.CallID, "codex_event_id": c.eventID,
		},
	})
	if err != nil {
		return nil, err
	}
	decision := api.DecisionDecline
	switch res.Action {
	case "accept":
		decision = api.DecisionAccept
		if d, ok := res.Content["decision"].(string); ok {
			if mapped, ok := approvalDecisions[strings.TrimSpace(d)]; ok {
				decision = mapped
			}
		}
	case "cancel":
		decision = api.DecisionCancel
	}
	return json.Marshal(map[string]string{"decision": decision})
}
