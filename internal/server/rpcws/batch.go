package rpcws

import (
	"bufio"
	"net"
	"net/http"
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
type Batcher struct {
	conn *batchConn // set by the hijack; nil if it did not go through us
}

// BatchWrites returns w wrapped for websocket.Accept and the Batcher for
// the stream.
func BatchWrites(w http.ResponseWriter) (http.ResponseWriter, *Batcher) {
	b := &Batcher{}
	return batchingWriter{ResponseWriter: w, b: b}, b
}

// hold makes writes wait in memory (true) or go out with the next write
// (false). Only the stream's writer calls it.
func (b *Batcher) hold(on bool) {
	if b != nil && b.conn != nil {
		b.conn.hold.Store(on)
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

// batchConn is a connection whose writes are held while hold is set, up
// to maxBatch bytes, and go out with the first write made without it.
// Writes are serialized by the websocket's frame lock, so only hold is
// shared with another goroutine.
type batchConn struct {
	net.Conn
	hold    atomic.Bool
	pending []byte
	writes  atomic.Int64 // writes to the socket, for tests
}

func (c *batchConn) Write(p []byte) (int, error) {
	if c.hold.Load() && len(c.pending)+len(p) <= maxBatch {
		c.pending = append(c.pending, p...)
		return len(p), nil
	}
	c.writes.Add(1)
	if len(c.pending) == 0 {
		return c.Conn.Write(p)
	}
	// Not kept between batches: an idle connection holds no buffer.
	buf := append(c.pending, p...)
	c.pending = nil
	if _, err := c.Conn.Write(buf); err != nil {
		return 0, err
	}
	return len(p), nil
}
