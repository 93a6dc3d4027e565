package server

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/dynamic"
	"github.com/appserver/appserver/internal/turns"
)

// ToolRouter delivers dynamic tool calls (item/tool/call) to the
// connections subscribed to their thread, and hands the answers back to the
// broker. It implements dynamic.Router.
//
// Rules: a call goes to one live subscriber of its thread (the first one
// that does not hold it yet). When that connection closes before
// answering, the call is offered again to another subscriber; with none,
// the broker waits for a reconnect (thread/resume) up to its timeout. When
// the call is settled, every other connection that still holds the request
// gets serverRequest/resolved.
type ToolRouter struct {
	s    *Server
	subs func(threadID string) []turns.ConnID

	mu    sync.Mutex // guards holds
	holds map[*dynamic.Pending][]*holding
}

// holding is one connection's copy of an outstanding request.
type holding struct {
	conn      uint64
	requestID int64
	cancel    context.CancelFunc
	answered  bool // guarded by ToolRouter.mu
}

// NewToolRouter returns a router over this server's connections; subs
// lists a thread's subscribers.
func (s *Server) NewToolRouter(subs func(threadID string) []turns.ConnID) *ToolRouter {
	return &ToolRouter{s: s, subs: subs, holds: map[*dynamic.Pending][]*holding{}}
}

// Offer implements dynamic.Router.
func (r *ToolRouter) Offer(ctx context.Context, p *dynamic.Pending) error {
	r.mu.Lock()
	held := map[uint64]bool{}
	for _, h := range r.holds[p] {
		if r.s.byID.get(h.conn) != nil {
			r.mu.Unlock()
			return nil // a live connection already has it
		}
		held[h.conn] = true
	}
	r.mu.Unlock()

	for _, c := range r.subs(p.ThreadID()) {
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
	return dynamic.ErrNoConnection
}

// send queues the request on sess and starts waiting for its answer.
func (r *ToolRouter) send(sess *Session, p *dynamic.Pending) error {
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
		if reqCtx.Err() != nil {
			return // withdrawn: the call was settled elsewhere
		}
		if errors.Is(err, ErrConnectionClosed) {
			r.drop(p, h) // the disconnect re-offers the call
			return
		}
		var clientErr error
		if err != nil {
			clientErr = err
		}
		r.mu.Lock()
		h.answered = true
		r.mu.Unlock()
		if !p.ResolveResponse(res, clientErr) {
			sess.log.Info("ignored answer to a dynamic tool call that was already settled", "thread", p.ThreadID(), "call", p.CallID())
		}
	}()
	return nil
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
func (r *ToolRouter) Withdraw(p *dynamic.Pending, _ dynamic.Outcome) {
	r.mu.Lock()
	hs := r.holds[p]
	delete(r.holds, p)
	r.mu.Unlock()
	for _, h := range hs {
		h.cancel()
		if h.answered {
			continue
		}
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
