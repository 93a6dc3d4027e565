package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/coder/websocket"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/dynamic"
	"github.com/appserver/appserver/internal/registry"
	"github.com/appserver/appserver/internal/server"
	"github.com/appserver/appserver/internal/turns"
)

// benchConn is one real websocket client of a real server, set up for
// benchmarks: initialized, with its session id known.
type benchConn struct {
	srv  *server.Server
	ws   *websocket.Conn
	conn turns.ConnID
	// read, when set, gets a signal for every frame the client read that
	// was not an item/tool/call.
	read chan struct{}
}

func newBenchConn(b *testing.B) *benchConn {
	b.Helper()
	srv, err := server.New(server.Config{})
	if err != nil {
		b.Fatal(err)
	}
	ws := server.DialBench(b, srv)
	ctx := context.Background()
	init := `{"id":1,"method":"initialize","params":{"clientInfo":{"name":"bench","version":"1"}}}`
	if err := ws.Write(ctx, websocket.MessageText, []byte(init)); err != nil {
		b.Fatal(err)
	}
	if _, _, err := ws.Read(ctx); err != nil {
		b.Fatal(err)
	}
	c := &benchConn{srv: srv, ws: ws, conn: turns.ConnID(srv.Sessions()[0].ID())}
	return c
}

// serve reads frames until the connection ends, answering every
// item/tool/call at once with a fixed result. It reuses its buffers so that
// the client adds as little as possible to the server's allocations.
func (c *benchConn) serve(done chan<- struct{}) {
	defer close(done)
	ctx := context.Background()
	buf := make([]byte, 0, 4096)
	answer := make([]byte, 0, 256)
	for {
		_, r, err := c.ws.Reader(ctx)
		if err != nil {
			return
		}
		if buf, err = server.ReadMessage(r, buf); err != nil {
			return
		}
		if !bytes.Contains(buf, []byte(`"method":"item/tool/call"`)) {
			if c.read != nil {
				c.read <- struct{}{}
			}
			continue
		}
		// Server requests start with {"id":N,.
		rest := buf[len(`{"id":`):]
		id := rest[:bytes.IndexByte(rest, ',')]
		answer = append(answer[:0], `{"id":`...)
		answer = append(answer, id...)
		answer = append(answer, `,"result":{"contentItems":[{"type":"inputText","text":"sunny, 21°C"}],"success":true}}`...)
		if err := c.ws.Write(ctx, websocket.MessageText, answer); err != nil {
			return
		}
	}
}

// benchItems announces a call's dynamicToolCall item to the thread's
// subscribers as the turns layer does (minus persisting it).
type benchItems struct {
	sink turns.Sink
	th   string
	turn string
}

func (e benchItems) ItemStarted(item api.ThreadItem) {
	e.sink.Publish(turns.Event{ThreadID: e.th, Method: "item/started", Params: api.ItemStartedNotification{Item: item, ThreadID: e.th, TurnID: e.turn, StartedAtMs: *item.StartedAtMs}})
}

func (e benchItems) ItemCompletedFinal(item api.ThreadItem) {
	e.sink.Publish(turns.Event{ThreadID: e.th, Method: "item/completed", Params: api.ItemCompletedNotification{Item: item, ThreadID: e.th, TurnID: e.turn, CompletedAtMs: *item.CompletedAtMs}})
}

// BenchmarkDynamicToolCall measures the websocket side of one dynamic tool
// call, as the daemon runs it for a turn: argument validation,
// item/started, the item/tool/call request to a real websocket client that
// answers at once, the answer decoded and handed back through the broker,
// and item/completed. Allocations of the client goroutine are counted too;
// it reuses its buffers.
func BenchmarkDynamicToolCall(b *testing.B) {
	c := newBenchConn(b)
	done := make(chan struct{})
	go c.serve(done)
	defer func() {
		_ = c.ws.CloseNow()
		<-done
	}()

	c.srv.Hub().Subscribe("th", c.conn)
	broker := c.srv.Hub().Broker()
	defer broker.Close()
	var specs []api.DynamicToolSpec
	if err := json.Unmarshal([]byte(`[{"type":"function","name":"lookup_weather","description":"Weather","inputSchema":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"],"additionalProperties":false}}]`), &specs); err != nil {
		b.Fatal(err)
	}
	tools, err := dynamic.Validate(specs, dynamic.Options{})
	if err != nil {
		b.Fatal(err)
	}
	h := dynamic.NewHandler(dynamic.HandlerConfig{ThreadID: "th", Tools: tools, Broker: broker,
		Items: benchItems{sink: c.srv.Hub(), th: "th", turn: "turn"}})
	ctx := context.Background()
	inv := registry.Invocation{
		Call: registry.Call{Name: "lookup_weather", Payload: registry.FunctionPayload{Arguments: `{"city":"Paris","days":3}`}},
		Turn: registry.TurnContext{TurnID: "turn"},
	}
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		i++
		inv.CallID = "call_" + strconv.Itoa(i)
		out, err := h.Handle(ctx, inv)
		if err != nil || !out.Succeeded() {
			b.Fatal(err, out.Text)
		}
	}
}

// BenchmarkNotificationFrame measures sending one item/completed
// notification of a dynamicToolCall item on a real websocket: encoding,
// queueing and writing it. Each iteration waits for the client to read the
// frame, so that every frame costs one writer run.
func BenchmarkNotificationFrame(b *testing.B) {
	c := newBenchConn(b)
	c.read = make(chan struct{})
	done := make(chan struct{})
	go c.serve(done)
	defer func() {
		_ = c.ws.CloseNow()
		<-done
	}()
	h := c.srv.Hub()
	ns := "geo"
	started, completed, duration, success := int64(1_700_000_000_000), int64(1_700_000_000_042), int64(42), true
	item := &api.DynamicToolCallItem{ID: "call_1", Namespace: &ns, Tool: "lookup_weather", Arguments: json.RawMessage(`{"city":"Paris","days":3}`),
		Status: api.StatusCompleted, ContentItems: []api.DynamicToolCallOutputContentItem{{Type: api.ContentInputText, Text: "sunny, 21°C"}},
		Success: &success, DurationMs: &duration}
	params := api.ItemCompletedNotification{Item: api.ThreadItem{Body: item, StartedAtMs: &started, CompletedAtMs: &completed},
		ThreadID: "th", TurnID: "turn", CompletedAtMs: completed}
	b.ReportAllocs()
	for b.Loop() {
		h.Send(c.conn, "item/completed", params)
		<-c.read
	}
}
