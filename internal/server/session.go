package server

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/appserver/appserver/internal/server/rpcws"
)

var sprintf = fmt.Sprintf

// Method handles one JSON-RPC method. It returns the result to send, or an
// error (an *RPCError, an apperr error, or anything else as internal).
type Method func(ctx context.Context, c *Call) (any, error)

// Call is one inbound request as a Method sees it.
type Call struct {
	Session *Session
	Method  string
	// Params is nil when the key was absent and "null" when it was null.
	Params  json.RawMessage
	after   []func()
	release func()
}

// ReleaseOrder lets later requests that touch the same resource (thread,
// command/exec process) start before this one returns; a long-running
// method calls it once the resource is ready for them.
func (c *Call) ReleaseOrder() {
	if c.release != nil {
		c.release()
	}
}

// After queues f to run once the response has been queued, so that
// notifications a method causes follow its response on the wire.
func (c *Call) After(f func()) { c.after = append(c.after, f) }

// Session is one websocket connection's JSON-RPC state.
type Session struct {
	srv    *Server
	id     uint64
	log    *slog.Logger
	ctx    context.Context
	stream *rpcws.Stream
	// conn is set by the first Handle call or after NewConn returns,
	// whichever is first: jsonrpc2 starts reading before NewConn returns.
	conn atomic.Pointer[jsonrpc2.Conn]

	// Written once by initialize (on the reader goroutine) before
	// initialized is set; read-only afterwards.
	initialized  atomic.Bool
	clientName   string
	clientVer    string
	experimental bool
	optOut       map[string]struct{}

	handlers sync.WaitGroup

	mu         sync.Mutex // guards closeHooks, closed, tails
	closeHooks []func()
	closed     bool
	// tails holds, per resource key, the done channel of the last request
	// admitted for it, so that requests naming the same thread are served
	// in arrival order while unrelated ones run concurrently.
	tails map[string]chan struct{}

	// The server→client requests waiting for their answer, by id. They are
	// kept here rather than by jsonrpc2, so that the request frame is
	// encoded once and the answer decoded once (see rpcws.EncodeRequest);
	// jsonrpc2 only serves the client's requests. An entry stays until its
	// answer arrives or the connection closes, even when its waiter gave
	// up, so that a late answer is still recognised.
	// sub is the session's hub subscriber, set by initialize.
	sub atomic.Pointer[wsSub]

	callMu      sync.Mutex // guards calls, callsClosed
	calls       map[int64]*sentRequest
	callsClosed bool
}

// sentRequest is a server→client request waiting for its answer.
type sentRequest struct {
	id     int64
	method string
	done   chan struct{} // closed once answered or the connection closed
	// Set before done is closed: the answer, or closed when the
	// connection went away first.
	result json.RawMessage
	err    *jsonrpc2.Error
	closed bool
}

// ID returns the session's process-unique id.
func (s *Session) ID() uint64 { return s.id }

// Initialized reports whether initialize has succeeded on this connection.
func (s *Session) Initialized() bool { return s.initialized.Load() }

// Experimental reports whether the client opted into experimentalApi.
func (s *Session) Experimental() bool { return s.experimental }

// ClientName returns clientInfo.name from initialize.
func (s *Session) ClientName() string { return s.clientName }

// Context is cancelled when the connection closes.
func (s *Session) Context() context.Context { return s.ctx }

// Logger returns the session's logger.
func (s *Session) Logger() *slog.Logger { return s.log }

// OnClose registers f to run after the connection has closed; if it is
// already closed, f runs at once.
func (s *Session) OnClose(f func()) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		f()
		return
	}
	s.closeHooks = append(s.closeHooks, f)
	s.mu.Unlock()
}

func (s *Session) runCloseHooks() {
	s.mu.Lock()
	s.closed = true
	hooks := s.closeHooks
	s.closeHooks = nil
	s.mu.Unlock()
	for _, f := range hooks {
		f()
	}
}

// Notify queues a notification unless the client opted out of its method.
// A full queue disconnects the client (see rpcws); it never blocks.
func (s *Session) Notify(n *Notification) {
	if _, out := s.optOut[n.Method]; out {
		return
	}
	if err := s.stream.Send(n.Frame()); err == nil {
		s.srv.metrics.Notifications.WithLabelValues(n.Method).Inc()
	}
}

