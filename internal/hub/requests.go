package hub

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/audit"
	"github.com/appserver/appserver/internal/dynamic"
	"github.com/appserver/appserver/internal/turns"
)

// Request is one server→client request routed by the hub. Subscribers get
// it through Subscriber.Request and report back with Answer or Lost.
type Request struct {
	h *Hub
	// Kind says how the request is routed and timed out.
	Kind Kind
	// ThreadID is the thread the request belongs to.
	ThreadID string
	// Method and Params are the request as sent.
	Method string
	Params any
	// Call is the dynamic tool call of a KindToolCall request, nil
	// otherwise.
	Call *dynamic.Pending
	// ID is the request id every holder of an approval or user-input
	// request gets (tool calls get one id per delivery).
	ID int64

	done chan struct{} // closed once settled (approvals and user input)

	mu       sync.Mutex
	holders  []holder
	sent     bool // delivered at least once
	settled  bool
	result   json.RawMessage
	err      error
	outcome  dynamic.Outcome
	answered map[ConnID]bool // holders whose answer settled the request
	// answerer is who answered an approval or user-input request, for
	// the audit log: nil when nobody did, or a client of another daemon.
	answerer *audit.Actor

	// published is set once a dynamic tool call of this daemon was
	// published for the other daemons' clients.
	published bool
	// remote marks a request of another daemon's turn presented here;
	// remoteID is its id on that daemon, where answers go.
	remote   bool
	remoteID int64
	// heldReported is what this daemon last told the one that asked:
	// whether a client here holds the request; reporting is set while a
	// reporter sends. remoteHolders are, on the daemon that asked, the
	// daemons whose clients hold it.
	heldReported  bool
	reporting     bool
	remoteHolders map[string]bool
}

// holder is one subscriber's copy of a request.
type holder struct {
	id  ConnID
	sub Subscriber
	// delivering is set while the subscriber's Request has not returned:
	// such a holder counts as holding the request for no other daemon,
	// and a settlement meanwhile is told to it by offer, after Request,
	// not by withdraw.
	delivering bool
}

// Outcome is how a tool call ended; "" until it is settled and for the
// other kinds.
func (r *Request) Outcome() dynamic.Outcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.outcome
}

// Answer delivers the answer of the client behind from: a result, or the
// client's JSON-RPC error as err. It reports whether this answer settled
// the request; only the first answer does, whichever transport brings it.
// The audit log knows nobody for it: doors answer with AnswerAs.
func (r *Request) Answer(from ConnID, result json.RawMessage, err error) bool {
	return r.AnswerAs(from, audit.Actor{}, result, err)
}

// AnswerAs is Answer by the actor by, whom the audit log names as the
// one who answered an approval.
func (r *Request) AnswerAs(from ConnID, by audit.Actor, result json.RawMessage, err error) bool {
	if r.remote {
		return r.answerRemote(from, result, err)
	}
	if r.Kind == KindToolCall {
		ok := r.Call.ResolveResponse(result, err)
		if ok {
			r.mu.Lock()
			r.answered[from] = true
			r.mu.Unlock()
		}
		return ok
	}
	return r.settle(from, &by, result, err)
}

// AnsweredBy reports whether the answer of the client behind id settled
// the request.
func (r *Request) AnsweredBy(id ConnID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.answered[id]
}

// Lost tells that the client behind from went away without answering: the
// request is offered again to the thread's other subscribers, or waits for
// one.
func (r *Request) Lost(from ConnID) {
	r.mu.Lock()
	r.holders = slices.DeleteFunc(r.holders, func(h holder) bool { return h.id == from })
	settled := r.settled
	r.mu.Unlock()
	if settled {
		return
	}
	switch {
	case r.remote && r.Kind == KindToolCall:
		r.h.offerRemote(r)
		r.h.reportHeld(r)
		return
	case r.remote:
		r.h.reportHeld(r)
		return
	case r.Kind == KindToolCall:
		r.h.broker.Reoffer(r.ThreadID)
		return
	}
	r.h.mu.Lock()
	r.h.wakeLocked()
	r.h.mu.Unlock()
}

