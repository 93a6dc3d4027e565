package rpcws

import (
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

// DefaultOutboundBytes is the number of bytes a connection may have
// waiting to be written (the frame being written included) before it is
// disconnected as a slow consumer: whatever the frame count, a client that
// reads slowly holds at most this much and one frame more.
const DefaultOutboundBytes = 32 << 20

// DefaultLazyDelay is how long a frame queued by SendLazy may wait for
// others before it is written on its own. BenchmarkCrowdTurns (bench/)
// measures what it saves: at 400 connections, each thread's status
// broadcasts go to all 400, and written one by one they cost one write
// each per connection.
const DefaultLazyDelay = 20 * time.Millisecond

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
	// DropOverloaded is a frame that did not fit in the inbound budget
	// and could not be answered (a notification, or one whose id lies
	// past its first chunk).
	DropOverloaded DropReason = "overloaded"
)

// Hooks receive events for metrics. Every field may be nil.
type Hooks struct {
	FrameIn      func()
	FrameOut     func()
	Dropped      func(DropReason)
	SlowConsumer func()
	// Overloaded counts the frames refused because they did not fit in
	// the inbound budget.
	Overloaded func()
}

// Options configure a Stream.
type Options struct {
	// OutboundQueue bounds the frames waiting to be written; 0 means
	// DefaultOutboundQueue.
	OutboundQueue int
	// OutboundBytes bounds the bytes of those frames and of the frame
	// being written: a frame is queued only while fewer are waiting; 0
	// means DefaultOutboundBytes.
	OutboundBytes int64
	// ReadLimit is the largest inbound message in bytes; 0 means 16 MiB.
	// NewStream applies it to the websocket; NewFramedStream leaves it to
	// the framer, built with its own.
	ReadLimit int64
	// WriteTimeout bounds one frame write; 0 means 10 s.
	WriteTimeout time.Duration
	// FlushTimeout bounds how long Close waits for queued frames; 0 means 1 s.
	FlushTimeout time.Duration
	// LazyDelay bounds how long a frame queued by SendLazy waits for the
	// next frame of Send; 0 means DefaultLazyDelay.
	LazyDelay time.Duration
	// Inbound, shared by the server's streams, bounds the inbound bytes
	// in flight across them; nil bounds nothing.
	Inbound *InboundBudget
	Logger  *slog.Logger
	Hooks   Hooks
	// Batch, from BatchWrites, lets NewStream's websocket send the frames
	// its writer finds queued together in one write; nil writes each frame
	// on its own. NewFramedStream does not use it.
	Batch *Batcher
}

// Stream is one connection's frames over its Framer: it reads inbound
// frames within the inbound budget and writes queued ones, whatever the
// transport.
//
// Outbound frames wait in a slice that grows on demand and is released once
// it drains, so an idle connection holds no queue memory. A writer goroutine
// exists only while there is something to do: Send starts one when it queues
// a frame and none is running, and it exits once the queue is empty. Closing
// starts one too (if none is running), to flush the queue and close the
// framer; that last writer closes Done.
type Stream struct {
	f    Framer
	opts Options
	log  *slog.Logger

	mu sync.Mutex // guards the fields up to closeText
	// queue holds the frames not yet taken by the writer, oldest first. It
	// is nil whenever it is empty, so a burst does not pin its backing
	// array; qarray is the queueArrays box its array came from, which the
	// array (or the one append grew it into) goes back in.
	queue  []outFrame
	qarray *[]outFrame
	// queuedBytes is the size of the frames in queue plus that of the
	// frame being written (writingBytes), which is held until its write
	// returns.
	queuedBytes  int64
	writingBytes int64
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
	// per frame. One timer per stream, re-armed for every frame, aborts
	// the framer instead (see writeTimedOut), as the library does when a
	// write's context ends.
	writeTimer *time.Timer
	// lazyTimer starts a writer for frames SendLazy queued when no Send
	// came within their delay; lazyArmed is set while it is pending, to
	// fire at lazyDeadline, lazyArmedFor after it was armed.
	lazyTimer    *time.Timer
	lazyArmed    bool
	lazyArmedFor time.Duration
	lazyDeadline time.Time
	closeCode    CloseCode
	closeText    string

	// inWrite is set while a frame is being written. It is cleared as soon
	// as the write returns, without waiting for mu, so that an abort racing
	// with the end of a write leaves the socket to the close handshake, as
	// cancelling a finished write's context did.
	inWrite atomic.Bool

	// fw is the framer when it writes several frames at once, nil
	// otherwise (or once it declined to). Only the writer uses it; a writer
	// hands it to the next through mu.
	fw framesWriter

	writerDone chan struct{}
	closeOnce  sync.Once
}