// Request sends a server→client request with a process-wide integer id and
// waits for the client's result, ctx, or the connection to close. It returns
// the id as soon as it is known through onID (for serverRequest/resolved).
func (s *Session) Request(ctx context.Context, method string, params any, onID func(id int64)) (json.RawMessage, error) {
	id, wait, err := s.StartRequest(ctx, method, params)
	if onID != nil {
		onID(id)
	}
	if err != nil {
		return nil, err
	}
	return wait(ctx)
}

// ErrConnectionClosed is returned by a request's wait when the connection
// closed before the client answered.
var ErrConnectionClosed = jsonrpc2.ErrClosed

// StartRequest queues a server→client request without waiting: it returns
// the request id and a function that waits for the answer. A client's error
// reply is returned as an *RPCError; a closed connection as
// ErrConnectionClosed. Queueing never blocks; ctx is not used by it.
func (s *Session) StartRequest(ctx context.Context, method string, params any) (int64, func(context.Context) (json.RawMessage, error), error) {
	id := s.srv.hub.NextRequestID()
	wait, err := s.startRequest(id, method, params)
	return id, wait, err
}

// startRequest is StartRequest with the id chosen by the caller: the hub
// sends an approval to every subscriber under one id.
func (s *Session) startRequest(id int64, method string, params any) (func(context.Context) (json.RawMessage, error), error) {
	frame, err := rpcws.EncodeRequest(id, method, params)
	if err != nil {
		return nil, err
	}
	r := &sentRequest{id: id, method: method, done: make(chan struct{})}
	// Registered before the frame is queued: the answer may come back at
	// once.
	s.callMu.Lock()
	if s.callsClosed {
		s.callMu.Unlock()
		return nil, ErrConnectionClosed
	}
	if s.calls == nil {
		s.calls = map[int64]*sentRequest{}
	}
	s.calls[id] = r
	s.callMu.Unlock()
	if err := s.stream.Send(frame); err != nil {
		s.callMu.Lock()
		delete(s.calls, id)
		closed := s.callsClosed
		s.callMu.Unlock()
		if closed {
			err = ErrConnectionClosed
		}
		return nil, err
	}
	return r.wait, nil
}

// wait waits for the answer, ctx or the connection to close.
func (r *sentRequest) wait(ctx context.Context) (json.RawMessage, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-r.done:
	}
	switch {
	case r.closed:
		return nil, ErrConnectionClosed
	case r.err != nil:
		return nil, &RPCError{Code: r.err.Code, Message: r.err.Message}
	}
	return r.result, nil
}

// response takes a client's answer on the connection's reader goroutine:
// it hands the answer to the request's waiter after the server's response
// hook saw it.
func (s *Session) response(resp *rpcws.Response) {
	var r *sentRequest
	if !resp.ID.IsString {
		id := int64(resp.ID.Num)
		s.callMu.Lock()
		if r = s.calls[id]; r != nil {
			delete(s.calls, id)
		}
		s.callMu.Unlock()
	}
	if h := s.srv.responseHook.Load(); h != nil {
		(*h)(s, r, resp.ID)
	}
	if r == nil {
		s.log.Debug("ignoring response with no corresponding request", "id", resp.ID.String())
		return
	}
	r.result, r.err = resp.Result, resp.Error
	close(r.done)
}

// failRequests fails every request still waiting for its answer, and any
// later one, with ErrConnectionClosed.
func (s *Session) failRequests() {
	s.callMu.Lock()
	calls := s.calls
	s.calls = nil
	s.callsClosed = true
	s.callMu.Unlock()
	for _, r := range calls {
		r.closed = true
		close(r.done)
	}
}

// Handle implements jsonrpc2.Handler. It runs on the connection's reader
// goroutine, so it must not block: initialize is answered inline (so that
// later requests on the connection see its outcome) and everything else is
// admitted to the bounded ingress and handled on its own goroutine.
func (s *Session) Handle(ctx context.Context, conn *jsonrpc2.Conn, req *jsonrpc2.Request) {
	if s.conn.Load() == nil {
		s.conn.CompareAndSwap(nil, conn)
	}
	if req.Notif {
		// Client notifications (initialized, …) carry nothing we act on.
		return
	}
	if req.Method == "initialize" {
		s.handlers.Add(1)
		s.serve(ctx, req, nil)
		return
	}
	if !s.initialized.Load() {
		s.replyError(ctx, req, InvalidRequest("Not initialized"), time.Now())
		return
	}
	if s.srv.draining.Load() {
		s.replyError(ctx, req, &RPCError{
			Code:    CodeInvalidRequest,
			Message: "Server is draining; retry after reconnecting",
			Data:    map[string]string{"reason": "serverShuttingDown"},
		}, time.Now())
		return
	}
	select {
	case s.srv.ingress <- struct{}{}:
	default:
		s.srv.metrics.Overloaded.Inc()
		s.replyError(ctx, req, &RPCError{Code: CodeOverloaded, Message: OverloadedMessage}, time.Now())
		return
	}
	s.handlers.Add(1)
	key := resourceKey(req)
	prev, mine := s.enqueue(key)
	go func() {
		defer func() { <-s.srv.ingress }()
		if prev != nil {
			select {
			case <-prev:
			case <-ctx.Done():
			}
		}
		var once sync.Once
		release := func() { once.Do(func() { s.dequeue(key, mine) }) }
		s.serve(ctx, req, release)
		release()
	}()
}

