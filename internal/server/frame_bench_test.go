package server

import (
	"context"
	"io"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/turns"
)

// The frame benchmarks send one request at a time over a real websocket and
// wait for its reply, so that each operation is one frame decoded and
// dispatched and one reply encoded and written. The client reuses its
// buffers; its allocations (a few per frame, the same for every server
// build) are counted with the server's. Compare:
//
//   - TurnStart: a turn/start frame as the TUI sends it, through the thread
//     method adapter (experimental-field gate, required fields, params
//     decode), answered with the TurnStartResult turns returns;
//   - Reply: a small request answered with that same TurnStartResult;
//   - Empty: a small request answered with {}.
//
// TurnStart minus Reply is the cost of decoding and dispatching the
// turn/start frame; Reply minus Empty the cost of encoding the reply.

const benchThreadID = "0194f0d2-7c1e-7c3a-9b1e-1f2e3d4c5b6a"

func benchTurnResult() api.TurnStartResult {
	id := "0194f0d2-8a2b-7c3a-9b1e-aa2e3d4c5b6b"
	return api.TurnStartResult{Turn: api.Turn{ID: id, RootTurnID: &id, Items: api.List[api.ThreadItem]{},
		ItemsView: api.ItemsNotLoaded, Status: api.TurnInProgress}}
}

// benchFrames serves srv on a real websocket and times round trips of the
// frame built by head+id+tail.
func benchFrames(b *testing.B, srv *Server, head, tail string) {
	ws := DialBench(b, srv)
	ctx := context.Background()
	buf := make([]byte, 0, 4096)
	roundTrip := func(frame []byte) {
		if err := ws.Write(ctx, websocket.MessageText, frame); err != nil {
			b.Fatal(err)
		}
		_, r, err := ws.Reader(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if buf, err = ReadMessage(r, buf); err != nil {
			b.Fatal(err)
		}
		if !strings.Contains(string(buf), `"result"`) {
			b.Fatalf("not a result: %s", buf)
		}
	}
	roundTrip([]byte(`{"id":0,"method":"initialize","params":{"clientInfo":{"name":"bench","version":"1"}}}`))
	frame := make([]byte, 0, 512)
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		i++
		frame = append(frame[:0], head...)
		frame = strconv.AppendInt(frame, int64(i), 10)
		frame = append(frame, tail...)
		roundTrip(frame)
	}
}

func newFrameBenchServer(b *testing.B) *Server {
	srv, err := New(Config{})
	if err != nil {
		b.Fatal(err)
	}
	res := benchTurnResult()
	srv.Handle("turn/start", threadMethod([]string{"threadId", "input"}, func(_ context.Context, _ *Call, p api.TurnStartParams) (api.TurnStartResult, turns.After, error) {
		if p.ThreadID != benchThreadID || len(p.Input) != 1 {
			b.Errorf("params not decoded: %+v", p)
		}
		return res, nil, nil
	}))
	srv.Handle("bench/reply", func(context.Context, *Call) (any, error) { return res, nil })
	srv.Handle("bench/empty", func(context.Context, *Call) (any, error) { return nil, nil })
	return srv
}

func BenchmarkFrameTurnStart(b *testing.B) {
	benchFrames(b, newFrameBenchServer(b), `{"id":`, `,"method":"turn/start","params":{"threadId":"`+benchThreadID+
		`","input":[{"type":"text","text":"Say hello","text_elements":[]}],"clientUserMessageId":"cmsg-1"}}`)
}

func BenchmarkFrameReply(b *testing.B) {
	benchFrames(b, newFrameBenchServer(b), `{"id":`, `,"method":"bench/reply","params":{}}`)
}

func BenchmarkFrameEmpty(b *testing.B) {
	benchFrames(b, newFrameBenchServer(b), `{"id":`, `,"method":"bench/empty","params":{}}`)
}

// DialBench serves srv on a test listener and returns a websocket client
// of it; both are closed when b ends.
func DialBench(b *testing.B, srv *Server) *websocket.Conn {
	b.Helper()
	hs := httptest.NewServer(srv.Handler())
	ws, resp, err := websocket.Dial(context.Background(), "ws"+strings.TrimPrefix(hs.URL, "http"), nil)
	if err != nil {
		b.Fatal(err)
	}
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	b.Cleanup(func() {
		_ = ws.CloseNow()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.CloseConnections(ctx)
		hs.Close()
	})
	return ws
}

// ReadMessage reads r to its end into buf, reusing its capacity, so that a
// benchmark's client adds as few allocations as it can.
func ReadMessage(r io.Reader, buf []byte) ([]byte, error) {
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}
