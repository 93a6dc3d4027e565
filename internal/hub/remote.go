package hub

import (
	"context"
	"encoding/json"
	"time"

	"github.com/appserver/appserver/api"
)

// The methods of the events that carry server requests between daemons.
// They are numbered in the thread's event log among its notifications, so
// that every daemon sees a request after the notifications that led to it
// (the command item's item/started before its approval), but no client
// gets them: the hubs of the other daemons turn them into requests of
// their own, and EventsAfter leaves them out of replays.
const (
	// methodWithdrawn says that a dynamic tool call published with
	// MethodRequestOffered is settled (remoteWithdrawn). Approvals and user input
	// need none: the turns layer logs serverRequest/resolved for them.
	methodWithdrawn = "appserver/serverRequest/withdrawn"
)

// The hub's own entries of a thread's event log that in-process consumers
// of the log (eventlog.Consumer) may act on; no client gets them.
const (
	// MethodRequestOffered is the entry of a server request of a durable
	// thread (an approval, a user-input request, an MCP elicitation, a
	// dynamic tool call no client here could take); its params decode as
	// an Offer.
	MethodRequestOffered = "appserver/serverRequest/offered"
	// MethodThreadArchived and MethodThreadUnarchived are the entries of
	// a thread's archiving and unarchiving, which clients hear as the
	// broadcasts thread/archived and thread/unarchived; their params
	// are {"threadId"}.
	MethodThreadArchived   = "appserver/thread/archived"
	MethodThreadUnarchived = "appserver/thread/unarchived"
)

// remoteAnswerTimeout bounds forwarding one client's answer to the daemon
// that asked.
const remoteAnswerTimeout = 30 * time.Second

// Remote is the hub's way to the other daemons sharing the database: it
// carries a client's answer to a request another daemon's turn asked. With
// a Remote the hub also publishes its own requests in the thread's event
// log and presents the other daemons' requests to its subscribers; without
// one (a single daemon) neither happens.
type Remote interface {
	// Answer forwards the answer of a client of this daemon (a result, or
	// the client's JSON-RPC error as clientErr) to request requestID of
	// the daemon running threadID's turn, which settles it with
	// AnswerRemote. It fails when that daemon did not take the answer:
	// the request is settled already, or no daemon runs the thread.
	Answer(ctx context.Context, threadID string, requestID int64, result json.RawMessage, clientErr error) error
	// Held tells the daemon running threadID's turn whether a client of
	// this daemon holds its request requestID (HeldRemote there): while
	// one does, it waits for the answer as for one of its own clients'.
	Held(ctx context.Context, threadID string, requestID int64, held bool) error
	// Pending returns the pending requests of threadID's turn from the
	// daemon running it (its PendingRequests), none when no other daemon
	// runs it: what a client that subscribes here mid-request must get.
	Pending(ctx context.Context, threadID string) ([]Offer, error)
}

