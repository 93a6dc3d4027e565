package rpcws

import (
	"bufio"
	"bytes"
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
