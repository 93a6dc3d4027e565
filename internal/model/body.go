package model

import (
	"bytes"
	"io"
	"sync"
	"sync/atomic"
)

// maxPooledBody is the largest request body buffer kept for reuse.
const maxPooledBody = 4 << 20

var bodyBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// requestBody is an encoded request body shared by the attempts of one
// call, and by net/http, which may still be writing it after the response
// has been read (a server may answer before reading the whole body).
//
// The buffer comes from a pool and goes back when the last reference is
// dropped: the caller holds one until done, and each copy handed to
// net/http (the request's Body, and each GetBody for a replay) holds one
// until net/http reports, through httptrace's WroteRequest, that it has
// finished writing it. The readers are plain io.NopCloser(*bytes.Reader)s
// on purpose: net/http recognises those as in-memory bodies and writes
// them together with the headers through the connection's buffer; any
// other reader type makes it flush the headers alone and copy the body
// through a fresh temporary buffer. A copy that is never written (the dial
// failed, say) only means the buffer is not reused.
//
// sent, when set, is Request.Sent: the first WroteRequest calls it, or the
// end of the first attempt if that never wrote the request.
type requestBody struct {
	buf     *bytes.Buffer
	pooled  bool
	refs    atomic.Int32
	sent    func()
	sentRan atomic.Bool
}

// newPooledBody returns a body whose buffer comes from the pool; write the
// body into buf, then use it. The caller's reference is dropped by done.
func newPooledBody() *requestBody {
	b := &requestBody{buf: bodyBuffers.Get().(*bytes.Buffer), pooled: true}
	b.buf.Reset()
	b.refs.Store(1)
	return b
}

// newBody wraps an encoded body that is not pooled.
func newBody(p []byte) *requestBody {
	b := &requestBody{buf: bytes.NewBuffer(p)}
	b.refs.Store(1)
	return b
}

// bytes is the encoded body.
func (b *requestBody) bytes() []byte { return b.buf.Bytes() }

// reader returns a new reader of the body for net/http, holding a
// reference that wrote drops.
func (b *requestBody) reader() io.ReadCloser {
	b.refs.Add(1)
	return io.NopCloser(bytes.NewReader(b.buf.Bytes()))
}

// wrote drops the reference of one reader that net/http finished writing,
// and calls sent the first time.
func (b *requestBody) wrote() {
	b.markSent()
	b.unref()
}

// markSent calls sent unless it already ran.
func (b *requestBody) markSent() {
	if b.sent != nil && b.sentRan.CompareAndSwap(false, true) {
		b.sent()
	}
}

// done drops the caller's reference.
func (b *requestBody) done() { b.unref() }

func (b *requestBody) unref() {
	if b.refs.Add(-1) != 0 || !b.pooled {
		return
	}
	buf := b.buf
	b.buf = nil
	if buf.Cap() <= maxPooledBody {
		bodyBuffers.Put(buf)
	}
}
