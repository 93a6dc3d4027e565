// Package rpcws adapts sourcegraph/jsonrpc2 to a websocket with Codex framing:
// one message per text frame, no "jsonrpc" member on output and none required
// on input, request ids that are strings or signed 64-bit integers echoed back
// exactly, frames that are not one of the four message shapes dropped without
// closing the connection, and a bounded outbound queue whose overflow
// disconnects the slow client instead of stalling the server.
package rpcws

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/sourcegraph/jsonrpc2"
)

// DefaultOutboundQueue is the number of frames a connection may have waiting
// to be written before it is disconnected as a slow consumer (8 × 128, as the
// reference server sizes it).
const DefaultOutboundQueue = 1024

// SlowConsumerReason is the close reason sent to a client whose outbound
// queue overflowed.
const SlowConsumerReason = "disconnecting slow connection after outbound queue filled"

// ErrSlowConsumer is returned by writes once the outbound queue overflowed.
var ErrSlowConsumer = errors.New("rpcws: outbound queue full, connection closed")

// ErrClosed is returned by writes after the stream was closed.
var ErrClosed = errors.New("rpcws: stream closed")

// DropReason says why an inbound frame was dropped.
type DropReason string

// The reasons an inbound frame is dropped.
const (
	DropBinary    DropReason = "binary"
	DropMalformed DropReason = "malformed"
)

// Hooks receive events for metrics. Every field may be nil.
type Hooks struct {
	FrameIn      func()
	FrameOut     func()
	Dropped      func(DropReason)
	SlowConsumer func()
}

// Options configure a Stream.
type Options struct {
	// OutboundQueue bounds the frames waiting to be written; 0 means
	// DefaultOutboundQueue.
	OutboundQueue int
	// ReadLimit is the largest inbound message in bytes; 0 means 16 MiB.
	ReadLimit int64
	// WriteTimeout bounds one frame write; 0 means 10 s.
	WriteTimeout time.Duration
	// FlushTimeout bounds how long Close waits for queued frames; 0 means 1 s.
	FlushTimeout time.Duration
	Logger       *slog.Logger
	Hooks        Hooks
	// OnResponse, when set, receives every valid response frame (a
	// client's answer to a request the server sent) on the reading
	// goroutine, in arrival order, instead of ReadObject returning it: the
	// server keeps the requests it sent itself. It must not block.
	OnResponse func(*Response)
	// Batch, from BatchWrites, lets the writer send the frames it finds
	// queued together in one write; nil writes each frame on its own.
	Batch *Batcher
}

// Response is a client's answer to a server→client request.
type Response struct {
	// ID is the id the client sent: a number in [0, MaxInt64] or a string.
	ID jsonrpc2.ID
	// Result is the result as sent (JSON null included); nil for an error
	// reply.
	Result json.RawMessage
	// Error is the error reply (its code and message), or nil.
	Error *jsonrpc2.Error
}

// Stream is a jsonrpc2.ObjectStream over one websocket connection.
//
// Outbound frames wait in a slice that grows on demand and is released once
// it drains, so an idle connection holds no queue memory. A writer goroutine
// exists only while there is something to do: Send starts one when it queues
// a frame and none is running, and it exits once the queue is empty. Closing
// starts one too (if none is running), to flush the queue and run the close
// handshake; that last writer closes Done.
type Stream struct {
	ws   *websocket.Conn
	opts Options
	log  *slog.Logger
	// readCtx is cancelled only to tear the socket down hard: the websocket
	// library drops the connection when a read's context ends.
	readCtx    context.Context
	readCancel context.CancelFunc

	mu sync.Mutex // guards the fields up to closeText
	// queue holds the frames not yet taken by the writer, oldest first. It
	// is nil whenever it is empty, so a burst does not pin its backing array.
	queue [][]byte
	// writing is set while a writer goroutine runs. The writer clears it
	// when it finds the queue empty, unless the stream is closing: the
	// writer that closes the socket is the last one.
	writing bool
	closing bool
	// aborted is set once the flush deadline passed or a write failed:
	// nothing more is written.
	aborted bool
	// writeDeadline is when the current (or last) write times out.
	writeDeadline time.Time
	// writeTimer enforces writeDeadline. Writes run without a context of
	// their own: a context per frame costs a timer, a cancel context and
	// the websocket library's AfterFunc registration, several allocations
	// per frame. One timer per stream, re-armed for every frame, tears the
	// socket down instead (see writeTimedOut), as the library does when a
	// write's context ends.
	writeTimer *time.Timer
	closeCode  websocket.StatusCode
	closeText  string

	// inWrite is set while a frame is being written. It is cleared as soon
	// as the write returns, without waiting for mu, so that an abort racing
	// with the end of a write leaves the socket to the close handshake, as
	// cancelling a finished write's context did.
	inWrite atomic.Bool

	writerDone chan struct{}
	closeOnce  sync.Once
}