// framesWriter is a Framer that can write several whole frames at once,
// cheaper than one WriteFrame each: the websocket when its hijacked
// connection goes through a Batcher. The writer hands it the plain frames
// it finds queued one after the other (at least two); handled is false,
// and nothing written, when the framer cannot do it after all, and the
// writer then writes frame by frame. A failed write (err) fails the
// stream, as one of WriteFrame does.
type framesWriter interface {
	WriteFrames(frames [][]byte) (handled bool, err error)
}

// A batch for a framesWriter holds at most maxBatchFrames frames and,
// beyond its first frame, maxBatchBytes bytes: the write timer bounds a
// batch as a whole, and a larger batch would give a slow reader more time
// per frame.
const (
	maxBatchFrames = 256
	maxBatchBytes  = 4 * maxBatch
)

// frameLists hold the lists a batch of frames is handed to the framer in,
// shared by every stream, so that an idle connection keeps none.
var frameLists = sync.Pool{New: func() any {
	l := make([][]byte, 0, 16)
	return &l
}}

// queueArrays hold the backing arrays of drained queues for the next
// frames of any stream. A queue used to grow from nothing after each time
// its writer drained it: with 400 connections taking every broadcast,
// that growth was 7 % of the daemon's CPU (BenchmarkCrowdTurns/threads=400,
// bench/README.md). An array goes back only when its queue is empty, and
// cleared, so it holds no frame.
var queueArrays = sync.Pool{New: func() any {
	a := make([]outFrame, 0, 32)
	return &a
}}

// maxPooledQueue bounds the arrays queueArrays keep: a queue that grew
// past it (a slow reader's backlog) gives its array to the collector;
// minPooledQueue keeps out arrays a long backlog's reslicing left small.
// maxShiftedFrames is the most frames dropHeadLocked moves to the front.
const (
	maxPooledQueue   = 1024
	minPooledQueue   = 16
	maxShiftedFrames = 64
)

// NewStream returns the stream of a websocket (WebSocket with the options'
// ReadLimit and Batch).
func NewStream(ws *websocket.Conn, opts Options) *Stream {
	return NewFramedStream(WebSocket(ws, WebSocketOptions{ReadLimit: opts.ReadLimit, Batch: opts.Batch, Logger: opts.Logger}), opts)
}

