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
// the next write to the socket, whoever makes it.
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
// stream's writer calls it, before writing each frame.
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

// batchConn is a connection that holds the write ending with the expected
// frame (up to maxBatch bytes) and sends it with the next write, whatever
// that is.
type batchConn struct {
	net.Conn
	// mu serializes writes (the websocket's own frame lock already does)
	// and guards expect and pending against holdFor.
	mu      sync.Mutex
	expect  []byte // the frame whose write to hold
	pending []byte // a held write
	writes  atomic.Int64
}

func (c *batchConn) holdFor(frame []byte) {
	c.mu.Lock()
	c.expect = frame
	c.mu.Unlock()
}

func (c *batchConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.expect != nil && bytes.HasSuffix(p, c.expect) && len(c.pending)+len(p) <= maxBatch {
		c.expect = nil
		c.pending = append(c.pending, p...)
		return len(p), nil
	}
	c.writes.Add(1)
	if len(c.pending) == 0 {
		return c.Conn.Write(p)
	}
	// Not kept between batches: an idle connection holds no buffer.
	bufs := net.Buffers{c.pending, p}
	c.pending = nil
	if _, err := bufs.WriteTo(c.Conn); err != nil {
		return 0, err
	}
	return len(p), nil
}