// resourceKey names what a request touches for ordering: its thread, or
// the connection-scoped process id of command/exec and its follow-ups.
func resourceKey(req *jsonrpc2.Request) string {
	if req.Params == nil {
		return ""
	}
	var p struct {
		ThreadID  string `json:"threadId"`
		ProcessID string `json:"processId"`
	}
	if json.Unmarshal(*req.Params, &p) != nil {
		return ""
	}
	if p.ThreadID != "" {
		return "thread:" + p.ThreadID
	}
	if p.ProcessID != "" && strings.HasPrefix(req.Method, "command/exec") {
		return "process:" + p.ProcessID
	}
	return ""
}

// enqueue records a request for key and returns the previous request's
// done channel (nil if none) and this request's own.
func (s *Session) enqueue(key string) (prev, mine chan struct{}) {
	if key == "" {
		return nil, nil
	}
	mine = make(chan struct{})
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tails == nil {
		s.tails = map[string]chan struct{}{}
	}
	prev = s.tails[key]
	s.tails[key] = mine
	return prev, mine
}

func (s *Session) dequeue(key string, mine chan struct{}) {
	if mine == nil {
		return
	}
	close(mine)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tails[key] == mine {
		delete(s.tails, key)
	}
}

func (s *Session) serve(ctx context.Context, req *jsonrpc2.Request, release func()) {
	defer s.handlers.Done()
	start := time.Now()
	call := &Call{Session: s, Method: req.Method, release: release}
	if req.Params != nil {
		call.Params = *req.Params
	}
	result, err := s.invokeSafely(ctx, call)
	if err != nil {
		rerr := toRPCError(err)
		if rerr.Code == CodeInternal {
			// The client sees a generic message; the cause goes to the log.
			s.log.Error("request failed", "method", req.Method, "err", err)
		}
		s.replyError(ctx, req, rerr, start)
		return
	}
	if result == nil {
		result = struct{}{}
	}
	if err := s.conn.Load().Reply(ctx, req.ID, result); err != nil {
		s.log.Debug("reply not sent", "method", req.Method, "err", err)
	}
	s.observe(req.Method, 0, start)
	for _, f := range call.after {
		f()
	}
}

// invokeSafely runs the method, turning a panic into an internal error so
// that one faulty handler cannot take the daemon down.
func (s *Session) invokeSafely(ctx context.Context, c *Call) (result any, err error) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("request handler panicked", "method", c.Method, "panic", p, "stack", string(debug.Stack()))
			c.after = nil
			result, err = nil, fmt.Errorf("panic in %s: %v", c.Method, p)
		}
	}()
	return s.srv.invoke(ctx, c)
}

func (s *Session) replyError(ctx context.Context, req *jsonrpc2.Request, e *RPCError, start time.Time) {
	if e.Code != CodeInternal {
		s.log.Debug("request refused", "method", req.Method, "code", e.Code, "message", e.Message)
	}
	if err := s.conn.Load().ReplyWithError(ctx, req.ID, e.wire()); err != nil {
		s.log.Debug("error reply not sent", "method", req.Method, "err", err)
	}
	s.observe(req.Method, e.Code, start)
}

func (s *Session) observe(method string, code int64, start time.Time) {
	s.log.Debug("request", "method", method, "code", code, "duration", time.Since(start))
	label := s.srv.methodLabel(method)
	s.srv.metrics.Requests.WithLabelValues(label, fmt.Sprint(code)).Inc()
	s.srv.metrics.RequestDuration.WithLabelValues(label).Observe(time.Since(start).Seconds())
}