// NewFramedStream returns the stream of f. It starts no goroutine: writers
// are started on demand by Send and by closing. Close (or CloseWith) must
// be called to release the transport.
func NewFramedStream(f Framer, opts Options) *Stream {
	if opts.OutboundQueue <= 0 {
		opts.OutboundQueue = DefaultOutboundQueue
	}
	if opts.OutboundBytes <= 0 {
		opts.OutboundBytes = DefaultOutboundBytes
	}
	if opts.ReadLimit <= 0 {
		opts.ReadLimit = DefaultReadLimit
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = 10 * time.Second
	}
	if opts.FlushTimeout <= 0 {
		opts.FlushTimeout = time.Second
	}
	if opts.LazyDelay <= 0 {
		opts.LazyDelay = DefaultLazyDelay
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Stream{
		f:          f,
		opts:       opts,
		log:        opts.Logger,
		closeCode:  CloseNormal,
		writerDone: make(chan struct{}),
	}
	s.fw, _ = f.(framesWriter)
	return s
}

// inFrame is one inbound frame as read.
type inFrame struct {
	// data is the frame, in a slice of its own; only its first chunk
	// (the first readChunk bytes or fewer) when it was refused.
	data []byte
	// held is what the frame holds of the inbound budget, given back
	// once it is done being handled.
	held int64
	// refused is set when the frame did not fit in the inbound budget.
	refused bool
}

// ReadFrame returns the next text frame, in a slice of its own. Binary
// frames are dropped (and counted), never fatal. The peer ending the
// connection in order ends reading with io.EOF. It is readFrame without the inbound
// budget's bookkeeping: the frame's bytes are given back at once, and a
// frame that did not fit is returned cut to its first chunk.
func (s *Stream) ReadFrame() ([]byte, error) {
	f, err := s.readFrame()
	s.opts.Inbound.release(f.held)
	return f.data, err
}

// readFrame returns the next text frame, holding its bytes in the inbound
// budget.
func (s *Stream) readFrame() (inFrame, error) {
	for {
		r, text, err := s.f.NextReader()
		if err != nil {
			return inFrame{}, err
		}
		f, err := s.readMessage(r)
		if err != nil {
			return inFrame{}, err
		}
		if h := s.opts.Hooks.FrameIn; h != nil {
			h()
		}
		if !text {
			s.opts.Inbound.release(f.held)
			s.drop(DropBinary, "binary frame")
			continue
		}
		return f, nil
	}
}

// readChunk is the size of the first piece of an inbound frame: frames
// up to it are read into a pooled buffer and copied out at their exact
// size. maxReadChunk bounds the later pieces of a larger frame.
const (
	readChunk    = 64 << 10
	maxReadChunk = 1 << 20
)

// readMessage reads one message, its bytes taken from the inbound budget
// as they are read. A message longer than readChunk is read in chunks and
// copied into one slice of its exact size at the end: growing one buffer
// instead (as io.ReadAll does) allocates about five times the frame's
// size on the way to 16 MiB and may keep twice its size, and that is what
// large frames cost while in flight.
func (s *Stream) readMessage(r io.Reader) (inFrame, error) {
	budget := s.opts.Inbound
	buf := getReadBuffer()
	head, more, err := buf.readHead(r)
	if err != nil {
		putReadBuffer(buf)
		return inFrame{}, err
	}
	if !more {
		f := inFrame{data: append([]byte(nil), head...)}
		putReadBuffer(buf)
		if budget.reserve(int64(len(f.data))) {
			f.held = int64(len(f.data))
		} else {
			f.refused = true
		}
		return f, nil
	}
	// The full head becomes the frame's first chunk, no longer pooled.
	buf.b = nil
	putReadBuffer(buf)
	held := int64(len(head))
	if !budget.reserve(held) {
		return discardRest(r, head)
	}
	chunks := [][]byte{head}
	for {
		c := make([]byte, min(held, maxReadChunk))
		n, err := io.ReadFull(r, c)
		if !budget.reserve(int64(n)) {
			budget.release(held)
			return discardRest(r, head)
		}
		held += int64(n)
		chunks = append(chunks, c[:n])
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			budget.release(held)
			return inFrame{}, err
		}
	}
	// The chunks are garbage once copied: the frame holds its own size.
	frame := make([]byte, 0, held)
	for _, c := range chunks {
		frame = append(frame, c...)
	}
	return inFrame{data: frame, held: held}, nil
}

// discardRest reads the rest of a refused frame without keeping it: the
// frame is refused with head, its first chunk, to find its id in.
func discardRest(r io.Reader, head []byte) (inFrame, error) {
	if _, err := io.Copy(io.Discard, r); err != nil {
		return inFrame{}, err
	}
	return inFrame{data: head, refused: true}, nil
}

// readBuffer holds the first chunk of one inbound frame while it is read.
type readBuffer struct{ b []byte }

var readBuffers = sync.Pool{New: func() any { return &readBuffer{b: make([]byte, 0, 512)} }}

func getReadBuffer() *readBuffer { return readBuffers.Get().(*readBuffer) }

// putReadBuffer pools buf unless it is larger than maxPooledFrame: the
// pools keep only buffers of the size most frames need, so that a burst
// of large frames leaves nothing behind once it is over.
func putReadBuffer(buf *readBuffer) {
	if cap(buf.b) <= maxPooledFrame {
		readBuffers.Put(buf)
	}
}

