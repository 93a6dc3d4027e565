package rpcws

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
)

// A Batcher lets a Stream's writer send the frames it finds queued
// together in one write to the socket, instead of one write (a system call
// and, on loopback, a wake-up of the reader) per frame. A tool call's
// item/started notification and its item/tool/call request, queued one
// after the other, thus leave together.
//
// BatchWrites wraps the ResponseWriter given to websocket.Accept, so that
// the hijacked connection's writes go through the Batcher; pass the
// Batcher to NewStream in Options.Batch.
//
// Only the writer's own frames are ever held. The websocket also writes
// from its reading goroutine (pongs, the reply to a close frame), and such
// a write goes out at once, after whatever is held: a hold never outlives
// the next write to the socket, whoever makes it. Setting what to hold
// never waits for a write in progress, so the writer can do it under the
// stream's lock.
type Batcher struct {
	conn *batchConn // set by the hijack; nil if it did not go through us
}

// BatchWrites returns w wrapped for websocket.Accept and the Batcher for
// the stream.
func BatchWrites(w http.ResponseWriter) (http.ResponseWriter, *Batcher) {
	b := &Batcher{}
	return batchingWriter{ResponseWriter: w, b: b}, b
}

// holdFrame makes the socket write that carries frame, the writer's next
// message, wait for the write after it; nil holds nothing. Only the
// websocket framer calls it, on the stream's writer goroutine, before
// writing each frame.
func (b *Batcher) holdFrame(frame []byte) {
	if b != nil && b.conn != nil {
		b.conn.holdFor(frame)
	}
}

// writeFrames writes frames, each a whole final text frame, straight to
// the socket after whatever is held (see batchConn.writeFrames). handled
// is false, and nothing written, when the connection did not go through
// us.
func (b *Batcher) writeFrames(frames [][]byte) (handled bool, err error) {
	if b == nil || b.conn == nil {
		return false, nil
	}
	return true, b.conn.writeFrames(frames)
}

type batchingWriter struct {
	http.ResponseWriter
	b *Batcher
}

