package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/audit"
	"github.com/appserver/appserver/internal/jsonscan"
	"github.com/appserver/appserver/internal/principal"
	"github.com/appserver/appserver/internal/server/rpcws"
	"github.com/appserver/appserver/internal/stackgrow"
)

// Method handles one JSON-RPC method. It returns the result to send, or an
// error (an *RPCError, an apperr error, or anything else as internal).
type Method func(ctx context.Context, c *Call) (any, error)

// Call is one inbound request as a Method sees it.
type Call struct {
	Session *Session
	Method  string
	// Params is nil when the key was absent and "null" when it was null.
	Params json.RawMessage
	// req is the request as the connection decoded it, nil for a Call
	// made otherwise; its params' members spare DecodeParams a decode.
	req     *rpcws.Request
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
	srv  *Server
	id   uint64
	log  *slog.Logger
	conn *rpcws.Conn
	// who opened the connection: set at the upgrade, never changed.
	who principal.Principal

	// Written once by initialize (on the reader goroutine) before
	// initialized is set; read-only afterwards.
	initialized  atomic.Bool
	clientName   string
	clientVer    string
	experimental bool
	eventSeq     bool // thread notifications carry "seq"
	optOut       map[string]struct{}

	mu         sync.Mutex // guards closeHooks, closed, tails
	closeHooks []func()
	closed     bool
	// tails holds, per resource key, the done channel of the last request
	// admitted for it, so that requests naming the same thread are served
	// in arrival order while unrelated ones run concurrently.
	tails map[string]chan struct{}

	// sub is the session's hub subscriber, set by initialize.
	sub atomic.Pointer[wsSub]
}

// ID returns the session's process-unique id.
func (s *Session) ID() uint64 { return s.id }

// Initialized reports whether initialize has succeeded on this connection.
func (s *Session) Initialized() bool { return s.initialized.Load() }

// Experimental reports whether the client opted into experimentalApi.
func (s *Session) Experimental() bool { return s.experimental }

// Actor is who the connection acts for, as the audit log names it: the
// principal that opened it, through its client (clientInfo.name and the
// connection's id).
func (s *Session) Actor() audit.Actor {
	return audit.Actor{Principal: s.who.Name(), Client: s.clientName + "#" + strconv.FormatUint(s.id, 10)}
}

// ClientName returns clientInfo.name from initialize.
func (s *Session) ClientName() string { return s.clientName }

// Context is cancelled when the connection closes.
func (s *Session) Context() context.Context { return s.conn.Context() }

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
	frame := n.Frame()
	if s.eventSeq {
		// Clients that asked see each thread notification's sequence
		// number, the position thread/resume's afterSeq takes.
		frame = n.SeqFrame()
	}
	var err error
	if hold := holdFor(n); hold > 0 {
		err = s.conn.SendLazyWithin(frame, hold)
	} else {
		err = s.conn.Send(frame)
	}
	if err == nil {
		s.srv.metrics.notification(n.Method)
	}
}

// Distant broadcasts (thread/status/changed and the like, about a thread a
// client does not follow) reach every connection, so written as they come
// they cost a write per connection per change: with one thread running
// per connection, a cost per turn that grows with the number of
// connections. Each connection holds them instead for up to
// audience × distantDelayPerConn, between DefaultLazyDelay and
// maxDistantDelay, which bounds the writes they cause daemon-wide to
// about one per distantDelayPerConn until maxDistantDelay is reached
// (bench/README.md, BenchmarkCrowdTurns).
const (
	distantDelayPerConn = 250 * time.Microsecond
	maxDistantDelay     = time.Second
)

// holdFor is how long a connection may hold n for its next frame before
// writing it; 0 writes it at once.
func holdFor(n *Notification) time.Duration {
	switch {
	case n.Distant:
		// About a thread this client does not follow: a delay that grows
		// with the audience.
		return distantDelay(n.Audience)
	case n.Broadcast:
		// Every connection gets it.
		return rpcws.DefaultLazyDelay
	case n.Audience >= crowdedThread:
		// A notification of a thread many follow.
		return crowdedDelay(n.Audience)
	}
	return 0
}