// NewStream wraps ws. It starts no goroutine: writers are started on demand
// by Send and by closing. Close (or CloseWith) must be called to release the
// socket.
func NewStream(ws *websocket.Conn, opts Options) *Stream {
	if opts.OutboundQueue <= 0 {
		opts.OutboundQueue = DefaultOutboundQueue
	}
	if opts.ReadLimit <= 0 {
		opts.ReadLimit = 16 << 20
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = 10 * time.Second
	}
	if opts.FlushTimeout <= 0 {
		opts.FlushTimeout = time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	ws.SetReadLimit(opts.ReadLimit)
	readCtx, readCancel := context.WithCancel(context.Background())
	s := &Stream{
		readCtx:    readCtx,
		readCancel: readCancel,
		ws:         ws,
		opts:       opts,
		log:        opts.Logger,
		closeCode:  websocket.StatusNormalClosure,
		writerDone: make(chan struct{}),
	}
	return s
}

// ReadObject reads frames until one is a valid message and decodes it into v.
// Malformed and binary frames are dropped (and counted), never fatal.
func (s *Stream) ReadObject(v any) error {
	for {
		decoded, err := s.readFrame(v)
		if err != nil || decoded {
			return err
		}
	}
}

// readFrame reads one frame and reports whether it decoded a message into
// v: it did not when the frame was dropped or handed to OnResponse.
func (s *Stream) readFrame(v any) (bool, error) {
	// Reads are not bound to the write deadlines: closing goes through the
	// writer so that the close frame carries our reason.
	typ, r, err := s.ws.Reader(s.readCtx)
	if err != nil {
		return false, readError(err)
	}
	// The frame is read into a pooled buffer, taken only now that a frame
	// arrived so that idle connections hold none. Nothing keeps the bytes:
	// the envelope's fields and whatever jsonrpc2 decodes are copies.
	buf := getReadBuffer()
	defer putReadBuffer(buf)
	data, err := buf.readAll(r)
	if err != nil {
		return false, readError(err)
	}
	if h := s.opts.Hooks.FrameIn; h != nil {
		h()
	}
	if typ != websocket.MessageText {
		s.drop(DropBinary, "binary frame")
		return false, nil
	}
	m, err := parseInbound(data)
	if err != nil {
		s.drop(DropMalformed, err.Error())
		return false, nil
	}
	if m.Method == nil && s.opts.OnResponse != nil {
		resp, err := m.response()
		if err != nil {
			s.drop(DropMalformed, err.Error())
			return false, nil
		}
		s.opts.OnResponse(resp)
		return false, nil
	}
	msg, err := m.normalize(data)
	if err != nil {
		s.drop(DropMalformed, err.Error())
		return false, nil
	}
	if err := json.Unmarshal(msg, v); err != nil {
		s.drop(DropMalformed, err.Error())
		return false, nil
	}
	return true, nil
}

// readError maps a close frame from the peer to io.EOF.
func readError(err error) error {
	if websocket.CloseStatus(err) != -1 {
		return io.EOF
	}
	return err
}

// readBuffer holds one inbound frame while it is decoded.
type readBuffer struct{ b []byte }

var readBuffers = sync.Pool{New: func() any { return &readBuffer{b: make([]byte, 0, 512)} }}

func getReadBuffer() *readBuffer { return readBuffers.Get().(*readBuffer) }

func putReadBuffer(buf *readBuffer) {
	if cap(buf.b) <= maxPooledFrame { // do not keep a huge frame's buffer
		readBuffers.Put(buf)
	}
}

// readAll reads r to its end into the buffer, as io.ReadAll does.
func (buf *readBuffer) readAll(r io.Reader) ([]byte, error) {
	b := buf.b[:0]
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			buf.b = b
			if err == io.EOF {
				return b, nil
			}
			return nil, err
		}
	}
}

