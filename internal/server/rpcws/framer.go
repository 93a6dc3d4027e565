package rpcws

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// A Framer is the transport of one connection as a Stream uses it: it cuts
// the inbound bytes into messages and writes outbound messages, whole or in
// pieces. Everything above it (the outbound queue and its bounds, the
// inbound budget, decoding, correlation, the session) is the same whatever
// the transport.
//
// The Stream calls NextReader from its reading goroutine only, and the
// other methods from its one writer goroutine at a time, except Abort,
// which may be called from any goroutine while a write is in progress.
type Framer interface {
	// NextReader returns the next inbound message: r yields its bytes and
	// then io.EOF, and must be read to its end before NextReader is called
	// again. text is false for a message the protocol does not carry (a
	// binary websocket message), which the Stream reads and drops. err is
	// io.EOF once the peer ended the connection in order.
	NextReader() (r io.Reader, text bool, err error)
	// WriteFrame writes one message. more says that another follows at
	// once: the framer may hold this one back to send both in one write,
	// and then sends it with its next write or Close.
	WriteFrame(p []byte, more bool) error
	// FrameWriter starts a message written in pieces (a StreamedFrame);
	// closing the writer ends the message.
	FrameWriter() (io.WriteCloser, error)
	// Close ends the connection in order once the last message went out,
	// telling the peer code and reason where the transport carries them,
	// and waits at most wait for the peer's side of the close. It ends
	// NextReader.
	Close(code CloseCode, reason string, wait time.Duration)
	// Abort tears the connection down at once, without a close handshake:
	// a write in progress fails.
	Abort()
}

// CloseCode is why a connection closes, as a websocket close status (RFC
// 6455 §7.4); transports without close frames do not carry it.
type CloseCode = websocket.StatusCode

// The close codes a Stream and its callers use.
const (
	// CloseNormal is an orderly close (the peer left, or Close).
	CloseNormal = websocket.StatusNormalClosure
	// CloseGoingAway is the server shutting down.
	CloseGoingAway = websocket.StatusGoingAway
	// ClosePolicyViolation is a slow consumer disconnected.
	ClosePolicyViolation = websocket.StatusPolicyViolation
	// CloseInternalError is a reply that failed part way.
	CloseInternalError = websocket.StatusInternalError
)

// wsFramer is a Framer over a websocket: one JSON-RPC message per text
// message, binary messages dropped, close frames with a status and reason.
// It serves ws://, wss:// and unix:// alike (the reference speaks a
// websocket on its control socket too).
type wsFramer struct {
	ws    *websocket.Conn
	batch *Batcher
	// readCtx is cancelled only to tear the socket down hard: the websocket
	// library drops the connection when a read's context ends.
	readCtx    context.Context
	readCancel context.CancelFunc
	// pinger pings the peer; nil when pings are off.
	pinger *pinger
	// msg is the message being read, kept here so that handing it out
	// costs no allocation.
	msg wsMessage
}

// WebSocketOptions configure the Framer of a websocket.
type WebSocketOptions struct {
	// ReadLimit is the largest inbound message, in bytes; 0 means
	// DefaultReadLimit.
	ReadLimit int64
	// Batch, from BatchWrites, lets the writer send messages queued
	// together in one socket write; nil writes each on its own.
	Batch *Batcher
	// PingInterval is how often the peer is pinged; 0 sends no pings.
	PingInterval time.Duration
	// PongTimeout is how long a ping waits for its pong before the
	// connection is torn down; 0 means DefaultPongTimeout.
	PongTimeout time.Duration
	// PingTimedOut, when set, is called when a pong did not come in time.
	PingTimedOut func()
	// Logger; nil discards.
	Logger *slog.Logger
}

// DefaultPongTimeout is how long a ping waits for its pong when
// WebSocketOptions set none.
const DefaultPongTimeout = 15 * time.Second

