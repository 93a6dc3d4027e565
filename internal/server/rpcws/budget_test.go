package rpcws

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
)

// holdingHandler hands every request to the test, which finishes it.
type holdingHandler struct {
	conn int // which connection of the test it serves
	reqs chan heldRequest
}

type heldRequest struct {
	conn int
	req  *Request
}

func (h holdingHandler) Handle(_ context.Context, req *Request) {
	if !req.IsNotification() {
		h.reqs <- heldRequest{h.conn, req}
	}
}

// servedConn returns a Conn serving a websocket and the client end of it.
// Serve runs until the client closes; cleanup waits for it.
func servedConn(t *testing.T, opts Options, h Handler) (*Conn, *websocket.Conn) {
	t.Helper()
	s, client := pair(t, opts)
	c := NewConn(s, h, ConnOptions{})
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = c.Serve()
	}()
	t.Cleanup(func() {
		_ = client.CloseNow()
		<-served
	})
	return c, client
}

// bigRequest is a request frame of about size bytes.
func bigRequest(id, size int) []byte {
	return []byte(fmt.Sprintf(`{"id":%d,"method":"turn/start","params":{"text":"%s"}}`, id, strings.Repeat("x", size)))
}

// N connections each send a large request while the handler holds them:
// the frames that do not fit in the budget are answered -32001 at once
// (which ones depends on how their reads interleave),
// the budget never holds more than its limit, and it is empty once every
// request has finished.
func TestInboundBudgetRefusesFramesOverIt(t *testing.T) {
	const (
		conns = 6
		size  = 300 << 10
		limit = 1 << 20 // three frames fit, not four
	)
	budget := NewInboundBudget(limit)
	var overloaded atomic.Int32
	reqs := make(chan heldRequest, conns)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	type side struct {
		conn   *Conn
		client *websocket.Conn
	}
	sides := make([]side, conns)
	for i := range sides {
		c, client := servedConn(t, Options{Inbound: budget, Hooks: Hooks{Overloaded: func() { overloaded.Add(1) }}}, holdingHandler{i, reqs})
		sides[i] = side{c, client}
	}
	var wg sync.WaitGroup
	for i, sd := range sides {
		wg.Add(1)
		go func() {
			defer wg.Done()
			require.NoError(t, sd.client.Write(ctx, websocket.MessageText, bigRequest(i, size)))
		}()
	}
	wg.Wait()

	// Every frame is either held by the handler or refused.
	var held []heldRequest
	refused := 0
	// A failing check must not leave Serve waiting for the held ones.
	t.Cleanup(func() {
		for _, r := range held {
			sides[r.conn].conn.Finish(r.req)
		}
	})
	replies := make(chan []byte, conns)
	for _, sd := range sides {
		go func() {
			_, data, err := sd.client.Read(ctx)
			if err == nil {
				replies <- data
			}
		}()
	}
	for held, refused = nil, 0; len(held)+refused < conns; {
		select {
		case r := <-reqs:
			held = append(held, r)
		case data := <-replies:
			var reply struct {
				Error *struct {
					Code    int64  `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			require.NoError(t, json.Unmarshal(data, &reply), string(data))
			require.NotNil(t, reply.Error, string(data))
			require.Equal(t, int64(api.CodeServerOverloaded), reply.Error.Code)
			require.Equal(t, OverloadedMessage, reply.Error.Message)
			refused++
		case <-ctx.Done():
			t.Fatalf("%d held, %d refused of %d", len(held), refused, conns)
		}
	}
	// Which frames fit depends on how their reads interleave (each takes
	// its bytes as they arrive), but no more than three can.
	require.NotEmpty(t, held, "no frame was served")
	require.LessOrEqual(t, len(held), 3)
	require.GreaterOrEqual(t, refused, conns-3)
	require.Equal(t, int32(refused), overloaded.Load())
	require.LessOrEqual(t, budget.Peak(), int64(limit), "the budget held more than its limit")
	require.Greater(t, budget.InFlight(), int64(len(held)*size), "held requests keep their frames in the budget")

	// Finishing the held requests gives their bytes back: a new large
	// frame fits again.
	for _, r := range held {
		sides[r.conn].conn.Finish(r.req)
	}
	require.Zero(t, budget.InFlight())
	require.NoError(t, sides[0].client.Write(ctx, websocket.MessageText, bigRequest(99, size)))
	select {
	case r := <-reqs:
		require.Equal(t, "99", r.req.IDText())
		sides[0].conn.Finish(r.req)
	case data := <-replies:
		t.Fatalf("refused with budget free: %s", data)
	case <-ctx.Done():
		t.Fatal("the request was neither served nor refused")
	}
	require.Zero(t, budget.InFlight())
}

// A client's answer to a server request that does not fit in the budget
// fails the waiting call with -32001 instead of leaving it waiting.
func TestInboundBudgetFailsCallWhoseAnswerIsRefused(t *testing.T) {
	budget := NewInboundBudget(256 << 10)
	c, client := servedConn(t, Options{Inbound: budget}, holdingHandler{reqs: make(chan heldRequest, 1)})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	call, err := c.Call(7, "item/tool/call", nil)
	require.NoError(t, err)
	_, _, err = client.Read(ctx)
	require.NoError(t, err)
	answer := fmt.Sprintf(`{"id":7,"result":{"output":"%s"}}`, strings.Repeat("y", 512<<10))
	require.NoError(t, client.Write(ctx, websocket.MessageText, []byte(answer)))
	_, err = call.Wait(ctx)
	var rerr *Error
	require.ErrorAs(t, err, &rerr)
	require.Equal(t, int64(api.CodeServerOverloaded), rerr.Code)
	require.Zero(t, budget.InFlight())
}

// The members of a refused frame's first chunk are found even though the
// frame is cut.
func TestScanPrefix(t *testing.T) {
	e := scanPrefix([]byte(`{"id":12,"method":"turn/start","params":{"text":"abc`))
	require.Equal(t, "12", string(e.id))
	require.Equal(t, `"turn/start"`, string(e.method))
	e = scanPrefix([]byte(` { "id" : "a" , "result" : {"x":[1,2`))
	require.Equal(t, `"a"`, string(e.id))
	require.NotNil(t, e.result)
	e = scanPrefix([]byte(`{"method":"turn/start","params":{"text":"abc`))
	require.Nil(t, e.id, "an id past the cut is not known")
	e = scanPrefix([]byte(`{"id":1`))
	require.Nil(t, e.id, "a value that may go on is not taken")
	e = scanPrefix([]byte(`[{"id":1,"method":"m"}]`))
	require.Nil(t, e.method)
}

// A client that stops reading while the server sends large frames is
// disconnected once the bytes waiting for it reach the byte bound, long
// before the frame bound, and what it holds never exceeds the bound by
// more than one frame.
func TestOutboundBytesBoundSlowConsumer(t *testing.T) {
	const (
		size  = 1 << 20
		bound = 4 << 20
	)
	var slow atomic.Int32
	s, _ := pair(t, Options{OutboundBytes: bound, Hooks: Hooks{SlowConsumer: func() { slow.Add(1) }}})
	// A reader runs, as in a connection: it is what ends the close
	// handshake with a peer that does not read.
	go func() {
		for {
			if _, err := s.ReadFrame(); err != nil {
				return
			}
		}
	}()
	big := bytes.Repeat([]byte("z"), size)
	big[0], big[len(big)-1] = '"', '"'
	sent := 0
	var err error
	for ; sent < DefaultOutboundQueue; sent++ {
		if err = s.Send(big); err != nil {
			break
		}
		s.mu.Lock()
		queued := s.queuedBytes
		s.mu.Unlock()
		require.LessOrEqual(t, queued, int64(bound+size), "the queue holds more than the bound and one frame")
	}
	require.ErrorIs(t, err, ErrSlowConsumer)
	require.Equal(t, int32(1), slow.Load())
	// The socket's buffers take some frames off the queue before the
	// writer blocks; on loopback they hold a few MiB.
	require.Less(t, sent, 64, "closed only after %d frames of %d bytes", sent, size)
}

// The byte bound closes the slow consumer as the frame bound does: the
// queue is discarded and the client gets the slow-consumer close.
func TestOutboundBytesBoundClosesAsSlowConsumer(t *testing.T) {
	const size = 100 << 10
	s, client := pair(t, Options{OutboundBytes: 3 * size})
	holdWriter(t, s)
	big := bytes.Repeat([]byte("z"), size)
	for range 3 {
		require.NoError(t, s.Send(big))
	}
	require.ErrorIs(t, s.Send(big), ErrSlowConsumer)
	queued, _, _, closing := s.state()
	require.True(t, closing)
	require.Zero(t, queued)
	releaseWriter(s)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := readAll(ctx, client)
	require.Empty(t, got)
	var ce websocket.CloseError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, websocket.StatusPolicyViolation, ce.Code)
	require.Equal(t, SlowConsumerReason, ce.Reason)
	<-s.Done()
}

// A large frame costs about twice its size to read (its chunks and the
// frame they are copied into), not the five times that growing one buffer
// to its size allocates, and leaves no large buffer in the pool.
func TestLargeFrameReadCost(t *testing.T) {
	const size = 4 << 20
	s, client := pair(t, Options{ReadLimit: 2 * size})
	msg := bigRequest(1, size)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The client writes from its own goroutine; its allocations are
	// counted too, so measure them alone first.
	written := make(chan error, 1)
	go func() { written <- client.Write(ctx, websocket.MessageText, msg) }()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	got, err := s.ReadFrame()
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	require.NoError(t, <-written)
	require.Equal(t, len(msg), len(got))
	require.True(t, bytes.Equal(msg, got))
	allocated := after.TotalAlloc - before.TotalAlloc
	require.Less(t, allocated, uint64(5*len(msg)/2), "reading a %d-byte frame allocated %d bytes", len(msg), allocated)

	for range 8 {
		buf := getReadBuffer()
		require.LessOrEqual(t, cap(buf.b), maxPooledFrame, "a large frame's buffer was pooled")
	}
}

// Buffers above maxPooledFrame are not pooled, so that a burst of large
// frames or replies leaves no memory behind in the pools.
func TestPoolsDropLargeBuffers(t *testing.T) {
	for range 8 {
		putReadBuffer(&readBuffer{b: make([]byte, 0, 2*maxPooledFrame)})
		e := getEncoder()
		e.buf.Grow(2 * maxPooledFrame)
		putEncoder(e)
	}
	for range 16 {
		require.LessOrEqual(t, cap(getReadBuffer().b), maxPooledFrame)
		require.LessOrEqual(t, getEncoder().buf.Cap(), maxPooledFrame)
	}
}
