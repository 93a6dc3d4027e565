package rpcws

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"
)

// teeConn records what is written to the socket and passes it on.
type teeConn struct {
	sizeConn
	out bytes.Buffer
}

func (c *teeConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.out.Write(p)
	c.mu.Unlock()
	return c.sizeConn.Write(p)
}

func (c *teeConn) take() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := bytes.Clone(c.out.Bytes())
	c.out.Reset()
	return b
}

// drain reads what comes until the connection closes, so that the
// stream's close handshake completes at once.
func drain(ws *websocket.Conn) {
	for {
		if _, _, err := ws.Read(context.Background()); err != nil {
			return
		}
	}
}

// payload is n bytes of JSON-like text that differ from one n to the next.
func payload(n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = "{}\"abcdefghijklmnopqrstuvwxyz0123456789:,"[(i*7+n)%40]
	}
	return p
}

// Frames written by batchConn.writeFrames are, byte for byte, those the
// websocket library writes for the same payloads, at every header size
// and on either side of maxBatch, and the client reads them intact.
func TestRawFramesMatchTheLibrary(t *testing.T) {
	s, client := pair(t, Options{})
	bc := s.opts.Batch.conn
	require.NotNil(t, bc)
	tc := &teeConn{sizeConn: sizeConn{Conn: bc.Conn}}
	bc.Conn = tc
	ws := s.f.(*wsFramer).ws
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	sizes := []int{0, 1, 125, 126, 127, 4000, 4096, 0xFFFF - 4, 0xFFFF, 0x10000, maxBatch - 10, maxBatch, 200000, 3}
	var payloads [][]byte
	for _, n := range sizes {
		payloads = append(payloads, payload(n))
	}
	got := make(chan []string, 1)
	go func() {
		var frames []string
		for range 2 * len(payloads) {
			typ, data, err := client.Read(ctx)
			if err != nil || typ != websocket.MessageText {
				break
			}
			frames = append(frames, string(data))
		}
		got <- frames
	}()

	for _, p := range payloads {
		require.NoError(t, ws.Write(ctx, websocket.MessageText, p))
	}
	byLibrary := tc.take()
	require.NoError(t, bc.writeFrames(payloads))
	raw := tc.take()
	require.Equal(t, len(byLibrary), len(raw))
	require.True(t, bytes.Equal(byLibrary, raw), "the raw frames differ from the library's")

	frames := <-got
	go drain(client)
	require.Len(t, frames, 2*len(payloads))
	for i, f := range frames {
		require.Equal(t, string(payloads[i%len(payloads)]), f, "frame %d", i)
	}
}

// Plain frames found queued go out in one socket write, framed by the
// batcher, even frames too large for the websocket's buffer, which it
// would write in two pieces each; the stream's accounting counts them all.
func TestQueuedFramesGoOutInOneRawWrite(t *testing.T) {
	var out atomic.Int64
	s, client := pair(t, Options{Hooks: Hooks{FrameOut: func() { out.Add(1) }}})
	bc := s.opts.Batch.conn
	require.NotNil(t, bc)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	const n = 10
	writes := sendQueued(ctx, t, s, client, n, 5000)
	go drain(client)
	require.Equal(t, int64(1), writes, "%d queued frames of 5 KB did not go out in one write", n)
	require.Eventually(t, func() bool {
		_, _, writing, _ := s.state()
		return !writing
	}, time.Second, time.Millisecond)
	require.Equal(t, int64(n), out.Load(), "FrameOut was not called once a frame")
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Zero(t, s.queuedBytes)
	require.Zero(t, s.writingBytes)
}

// A websocket whose hijack did not go through the Batcher declines to
// write a batch; the writer then writes the frames one by one and asks no
// more.
func TestBatchDeclinedIsWrittenFrameByFrame(t *testing.T) {
	s, client := pair(t, Options{Batch: &Batcher{}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	holdWriter(t, s)
	for i := range 5 {
		require.NoError(t, s.Send(frame(i)))
	}
	releaseWriter(s)
	for i := range 5 {
		_, data, err := client.Read(ctx)
		require.NoError(t, err)
		require.Equal(t, string(frame(i)), string(data))
	}
	go drain(client)
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Nil(t, s.fw)
}

// The pongs the websocket writes on its own while the writer sends raw
// batches, and its reply to the client's close, never land inside a
// frame: the client reads every frame intact and in order, its pings are
// answered, and the close handshake completes.
func TestControlFramesBetweenRawBatches(t *testing.T) {
	// The queue's bounds hold everything the test sends (about 18 MB), so
	// a writer slowed by the race detector on a busy machine never turns
	// the test into one of the slow-consumer bound.
	s, client := pair(t, Options{LazyDelay: time.Millisecond, OutboundQueue: 1 << 16, OutboundBytes: 1 << 30})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	go func() {
		for {
			if _, err := s.ReadFrame(); err != nil {
				return
			}
		}
	}()
	msg := func(i int) []byte {
		// Sizes around the header boundaries and the websocket's buffer.
		n := []int{10, 120, 130, 3000, 5000, 70000}[i%6]
		return []byte(`{"method":"n","params":{"i":` + strconv.Itoa(i) + `,"s":"` + strings.Repeat("y", n) + `"}}`)
	}
	const n = 1500
	var pings atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := client.Ping(ctx); err != nil {
				return
			}
			pings.Add(1)
		}
	}()
	readErr := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			_, data, err := client.Read(ctx)
			if err != nil {
				readErr <- err
				return
			}
			if i < n && !bytes.Equal(msg(i), data) {
				readErr <- errors.New("frame " + strconv.Itoa(i) + " came out wrong")
				return
			}
			if i == n-1 {
				close(stop)
			}
		}
	}()

	for i := range n {
		if i%5 == 4 {
			require.NoError(t, s.Send(msg(i)))
		} else {
			require.NoError(t, s.SendLazy(msg(i)))
		}
	}
	select {
	case <-stop:
	case err := <-readErr:
		t.Fatal(err)
	case <-ctx.Done():
		t.Fatal("the frames did not all come")
	}
	wg.Wait()
	require.Positive(t, pings.Load())

	// The client closes while the server keeps sending: the close reply
	// comes between frames.
	sending := make(chan struct{})
	go func() {
		defer close(sending)
		for i := n; ; i++ {
			if s.SendLazy(msg(i)) != nil {
				return
			}
			if i%50 == 0 {
				time.Sleep(time.Millisecond)
			}
		}
	}()
	time.Sleep(20 * time.Millisecond)
	closed := make(chan error, 1)
	go func() { closed <- client.Close(websocket.StatusNormalClosure, "") }()
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("the close handshake did not complete")
	}
	// The reader sees the close frame, or, when Close's handshake read it
	// first, the connection closed under it.
	err := <-readErr
	require.True(t, websocket.CloseStatus(err) == websocket.StatusNormalClosure || errors.Is(err, net.ErrClosed), "%v", err)
	s.CloseWith(CloseNormal, "")
	<-sending
}
