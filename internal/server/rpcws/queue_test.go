package rpcws

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"
)

// pair returns a server-side Stream and the client end of its websocket.
// The client must keep reading for closes to complete promptly.
func pair(t *testing.T, opts Options) (*Stream, *websocket.Conn) {
	t.Helper()
	accepted := make(chan *websocket.Conn, 1)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bw, batch := BatchWrites(w)
		ws, err := websocket.Accept(bw, r, nil)
		if err != nil {
			t.Error(err)
			return
		}
		if opts.Batch == nil {
			opts.Batch = batch
		}
		accepted <- ws
	}))
	t.Cleanup(hs.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	client, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(hs.URL, "http"), nil)
	require.NoError(t, err)
	client.SetReadLimit(-1)
	t.Cleanup(func() { _ = client.CloseNow() })
	s := NewStream(<-accepted, opts)
	t.Cleanup(func() {
		s.CloseWith(websocket.StatusNormalClosure, "")
		<-s.Done()
	})
	return s, client
}

// holdWriter makes Send behave as if a writer were busy: frames queue up
// and nothing is written until releaseWriter.
func holdWriter(t *testing.T, s *Stream) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	require.False(t, s.writing, "a writer is already running")
	s.writing = true
}

func releaseWriter(s *Stream) { go s.writeLoop() }

func (s *Stream) state() (queued, capacity int, writing, closing bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue), cap(s.queue), s.writing, s.closing
}

// readAll reads text frames until the connection closes and returns them
// with the close error.
func readAll(ctx context.Context, ws *websocket.Conn) ([]string, error) {
	var got []string
	for {
		_, data, err := ws.Read(ctx)
		if err != nil {
			return got, err
		}
		got = append(got, string(data))
	}
}

func frame(i int) []byte { return []byte(`{"method":"n","params":{"i":` + strconv.Itoa(i) + `}}`) }

// Frames queued while the writer is busy go out in one socket write, in
// order; one sent alone goes out on its own.
func TestQueuedFramesShareOneWrite(t *testing.T) {
	s, client := pair(t, Options{})
	require.NotNil(t, s.opts.Batch.conn, "the hijack did not go through the batcher")
	writes := &s.opts.Batch.conn.writes
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	holdWriter(t, s)
	for i := range 5 {
		require.NoError(t, s.Send(frame(i)))
	}
	before := writes.Load()
	releaseWriter(s)
	for i := range 5 {
		_, data, err := client.Read(ctx)
		require.NoError(t, err)
		require.JSONEq(t, string(frame(i)), string(data))
	}
	require.Equal(t, int64(1), writes.Load()-before, "five queued frames took more than one write")

	require.NoError(t, s.Send(frame(5)))
	_, data, err := client.Read(ctx)
	require.NoError(t, err)
	require.JSONEq(t, string(frame(5)), string(data))
	require.Equal(t, int64(2), writes.Load()-before)
}

// sizeConn records the size of every write to the socket.
type sizeConn struct {
	net.Conn
	mu    sync.Mutex
	sizes []int
}

func (c *sizeConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.sizes = append(c.sizes, len(p))
	c.mu.Unlock()
	return c.Conn.Write(p)
}

// paddedFrame is frame i padded with pad bytes.
func paddedFrame(i, pad int) []byte {
	return []byte(`{"method":"n","params":{"i":` + strconv.Itoa(i) + `,"s":"` + strings.Repeat("x", pad) + `"}}`)
}

// sendQueued queues n frames of paddedFrame while the writer is held,
// lets it go, checks that the client reads them intact and in order, and
// returns how many socket writes they took.
func sendQueued(ctx context.Context, t *testing.T, s *Stream, client *websocket.Conn, n, pad int) int64 {
	t.Helper()
	holdWriter(t, s)
	for i := range n {
		require.NoError(t, s.Send(paddedFrame(i, pad)))
	}
	bc := s.opts.Batch.conn
	before := bc.writes.Load()
	releaseWriter(s)
	for i := range n {
		_, data, err := client.Read(ctx)
		require.NoError(t, err)
		require.Equal(t, string(paddedFrame(i, pad)), string(data))
	}
	return bc.writes.Load() - before
}

