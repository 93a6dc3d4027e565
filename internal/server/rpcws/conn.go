package rpcws

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/jsonscan"
)

// Error is a JSON-RPC error object, as sent in an error reply or received
// in a client's.
type Error struct {
	Code    int64
	Message string
	// Data is the encoded data member; nil leaves it out. Received errors
	// never carry it.
	Data json.RawMessage
}

// Error returns the code and message.
func (e *Error) Error() string { return fmt.Sprintf("jsonrpc error %d: %s", e.Code, e.Message) }

// Request is one inbound request or notification, decoded once from its
// frame: its id, method and params are slices of the frame, which it owns.
type Request struct {
	// Method is the method name.
	Method string
	// Params is nil when the key was absent and "null" when it was null.
	Params json.RawMessage
	// rawID is the id as the client wrote it, echoed in the reply; nil for
	// a notification.
	rawID []byte
	// members are Params' top-level members when Params is one object
	// jsonscan accepts (membersOK); memberBuf holds them for most requests
	// without an allocation of their own.
	members   []jsonscan.Member
	membersOK bool
	memberBuf [8]jsonscan.Member
	// held is what the request's frame holds of the inbound budget until
	// Finish.
	held     int64
	finished atomic.Bool
}

// IsNotification reports whether the message has no id, so that it gets no
// reply.
func (r *Request) IsNotification() bool { return r.rawID == nil }

// ID returns the request id (the zero RequestID for a notification).
func (r *Request) ID() api.RequestID {
	if len(r.rawID) > 0 && r.rawID[0] == '"' {
		return api.StringRequestID(idText(r.rawID))
	}
	n, _ := parseInt64(r.rawID)
	return api.IntRequestID(n)
}

// IDText returns the id as the client wrote it (strings unquoted), for
// logs.
func (r *Request) IDText() string { return idText(r.rawID) }

// Members returns the top-level members of Params, found when the frame was
// read. ok is false when Params is not an object or when the strict scan
// left it to encoding/json (see jsonscan): callers then decode Params
// themselves.
func (r *Request) Members() (members []jsonscan.Member, ok bool) { return r.members, r.membersOK }

// Handler serves the requests and notifications of a connection.
type Handler interface {
	// Handle receives each inbound request and notification in arrival
	// order, on the connection's reading goroutine, so it must not block:
	// it answers at once or hands the request to a goroutine. Every
	// request (not notification) counts as in flight until Finish.
	Handle(ctx context.Context, req *Request)
}

// ConnOptions configure a Conn.
type ConnOptions struct {
	// OnResponse, when set, sees every valid response a client sends, on
	// the reading goroutine, before the waiting call gets it: call is the
	// request it answers (nil when no outstanding request has its id,
	// and the response is dropped), id the id the client sent. It must
	// not block.
	OnResponse func(call *PendingCall, id api.RequestID)
	Logger     *slog.Logger
	// Context is the parent of the connection's Context, for its values
	// only (what the session keeps of the request that opened it): its
	// cancellation is not the connection's. nil means none.
	Context context.Context
}

// Conn is one JSON-RPC connection over a Stream: it reads and decodes
// frames, hands requests to a Handler, encodes replies, and keeps the
// in-flight state of both directions under one lock: the client's
// requests being served and the server's requests awaiting the client's
// answer. Its only goroutine is the one running Serve; the Stream starts
// a writer only while frames are queued.
type Conn struct {
	stream     *Stream
	handler    Handler
	onResponse func(*PendingCall, api.RequestID)
	log        *slog.Logger
	// ctx is given to Handle; it is cancelled once the connection ends.
	ctx    context.Context
	cancel context.CancelFunc

	mu sync.Mutex // guards the in-flight state below
	// serving counts the requests handed to the handler and not finished.
	serving int
	// idle, when set, is closed once serving drops to 0.
	idle chan struct{}
	// calls holds the server→client requests awaiting an answer, by id.
	// An entry stays until its answer arrives or the connection ends, even
	// when its waiter gave up, so that a late answer is still recognised.
	calls map[int64]*PendingCall
	// closed is set once the reading ended: no call is accepted after.
	closed bool
}

// NewConn returns a connection over s. Serve must be run to read from it.
func NewConn(s *Stream, h Handler, opts ConnOptions) *Conn {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	parent := context.Background()
	if opts.Context != nil {
		parent = context.WithoutCancel(opts.Context)
	}
	ctx, cancel := context.WithCancel(parent)
	return &Conn{stream: s, handler: h, onResponse: opts.OnResponse, log: opts.Logger, ctx: ctx, cancel: cancel}
}

// Context is cancelled once the connection ends.
func (c *Conn) Context() context.Context { return c.ctx }

