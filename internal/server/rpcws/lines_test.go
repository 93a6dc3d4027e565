package rpcws

import (
	"bufio"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// echoHandler answers every request with its params.
type echoHandler struct{ c *Conn }

func (h *echoHandler) Handle(_ context.Context, req *Request) {
	if req.IsNotification() {
		return
	}
	defer h.c.Finish(req)
	var result any = struct{}{}
	if req.Params != nil {
		result = req.Params
	}
	_ = h.c.Reply(req, result)
}

// linesPeer is the client end of a Conn served over newline-delimited
// JSON on two pipes.
type linesPeer struct {
	t      *testing.T
	in     *io.PipeWriter // what the server reads
	out    *bufio.Reader  // what the server writes
	conn   *Conn
	served chan error
}

func serveLines(t *testing.T, readLimit int64, h func(*Conn) Handler) *linesPeer {
	return serveLinesWith(t, readLimit, Options{}, h)
}

func serveLinesWith(t *testing.T, readLimit int64, opts Options, h func(*Conn) Handler) *linesPeer {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	s := NewFramedStream(Lines(inR, outW, readLimit), opts)
	p := &linesPeer{t: t, in: inW, out: bufio.NewReader(outR), served: make(chan error, 1)}
	p.conn = NewConn(s, nil, ConnOptions{})
	p.conn.handler = h(p.conn)
	go func() { p.served <- p.conn.Serve() }()
	t.Cleanup(func() {
		_ = inW.Close()
		_ = outR.Close()
		<-s.Done()
	})
	return p
}

func (p *linesPeer) write(s string) {
	p.t.Helper()
	_, err := io.WriteString(p.in, s)
	require.NoError(p.t, err)
}

// line reads one line the server wrote, without its newline.
func (p *linesPeer) line() string {
	p.t.Helper()
	type res struct {
		s   string
		err error
	}
	got := make(chan res, 1)
	go func() {
		s, err := p.out.ReadString('\n')
		got <- res{s, err}
	}()
	select {
	case r := <-got:
		require.NoError(p.t, r.err)
		require.True(p.t, strings.HasSuffix(r.s, "\n"))
		return strings.TrimSuffix(r.s, "\n")
	case <-time.After(5 * time.Second):
		p.t.Fatal("no line from the server")
		return ""
	}
}

// One message per line each way: ids come back exactly as written, blank
// lines and CRLF endings are tolerated, a line that is not a message is
// dropped without ending the connection, and the peer's last line counts
// even without its newline.
func TestLinesFraming(t *testing.T) {
	var dropped atomic.Int32
	opts := Options{Hooks: Hooks{Dropped: func(DropReason) { dropped.Add(1) }}}
	p := serveLinesWith(t, 0, opts, func(c *Conn) Handler { return &echoHandler{c} })
	p.write(`{"id":"a","method":"m","params":{"x":1}}` + "\n")
	require.Equal(t, `{"id":"a","result":{"x":1}}`, p.line())
	p.write("\n\r\n" + `{"id":-9223372036854775808,"method":"m"}` + "\r\n")
	require.Equal(t, `{"id":-9223372036854775808,"result":{}}`, p.line())
	p.write("not json\n" + `{"id":7,"method":"m","params":[1]}` + "\n")
	require.Equal(t, `{"id":7,"result":[1]}`, p.line())
	p.write(`{"id":8,"method":"m","params":"` + strings.Repeat("y", 200<<10) + `"}` + "\n")
	require.Equal(t, `{"id":8,"result":"`+strings.Repeat("y", 200<<10)+`"}`, p.line())
	p.write(`{"id":9,"method":"m"}`)
	require.NoError(t, p.in.Close())
	require.Equal(t, `{"id":9,"result":{}}`, p.line())
	require.NoError(t, <-p.served, "the end of the input ends the connection in order")
	require.Equal(t, int32(1), dropped.Load(), "only the line that is not a message is dropped")
	_, err := p.out.ReadString('\n')
	require.ErrorIs(t, err, io.EOF, "the connection's end closes its output")
}

// A line over the read limit ends the connection, as a websocket message
// over its limit does.
func TestLinesOverReadLimit(t *testing.T) {
	p := serveLines(t, 1024, func(c *Conn) Handler { return &echoHandler{c} })
	p.write(`{"id":1,"method":"m","params":"` + strings.Repeat("z", 512) + `"}` + "\n")
	require.Contains(t, p.line(), `"id":1`)
	go func() {
		_, _ = io.WriteString(p.in, `{"id":2,"method":"m","params":"`+strings.Repeat("z", 2048)+`"}`+"\n")
	}()
	select {
	case err := <-p.served:
		require.ErrorIs(t, err, ErrFrameTooLarge)
	case <-time.After(5 * time.Second):
		t.Fatal("the connection did not end")
	}
}

// writeCounter counts the writes to it and keeps what was written.
type writeCounter struct {
	mu     sync.Mutex
	writes int
	buf    strings.Builder
}

func (w *writeCounter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes++
	return w.buf.Write(p)
}

func (w *writeCounter) get() (int, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.writes, w.buf.String()
}

// Frames queued while the writer is busy go out in one write, each on
// its line; a streamed frame is one line; the queue starts no writer
// while it is idle.
func TestLinesBatchesQueuedFrames(t *testing.T) {
	w := &writeCounter{}
	s := NewFramedStream(Lines(strings.NewReader(""), w, 0), Options{})
	holdWriter(t, s)
	for i := range 5 {
		require.NoError(t, s.Send(frame(i)))
	}
	require.NoError(t, s.SendStreamed(&pieces{parts: []string{`{"b":`, `[1,2]`, `}`}, size: 10}))
	require.NoError(t, s.Send(frame(5)))
	releaseWriter(s)
	want := ""
	for i := range 5 {
		want += string(frame(i)) + "\n"
	}
	want += `{"b":[1,2]}` + "\n" + string(frame(5)) + "\n"
	require.Eventually(t, func() bool { _, got := w.get(); return got == want }, 5*time.Second, time.Millisecond)
	n, _ := w.get()
	// The five queued frames, the streamed one's three pieces and its
	// newline, the last frame.
	require.Equal(t, 1+3+1+1, n)
	require.Eventually(t, func() bool { _, _, writing, _ := s.state(); return !writing }, 5*time.Second, time.Millisecond)
	s.CloseWith(CloseNormal, "")
	<-s.Done()
}

// A frame with a raw newline would be two messages to the peer: it is
// refused and the connection closes.
func TestLinesRefuseNewlineInFrame(t *testing.T) {
	w := &writeCounter{}
	s := NewFramedStream(Lines(strings.NewReader(""), w, 0), Options{})
	require.NoError(t, s.Send([]byte("{\"a\":\n1}")))
	select {
	case <-s.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the stream did not close")
	}
	_, got := w.get()
	require.Empty(t, got)
	require.True(t, errors.Is(s.Send([]byte(`{}`)), ErrClosed))
}

// Closing the connection closes the framer's reader, which ends a read
// waiting on it, and its writer, so the peer reads EOF.
func TestLinesCloseEndsRead(t *testing.T) {
	p := serveLines(t, 0, func(c *Conn) Handler { return &echoHandler{c} })
	p.write(`{"id":1,"method":"m"}` + "\n")
	require.Equal(t, `{"id":1,"result":{}}`, p.line())
	p.conn.Stream().CloseWith(CloseGoingAway, "bye")
	select {
	case err := <-p.served:
		require.ErrorIs(t, err, io.ErrClosedPipe)
	case <-time.After(5 * time.Second):
		t.Fatal("closing did not end the read")
	}
	_, err := p.out.ReadString('\n')
	require.ErrorIs(t, err, io.EOF)
}

// Server requests go out on their own line and the peer's answer, on its
// line, settles them.
func TestLinesServerRequests(t *testing.T) {
	p := serveLines(t, 0, func(c *Conn) Handler { return &echoHandler{c} })
	call, err := p.conn.Call(3, "item/tool/call", map[string]string{"tool": "t"})
	require.NoError(t, err)
	require.Equal(t, `{"id":3,"method":"item/tool/call","params":{"tool":"t"}}`, p.line())
	p.write(`{"id":3,"result":{"ok":true}}` + "\n")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := call.Wait(ctx)
	require.NoError(t, err)
	require.JSONEq(t, `{"ok":true}`, string(res))
}