// A batch never holds more than maxBatch bytes: a longer burst of small
// frames goes out in several writes, every frame intact and in order.
func TestBatchIsBounded(t *testing.T) {
	s, client := pair(t, Options{})
	bc := s.opts.Batch.conn
	require.NotNil(t, bc)
	sc := &sizeConn{Conn: bc.Conn}
	bc.Conn = sc
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	const n = 40
	writes := sendQueued(ctx, t, s, client, n, 3000)
	require.Greater(t, writes, int64(1), "%d frames of 3 KB went out in one write", n)
	require.Less(t, writes, int64(n/4), "the frames were not batched")
	sc.mu.Lock()
	defer sc.mu.Unlock()
	for _, size := range sc.sizes {
		require.LessOrEqual(t, size, maxBatch)
	}
}

// recordConn records what is written to it.
type recordConn struct {
	net.Conn
	out bytes.Buffer
}

func (c *recordConn) Write(p []byte) (int, error) { return c.out.Write(p) }

// wsFrame is an unmasked, unfragmented frame with opcode op (a final
// text frame is 0x81, a pong 0x8A, a close 0x88).
func wsFrame(op byte, payload []byte) []byte {
	var h []byte
	switch n := len(payload); {
	case n <= 125:
		h = []byte{op, byte(n)}
	case n <= 0xFFFF:
		h = []byte{op, 126, byte(n >> 8), byte(n)}
	default:
		h = []byte{op, 127, 0, 0, 0, 0, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}
	}
	return append(h, payload...)
}

// Only the write of the expected frame is held, and any later write,
// whoever makes it (the websocket's reader answering a ping or a close),
// sends it first: a hold never strands bytes.
func TestBatchHoldsOnlyTheWritersFrame(t *testing.T) {
	rc := &recordConn{}
	c := &batchConn{Conn: rc}
	payload := []byte(`{"id":1,"result":{}}`)
	text, pong, closing := wsFrame(0x81, payload), wsFrame(0x8A, payload), wsFrame(0x88, payload)
	write := func(p []byte) {
		t.Helper()
		n, err := c.Write(p)
		require.NoError(t, err)
		require.Equal(t, len(p), n)
	}
	var want []byte

	c.holdFor(payload)
	// The reader's pong, even one echoing the expected payload: out at once.
	write(pong)
	want = append(want, pong...)
	require.Equal(t, want, rc.out.Bytes())
	// The writer's frame: held.
	write(text)
	require.Equal(t, want, rc.out.Bytes())
	// The reader's close reply: out, after the held frame.
	write(closing)
	want = append(append(want, text...), closing...)
	require.Equal(t, want, rc.out.Bytes())
	require.Empty(t, c.held())

	// A close reply matching the expected payload is not held either.
	c.holdFor(payload)
	write(closing)
	want = append(want, closing...)
	require.Equal(t, want, rc.out.Bytes())

	// Once a frame is held, a later write of the same bytes is not.
	c.holdFor(payload)
	write(text)
	write(text)
	want = append(append(want, text...), text...)
	require.Equal(t, want, rc.out.Bytes())

	// Frames of each header size are held; an empty expected frame holds
	// only an empty text frame.
	for _, n := range []int{0, 125, 126, 0xFFFF - 4, 0xFFFF, 0x10000} {
		p := bytes.Repeat([]byte("x"), n)
		f := wsFrame(0x81, p)
		c.holdFor(p)
		write(f)
		if len(f) <= maxBatch {
			require.Len(t, c.held(), len(f), "payload of %d bytes", n)
		} else {
			require.Empty(t, c.held(), "payload of %d bytes", n)
		}
		write(pong)
		require.Empty(t, c.held())
	}
}

// stallConn is a connection whose writes block, once stalled, until it is
// closed: a peer that stopped reading.
type stallConn struct {
	net.Conn
	stall   atomic.Bool
	blocked chan struct{} // closed when a write first blocks
	once    sync.Once
	closed  chan struct{}
	cOnce   sync.Once
}

func (c *stallConn) Write(p []byte) (int, error) {
	if c.stall.Load() {
		c.once.Do(func() { close(c.blocked) })
		<-c.closed
		return 0, net.ErrClosed
	}
	return c.Conn.Write(p)
}