// settle records the outcome of an approval or user-input request once,
// and by whom (nil: not a client of this daemon).
func (r *Request) settle(from ConnID, by *audit.Actor, result json.RawMessage, err error) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.settled {
		return false
	}
	r.settled = true
	r.result, r.err = result, err
	if from != 0 {
		r.answered[from] = true
	}
	r.answerer = by
	close(r.done)
	return true
}

// holds reports whether the subscriber id holds the request.
func (r *Request) holds(id ConnID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.ContainsFunc(r.holders, func(h holder) bool { return h.id == id })
}

// offer delivers the request to m unless it holds it already; it reports
// whether m holds it now. m is a holder before the request is delivered,
// so that the client's answer or its going away (r.Lost), which may come
// before Request returns, finds it; a request settled meanwhile is told
// to m as settled once Request returned. A settled request is offered to
// no one.
func (r *Request) offer(m member, id int64) bool {
	isM := func(h holder) bool { return h.id == m.id }
	r.mu.Lock()
	if r.settled {
		r.mu.Unlock()
		return false
	}
	if slices.ContainsFunc(r.holders, isM) {
		r.mu.Unlock()
		return true
	}
	r.holders = append(r.holders, holder{id: m.id, sub: m.sub, delivering: true})
	r.mu.Unlock()
	took := m.sub.Request(r, id)
	r.mu.Lock()
	r.sent = r.sent || took
	settled := r.settled
	i := slices.IndexFunc(r.holders, isM)
	held := took && i >= 0 // not lost while being delivered
	switch {
	case i < 0:
	case held && !settled:
		r.holders[i].delivering = false
	default:
		r.holders = slices.Delete(r.holders, i, i+1)
	}
	r.mu.Unlock()
	if held && settled {
		m.sub.Settled(r) // withdraw left it to us
		return false
	}
	return held
}

// takeHolders marks the request settled and returns its holders, once;
// those still being delivered to are told by offer.
func (r *Request) takeHolders() []holder {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.settled = true
	var hs, delivering []holder
	for _, h := range r.holders {
		if h.delivering {
			delivering = append(delivering, h)
		} else {
			hs = append(hs, h)
		}
	}
	r.holders = delivering
	return hs
}

// heldLocked reports whether a subscriber that took r holds it, one
// whose Request has returned; r.mu must be held.
func (r *Request) heldLocked() bool {
	return !r.settled && slices.ContainsFunc(r.holders, func(h holder) bool { return !h.delivering })
}

func (h *Hub) newRequest(kind Kind, threadID, method string, params any) *Request {
	return &Request{h: h, Kind: kind, ThreadID: threadID, Method: method, Params: params,
		done: make(chan struct{}), answered: map[ConnID]bool{}}
}

// Request implements turns.Sink for approvals, user-input requests and
// MCP elicitations (docs/protocol.md §7): the request goes to every
// subscriber of the thread (or of its nearest ancestor with any: the rule
// above audience), under one id, and to every client that subscribes while
// it is pending; the first answer is used. While no subscriber holds it, it
// waits for one at most the kind's NoClient timeout, then fails with
// turns.ErrNoClient. The caller (turns) announces
// serverRequest/resolved for the returned id to the thread's subscribers,
// which tells the other holders that the request is settled.
func (h *Hub) Request(ctx context.Context, req turns.ServerRequest) (json.RawMessage, api.RequestID, bool, error) {
	threadID, method, params := h.requestThread(req.ThreadID, req.Ancestors), req.Method, req.Params
	kind := KindOf(method)
	if kind != KindApproval && kind != KindElicitation {
		return h.request(ctx, kind, threadID, method, params, !req.Ephemeral)
	}
	h.cfg.ApprovalMetrics.ApprovalPending(1)
	res, id, sent, err := h.request(ctx, kind, threadID, method, params, !req.Ephemeral)
	h.cfg.ApprovalMetrics.ApprovalPending(-1)
	h.cfg.ApprovalMetrics.ApprovalDecided(kind.String(), decisionOf(res, err))
	return res, id, sent, err
}

