package server

import (
	"net/http"
	"sync"

	"github.com/appserver/appserver/internal/dynamic"
	"github.com/appserver/appserver/internal/turns"
)

// Sink is a subscriber that is not a websocket connection. The HTTP API
// registers one per thread it records, so that turns.Manager can subscribe
// it to the thread like any connection: notifications sent to its id reach
// Notify, and the tool router offers it the thread's dynamic tool calls.
// Every method is called on the emitter's goroutine and must not block.
type Sink interface {
	// Notify receives one notification addressed to the sink.
	Notify(n *Notification)
	// HoldToolCall offers the sink a pending dynamic tool call; it reports
	// whether the sink took it, i.e. whether its clients can now see the
	// call and answer it through the broker.
	HoldToolCall(p *dynamic.Pending) bool
	// ToolCallSettled tells that a call the sink held was settled, however
	// and by whichever transport.
	ToolCallSettled(p *dynamic.Pending, outcome dynamic.Outcome)
}

// AddSink registers a sink under a fresh connection id, taken from the
// counter websocket sessions use, so ids stay unique and ordered by age.
func (s *Server) AddSink(k Sink) turns.ConnID {
	id := s.nextSess.Add(1)
	s.sinks.put(id, k)
	return turns.ConnID(id)
}

// RemoveSink forgets a sink; notifications sent to its id are dropped.
func (s *Server) RemoveSink(id turns.ConnID) { s.sinks.del(uint64(id)) }

// Mount serves h under pattern (for example "/v1") on the listener, behind
// the origin guard. Call it before Serve.
func (s *Server) Mount(pattern string, h http.Handler) { s.router.Mount(pattern, h) }

// Draining reports whether the server has started shutting down.
func (s *Server) Draining() bool { return s.draining.Load() }

// Frame returns the encoded notification, {"method", "params",
// "emittedAtMs"}, as sent on websockets. It is shared: do not modify it.
func (n *Notification) Frame() []byte { return n.frame }

// sinkIndex finds sinks by connection id.
type sinkIndex struct {
	mu sync.RWMutex
	m  map[uint64]Sink
}

func (x *sinkIndex) put(id uint64, k Sink) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.m == nil {
		x.m = map[uint64]Sink{}
	}
	x.m[id] = k
}

func (x *sinkIndex) del(id uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.m, id)
}

func (x *sinkIndex) get(id uint64) Sink {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.m[id]
}