func (c *stallConn) Close() error {
	c.cOnce.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// Send does not block while the websocket's reader is stuck writing a
// pong to a peer that stopped reading, however the writer holds frames.
func TestSendNeverWaitsForAStalledControlWrite(t *testing.T) {
	s, client := pair(t, Options{})
	bc := s.opts.Batch.conn
	require.NotNil(t, bc)
	sc := &stallConn{Conn: bc.Conn, blocked: make(chan struct{}), closed: make(chan struct{})}
	bc.Conn = sc
	go func() {
		for {
			if _, err := s.ReadFrame(); err != nil {
				return
			}
		}
	}()
	sc.stall.Store(true)
	pinged := make(chan struct{})
	go func() {
		defer close(pinged)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = client.Ping(ctx) // the pong never comes: the server's write is stuck
	}()
	select {
	case <-sc.blocked:
	case <-time.After(5 * time.Second):
		t.Fatal("the pong write never blocked")
	}
	// The writer takes the first frame and gets stuck behind the pong.
	require.NoError(t, s.Send(frame(0)))
	require.Eventually(t, func() bool {
		queued, _, writing, _ := s.state()
		return queued == 0 && writing
	}, 5*time.Second, time.Millisecond)
	time.Sleep(20 * time.Millisecond) // let it get as far as it can
	start := time.Now()
	for i := 1; i < 3; i++ {
		require.NoError(t, s.Send(frame(i)))
	}
	require.Less(t, time.Since(start), time.Second, "Send waited for the stalled write")
	_ = client.CloseNow()
	_ = sc.Close()
	<-pinged
}

// A client that closes the connection while the server writes bursts of
// frames gets every frame written before the close reply, and the close
// handshake completes.
func TestClientCloseDuringBurst(t *testing.T) {
	for round := range 50 {
		s, client := pair(t, Options{})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		// The server's reader must run for it to answer the close.
		go func() {
			for {
				if _, err := s.ReadFrame(); err != nil {
					return
				}
			}
		}()
		got := make(chan int, 1)
		go func() {
			n := 0
			for {
				if _, _, err := client.Read(ctx); err != nil {
					got <- n
					return
				}
				n++
			}
		}()
		for i := range 20 {
			if s.Send(frame(i)) != nil {
				break
			}
		}
		err := client.Close(websocket.StatusNormalClosure, "bye")
		require.NoError(t, err, "round %d: the close handshake failed", round)
		<-got
		cancel()
	}
}

func TestSlowConsumerAtExactlyOutboundQueue(t *testing.T) {
	const limit = 8
	var slow, out atomic.Int32
	s, client := pair(t, Options{OutboundQueue: limit, Hooks: Hooks{
		SlowConsumer: func() { slow.Add(1) },
		FrameOut:     func() { out.Add(1) },
	}})
	holdWriter(t, s)
	for i := 0; i < limit; i++ {
		require.NoError(t, s.Send(frame(i)), "frame %d of %d", i, limit)
	}
	queued, _, _, closing := s.state()
	require.Equal(t, limit, queued)
	require.False(t, closing)
	require.Zero(t, slow.Load())

	require.ErrorIs(t, s.Send(frame(limit)), ErrSlowConsumer)
	require.Equal(t, int32(1), slow.Load())
	queued, capacity, _, closing := s.state()
	require.True(t, closing)
	require.Zero(t, queued, "a slow consumer's queue is discarded")
	require.Zero(t, capacity)
	require.ErrorIs(t, s.Send(frame(0)), ErrClosed)
	require.Equal(t, int32(1), slow.Load(), "the hook fires once")

	releaseWriter(s)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := readAll(ctx, client)
	require.Empty(t, got, "discarded frames must not be written")
	require.Equal(t, websocket.StatusPolicyViolation, websocket.CloseStatus(err))
	var ce websocket.CloseError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, SlowConsumerReason, ce.Reason)
	<-s.Done()
	require.Zero(t, out.Load())
}

