package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/dynamic"
	"github.com/appserver/appserver/internal/server/rpcws"
	"github.com/appserver/appserver/internal/turns"
)

// ToolRouter delivers dynamic tool calls (item/tool/call) to the
// connections subscribed to their thread, and hands the answers back to the
// broker. It implements dynamic.Router.
//
// Rules: a call goes to one live subscriber of its thread, the oldest
// connection first (normally the client that registered the tools). When
// that connection closes or unsubscribes before answering, the call is
// offered again to another subscriber; with none, the broker waits for a
// reconnect (thread/resume) up to its timeout. A holder that unsubscribed
// but is still connected may still answer. When the call is settled, every
// other connection that still holds the request gets
// serverRequest/resolved.
//
// Answers that are not used are logged and counted
// (appserver_dynamic_tool_ignored_answers_total): a second answer to a
// request, an answer to a request that was withdrawn (turn interrupted,
// answered elsewhere) and an answer whose id matches no outstanding
// request. item/tool/call is the only server request appserver sends, so
// a response to an unknown id counts as unknown_call.
//
// Sinks (the HTTP API's per-thread event logs) subscribed to the thread
// hold every call besides that one websocket: the sink records it for its
// HTTP clients, which answer through the broker, and is told when the call
// is settled. The first answer wins, whichever transport brings it.
type ToolRouter struct {
	s    *Server
	subs func(threadID string) []turns.ConnID

	mu    sync.Mutex // guards the fields below and holding.answered; Withdraw cancels requests under it
	holds map[*dynamic.Pending][]*holding
	conns map[uint64]*connCalls // connections that were sent item/tool/call
}

// holding is one connection's copy of an outstanding request, or a sink's
// record of the call (sink set; requestID and cancel unused).
type holding struct {
	conn      uint64
	sink      Sink
	requestID int64
	cancel    context.CancelFunc
	answered  bool // the waiter took this connection's answer
}

// answerState tracks an item/tool/call request whose waiter and answer
// have not met: the answer arrived (seen by the reader) before the waiter
// took it, or the request was withdrawn before any answer arrived. A
// withdrawn request that is never answered is remembered until its
// connection closes (the session keeps the request that long too).
type answerState uint8

const (
	answerArrived answerState = iota + 1
	answerWithdrawn
)

// recentAnswered is how many answered request ids a connection remembers
// to tell a second answer (duplicate) from an unknown id.
const recentAnswered = 64

// connCalls is the per-connection bookkeeping of item/tool/call requests;
// it is dropped when the connection closes.
type connCalls struct {
	state  map[int64]answerState
	recent [recentAnswered]int64
	n      int // ids written to recent
}

func (c *connCalls) remember(id int64) {
	c.recent[c.n%recentAnswered] = id
	c.n++
}

func (c *connCalls) answered(id int64) bool {
	for _, x := range c.recent[:min(c.n, recentAnswered)] {
		if x == id {
			return true
		}
	}
	return false
}

// NewToolRouter returns a router over this server's connections; subs
// lists a thread's subscribers. It also starts counting the client answers
// that are not used.
func (s *Server) NewToolRouter(subs func(threadID string) []turns.ConnID) *ToolRouter {
	r := &ToolRouter{s: s, subs: subs, holds: map[*dynamic.Pending][]*holding{}, conns: map[uint64]*connCalls{}}
	hook := responseHook(r.response)
	s.responseHook.Store(&hook)
	return r
}

// Offer implements dynamic.Router.
func (r *ToolRouter) Offer(ctx context.Context, p *dynamic.Pending) error {
	subs := r.subs(p.ThreadID())
	slices.Sort(subs) // connection ids grow: oldest first
	r.mu.Lock()
	held := map[uint64]bool{}
	for _, h := range r.holds[p] {
		held[h.conn] = true
	}
	r.mu.Unlock()
	sinkHolds := r.offerSinks(p, subs, held)
	for _, c := range subs {
		if held[uint64(c)] && r.s.byID.get(uint64(c)) != nil {
			return nil // a live subscriber already has it
		}
	}

	for _, c := range subs {
		id := uint64(c)
		sess := r.s.byID.get(id)
		if sess == nil || held[id] {
			continue
		}
		if err := r.send(sess, p); err != nil {
			continue // that connection just went away; try the next
		}
		return nil
	}
	if sinkHolds {
		return nil
	}
	return dynamic.ErrNoConnection
}

// offerSinks gives the call to every subscribed sink that does not hold it
// yet and reports whether any subscribed sink holds it now.
func (r *ToolRouter) offerSinks(p *dynamic.Pending, subs []turns.ConnID, held map[uint64]bool) bool {
	holds := false
	for _, c := range subs {
		id := uint64(c)
		k := r.s.sinks.get(id)
		if k == nil {
			continue
		}
		if held[id] {
			holds = true
			continue
		}
		if !k.HoldToolCall(p) {
			continue
		}
		r.mu.Lock()
		r.holds[p] = append(r.holds[p], &holding{conn: id, sink: k})
		r.mu.Unlock()
		holds = true
	}
	return holds
}

// track creates the bookkeeping of sess (and its cleanup when the
// connection closes) unless it exists.
func (r *ToolRouter) track(sess *Session) {
	r.mu.Lock()
	_, ok := r.conns[sess.id]
	if !ok {
		r.conns[sess.id] = &connCalls{state: map[int64]answerState{}}
	}
	r.mu.Unlock()
	if !ok {
		sess.OnClose(func() {
			r.mu.Lock()
			delete(r.conns, sess.id)
			r.mu.Unlock()
		})
	}
}