// Offer is a pending server request of a thread as the daemon running its
// turn lists it for the others.
type Offer struct {
	// RequestID is the request's id on the daemon that asked.
	RequestID int64 `json:"requestId"`
	// Method and Params are the request as sent.
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// PendingRequests lists the requests of a thread's turn that clients of
// other daemons may answer: its unsettled approvals and user-input
// requests, and the dynamic tool calls it published.
func (h *Hub) PendingRequests(threadID string) []Offer {
	h.mu.Lock()
	var rs []*Request
	var ids []int64
	for id, r := range h.waiting {
		if r.ThreadID == threadID {
			rs, ids = append(rs, r), append(ids, id)
		}
	}
	h.mu.Unlock()
	out := make([]Offer, 0, len(rs))
	for i, r := range rs {
		if r.isSettled() {
			continue
		}
		params, err := json.Marshal(r.Params)
		if err != nil {
			h.log.Error("encode a pending server request", "method", r.Method, "err", err)
			continue
		}
		out = append(out, Offer{RequestID: ids[i], Method: r.Method, Params: params})
	}
	return out
}

// fetchRemote presents the pending requests of the daemon running a
// thread's turn, for the thread's first subscribers here: the events that
// offered them were logged before this daemon listened for the thread.
func (h *Hub) fetchRemote(threadID string) {
	defer h.wg.Done()
	ctx, cancel := context.WithTimeout(h.ctx, remoteAnswerTimeout)
	defer cancel()
	offers, err := h.cfg.Remote.Pending(ctx, threadID)
	if err != nil {
		h.log.Info("reading another daemon's pending requests", "thread", threadID, "err", err)
		return
	}
	for _, o := range offers {
		h.presentRemote(threadID, remoteOfferIn(o))
	}
}

// remoteOffer is the params of a MethodRequestOffered event.
type remoteOffer struct {
	RequestID int64  `json:"requestId"`
	Method    string `json:"method"`
	Params    any    `json:"params"`
}

// remoteOfferIn is a remoteOffer as another daemon reads it.
type remoteOfferIn Offer

// remoteWithdrawn is the params of a methodWithdrawn event.
type remoteWithdrawn struct {
	RequestID int64 `json:"requestId"`
}

// remoteKey names a request of another daemon: its thread and its id on
// the daemon that asked (one daemon runs a thread's turn at a time).
type remoteKey struct {
	thread string
	id     int64
}

// internalEvent reports whether a logged event is one of the hub's own,
// which no client gets.
func internalEvent(method string) bool {
	switch method {
	case MethodRequestOffered, methodWithdrawn, MethodThreadArchived, MethodThreadUnarchived:
		return true
	}
	return false
}

// publish numbers one of the hub's own entries in a thread's log for the
// other daemons and the event consumers; no client here gets it.
func (h *Hub) publish(threadID, method string, params any) {
	n, err := h.NewNotification(method, params)
	if err != nil {
		h.log.Error("encode an entry of the event log", "method", method, "err", err)
		return
	}
	n.ThreadID = threadID
	h.cfg.Journal.Record(n, func() { h.notifyEveryone(n) })
}

// publishCall publishes a dynamic tool call that no live client here can
// take, once, so that a live client of another daemon may answer it; when
// the call is settled, however, its withdrawal follows.
func (h *Hub) publishCall(r *Request) {
	r.mu.Lock()
	if r.published || r.settled {
		r.mu.Unlock()
		return
	}
	r.published = true
	r.mu.Unlock()
	id := h.NextRequestID()
	h.mu.Lock()
	h.waiting[id] = r
	h.mu.Unlock()
	h.publish(r.ThreadID, MethodRequestOffered, remoteOffer{RequestID: id, Method: r.Method, Params: r.Params})
	// The broker withdraws through the router only calls it offered to a
	// connection here; this one may have been held elsewhere only.
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		<-r.Call.Done()
		h.mu.Lock()
		delete(h.waiting, id)
		h.mu.Unlock()
		h.publish(r.ThreadID, methodWithdrawn, remoteWithdrawn{RequestID: id})
	}()
}

// remoteEvent handles a logged event of another daemon that concerns
// server requests; it reports whether the event was consumed (not to be
// given to the subscribers as it is).
func (h *Hub) remoteEvent(n *Notification) bool {
	switch n.Method {
	case MethodRequestOffered:
		var in remoteOfferIn
		if err := decodeParams(n, &in); err != nil {
			h.log.Warn("a server request of another daemon", "thread", n.ThreadID, "err", err)
			return true
		}
		h.presentRemote(n.ThreadID, in)
		return true
	case MethodThreadArchived, MethodThreadUnarchived:
		return true
	case methodWithdrawn:
		var in remoteWithdrawn
		if err := decodeParams(n, &in); err == nil {
			if r := h.takeRemote(remoteKey{n.ThreadID, in.RequestID}); r != nil {
				r.withdraw()
			}
		}
		return true
	case "serverRequest/resolved":
		var in api.ServerRequestResolvedNotification
		if err := decodeParams(n, &in); err != nil || in.RequestID.IsString {
			return false
		}
		r := h.takeRemote(remoteKey{n.ThreadID, in.RequestID.Num})
		if r == nil {
			return false
		}
		r.withdraw()
		// The subscribers here know the request under this daemon's id.
		local, err := h.NewNotification(n.Method, api.ServerRequestResolvedNotification{ThreadID: n.ThreadID, RequestID: api.IntRequestID(r.ID)})
		if err != nil {
			return true
		}
		local.ThreadID, local.Seq = n.ThreadID, n.Seq
		for _, m := range h.subscribed(n.ThreadID) {
			m.sub.Notify(local)
		}
		return true
	case "turn/completed":
		// A turn that ended settled its requests; should the daemon that ran
		// it have died, nobody will say so otherwise. The approvals stay
		// known so that a serverRequest/resolved logged after
		// turn/completed (an interrupted turn) is still translated.
		for _, r := range h.remoteOf(n.ThreadID) {
			r.withdraw()
			if r.Kind == KindToolCall {
				h.takeRemote(r.remoteKey())
			}
		}
		h.relayEnd(n)
	case "turn/started":
		h.mu.Lock()
		for k, r := range h.remote {
			if k.thread == n.ThreadID && r.isSettled() {
				delete(h.remote, k)
			}
		}
		h.mu.Unlock()
		h.relayStatus(n.ThreadID, func() api.ThreadStatus { return api.ThreadStatus{Type: api.ThreadActive} })
	}
	return false
}