func TestCloseFlushesQueueInOrder(t *testing.T) {
	const n = 500
	var out atomic.Int32
	s, client := pair(t, Options{OutboundQueue: n, Hooks: Hooks{FrameOut: func() { out.Add(1) }}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	type result struct {
		got []string
		err error
	}
	res := make(chan result, 1)
	go func() {
		got, err := readAll(ctx, client)
		res <- result{got, err}
	}()
	// Some frames go out while others are still being queued; the rest
	// must be flushed by Close, all in order.
	for i := 0; i < n; i++ {
		require.NoError(t, s.Send(frame(i)))
	}
	s.CloseWith(websocket.StatusGoingAway, "bye")
	require.ErrorIs(t, s.Send(frame(n)), ErrClosed)
	require.NoError(t, s.Close())
	r := <-res
	require.Len(t, r.got, n)
	for i, f := range r.got {
		require.Equal(t, string(frame(i)), f)
	}
	require.Equal(t, websocket.StatusGoingAway, websocket.CloseStatus(r.err))
	require.Equal(t, int32(n), out.Load())
}

func TestCloseFlushesHeldQueue(t *testing.T) {
	const n = 100
	s, client := pair(t, Options{OutboundQueue: n})
	holdWriter(t, s)
	for i := 0; i < n; i++ {
		require.NoError(t, s.Send(frame(i)))
	}
	s.CloseWith(websocket.StatusNormalClosure, "")
	releaseWriter(s)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := readAll(ctx, client)
	require.Len(t, got, n, "every frame queued before the close is delivered")
	for i, f := range got {
		require.Equal(t, string(frame(i)), f)
	}
	require.Equal(t, websocket.StatusNormalClosure, websocket.CloseStatus(err))
	<-s.Done()
}

func TestQueueMemoryReleasedAfterBurst(t *testing.T) {
	const n = 1000
	s, client := pair(t, Options{})
	_, capacity, writing, _ := s.state()
	require.Zero(t, capacity, "an idle stream holds no queue")
	require.False(t, writing, "an idle stream runs no writer")

	holdWriter(t, s)
	for i := 0; i < n; i++ {
		require.NoError(t, s.Send(frame(i)))
	}
	queued, capacity, _, _ := s.state()
	require.Equal(t, n, queued)
	require.GreaterOrEqual(t, capacity, n)
	releaseWriter(s)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := 0; i < n; i++ {
		_, data, err := client.Read(ctx)
		require.NoError(t, err)
		require.Equal(t, string(frame(i)), string(data))
	}
	require.Eventually(t, func() bool {
		_, _, writing, _ := s.state()
		return !writing
	}, 5*time.Second, time.Millisecond, "the writer exits once the queue drains")
	queued, capacity, _, closing := s.state()
	require.Zero(t, queued)
	require.Zero(t, capacity, "the burst's backing array must be released")
	require.False(t, closing)

	// The stream keeps working: the next Send starts a new writer.
	require.NoError(t, s.Send(frame(n)))
	_, data, err := client.Read(ctx)
	require.NoError(t, err)
	require.Equal(t, string(frame(n)), string(data))

	// Close needs the peer to answer the close handshake.
	done := make(chan error, 1)
	go func() {
		_, err := readAll(ctx, client)
		done <- err
	}()
	require.NoError(t, s.Close())
	require.Equal(t, websocket.StatusNormalClosure, websocket.CloseStatus(<-done))
}

func TestWriteFailureClosesStream(t *testing.T) {
	s, client := pair(t, Options{FlushTimeout: 100 * time.Millisecond})
	require.NoError(t, client.CloseNow())
	// Writes eventually fail once the peer is gone; the stream then stops
	// accepting frames and shuts down on its own.
	require.Eventually(t, func() bool {
		return s.Send(frame(0)) == ErrClosed
	}, 5*time.Second, time.Millisecond)
	select {
	case <-s.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("stream did not shut down after a write failure")
	}
}

func TestConcurrentSendersKeepTheirOrder(t *testing.T) {
	const senders, each = 4, 250
	s, client := pair(t, Options{OutboundQueue: senders * each})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errs := make(chan error, senders)
	for g := 0; g < senders; g++ {
		go func() {
			for i := 0; i < each; i++ {
				if err := s.Send([]byte(strconv.Itoa(g*each + i))); err != nil {
					errs <- err
					return
				}
				if i%50 == 0 {
					time.Sleep(time.Millisecond) // let the writer drain and exit
				}
			}
			errs <- nil
		}()
	}
	next := make([]int, senders)
	for n := 0; n < senders*each; n++ {
		_, data, err := client.Read(ctx)
		require.NoError(t, err)
		v, err := strconv.Atoi(string(data))
		require.NoError(t, err)
		g := v / each
		require.Equal(t, next[g], v%each, "sender %d out of order", g)
		next[g]++
	}
	for g := 0; g < senders; g++ {
		require.NoError(t, <-errs)
	}
	done := make(chan error, 1)
	go func() {
		_, err := readAll(ctx, client)
		done <- err
	}()
	require.NoError(t, s.Close())
	require.Equal(t, websocket.StatusNormalClosure, websocket.CloseStatus(<-done))
}

func TestFlushBoundedByFlushTimeout(t *testing.T) {
	const n = 64
	// No byte bound: 64 MiB must queue without overflowing.
	s, _ := pair(t, Options{OutboundQueue: n, OutboundBytes: 1 << 30, FlushTimeout: 200 * time.Millisecond})
	// The client never reads: the writer blocks once the socket buffers
	// are full, and closing must not wait for it beyond FlushTimeout.
	big := []byte(`{"method":"n","params":"` + strings.Repeat("x", 1<<20) + `"}`)
	for i := 0; i < n; i++ {
		require.NoError(t, s.Send(big))
	}
	start := time.Now()
	s.CloseWith(websocket.StatusGoingAway, "bye")
	select {
	case <-s.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("close was not bounded by FlushTimeout")
	}
	require.Less(t, time.Since(start), 3*time.Second)
	_, capacity, _, closing := s.state()
	require.True(t, closing)
	require.Zero(t, capacity)
}

func TestWriteTimeoutDropsStalledConnection(t *testing.T) {
	const n = 64
	// No byte bound: the queue must not overflow before a write stalls.
	s, _ := pair(t, Options{OutboundQueue: n, OutboundBytes: 1 << 30, WriteTimeout: 200 * time.Millisecond})
	// The client never reads: once the socket buffers are full a write
	// stalls, and WriteTimeout must end the connection without any Close.
	big := []byte(`{"method":"n","params":"` + strings.Repeat("x", 1<<20) + `"}`)
	for i := 0; i < n; i++ {
		if s.Send(big) != nil {
			break
		}
	}
	start := time.Now()
	select {
	case <-s.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a stalled write was not bounded by WriteTimeout")
	}
	require.Less(t, time.Since(start), 3*time.Second)
	require.ErrorIs(t, s.Send(frame(0)), ErrClosed)
}

func TestWriteTimerSpansManyFrames(t *testing.T) {
	// Frames written one after another, each well within WriteTimeout but
	// together longer than it, must not trip the re-armed timer.
	s, client := pair(t, Options{WriteTimeout: 50 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := 0; i < 20; i++ {
		require.NoError(t, s.Send(frame(i)))
		_, data, err := client.Read(ctx)
		require.NoError(t, err)
		require.Equal(t, string(frame(i)), string(data))
		time.Sleep(10 * time.Millisecond)
	}
	done := make(chan error, 1)
	go func() {
		_, err := readAll(ctx, client)
		done <- err
	}()
	require.NoError(t, s.Close())
	require.Equal(t, websocket.StatusNormalClosure, websocket.CloseStatus(<-done))
}

// held returns the bytes the connection holds for its next write.
func (c *batchConn) held() []byte {
	if c.pending == nil {
		return nil
	}
	return *c.pending
}

// discardConn is a connection whose writes go nowhere.
type discardConn struct{ net.Conn }

func (discardConn) Write(p []byte) (int, error) { return len(p), nil }

// A batch is built in a pooled buffer: once warm, holding three frames
// and writing them with a fourth allocates no buffer (growing one from
// nothing for every batch was the largest allocation of a broadcast to
// many connections).
func TestBatchReusesItsBuffer(t *testing.T) {
	c := &batchConn{Conn: discardConn{}}
	payload := bytes.Repeat([]byte("x"), 300)
	frame := wsFrame(0x81, payload)
	batch := func() {
		for range 3 {
			c.holdFor(payload)
			if _, err := c.Write(frame); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.Write(frame); err != nil {
			t.Fatal(err)
		}
	}
	batch()
	require.Empty(t, c.held())
	// The net.Buffers of the write escape to the heap: two small allocations.
	require.LessOrEqual(t, testing.AllocsPerRun(100, batch), 2.0)
}
