package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/dynamic"
	"github.com/appserver/appserver/internal/hub"
	"github.com/appserver/appserver/internal/server/rpcws"
)

// wsSub is an initialized websocket session as the hub sees it: the
// session's side of the hub's request router. It sends the requests the hub
// routes to it, hands the answers back, and tells the hub when the
// connection went away before answering.
//
// For item/tool/call it also accounts for the answers that are not used
// (appserver_dynamic_tool_ignored_answers_total): a second answer to a
// request, an answer to a request that was withdrawn (turn interrupted,
// answered elsewhere) and an answer whose id matches no outstanding
// request, and it sends serverRequest/resolved to a holder whose call was
// settled elsewhere. For approvals and user input the turns layer announces
// serverRequest/resolved to every subscriber itself.
type wsSub struct {
	sess *Session

	mu    sync.Mutex // guards the fields below; Settled cancels requests under it
	held  map[*hub.Request]*heldRequest
	calls connCalls // item/tool/call ids of this connection
	// holding has, per thread being replayed (thread/resume with
	// afterSeq), the live notifications that wait for the replay's end.
	holding map[string][]*hub.Notification
}

// heldRequest is the session's copy of a routed request.
type heldRequest struct {
	id       int64
	cancel   context.CancelFunc
	answered bool // the waiter took this connection's answer
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

// connCalls is the per-connection bookkeeping of item/tool/call requests.
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

func newWSSub(sess *Session) *wsSub {
	return &wsSub{sess: sess, held: map[*hub.Request]*heldRequest{}, calls: connCalls{state: map[int64]answerState{}}}
}

// Notify implements hub.Subscriber. A numbered notification of a thread
// being replayed waits for the replay's end; a broadcast about a thread
// the connection's principal may not see is dropped.
func (w *wsSub) Notify(n *hub.Notification) {
	if n.Owned && !w.sess.who.SeesOriginator(n.Owner) {
		return // about another principal's thread
	}
	if n.Seq > 0 {
		w.mu.Lock()
		if held, ok := w.holding[n.ThreadID]; ok {
			w.holding[n.ThreadID] = append(held, n)
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
	}
	w.sess.Notify(n)
}

// hold starts holding the live notifications of a thread until replay.
func (w *wsSub) hold(threadID string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.holding == nil {
		w.holding = map[string][]*hub.Notification{}
	}
	if _, ok := w.holding[threadID]; !ok {
		w.holding[threadID] = nil
	}
}

// replay sends the thread's logged notifications after afterSeq (none when
// afterSeq is negative), then the held live ones it did not send, and
// stops holding. The live ones are sent under w.mu, so that a notification
// arriving meanwhile cannot overtake them.
func (w *wsSub) replay(ctx context.Context, h *hub.Hub, threadID string, afterSeq int64) {
	last := afterSeq
	for last >= 0 {
		evs, err := h.EventsAfter(ctx, threadID, last, 0)
		if err != nil {
			w.sess.Logger().Warn("thread/resume: replaying the event log", "thread", threadID, "err", err)
			break
		}
		if len(evs) == 0 {
			break
		}
		for _, n := range evs {
			w.sess.Notify(n)
			last = n.Seq
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, n := range w.holding[threadID] {
		if n.Seq > last {
			w.sess.Notify(n)
		}
	}
	delete(w.holding, threadID)
}

// Request implements hub.Subscriber: it queues the request and waits for
// its answer on a goroutine of its own, which ends with the answer, the
// connection or the request's settlement.
func (w *wsSub) Request(r *hub.Request, id int64) bool {
	ctx, cancel := context.WithCancel(context.Background())
	wait, err := w.sess.startRequest(id, r.Method, r.Params)
	if err != nil {
		cancel()
		return false
	}
	h := &heldRequest{id: id, cancel: cancel}
	w.mu.Lock()
	w.held[r] = h
	w.mu.Unlock()
	go w.await(ctx, r, h, wait)
	return true
}

func (w *wsSub) await(ctx context.Context, r *hub.Request, h *heldRequest, wait func(context.Context) (json.RawMessage, error)) {
	defer h.cancel()
	res, err := wait(ctx)
	if errors.Is(err, ErrConnectionClosed) && ctx.Err() == nil {
		w.forget(r)
		r.Lost(hub.ConnID(w.sess.id))
		return
	}
	tool := r.Kind == hub.KindToolCall
	// Settled cancels ctx under w.mu, so this check and the bookkeeping
	// below are atomic with respect to it.
	w.mu.Lock()
	withdrawn, lost := ctx.Err() != nil, false
	if tool {
		if withdrawn {
			// Settled elsewhere. An answer that arrived meanwhile is not
			// used; a later one is counted by response.
			lost = w.calls.state[h.id] == answerArrived
			if lost {
				delete(w.calls.state, h.id)
			}
		} else {
			delete(w.calls.state, h.id)
		}
	}
	if !withdrawn {
		h.answered = true
	}
	w.mu.Unlock()
	if withdrawn {
		if lost {
			w.ignored(h.id, dynamic.IgnoredDuplicate)
		}
		return
	}
	if !r.AnswerAs(hub.ConnID(w.sess.id), w.sess.Actor(), res, err) && tool && r.Call != nil {
		// (A call of another daemon has no broker call here; the hub logged it.)
		w.sess.log.Info("ignored answer to a dynamic tool call that was already settled", "thread", r.ThreadID, "call", r.Call.CallID())
	}
}

func (w *wsSub) forget(r *hub.Request) {
	w.mu.Lock()
	delete(w.held, r)
	w.mu.Unlock()
}

// Settled implements hub.Subscriber.
func (w *wsSub) Settled(r *hub.Request) {
	w.mu.Lock()
	h := w.held[r]
	delete(w.held, r)
	notify := false
	if h != nil {
		h.cancel()
		if r.Kind == hub.KindToolCall && !h.answered {
			if _, ok := w.calls.state[h.id]; !ok {
				w.calls.state[h.id] = answerWithdrawn // a late answer is counted
				notify = true
			} // else its answer is on the way to the waiter
		}
	}
	w.mu.Unlock()
	if !notify {
		return
	}
	n, err := w.sess.srv.NewNotification("serverRequest/resolved", api.ServerRequestResolvedNotification{
		ThreadID: r.ThreadID, RequestID: api.IntRequestID(h.id),
	})
	if err == nil {
		w.sess.Notify(n)
	}
}

// response sees every response the client sends, on the connection's
// reader goroutine, before the session hands it to the waiting request:
// req is the request it answers, nil when no request with its id is
// outstanding.
func (w *wsSub) response(req *rpcws.PendingCall, respID api.RequestID) {
	if req != nil {
		if req.Method != "item/tool/call" {
			return
		}
		id := req.ID
		late := false
		w.mu.Lock()
		w.calls.remember(id)
		if w.calls.state[id] == answerWithdrawn {
			delete(w.calls.state, id)
			late = true
		} else {
			w.calls.state[id] = answerArrived
		}
		w.mu.Unlock()
		if late {
			w.ignored(id, dynamic.IgnoredDuplicate)
		}
		return
	}
	reason := dynamic.IgnoredUnknownCall
	if !respID.IsString {
		w.mu.Lock()
		if w.calls.answered(respID.Num) {
			reason = dynamic.IgnoredDuplicate
		}
		w.mu.Unlock()
	}
	w.ignored(respID, reason)
}

// ignored logs and counts an answer that is not used.
func (w *wsSub) ignored(id any, reason dynamic.IgnoredReason) {
	w.sess.log.Warn("dynamic tool answer ignored", "request_id", fmt.Sprint(id), "reason", string(reason))
	w.sess.srv.metrics.DynamicIgnoredAnswers.WithLabelValues(string(reason)).Inc()
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