func (w batchingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Hijack hijacks the connection and routes its buffered writer through a
// batchConn. Should the writer already hold bytes (net/http flushes the
// upgrade response before handing the connection over), it leaves the
// connection as it is, without batching.
func (w batchingWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil || brw == nil || brw.Writer.Buffered() > 0 {
		return conn, brw, err
	}
	bc := &batchConn{Conn: conn}
	brw.Writer.Reset(bc)
	w.b.conn = bc
	return bc, brw, nil
}

// maxBatch bounds the bytes held for one write.
const maxBatch = 64 << 10

// batchConn is a connection that holds the write of the expected frame
// (up to maxBatch bytes) and sends it with the next write, whatever that
// is.
//
// Only a write that is exactly one whole final text frame carrying the
// expected payload is held: the websocket writes a frame that fits its
// buffer (net/http's 4 KiB one, from the hijack) in one flush, header and
// payload, so a pong or a close reply, whatever its payload, never matches,
// and a larger frame, which goes out in pieces, is simply not held.
type batchConn struct {
	net.Conn
	// expect is the frame whose write to hold; holdFor sets it while a
	// write may be in progress, so it has a lock of its own, never held
	// during a write.
	emu    sync.Mutex
	expect []byte
	// wmu serializes the writes (the websocket's frame lock already does)
	// and guards pending, the held write, in a buffer of batchBuffers.
	wmu     sync.Mutex
	pending *[]byte
	writes  atomic.Int64 // writes to the socket, for tests
}

// batchBuffers hold the writes being batched, shared by every connection:
// a buffer is taken for a batch and given back once the batch is written,
// so an idle connection holds none, and a batch does not grow a buffer
// from nothing again (under a broadcast to every connection, that growing
// was the largest allocation of the daemon).
var batchBuffers = sync.Pool{New: func() any {
	b := make([]byte, 0, 4<<10)
	return &b
}}

func (c *batchConn) holdFor(frame []byte) {
	c.emu.Lock()
	c.expect = frame
	c.emu.Unlock()
}

// takeExpected reports whether p is the write of the expected frame, and
// if so stops expecting it.
func (c *batchConn) takeExpected(p []byte) bool {
	c.emu.Lock()
	defer c.emu.Unlock()
	f := c.expect
	if f == nil || len(p) != textHeaderLen(len(f))+len(f) || p[0] != finText || !bytes.HasSuffix(p, f) {
		return false
	}
	c.expect = nil
	return true
}

// finText is the first byte of an unfragmented text frame.
const finText = 0x81

// textHeaderLen is the length of an unmasked frame header for a payload of
// n bytes.
func textHeaderLen(n int) int {
	switch {
	case n <= 125:
		return 2
	case n <= 0xFFFF:
		return 4
	}
	return 10
}

// appendTextHeader appends the header of an unmasked final text frame of
// n bytes, as RFC 6455 §5.2 lays it out and the websocket library writes
// it for a server without compression: 0x81, then the length in 7 bits,
// or 126 and 16 bits, or 127 and 64 bits, big-endian.
func appendTextHeader(b []byte, n int) []byte {
	switch textHeaderLen(n) {
	case 2:
		return append(b, finText, byte(n))
	case 4:
		return append(b, finText, 126, byte(n>>8), byte(n))
	}
	return binary.BigEndian.AppendUint64(append(b, finText, 127), uint64(n))
}

// writeFrames writes each payload as a whole final text frame, framing it
// itself instead of going through the websocket library's Write: the
// library takes its locks, writes the header and the payload into its
// buffered writer and flushes that into Write for every frame, and under
// BenchmarkCrowdTurns/threads=400 (every turn broadcasts about three
// notifications to each of 400 connections, so each connection's writer
// finds many frames queued) that cost about 600 ns a frame. Framed here,
// the frames go into one pooled buffer after whatever is held and out in
// as few socket writes as maxBatch allows: BenchmarkCrowdTurns/threads=400
// went from 2.04 to 1.75 daemon-cpu-ms/turn (three runs each, see
// bench/README.md).
//
// The bytes are those the library writes for the same payloads (a server
// never masks its frames, and server.go turns compression off), which
// TestRawFramesMatchTheLibrary checks.
//
// Writing past the library is safe because of who else writes:
//   - The library writes on its own only control frames (a pong, the reply
//     to a close, a ping from the pinger), each at most 127 bytes and so,
//     its buffer being empty between frames, in one Write. Write and
//     writeFrames both run under wmu, so a raw batch never lands inside a
//     library frame, nor one inside the batch.
//   - Data frames come only from the stream's writer goroutine, which
//     calls writeFrames; a streamed frame (the library's message writer)
//     is finished, its last piece flushed, before the writer takes the next
//     batch, so the library's buffer holds nothing of it.
//   - The library refuses writes once it sent a close frame. The reply to
//     a peer's close is followed at once by closing the socket, so a batch
//     that slips in between the two puts data frames after the close
//     frame, which the peer, which closed first, discards; our own close
//     frame is written only after the writer is done.
//
// A frame larger than maxBatch is not copied: its header goes after the
// buffered bytes and its payload out with them in one vectored write. A
// failed write leaves the rest unwritten; the stream then aborts.
func (c *batchConn) writeFrames(frames [][]byte) error {
	c.holdFor(nil)
	c.wmu.Lock()
	defer c.wmu.Unlock()
	buf := c.pending
	c.pending = nil
	if buf == nil {
		buf = batchBuffers.Get().(*[]byte)
	}
	var err error
	for _, p := range frames {
		n := textHeaderLen(len(p)) + len(p)
		if n > maxBatch {
			*buf = appendTextHeader(*buf, len(p))
			c.writes.Add(1)
			bufs := net.Buffers{*buf, p}
			_, err = bufs.WriteTo(c.Conn)
			*buf = (*buf)[:0]
			if err != nil {
				break
			}
			continue
		}
		if len(*buf)+n > maxBatch {
			c.writes.Add(1)
			_, err = c.Conn.Write(*buf)
			*buf = (*buf)[:0]
			if err != nil {
				break
			}
		}
		*buf = append(appendTextHeader(*buf, len(p)), p...)
	}
	if err == nil && len(*buf) > 0 {
		c.writes.Add(1)
		_, err = c.Conn.Write(*buf)
	}
	// Written (or failed): the socket keeps no reference to it.
	*buf = (*buf)[:0]
	batchBuffers.Put(buf)
	return err
}

func (c *batchConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	held := 0
	if c.pending != nil {
		held = len(*c.pending)
	}
	if c.takeExpected(p) && held+len(p) <= maxBatch {
		if c.pending == nil {
			c.pending = batchBuffers.Get().(*[]byte)
		}
		*c.pending = append(*c.pending, p...)
		return len(p), nil
	}
	c.writes.Add(1)
	if held == 0 {
		return c.Conn.Write(p)
	}
	// Not kept between batches: an idle connection holds no buffer.
	buf := c.pending
	c.pending = nil
	bufs := net.Buffers{*buf, p}
	_, err := bufs.WriteTo(c.Conn)
	// Written (or failed): the socket keeps no reference to it.
	*buf = (*buf)[:0]
	batchBuffers.Put(buf)
	if err != nil {
		return 0, err
	}
	return len(p), nil
}