func (s *Stream) drop(reason DropReason, detail string) {
	s.log.Warn("dropping inbound websocket frame", "reason", string(reason), "detail", detail)
	if h := s.opts.Hooks.Dropped; h != nil {
		h(reason)
	}
}

// WriteObject encodes a jsonrpc2 message in Codex framing and queues it.
func (s *Stream) WriteObject(obj any) error {
	raw, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	frame, err := normalizeOutbound(raw)
	if err != nil {
		return err
	}
	return s.Send(frame)
}

// Send queues one pre-encoded frame. It never blocks: when OutboundQueue
// frames are already waiting the connection is closed as a slow consumer,
// its queue discarded, and ErrSlowConsumer returned.
func (s *Stream) Send(frame []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return ErrClosed
	}
	if len(s.queue) < s.opts.OutboundQueue {
		s.queue = append(s.queue, frame)
		s.startWriterLocked()
		return nil
	}
	s.log.Warn(SlowConsumerReason, "queued", len(s.queue))
	if h := s.opts.Hooks.SlowConsumer; h != nil {
		h()
	}
	s.closeLocked(websocket.StatusPolicyViolation, SlowConsumerReason, false)
	return ErrSlowConsumer
}

// startWriterLocked starts a writer goroutine unless one is running; s.mu
// must be held.
func (s *Stream) startWriterLocked() {
	if !s.writing {
		s.writing = true
		go s.writeLoop()
	}
}

// CloseWith closes the connection with the given status and reason after
// flushing what is queued (bounded by FlushTimeout). It does not block.
func (s *Stream) CloseWith(code websocket.StatusCode, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeLocked(code, reason, true)
}

// closeLocked starts closing; s.mu must be held. With flush false, queued
// frames are discarded.
func (s *Stream) closeLocked(code websocket.StatusCode, reason string, flush bool) {
	if s.closing {
		return
	}
	s.closing = true
	if !flush {
		s.queue = nil
	}
	s.closeCode, s.closeText = code, reason
	// Bound the flush (or the write in progress when discarding) so a peer
	// that stopped reading cannot hold the connection open.
	time.AfterFunc(s.opts.FlushTimeout, s.abort)
	// A running writer sees closing once the queue is empty; otherwise
	// start one to run the close handshake.
	s.startWriterLocked()
}

// Close implements jsonrpc2.ObjectStream: it flushes, sends a close frame and
// waits for the writer to finish.
func (s *Stream) Close() error {
	s.CloseWith(websocket.StatusNormalClosure, "")
	<-s.writerDone
	return nil
}

// Done is closed once the stream has fully shut down.
func (s *Stream) Done() <-chan struct{} { return s.writerDone }

// writeLoop writes queued frames in order until the queue is empty. It runs
// with s.writing set, and only one runs at a time. It then either exits,
// clearing s.writing (the next Send starts a new writer), or, when the
// stream is closing or a write failed, closes the socket and Done.
func (s *Stream) writeLoop() {
	s.mu.Lock()
	for len(s.queue) > 0 && !s.aborted {
		frame := s.queue[0]
		s.queue[0] = nil
		s.queue = s.queue[1:]
		if len(s.queue) == 0 {
			s.queue = nil // release the backing array
		}
		// A frame with others queued behind it waits for the next one:
		// the last frame found queued writes them all at once.
		var hold []byte
		if len(s.queue) > 0 {
			hold = frame
		}
		s.opts.Batch.holdFrame(hold)
		s.writeDeadline = time.Now().Add(s.opts.WriteTimeout)
		if s.writeTimer == nil {
			s.writeTimer = time.AfterFunc(s.opts.WriteTimeout, s.writeTimedOut)
		} else {
			s.writeTimer.Reset(s.opts.WriteTimeout)
		}
		s.inWrite.Store(true)
		s.mu.Unlock()
		ok := s.writeFrame(frame)
		s.inWrite.Store(false)
		s.mu.Lock()
		s.writeTimer.Stop()
		if !ok {
			// The writer failed: stop accepting frames (a no-op if the
			// stream was already closing) and drop what is queued.
			s.aborted = true
			s.closing = true
			s.queue = nil
			break
		}
	}
	// A frame is still held only when the loop ended early (a failed
	// write, an abort, the queue discarded by a close), and the next write
	// to the socket, the close frame included, sends it first.
	s.opts.Batch.holdFrame(nil)
	if !s.closing {
		s.writing = false
		s.mu.Unlock()
		return
	}
	// The stream is closing and the queue is flushed, discarded or past its
	// flush deadline: this is the last writer.
	s.queue = nil
	code, text := s.closeCode, s.closeText
	s.mu.Unlock()
	s.closeSocket(code, text)
	s.abort()
	close(s.writerDone)
}