// readHead reads r into the buffer up to readChunk bytes; more is set
// when the buffer filled up before r ended.
func (buf *readBuffer) readHead(r io.Reader) (head []byte, more bool, err error) {
	b := buf.b[:0]
	for {
		if len(b) == cap(b) {
			if len(b) >= readChunk {
				buf.b = b
				return b, true, nil
			}
			grown := make([]byte, len(b), min(max(2*cap(b), 512), readChunk))
			copy(grown, b)
			b = grown
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			buf.b = b
			if err == io.EOF {
				return b, false, nil
			}
			return nil, false, err
		}
	}
}

func (s *Stream) drop(reason DropReason, detail string) {
	s.log.Warn("dropping inbound frame", "reason", string(reason), "detail", detail)
	if h := s.opts.Hooks.Dropped; h != nil {
		h(reason)
	}
}

// Send queues one pre-encoded frame. It never blocks: when OutboundQueue
// frames, or OutboundBytes bytes, are already waiting the connection is
// closed as a slow consumer, its queue discarded, and ErrSlowConsumer
// returned.
func (s *Stream) Send(frame []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return ErrClosed
	}
	return s.queueLocked(outFrame{data: frame, size: int64(len(frame))}, 0)
}

// SendLazy is Send for a frame that may wait up to LazyDelay: it goes out
// with the next frame Send queues (in queue order, in one write where the
// framer batches), or on its own once the delay has passed. For
// broadcasts, which every connection gets: written one by one they cost a
// write per frame per connection.
func (s *Stream) SendLazy(frame []byte) error {
	return s.SendLazyWithin(frame, s.opts.LazyDelay)
}

// SendLazyWithin is SendLazy with a delay of its own: the frame goes out
// with the next frame Send queues, or on its own within d. Frames queued
// with different delays go out together, by the earliest of their
// deadlines.
func (s *Stream) SendLazyWithin(frame []byte, d time.Duration) error {
	if d <= 0 {
		d = s.opts.LazyDelay
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return ErrClosed
	}
	return s.queueLocked(outFrame{data: frame, size: int64(len(frame))}, d)
}

// SendStreamed queues a frame that f writes while it is sent (see
// StreamedFrame), counted in the outbound bytes as f.Size(). Otherwise it
// is Send.
func (s *Stream) SendStreamed(f StreamedFrame) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return ErrClosed
	}
	return s.queueLocked(outFrame{streamed: f, size: f.Size()}, 0)
}

// queueLocked queues f, or closes the stream as a slow consumer when the
// queue is full; s.mu must be held and the stream not closing. A lazy
// frame (lazy > 0) starts no writer before lazy has passed.
func (s *Stream) queueLocked(f outFrame, lazy time.Duration) error {
	if len(s.queue) < s.opts.OutboundQueue && s.queuedBytes < s.opts.OutboundBytes {
		if s.queue == nil {
			// The box carries the array to the pool and back; it holds
			// nothing while the queue is in use.
			s.qarray = queueArrays.Get().(*[]outFrame)
			s.queue, *s.qarray = (*s.qarray)[:0], nil
		}
		s.queue = append(s.queue, f)
		s.queuedBytes += f.size
		if lazy <= 0 || s.writing {
			s.startWriterLocked()
		} else {
			s.armLazyLocked(lazy)
		}
		return nil
	}
	s.log.Warn(SlowConsumerReason, "queued", len(s.queue), "queuedBytes", s.queuedBytes)
	if h := s.opts.Hooks.SlowConsumer; h != nil {
		h()
	}
	s.closeLocked(ClosePolicyViolation, SlowConsumerReason, false)
	return ErrSlowConsumer
}

// armLazyLocked makes the lazy timer fire within d; s.mu must be held.
// A timer already armed for an earlier deadline is left alone.
func (s *Stream) armLazyLocked(d time.Duration) {
	if s.lazyArmed && d >= s.lazyArmedFor {
		return // armed for no later than d from now
	}
	now := time.Now()
	if s.lazyArmed && !now.Add(d).Before(s.lazyDeadline) {
		return
	}
	s.lazyArmed, s.lazyArmedFor, s.lazyDeadline = true, d, now.Add(d)
	if s.lazyTimer == nil {
		s.lazyTimer = time.AfterFunc(d, s.lazyDue)
	} else {
		s.lazyTimer.Reset(d)
	}
}