// relayEnd relays the status a turn's end gives its thread: systemError
// for a failed turn, idle otherwise, as the daemon that ran it says.
func (h *Hub) relayEnd(n *Notification) {
	h.relayStatus(n.ThreadID, func() api.ThreadStatus {
		var end struct {
			Turn struct {
				Status api.TurnStatus `json:"status"`
			} `json:"turn"`
		}
		if err := decodeParams(n, &end); err == nil && end.Turn.Status == api.TurnFailed {
			return api.ThreadStatus{Type: api.ThreadSystemError}
		}
		return api.ThreadStatus{Type: api.ThreadIdle}
	})
}

// relayStatus tells the thread's subscribers here the status (computed
// only when one hears it) that another daemon's turn start or end gave
// the thread, as that daemon's
// thread/status/changed tells its own connections: that broadcast is not
// logged, so it reaches no other daemon. It comes before the turn event,
// in the order the daemon running the turn sends the two. The active
// flags (an approval waited for) are not relayed, nor does a connection
// here that does not follow the thread hear of it.
func (h *Hub) relayStatus(threadID string, status func() api.ThreadStatus) {
	const method = "thread/status/changed"
	var to []member
	for _, m := range h.subscribed(threadID) {
		if m.opts.hears(method) {
			to = append(to, m)
		}
	}
	if len(to) == 0 {
		return
	}
	n, err := h.NewNotification(method, api.ThreadStatusChangedNotification{ThreadID: threadID, Status: status()})
	if err != nil {
		h.log.Error("encode notification", "method", method, "err", err)
		return
	}
	n.Broadcast = true
	for _, m := range to {
		m.sub.Notify(n)
	}
}

// presentRemote makes a request of another daemon a request of this hub,
// under ids of this daemon, and offers it to the thread's subscribers.
func (h *Hub) presentRemote(threadID string, in remoteOfferIn) {
	r := h.newRequest(KindOf(in.Method), threadID, in.Method, in.Params)
	r.remote, r.remoteID = true, in.RequestID
	if r.Kind != KindToolCall {
		r.ID = h.NextRequestID()
	}
	k := remoteKey{threadID, in.RequestID}
	h.mu.Lock()
	if known := h.remote[k]; known != nil {
		// Both the log and the daemon's list brought it.
		h.mu.Unlock()
		return
	}
	h.remote[k] = r
	h.mu.Unlock()
	h.offerRemote(r)
}

// offerRemote offers a request of another daemon as this hub offers its
// own: approvals and user input to every subscriber, a dynamic tool call to
// one live client (the oldest subscriber first) unless one holds it.
func (h *Hub) offerRemote(r *Request) {
	if r.isSettled() {
		return
	}
	members := h.subscribed(r.ThreadID)
	if r.Kind != KindToolCall {
		for _, m := range members {
			r.offer(m, r.ID)
		}
		h.reportHeld(r)
		return
	}
	for _, m := range members {
		if !m.opts.Recorder && r.holds(m.id) {
			return
		}
	}
	for _, m := range members {
		// Recorders keep a dynamic tool call by its broker call, which
		// lives on the daemon that asked.
		if !m.opts.Recorder && r.offer(m, h.NextRequestID()) {
			h.reportHeld(r)
			return
		}
	}
}