// abort stops all writing: it fails the write in progress and keeps the
// writer from starting another.
func (s *Stream) abort() {
	s.mu.Lock()
	s.aborted = true
	inWrite := s.inWrite.Load()
	s.mu.Unlock()
	if inWrite {
		s.dropSocket()
	}
}

// writeTimedOut runs when the write timer fires. The timer is re-armed for
// every frame, so a firing meant for an earlier write can arrive during a
// later one: only a write whose own deadline has passed is failed.
func (s *Stream) writeTimedOut() {
	s.mu.Lock()
	expired := s.inWrite.Load() && !time.Now().Before(s.writeDeadline)
	s.mu.Unlock()
	if expired {
		s.log.Debug("websocket write timed out", "timeout", s.opts.WriteTimeout)
		s.dropSocket()
	}
}

// dropSocket closes the connection without a close handshake, which fails
// the write in progress; the writer then shuts the stream down.
func (s *Stream) dropSocket() { _ = s.ws.CloseNow() }

func (s *Stream) writeFrame(frame []byte) bool {
	// No deadline on the context: writeTimer bounds the write.
	if err := s.ws.Write(context.Background(), websocket.MessageText, frame); err != nil {
		s.log.Debug("websocket write failed", "err", err)
		return false
	}
	if h := s.opts.Hooks.FrameOut; h != nil {
		h()
	}
	return true
}

func (s *Stream) closeSocket(code websocket.StatusCode, text string) {
	s.closeOnce.Do(func() {
		// ws.Close waits for the peer's close frame; bound it so a dead peer
		// cannot hold shutdown.
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = s.ws.Close(code, text)
		}()
		t := time.NewTimer(s.opts.FlushTimeout)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			// The peer did not answer our close frame: drop the socket,
			// which also releases the close handshake waiting on it.
			s.readCancel()
			<-done
		}
		s.readCancel()
	})
}

// inbound is the envelope of any inbound message; RawMessage fields are nil
// when the key is absent and "null" when it is JSON null.
type inbound struct {
	ID     json.RawMessage `json:"id"`
	Method json.RawMessage `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// Request ids travel through jsonrpc2 as tagged strings so that negative and
// string ids survive its unsigned ID type; normalizeOutbound restores them.
const (
	tagString = "s:"
	tagNumber = "n:"
)

var errShape = errors.New("not a request, notification or response")

// normalizeInbound validates one text frame and rewrites it into the form
// jsonrpc2 decodes: requests get a tagged string id.
func normalizeInbound(data []byte) ([]byte, error) {
	m, err := parseInbound(data)
	if err != nil {
		return nil, err
	}
	return m.normalize(data)
}

// parseInbound decodes the envelope of one text frame, which must be a JSON
// object.
func parseInbound(data []byte) (*inbound, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return nil, errShape
	}
	m := new(inbound)
	if err := json.Unmarshal(data, m); err != nil {
		return nil, err
	}
	return m, nil
}

// normalize validates the envelope of data and returns data in the form
// jsonrpc2 decodes.
func (m *inbound) normalize(data []byte) ([]byte, error) {
	data = bytes.TrimSpace(data)
	hasID := m.ID != nil && !isNull(m.ID)
	if m.ID != nil && !hasID {
		return nil, errors.New("null id")
	}
	if m.Method != nil {
		var method string
		if err := json.Unmarshal(m.Method, &method); err != nil || isNull(m.Method) {
			return nil, errors.New("method is not a string")
		}
		if m.Result != nil || m.Error != nil {
			return nil, errShape
		}
		out := struct {
			ID     string          `json:"id,omitempty"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params,omitempty"`
		}{Method: method, Params: m.Params}
		if !hasID {
			return json.Marshal(out)
		}
		tagged, err := tagID(m.ID)
		if err != nil {
			return nil, err
		}
		out.ID = tagged
		return json.Marshal(out)
	}
	if _, err := m.checkResponse(); err != nil {
		return nil, err
	}
	if _, err := tagID(m.ID); err != nil {
		return nil, err
	}
	return data, nil
}