// send queues the request on sess and starts waiting for its answer.
func (r *ToolRouter) send(sess *Session, p *dynamic.Pending) error {
	r.track(sess) // before the request goes out: its answer may come back at once
	reqCtx, cancel := context.WithCancel(context.Background())
	reqID, wait, err := sess.StartRequest(reqCtx, "item/tool/call", p.Params())
	if err != nil {
		cancel()
		return err
	}
	h := &holding{conn: sess.id, requestID: reqID, cancel: cancel}
	r.mu.Lock()
	r.holds[p] = append(r.holds[p], h)
	r.mu.Unlock()
	go func() {
		defer cancel()
		res, err := wait(reqCtx)
		if errors.Is(err, ErrConnectionClosed) && reqCtx.Err() == nil {
			r.drop(p, h) // the disconnect re-offers the call
			return
		}
		// Withdraw cancels reqCtx under r.mu, so this check and the
		// bookkeeping below are atomic with respect to it.
		r.mu.Lock()
		withdrawn, lost := reqCtx.Err() != nil, false
		if c := r.conns[h.conn]; c != nil {
			if withdrawn {
				// Settled elsewhere. An answer that arrived meanwhile is not
				// used; a later one is counted by response.
				lost = c.state[h.requestID] == answerArrived
				if lost {
					delete(c.state, h.requestID)
				}
			} else {
				delete(c.state, h.requestID)
			}
		}
		if !withdrawn {
			h.answered = true
		}
		r.mu.Unlock()
		if withdrawn {
			if lost {
				r.ignored(sess, reqID, dynamic.IgnoredDuplicate)
			}
			return
		}
		var clientErr error
		if err != nil {
			clientErr = err
		}
		if !p.ResolveResponse(res, clientErr) {
			sess.log.Info("ignored answer to a dynamic tool call that was already settled", "thread", p.ThreadID(), "call", p.CallID())
		}
	}()
	return nil
}

// response sees every response a client sends, on the connection's reader
// goroutine, before the session hands it to the waiting request: req is
// the request it answers, nil when no request with its id is outstanding.
func (r *ToolRouter) response(sess *Session, req *rpcws.PendingCall, respID api.RequestID) {
	if req != nil {
		if req.Method != "item/tool/call" {
			return
		}
		id := req.ID
		late := false
		r.mu.Lock()
		if c := r.conns[sess.id]; c != nil {
			c.remember(id)
			if c.state[id] == answerWithdrawn {
				delete(c.state, id)
				late = true
			} else {
				c.state[id] = answerArrived
			}
		}
		r.mu.Unlock()
		if late {
			r.ignored(sess, id, dynamic.IgnoredDuplicate)
		}
		return
	}
	reason := dynamic.IgnoredUnknownCall
	if !respID.IsString {
		r.mu.Lock()
		if c := r.conns[sess.id]; c != nil && c.answered(respID.Num) {
			reason = dynamic.IgnoredDuplicate
		}
		r.mu.Unlock()
	}
	r.ignored(sess, respID, reason)
}

// ignored logs and counts an answer that is not used.
func (r *ToolRouter) ignored(sess *Session, id any, reason dynamic.IgnoredReason) {
	sess.log.Warn("dynamic tool answer ignored", "request_id", fmt.Sprint(id), "reason", string(reason))
	r.s.metrics.DynamicIgnoredAnswers.WithLabelValues(string(reason)).Inc()
}

func (r *ToolRouter) drop(p *dynamic.Pending, h *holding) {
	r.mu.Lock()
	defer r.mu.Unlock()
	hs := r.holds[p]
	for i, x := range hs {
		if x == h {
			r.holds[p] = append(hs[:i:i], hs[i+1:]...)
			return
		}
	}
}

// Withdraw implements dynamic.Router.
func (r *ToolRouter) Withdraw(p *dynamic.Pending, outcome dynamic.Outcome) {
	r.mu.Lock()
	hs := r.holds[p]
	delete(r.holds, p)
	var notify, sinks []*holding
	for _, h := range hs {
		if h.sink != nil {
			sinks = append(sinks, h)
			continue
		}
		h.cancel()
		if h.answered {
			continue
		}
		if c := r.conns[h.conn]; c != nil {
			if _, ok := c.state[h.requestID]; ok {
				continue // its answer is on the way to the waiter
			}
			c.state[h.requestID] = answerWithdrawn // a late answer is counted
		}
		notify = append(notify, h)
	}
	r.mu.Unlock()
	for _, h := range sinks {
		h.sink.ToolCallSettled(p, outcome)
	}
	for _, h := range notify {
		sess := r.s.byID.get(h.conn)
		if sess == nil {
			continue
		}
		n, err := r.s.NewNotification("serverRequest/resolved", api.ServerRequestResolvedNotification{
			ThreadID: p.ThreadID(), RequestID: api.IntRequestID(h.requestID),
		})
		if err == nil {
			sess.Notify(n)
		}
	}
}

// DynamicMetrics adapts the server's Prometheus collectors to the dynamic
// tool broker's measurements.
func (m *Metrics) DynamicMetrics() dynamic.Metrics { return dynamicMetrics{m} }

type dynamicMetrics struct{ m *Metrics }

func (d dynamicMetrics) CallCompleted(o dynamic.Outcome, latency time.Duration) {
	d.m.DynamicCalls.WithLabelValues(string(o)).Inc()
	if latency > 0 {
		d.m.DynamicLatency.Observe(latency.Seconds())
	}
}

func (d dynamicMetrics) AddPending(delta int) { d.m.DynamicPending.Add(float64(delta)) }

func (d dynamicMetrics) AnswerIgnored(r dynamic.IgnoredReason) {
	d.m.DynamicIgnoredAnswers.WithLabelValues(string(r)).Inc()
}