// WebSocket returns the Framer of ws. With a PingInterval it pings the
// peer (the stream's reader takes the pongs in) and tears the connection
// down when a pong does not come within PongTimeout, so that proxies keep
// an idle connection open and a peer that vanished is noticed; between
// pings that costs a timer, no goroutine.
func WebSocket(ws *websocket.Conn, opts WebSocketOptions) Framer {
	if opts.ReadLimit <= 0 {
		opts.ReadLimit = DefaultReadLimit
	}
	if opts.PongTimeout <= 0 {
		opts.PongTimeout = DefaultPongTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	ws.SetReadLimit(opts.ReadLimit)
	ctx, cancel := context.WithCancel(context.Background())
	f := &wsFramer{ws: ws, batch: opts.Batch, readCtx: ctx, readCancel: cancel}
	if opts.PingInterval > 0 {
		f.pinger = startPinger(ws, opts)
	}
	return f
}

// DefaultReadLimit is the largest inbound message, in bytes, when Options
// set none.
const DefaultReadLimit = 16 << 20

func (f *wsFramer) NextReader() (io.Reader, bool, error) {
	// Reads are not bound to the write deadlines: closing goes through the
	// writer so that the close frame carries our reason.
	typ, r, err := f.ws.Reader(f.readCtx)
	if err != nil {
		if websocket.CloseStatus(err) != -1 {
			// A close frame from the peer ends reading in order.
			return nil, false, io.EOF
		}
		return nil, false, err
	}
	f.msg.r = r
	return &f.msg, typ == websocket.MessageText, nil
}

// wsMessage is one inbound message. A close frame met in the middle of it
// ends the connection in order, as one between messages does.
type wsMessage struct{ r io.Reader }

func (m *wsMessage) Read(p []byte) (int, error) {
	n, err := m.r.Read(p)
	if err != nil && err != io.EOF && websocket.CloseStatus(err) != -1 {
		err = errClosedInMessage
	}
	return n, err
}

// errClosedInMessage is the error of a message whose connection the peer
// closed before the message ended: the connection ended in order
// (errors.Is io.EOF), the message did not (it is not io.EOF itself, which
// ends a message).
var errClosedInMessage error = closedInMessage{}

type closedInMessage struct{}

func (closedInMessage) Error() string        { return "peer closed the connection in a message" }
func (closedInMessage) Is(target error) bool { return target == io.EOF }

func (f *wsFramer) WriteFrame(p []byte, more bool) error {
	// A frame with others queued behind it waits for the next one: the
	// last frame found queued writes them all at once.
	var hold []byte
	if more {
		hold = p
	}
	f.batch.holdFrame(hold)
	// No deadline on the context: the Stream's write timer bounds the
	// write (Abort).
	return f.ws.Write(context.Background(), websocket.MessageText, p)
}

// WriteFrames writes frames at once past the websocket library, framed by
// the Batcher's connection (batchConn.writeFrames says why that is safe);
// it does not handle them when the hijack did not go through the Batcher.
func (f *wsFramer) WriteFrames(frames [][]byte) (bool, error) {
	return f.batch.writeFrames(frames)
}

func (f *wsFramer) FrameWriter() (io.WriteCloser, error) {
	// A streamed frame goes out in pieces and is never held; what is held
	// goes out with its first piece.
	f.batch.holdFrame(nil)
	return f.ws.Writer(context.Background(), websocket.MessageText)
}

func (f *wsFramer) Close(code CloseCode, reason string, wait time.Duration) {
	if f.pinger != nil {
		f.pinger.stop()
	}
	// A frame still held (the writing ended early) goes out first with the
	// close frame, the socket's next write.
	f.batch.holdFrame(nil)
	// ws.Close waits for the peer's close frame; bound it so a dead peer
	// cannot hold shutdown.
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = f.ws.Close(code, reason)
	}()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		// The peer did not answer our close frame: drop the socket, which
		// also releases the close handshake waiting on it.
		f.readCancel()
		<-done
	}
	f.readCancel()
}

func (f *wsFramer) Abort() { _ = f.ws.CloseNow() }

// pinger pings a websocket's peer every interval, one ping at a time, and
// tears the connection down when a pong does not come in time. Between
// pings it is an armed timer; the timer's goroutine lives for one ping.
type pinger struct {
	ws       *websocket.Conn
	interval time.Duration
	timeout  time.Duration
	timedOut func()
	log      *slog.Logger

	mu      sync.Mutex // guards the fields below
	timer   *time.Timer
	stopped bool
	// cancel ends the ping in flight.
	cancel context.CancelFunc
	// armed counts the armed timer and the ping in flight, for stop to
	// wait for.
	armed sync.WaitGroup
}

func startPinger(ws *websocket.Conn, opts WebSocketOptions) *pinger {
	p := &pinger{ws: ws, interval: opts.PingInterval, timeout: opts.PongTimeout, timedOut: opts.PingTimedOut, log: opts.Logger}
	p.armed.Add(1)
	p.timer = time.AfterFunc(p.interval, p.ping)
	return p
}

// ping runs on the timer's goroutine: it sends one ping, waits for its
// pong, and arms the timer again.
func (p *pinger) ping() {
	defer p.armed.Done()
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	p.cancel = cancel
	p.mu.Unlock()

	err := p.ws.Ping(ctx)
	late := err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded)
	cancel()

	p.mu.Lock()
	p.cancel = nil
	if p.stopped || err != nil {
		// A ping that failed otherwise found the connection closed.
		p.stopped = true
		p.mu.Unlock()
		if late {
			p.log.Info("closing a websocket whose peer did not answer a ping", "timeout", p.timeout)
			if p.timedOut != nil {
				p.timedOut()
			}
			// The reader fails at once and the session ends.
			_ = p.ws.CloseNow()
		}
		return
	}
	p.armed.Add(1)
	p.timer.Reset(p.interval)
	p.mu.Unlock()
}

// stop disarms the timer, ends the ping in flight and waits for it.
func (p *pinger) stop() {
	p.mu.Lock()
	p.stopped = true
	if p.timer.Stop() {
		p.armed.Done() // the timer will not run
	}
	if p.cancel != nil {
		p.cancel()
	}
	p.mu.Unlock()
	p.armed.Wait()
}