// checkResponse validates the envelope of a response (a frame without
// "method") and returns its decoded error object, if any.
func (m *inbound) checkResponse() (*jsonrpc2.Error, error) {
	if m.ID == nil {
		return nil, errShape
	}
	if isNull(m.ID) {
		return nil, errors.New("null id")
	}
	if (m.Result != nil) == (m.Error != nil) {
		return nil, errShape
	}
	if m.Error == nil {
		return nil, nil
	}
	var e struct {
		Code    *int64 `json:"code"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(m.Error, &e); err != nil || e.Code == nil {
		return nil, errors.New("malformed error object")
	}
	return &jsonrpc2.Error{Code: *e.Code, Message: e.Message}, nil
}

// response validates a response frame and returns it. It accepts exactly
// what jsonrpc2 used to accept after normalize: ids that are strings or
// integers in [0, MaxInt64] (jsonrpc2 ids are unsigned).
func (m *inbound) response() (*Response, error) {
	rpcErr, err := m.checkResponse()
	if err != nil {
		return nil, err
	}
	r := &Response{Error: rpcErr}
	if rpcErr == nil {
		r.Result = m.Result
	}
	raw := bytes.TrimSpace(m.ID)
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &r.ID.Str); err != nil {
			return nil, err
		}
		r.ID.IsString = true
		return r, nil
	}
	n, ok := parseResponseID(raw)
	if !ok {
		return nil, errors.New("response id is neither a string nor an integer in [0, 2^63)")
	}
	r.ID.Num = n
	return r, nil
}

// parseResponseID parses a decimal integer in [0, MaxInt64] without the
// string conversion strconv needs.
func parseResponseID(raw []byte) (uint64, bool) {
	if len(raw) == 0 || len(raw) > 19 { // 19 digits cannot overflow uint64
		return 0, false
	}
	var n uint64
	for _, c := range raw {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, n <= math.MaxInt64
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// tagID accepts a JSON string or an integer that fits in int64.
func tagID(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", err
		}
		return tagString + s, nil
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return "", errors.New("id is neither a string nor a 64-bit integer")
	}
	return tagNumber + strconv.FormatInt(n, 10), nil
}

// outbound is the Codex framing of an outgoing message: no "jsonrpc" member.
type outbound struct {
	ID          json.RawMessage `json:"id,omitempty"`
	Method      string          `json:"method,omitempty"`
	Params      json.RawMessage `json:"params,omitempty"`
	Result      json.RawMessage `json:"result,omitempty"`
	Error       json.RawMessage `json:"error,omitempty"`
	EmittedAtMs json.RawMessage `json:"emittedAtMs,omitempty"`
}

// normalizeOutbound drops the "jsonrpc" member and restores tagged ids.
func normalizeOutbound(raw []byte) ([]byte, error) {
	var m outbound
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	if m.ID != nil {
		id, err := untagID(m.ID)
		if err != nil {
			return nil, err
		}
		m.ID = id
	}
	return json.Marshal(m)
}

func untagID(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) == 0 || raw[0] != '"' {
		// A number: our own server→client ids, never above MaxInt64.
		n, err := strconv.ParseUint(string(raw), 10, 64)
		if err == nil && n > math.MaxInt64 {
			return json.RawMessage(strconv.FormatInt(int64(n), 10)), nil
		}
		return raw, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, err
	}
	switch {
	case len(s) >= 2 && s[:2] == tagString:
		return json.Marshal(s[2:])
	case len(s) >= 2 && s[:2] == tagNumber:
		return json.RawMessage(s[2:]), nil
	}
	return raw, nil
}
