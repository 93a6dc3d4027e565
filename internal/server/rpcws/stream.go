package rpcws

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
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

// ErrClosed is returned by writes after the stream was closed, and by
// calls when the connection ended before their answer.
var ErrClosed = errors.New("rpcws: connection closed")

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
	// Batch, from BatchWrites, lets the writer send the frames it finds
	// queued together in one write; nil writes each frame on its own.
	Batch *Batcher
}

// Stream is the transport of one websocket connection: it reads text
// frames and writes queued ones.
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

// ReadFrame returns the next text frame, in a slice of its own. Binary
// frames are dropped (and counted), never fatal. A close frame from the
// peer ends reading with io.EOF.
func (s *Stream) ReadFrame() ([]byte, error) {
	for {
		// Reads are not bound to the write deadlines: closing goes through
		// the writer so that the close frame carries our reason.
		typ, r, err := s.ws.Reader(s.readCtx)
		if err != nil {
			return nil, readError(err)
		}
		// The frame is read into a pooled buffer, taken only now that a
		// frame arrived so that idle connections hold none, and copied
		// out at its exact size: the request decoded from it keeps slices
		// of it.
		buf := getReadBuffer()
		data, err := buf.readAll(r)
		if err != nil {
			putReadBuffer(buf)
			return nil, readError(err)
		}
		if h := s.opts.Hooks.FrameIn; h != nil {
			h()
		}
		if typ != websocket.MessageText {
			putReadBuffer(buf)
			s.drop(DropBinary, "binary frame")
			continue
		}
		frame := append([]byte(nil), data...)
		putReadBuffer(buf)
		return frame, nil
	}
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

// Close flushes, sends a close frame and waits for the writer to finish.
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