// request is Request for a request of the given kind; logged says that
// the thread keeps an event log (it is not ephemeral).
func (h *Hub) request(ctx context.Context, kind Kind, threadID, method string, params any, logged bool) (json.RawMessage, api.RequestID, bool, error) {
	limits := h.timeouts(kind)
	r := h.newRequest(kind, threadID, method, params)
	r.ID = h.NextRequestID()
	h.mu.Lock()
	h.waiting[r.ID] = r
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.waiting, r.ID)
		h.mu.Unlock()
	}()
	defer r.withdraw()
	if logged {
		// The request is an entry of the thread's log: the event
		// consumers (webhooks' approval.requested) hear of it, and so do
		// the other daemons, whose clients may hold it: the caller
		// announces its settlement in the log, which withdraws it there.
		h.publish(threadID, MethodRequestOffered, remoteOffer{RequestID: r.ID, Method: method, Params: params})
	}
	if logged && h.cfg.Remote != nil {
		r.mu.Lock()
		r.sent = true
		r.mu.Unlock()
	}

	var noClient, answer <-chan time.Time
	var noClientTimer *time.Timer
	if limits.Answer > 0 {
		t := time.NewTimer(limits.Answer)
		defer t.Stop()
		answer = t.C
	}
	defer func() {
		if noClientTimer != nil {
			noClientTimer.Stop()
		}
	}()
	for {
		wake := h.wakeup() // before offering: a change after it wakes us
		held := false
		for _, m := range h.offerable(threadID) {
			if r.offer(m, r.ID) {
				held = true
			}
		}
		held = held || r.heldByAttached() || r.isRemoteHeld()
		switch {
		case held && noClientTimer != nil:
			noClientTimer.Stop()
			noClientTimer, noClient = nil, nil
		case !held && noClientTimer == nil && limits.NoClient >= 0:
			noClientTimer = time.NewTimer(limits.NoClient)
			noClient = noClientTimer.C
		}
		var fail error
		select {
		case <-r.done:
		case <-wake:
			continue
		case <-noClient:
			fail = turns.ErrNoClient
		case <-answer:
			fail = turns.ErrNoClient
		case <-ctx.Done():
			fail = ctx.Err()
		}
		if fail != nil {
			r.settle(0, nil, nil, fail) // an answer that won the race is used
		}
		r.mu.Lock()
		res, err, sent := r.result, r.err, r.sent
		r.mu.Unlock()
		if kind == KindApproval || kind == KindElicitation {
			h.auditApproval(ctx, r, res, err)
		}
		return res, api.IntRequestID(r.ID), sent, err
	}
}

// AnswerRemote settles the pending request id of thread (an approval,
// user input, or a dynamic tool call published for other daemons) with an
// answer a client of another daemon gave: a result, or the client's
// JSON-RPC error as clientErr (forwarded by the cluster, since this daemon
// runs the turn that asked). It reports whether the answer settled the
// request: false when it is unknown, of another thread, or already
// settled.
func (h *Hub) AnswerRemote(threadID string, id int64, result json.RawMessage, clientErr error) bool {
	h.mu.Lock()
	r := h.waiting[id]
	h.mu.Unlock()
	if r == nil || r.ThreadID != threadID {
		return false
	}
	if r.Kind == KindToolCall {
		return r.Call.ResolveResponse(result, clientErr)
	}
	return r.settle(0, nil, result, clientErr)
}

// heldByAttached reports whether a holder of r is still attached: a client
// that unsubscribed but is still connected may still answer.
func (r *Request) heldByAttached() bool {
	r.mu.Lock()
	ids := make([]ConnID, len(r.holders))
	for i, hd := range r.holders {
		ids[i] = hd.id
	}
	r.mu.Unlock()
	for _, id := range ids {
		if _, ok := r.h.lookup(id); ok {
			return true
		}
	}
	return false
}