// Serve reads and dispatches messages until the peer closes the connection
// or reading fails. It then fails the server→client requests still
// waiting, cancels Context, flushes and closes the stream, and returns
// once every request handed to the handler has been finished. It returns
// nil when the peer closed the connection.
func (c *Conn) Serve() error {
	var err error
	for {
		var f inFrame
		if f, err = c.stream.readFrame(); err != nil {
			break
		}
		if f.refused {
			c.refuse(f.data)
			continue
		}
		c.dispatch(f)
	}
	c.mu.Lock()
	c.closed = true
	calls := c.calls
	c.calls = nil
	c.mu.Unlock()
	for _, p := range calls {
		p.closed = true
		close(p.done)
	}
	c.cancel()
	_ = c.stream.Close()
	c.mu.Lock()
	var idle chan struct{}
	if c.serving > 0 {
		idle = make(chan struct{})
		c.idle = idle
	}
	c.mu.Unlock()
	if idle != nil {
		<-idle
	}
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// dispatch decodes one frame and hands it on; frames that are not one of
// the four message shapes are dropped. A request's frame stays in the
// inbound budget until the request is finished; any other frame leaves it
// once dispatched.
func (c *Conn) dispatch(f inFrame) {
	budget := c.stream.opts.Inbound
	var e envelope
	if err := scanEnvelope(f.data, &e); err != nil {
		budget.release(f.held)
		c.stream.drop(DropMalformed, err.Error())
		return
	}
	if e.method == nil {
		resp, err := e.response()
		if err != nil {
			budget.release(f.held)
			c.stream.drop(DropMalformed, err.Error())
			return
		}
		c.answer(resp)
		budget.release(f.held)
		return
	}
	req := new(Request)
	if err := e.request(req); err != nil {
		budget.release(f.held)
		c.stream.drop(DropMalformed, err.Error())
		return
	}
	if req.IsNotification() {
		c.handler.Handle(c.ctx, req)
		budget.release(f.held)
		return
	}
	req.held = f.held
	c.mu.Lock()
	c.serving++
	c.mu.Unlock()
	c.handler.Handle(c.ctx, req)
}

// refuse answers a frame that did not fit in the inbound budget, of which
// only prefix, its first chunk, was kept: a request whose id and method
// lie in it is answered api.CodeServerOverloaded; a response to a call
// fails that call with the same error, so that what waits for it does not
// wait for an answer that was thrown away. Anything else is dropped.
func (c *Conn) refuse(prefix []byte) {
	if h := c.stream.opts.Hooks.Overloaded; h != nil {
		h()
	}
	overloaded := &Error{Code: api.CodeServerOverloaded, Message: OverloadedMessage}
	e := scanPrefix(prefix)
	if e.method != nil {
		method, ok := jsonscan.Text(e.method)
		req := new(Request)
		if ok && e.id != nil && validRequestID(e.id) {
			req.rawID, req.Method = e.id, method
			c.log.Warn("request refused: inbound bytes over budget", "method", method, "id", req.IDText())
			if err := c.ReplyError(req, overloaded); err != nil {
				c.log.Debug("overloaded reply not sent", "err", err)
			}
			return
		}
	} else if e.id != nil && (e.result != nil || e.err != nil) {
		if id, err := responseID(e.id); err == nil {
			c.log.Warn("response dropped: inbound bytes over budget", "id", id.String())
			c.answer(&response{id: id, err: overloaded})
			return
		}
	}
	c.stream.drop(DropOverloaded, "inbound bytes over budget")
}

// DecodeRequest decodes one frame as a Conn does, for callers that hold a
// request frame outside a connection; a frame that is not a request or
// notification is an error.
func DecodeRequest(frame []byte) (*Request, error) {
	var e envelope
	if err := scanEnvelope(frame, &e); err != nil {
		return nil, err
	}
	if e.method == nil {
		return nil, errShape
	}
	req := new(Request)
	if err := e.request(req); err != nil {
		return nil, err
	}
	return req, nil
}

// answer hands a client's answer to the call waiting for it.
func (c *Conn) answer(resp *response) {
	var p *PendingCall
	if !resp.id.IsString {
		c.mu.Lock()
		if p = c.calls[resp.id.Num]; p != nil {
			delete(c.calls, resp.id.Num)
		}
		c.mu.Unlock()
	}
	if c.onResponse != nil {
		c.onResponse(p, resp.id)
	}
	if p == nil {
		c.log.Debug("ignoring response with no corresponding request", "id", resp.id.String())
		return
	}
	p.result, p.err = resp.result, resp.err
	close(p.done)
}

// Finish ends a request's time in flight; Serve waits for every request to
// be finished before it returns. Only the first call counts.
func (c *Conn) Finish(req *Request) {
	if req.IsNotification() || req.finished.Swap(true) {
		return
	}
	c.stream.opts.Inbound.release(req.held)
	c.mu.Lock()
	c.serving--
	if c.serving == 0 && c.idle != nil {
		close(c.idle)
		c.idle = nil
	}
	c.mu.Unlock()
}

// Reply queues the reply {"id","result"} to req, its result encoded once
// as json.Marshal encodes it. A result that does not encode is answered
// with an internal error instead, and the encoding error returned. A
// StreamedResult is encoded while the reply is written instead.
func (c *Conn) Reply(req *Request, result any) error {
	if req.IsNotification() {
		return nil
	}
	if sr, ok := result.(StreamedResult); ok {
		return c.replyStreamed(req, sr)
	}
	e, err := replyHead(req, "result")
	if err != nil {
		return err
	}
	defer putEncoder(e)
	if err := e.value(result); err != nil {
		if rerr := c.ReplyError(req, &Error{Code: api.CodeInternalError, Message: "internal error"}); rerr != nil {
			return rerr
		}
		return fmt.Errorf("encode result: %w", err)
	}
	e.buf.WriteByte('}')
	return c.stream.Send(e.frame())
}

// ReplyError queues the error reply {"id","error"} to req.
func (c *Conn) ReplyError(req *Request, rerr *Error) error {
	if req.IsNotification() {
		return nil
	}
	e, err := replyHead(req, "error")
	if err != nil {
		return err
	}
	defer putEncoder(e)
	e.buf.WriteString(`{"code":`)
	e.int(rerr.Code)
	e.buf.WriteString(`,"message":`)
	if err := e.str(rerr.Message); err != nil {
		return err
	}
	if rerr.Data != nil {
		e.buf.WriteString(`,"data":`)
		e.buf.Write(rerr.Data)
	}
	e.buf.WriteString(`}}`)
	return c.stream.Send(e.frame())
}

// replyHead starts the reply to req in a pooled encoder: {"id":…,"member":
func replyHead(req *Request, member string) (*frameEncoder, error) {
	e := getEncoder()
	e.buf.WriteString(`{"id":`)
	if err := appendID(e, req.rawID); err != nil {
		putEncoder(e)
		return nil, err
	}
	e.buf.WriteString(`,"`)
	e.buf.WriteString(member)
	e.buf.WriteString(`":`)
	return e, nil
}

// PendingCall is a server→client request awaiting the client's answer.
type PendingCall struct {
	// ID is the request id.
	ID int64
	// Method is the request's method.
	Method string
	done   chan struct{} // closed once answered or the connection ended
	// Set before done is closed.
	result json.RawMessage
	err    *Error
	closed bool
}

// Call sends a server→client request with the given id, its frame encoded
// once, and returns the call to wait on. It never blocks. It returns
// ErrClosed once the connection is ending.
func (c *Conn) Call(id int64, method string, params any) (*PendingCall, error) {
	frame, err := EncodeRequest(id, method, params)
	if err != nil {
		return nil, err
	}
	p := &PendingCall{ID: id, Method: method, done: make(chan struct{})}
	// Registered before the frame is queued: the answer may come back at
	// once.
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	if c.calls == nil {
		c.calls = map[int64]*PendingCall{}
	}
	c.calls[id] = p
	c.mu.Unlock()
	if err := c.stream.Send(frame); err != nil {
		c.mu.Lock()
		delete(c.calls, id)
		c.mu.Unlock()
		return nil, err
	}
	return p, nil
}

// Wait waits for the answer, ctx or the end of the connection. A client's
// error reply is returned as an *Error, the end of the connection as
// ErrClosed.
func (p *PendingCall) Wait(ctx context.Context) (json.RawMessage, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-p.done:
	}
	switch {
	case p.closed:
		return nil, ErrClosed
	case p.err != nil:
		return nil, p.err
	}
	return p.result, nil
}

// Send queues a frame encoded elsewhere (a notification shared by several
// connections); see Stream.Send.
func (c *Conn) Send(frame []byte) error { return c.stream.Send(frame) }

// SendLazy queues a frame that may wait for others (Stream.SendLazy).
func (c *Conn) SendLazy(frame []byte) error { return c.stream.SendLazy(frame) }

// SendLazyWithin queues a frame that may wait up to d for others
// (Stream.SendLazyWithin).
func (c *Conn) SendLazyWithin(frame []byte, d time.Duration) error {
	return c.stream.SendLazyWithin(frame, d)
}

// Stream returns the connection's transport.
func (c *Conn) Stream() *Stream { return c.stream }