// reportHeld tells the daemon that asked r whether a client here holds
// it, when that changed since the last report; off the caller's goroutine,
// which may be the event listener's. One reporter per request at a time
// sends the reports, so that they arrive in order.
func (h *Hub) reportHeld(r *Request) {
	r.mu.Lock()
	start := !r.reporting && r.heldReported != r.heldLocked()
	r.reporting = r.reporting || start
	r.mu.Unlock()
	if !start {
		return
	}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		for {
			r.mu.Lock()
			held := r.heldLocked()
			if held == r.heldReported || h.ctx.Err() != nil {
				r.reporting = false
				r.mu.Unlock()
				return
			}
			r.heldReported = held
			r.mu.Unlock()
			ctx, cancel := context.WithTimeout(h.ctx, remoteAnswerTimeout)
			if err := h.cfg.Remote.Held(ctx, r.ThreadID, r.remoteID, held); err != nil {
				h.log.Info("telling another daemon whether its request is held", "thread", r.ThreadID, "method", r.Method, "held", held, "err", err)
			}
			cancel()
		}
	}()
}

// HeldRemote records whether a client of daemon node holds the pending
// request id of thread (an approval, user input, or a published dynamic
// tool call): while a client of some daemon does, the request waits for an
// answer as one a client here holds does; once none does, its no-client
// timeout runs again. It reports whether the request is pending here.
func (h *Hub) HeldRemote(threadID string, id int64, node string, held bool) bool {
	h.mu.Lock()
	r := h.waiting[id]
	if r == nil || r.ThreadID != threadID {
		h.mu.Unlock()
		return false
	}
	r.mu.Lock()
	if held {
		if r.remoteHolders == nil {
			r.remoteHolders = map[string]bool{}
		}
		r.remoteHolders[node] = true
	} else {
		delete(r.remoteHolders, node)
	}
	r.mu.Unlock()
	h.wakeLocked()
	h.mu.Unlock()
	if r.Kind == KindToolCall {
		h.broker.Reoffer(threadID)
	}
	return true
}

// isRemoteHeld reports whether a client of another daemon holds r.
func (r *Request) isRemoteHeld() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.remoteHolders) > 0
}

// answerRemote forwards the answer of the client behind from to the
// daemon that asked r; it reports whether that daemon took it.
func (r *Request) answerRemote(from ConnID, result json.RawMessage, err error) bool {
	ctx, cancel := context.WithTimeout(context.Background(), remoteAnswerTimeout)
	defer cancel()
	if ferr := r.h.cfg.Remote.Answer(ctx, r.ThreadID, r.remoteID, result, err); ferr != nil {
		r.h.log.Info("answer to another daemon's request not taken", "thread", r.ThreadID, "method", r.Method, "err", ferr)
		return false
	}
	r.mu.Lock()
	r.answered[from] = true
	r.mu.Unlock()
	return true
}

// takeRemote forgets a request of another daemon and returns it, nil if
// unknown.
func (h *Hub) takeRemote(k remoteKey) *Request {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.remote[k]
	delete(h.remote, k)
	return r
}

// remoteOf returns the unsettled requests of other daemons for a thread.
func (h *Hub) remoteOf(threadID string) []*Request {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []*Request
	for k, r := range h.remote {
		if k.thread == threadID && !r.isSettled() {
			out = append(out, r)
		}
	}
	return out
}

func (r *Request) remoteKey() remoteKey { return remoteKey{r.ThreadID, r.remoteID} }

func (r *Request) isSettled() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.settled
}

// withdraw settles a request, once, and tells its holders.
func (r *Request) withdraw() {
	for _, hd := range r.takeHolders() {
		hd.sub.Settled(r)
	}
}

// decodeParams decodes the params of a logged event from its frame.
func decodeParams(n *Notification, v any) error {
	var f struct {
		Params json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(n.Frame(), &f); err != nil {
		return err
	}
	return json.Unmarshal(f.Params, v)
}