// toolRouter routes dynamic tool calls; it is the broker's dynamic.Router.
type toolRouter struct{ h *Hub }

// Offer implements dynamic.Router: every recorder subscribed to the thread
// holds the call, and so does one live client, the oldest subscriber
// first (normally the client that registered the tools).
func (t toolRouter) Offer(_ context.Context, p *dynamic.Pending) error {
	h := t.h
	h.mu.Lock()
	r := h.tools[p]
	if r == nil {
		r = h.newRequest(KindToolCall, p.ThreadID(), "item/tool/call", p.Params())
		r.Call = p
		h.tools[p] = r
	}
	h.mu.Unlock()

	members := h.subscribed(p.ThreadID())
	recorded := false
	for _, m := range members {
		if m.opts.Recorder && r.offer(m, 0) {
			recorded = true
		}
	}
	for _, m := range members {
		if !m.opts.Recorder && r.holds(m.id) {
			return nil // a live client already has it
		}
	}
	for _, m := range members {
		if m.opts.Recorder {
			continue
		}
		if r.offer(m, h.NextRequestID()) {
			return nil
		}
	}
	if h.cfg.Remote != nil {
		// No live client here: one of another daemon may answer. Until
		// one says it holds the call, the call waits for a client as long
		// as its no-client rule says, so that it ends when nobody
		// anywhere answers.
		h.publishCall(r)
		if r.isRemoteHeld() {
			return nil // held by a live client of another daemon
		}
	}
	if recorded {
		return nil
	}
	return dynamic.ErrNoConnection
}

// Withdraw implements dynamic.Router: every holder is told the call is
// settled.
func (t toolRouter) Withdraw(p *dynamic.Pending, outcome dynamic.Outcome) {
	h := t.h
	h.mu.Lock()
	r := h.tools[p]
	delete(h.tools, p)
	h.mu.Unlock()
	if r == nil {
		return
	}
	r.mu.Lock()
	r.outcome = outcome
	r.mu.Unlock()
	for _, hd := range r.takeHolders() {
		hd.sub.Settled(r)
	}
}

// approvalDetail is the detail of an approval entry.
type approvalDetail struct {
	Method    string          `json:"method"`
	RequestID int64           `json:"requestId"`
	ItemID    string          `json:"itemId,omitempty"`
	Request   json.RawMessage `json:"request"`
	// Decision is the answer's decision (accept, decline, ...) or why
	// there was none (no_client, canceled, error).
	Decision string          `json:"decision"`
	Answer   json.RawMessage `json:"answer,omitempty"`
	// AnsweredRemotely says that a client of another daemon answered.
	AnsweredRemotely bool `json:"answeredRemotely,omitempty"`
}

// auditApproval records an approval request and its answer: the entry's
// actor is who answered (none when nobody did).
func (h *Hub) auditApproval(ctx context.Context, r *Request, res json.RawMessage, err error) {
	if h.cfg.Audit == nil {
		return
	}
	r.mu.Lock()
	by, remote := r.answerer, r.result != nil && r.answerer == nil
	r.mu.Unlock()
	var actor audit.Actor
	if by != nil {
		actor = *by
	}
	params, perr := json.Marshal(r.Params)
	if perr != nil {
		params = []byte(`null`)
	}
	var ids struct {
		TurnID string `json:"turnId"`
		ItemID string `json:"itemId"`
	}
	_ = json.Unmarshal(params, &ids)
	h.cfg.Audit.Record(ctx, audit.Entry{Kind: audit.KindApproval, Actor: &actor, ThreadID: r.ThreadID, TurnID: ids.TurnID, Detail: approvalDetail{
		Method: r.Method, RequestID: r.ID, ItemID: ids.ItemID, Request: params, Decision: decisionOf(res, err), Answer: res, AnsweredRemotely: remote,
	}})
}