// A thread's notifications go to its subscribers as they come, each in a
// write of its own unless the connection's writer is still busy, so that
// an editor following its thread sees every delta at once. With many
// subscribers those writes were most of the daemon's work; so a
// notification that goes to crowdedThread subscribers or more waits up
// to crowdedDelayPerConn for each of them, at most maxCrowdedDelay, for
// the connection's next frame, and the turn's notifications go out
// together. Nothing overtakes it. With 1,000 subscribers
// (BenchmarkBusyThread, builds alternating, bench/README.md) the daemon's
// CPU a turn fell from 32.7–33.4 to 22.7–24.0 ms and turns/s rose from
// 28 to 36–37, with the fan-out's p50 and p99 unchanged (16–17 and 35–41
// ms); holding up to 5 ms saved a little more CPU but delayed the fan-out.
const (
	crowdedThread       = 16
	crowdedDelayPerConn = 2 * time.Microsecond
	maxCrowdedDelay     = 2 * time.Millisecond
)

// crowdedDelay is how long a thread's notification to audience
// subscribers may wait for a connection's next frame.
func crowdedDelay(audience int) time.Duration {
	return min(time.Duration(audience)*crowdedDelayPerConn, maxCrowdedDelay)
}

// distantDelay is how long a distant broadcast to audience connections
// may wait for a connection's next frame.
func distantDelay(audience int) time.Duration {
	return min(max(time.Duration(audience)*distantDelayPerConn, rpcws.DefaultLazyDelay), maxDistantDelay)
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
var ErrConnectionClosed = rpcws.ErrClosed

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
	call, err := s.conn.Call(id, method, params)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) (json.RawMessage, error) {
		res, err := call.Wait(ctx)
		var rerr *rpcws.Error
		if errors.As(err, &rerr) {
			return nil, &RPCError{Code: rerr.Code, Message: rerr.Message}
		}
		return res, err
	}, nil
}

// response sees a client's answer on the connection's reader goroutine,
// before the waiting request gets it.
func (s *Session) response(call *rpcws.PendingCall, id api.RequestID) {
	if h := s.srv.responseHook.Load(); h != nil {
		(*h)(s, call, id)
	}
}

// Handle implements rpcws.Handler. It runs on the connection's reader
// goroutine, so it must not block: initialize is answered inline (so that
// later requests on the connection see its outcome), the requests refused
// before any work (not initialized, draining, overloaded) are answered
// inline, and everything else is admitted to the bounded ingress and
// handled on its own goroutine.
func (s *Session) Handle(ctx context.Context, req *rpcws.Request) {
	if req.IsNotification() {
		// Client notifications (initialized, …) carry nothing we act on.
		return
	}
	if req.Method == "initialize" {
		s.serve(ctx, req, nil, nil)
		return
	}
	if !s.initialized.Load() {
		s.refuse(req, InvalidRequest("Not initialized"))
		return
	}
	if s.srv.draining() {
		s.refuse(req, &RPCError{
			Code:    CodeInvalidRequest,
			Message: "Server is draining; retry after reconnecting",
			Data:    map[string]string{"reason": "serverShuttingDown"},
		})
		return
	}
	select {
	case s.srv.ingress <- struct{}{}:
	default:
		s.srv.metrics.Overloaded.Inc()
		s.refuse(req, &RPCError{Code: CodeOverloaded, Message: OverloadedMessage})
		return
	}
	key := resourceKey(req)
	prev, mine := s.enqueue(key)
	go func() {
		// The request's place in the ingress is free once it is served,
		// before its answer goes out: a client that got the answer may
		// send the next request at once and find the place free.
		var freed sync.Once
		free := func() { freed.Do(func() { <-s.srv.ingress }) }
		defer free()
		if prev != nil {
			s.srv.queued.Add(1)
			select {
			case <-prev:
			case <-ctx.Done():
			}
			s.srv.queued.Add(-1)
		}
		// Grown once it is to be served, not while it waits behind its
		// key's previous request.
		stackgrow.Grow()
		s.srv.inFlight.Add(1)
		defer s.srv.inFlight.Add(-1)
		var once sync.Once
		release := func() { once.Do(func() { s.dequeue(key, mine) }) }
		s.serve(ctx, req, release, free)
		release()
	}()
}