// lazyDue writes the lazy frames no Send took along. It runs on the
// timer's own goroutine, which becomes the writer: under a broadcast to
// every connection, starting another goroutine for each was a large part
// of what writing the broadcast cost.
func (s *Stream) lazyDue() {
	s.mu.Lock()
	s.lazyArmed = false
	if len(s.queue) == 0 || s.closing || s.writing {
		s.mu.Unlock()
		return
	}
	s.writing = true
	s.mu.Unlock()
	s.writeLoop()
}

// discardQueueLocked drops the queued frames; s.mu must be held. The
// frame being written, if any, stays counted until its write returns.
func (s *Stream) discardQueueLocked() {
	s.queue, s.qarray = nil, nil
	s.queuedBytes = s.writingBytes
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
func (s *Stream) CloseWith(code CloseCode, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeLocked(code, reason, true)
}

// closeLocked starts closing; s.mu must be held. With flush false, queued
// frames are discarded.
func (s *Stream) closeLocked(code CloseCode, reason string, flush bool) {
	if s.closing {
		return
	}
	s.closing = true
	if s.lazyTimer != nil {
		s.lazyTimer.Stop()
		s.lazyArmed = false
	}
	if !flush {
		s.discardQueueLocked()
	}
	s.closeCode, s.closeText = code, reason
	// Bound the flush (or the write in progress when discarding) so a peer
	// that stopped reading cannot hold the connection open.
	time.AfterFunc(s.opts.FlushTimeout, s.abort)
	// A running writer sees closing once the queue is empty; otherwise
	// start one to close the framer.
	s.startWriterLocked()
}

// Close flushes, closes the framer (a close frame on a websocket) and waits
// for the writer to finish.
func (s *Stream) Close() error {
	s.CloseWith(CloseNormal, "")
	<-s.writerDone
	return nil
}

// Done is closed once the stream has fully shut down.
func (s *Stream) Done() <-chan struct{} { return s.writerDone }

// writeLoop writes queued frames in order until the queue is empty. It runs
// with s.writing set, and only one runs at a time. It then either exits,
// clearing s.writing (the next Send starts a new writer), or, when the
// stream is closing or a write failed, closes the framer and Done.
func (s *Stream) writeLoop() {
	s.mu.Lock()
	for len(s.queue) > 0 && !s.aborted {
		var ok bool
		if frames, size := s.takeBatchLocked(); frames != nil {
			// The batch is written as one: its bytes are all being
			// written, and the write timer bounds it as a whole.
			s.armWriteTimerLocked()
			s.writingBytes = size
			s.inWrite.Store(true)
			s.mu.Unlock()
			ok = s.writeFrames(*frames)
			clear(*frames)
			*frames = (*frames)[:0]
			frameLists.Put(frames)
		} else {
			frame := s.queue[0]
			s.dropHeadLocked(1)
			// A frame with others queued behind it may wait for the next
			// one (Framer.WriteFrame): the last frame found queued writes
			// them all at once.
			more := len(s.queue) > 0
			s.armWriteTimerLocked()
			s.writingBytes = frame.size
			s.inWrite.Store(true)
			s.mu.Unlock()
			if frame.streamed != nil {
				ok = s.writeStreamed(frame.streamed)
			} else {
				ok = s.writeFrame(frame.data, more)
			}
		}
		s.inWrite.Store(false)
		s.mu.Lock()
		s.queuedBytes -= s.writingBytes
		s.writingBytes = 0
		s.writeTimer.Stop()
		if !ok {
			// The writer failed: stop accepting frames (a no-op if the
			// stream was already closing) and drop what is queued.
			s.aborted = true
			s.closing = true
			s.discardQueueLocked()
			break
		}
	}
	// A frame is still held by the framer only when the loop ended early
	// (a failed write, an abort, the queue discarded by a close), and its
	// Close sends it first.
	if !s.closing {
		s.writing = false
		s.mu.Unlock()
		return
	}
	// The stream is closing and the queue is flushed, discarded or past its
	// flush deadline: this is the last writer.
	s.discardQueueLocked()
	code, text := s.closeCode, s.closeText
	s.mu.Unlock()
	s.closeFramer(code, text)
	s.abort()
	close(s.writerDone)
}

// takeBatchLocked takes the plain frames at the head of the queue, up to
// maxBatchFrames and maxBatchBytes, for the framesWriter, and returns them
// (in a list of frameLists) and their size; it takes nothing (nil) unless the framer is one and
// there are at least two. s.mu must be held.
//
// A batch takes every plain frame queued (within its bounds) and the
// framer writes them all at once; the frames queued later, or behind a
// streamed frame, go in the next write.
func (s *Stream) takeBatchLocked() (*[][]byte, int64) {
	if s.fw == nil || len(s.queue) < 2 {
		return nil, 0
	}
	n, size := 0, int64(0)
	for _, f := range s.queue[:min(len(s.queue), maxBatchFrames)] {
		if f.streamed != nil || (n > 0 && size+f.size > maxBatchBytes) {
			break
		}
		n++
		size += f.size
	}
	if n < 2 {
		return nil, 0
	}
	frames := frameLists.Get().(*[][]byte)
	for i := range n {
		*frames = append(*frames, s.queue[i].data)
	}
	s.dropHeadLocked(n)
	return frames, size
}

// dropHeadLocked removes the first n frames of the queue, which the writer
// took; s.mu must be held. A few frames left are moved to the front, so
// that the array keeps its whole capacity; a long backlog is resliced
// instead of copied for every frame taken. A queue left empty gives its
// backing array back to queueArrays, unless reslicing left it small.
func (s *Stream) dropHeadLocked(n int) {
	clear(s.queue[:n])
	if rest := len(s.queue) - n; rest > 0 {
		if rest > maxShiftedFrames {
			s.queue = s.queue[n:]
			return
		}
		copy(s.queue, s.queue[n:])
		clear(s.queue[rest:])
		s.queue = s.queue[:rest]
		return
	}
	if a := s.qarray; a != nil && cap(s.queue) >= minPooledQueue && cap(s.queue) <= maxPooledQueue {
		*a = s.queue[:0]
		queueArrays.Put(a)
	}
	s.queue, s.qarray = nil, nil
}

// writeFrames writes a batch through the framesWriter, or frame by frame
// should it decline (and the framer is then no longer asked).
func (s *Stream) writeFrames(frames [][]byte) bool {
	// writeTimer bounds the write.
	handled, err := s.fw.WriteFrames(frames)
	if !handled {
		s.fw = nil
		for i, p := range frames {
			if !s.writeFrame(p, i < len(frames)-1) {
				return false
			}
		}
		return true
	}
	if err != nil {
		s.log.Debug("write failed", "err", err)
		return false
	}
	if h := s.opts.Hooks.FrameOut; h != nil {
		for range frames {
			h()
		}
	}
	return true
}

// armWriteTimerLocked starts the WriteTimeout of the next write (or of
// the next piece of a streamed frame); s.mu must be held.
func (s *Stream) armWriteTimerLocked() {
	s.writeDeadline = time.Now().Add(s.opts.WriteTimeout)
	if s.writeTimer == nil {
		s.writeTimer = time.AfterFunc(s.opts.WriteTimeout, s.writeTimedOut)
	} else {
		s.writeTimer.Reset(s.opts.WriteTimeout)
	}
}

// abort stops all writing: it fails the write in progress and keeps the
// writer from starting another.
func (s *Stream) abort() {
	s.mu.Lock()
	s.aborted = true
	inWrite := s.inWrite.Load()
	s.mu.Unlock()
	if inWrite {
		s.f.Abort()
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
		s.log.Debug("write timed out", "timeout", s.opts.WriteTimeout)
		// Aborting fails the write in progress; the writer then shuts
		// the stream down.
		s.f.Abort()
	}
}

func (s *Stream) writeFrame(frame []byte, more bool) bool {
	// writeTimer bounds the write.
	if err := s.f.WriteFrame(frame, more); err != nil {
		s.log.Debug("write failed", "err", err)
		return false
	}
	if h := s.opts.Hooks.FrameOut; h != nil {
		h()
	}
	return true
}

// closeFramer closes the framer once, waiting at most FlushTimeout for the
// peer's side of the close so that a dead peer cannot hold shutdown.
func (s *Stream) closeFramer(code CloseCode, text string) {
	s.closeOnce.Do(func() { s.f.Close(code, text, s.opts.FlushTimeout) })
}