// refuse answers a request that is not served.
func (s *Session) refuse(req *rpcws.Request, e *RPCError) {
	_, end := s.trace(s.conn.Context(), req)
	s.replyError(req, e, time.Now())
	end(e.Code, e.Message)
	s.conn.Finish(req)
}

// trace starts the span of a request when the server has a Tracer.
func (s *Session) trace(ctx context.Context, req *rpcws.Request) (context.Context, func(int64, string)) {
	if s.srv.cfg.Tracer == nil {
		return ctx, untraced
	}
	return s.srv.cfg.Tracer.Request(ctx, req.Method, req.IDText())
}

func untraced(int64, string) {}

// resourceKey names what a request touches for ordering: its thread, or
// the connection-scoped process of command/exec (processId), process/*
// (processHandle) and their follow-ups.
// It reads the params' members found when the frame was read; params the
// strict scan left alone are decoded by encoding/json as they always were.
func resourceKey(req *rpcws.Request) string {
	if req.Params == nil {
		return ""
	}
	names := [3]string{"threadId", "processId", "processHandle"}
	var vals [3][]byte
	members, ok := req.Members()
	if !ok || !jsonscan.Pick(members, names[:], vals[:]) {
		return decodeResourceKey(req)
	}
	// A member that is not a string (nor null) fails the whole decode.
	var ids [3]string
	for i, v := range vals {
		if v == nil || string(v) == "null" {
			continue
		}
		if v[0] != '"' {
			return ""
		}
		ids[i], _ = jsonscan.Text(v)
	}
	return keyOf(req.Method, ids[0], ids[1], ids[2])
}

func decodeResourceKey(req *rpcws.Request) string {
	var p struct {
		ThreadID      string `json:"threadId"`
		ProcessID     string `json:"processId"`
		ProcessHandle string `json:"processHandle"`
	}
	if json.Unmarshal(req.Params, &p) != nil {
		return ""
	}
	return keyOf(req.Method, p.ThreadID, p.ProcessID, p.ProcessHandle)
}

func keyOf(method, threadID, processID, processHandle string) string {
	switch {
	case threadID != "":
		return "thread:" + threadID
	case processID != "" && strings.HasPrefix(method, "command/exec"):
		return "process:" + processID
	case processHandle != "" && strings.HasPrefix(method, "process/"):
		return "processHandle:" + processHandle
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

// serve runs a request's method and answers it; the request leaves the
// connection's in-flight state once the notifications its method queued
// with After are queued too. served, if set, is called once the method
// returned, before the answer goes out.
func (s *Session) serve(ctx context.Context, req *rpcws.Request, release, served func()) {
	defer s.conn.Finish(req)
	start := time.Now()
	ctx, end := s.trace(ctx, req)
	ctx = audit.WithActor(ctx, s.Actor())
	call := &Call{Session: s, Method: req.Method, Params: req.Params, req: req, release: release}
	result, err := s.invokeSafely(ctx, call)
	if served != nil {
		served()
	}
	if err != nil {
		rerr := toRPCError(err)
		if rerr.Code == CodeInternal {
			// The client sees a generic message; the cause goes to the log.
			s.log.ErrorContext(ctx, "request failed", "method", req.Method, "err", err)
		}
		s.replyError(req, rerr, start)
		end(rerr.Code, rerr.Message)
		return
	}
	if result == nil {
		result = struct{}{}
	}
	if err := s.conn.Reply(req, result); err != nil {
		s.log.ErrorContext(ctx, "reply not sent", "method", req.Method, "err", err)
	}
	s.observe(req.Method, 0, start)
	for _, f := range call.after {
		f()
	}
	end(0, "")
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

func (s *Session) replyError(req *rpcws.Request, e *RPCError, start time.Time) {
	if e.Code != CodeInternal {
		s.log.Debug("request refused", "method", req.Method, "code", e.Code, "message", e.Message)
	}
	if err := s.conn.ReplyError(req, e.wire()); err != nil {
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
