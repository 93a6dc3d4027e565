package dynamic

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/registry"
)

// itemRecorder is the turn's ItemSink: it records the item notifications
// in order.
type itemRecorder struct {
	mu     sync.Mutex
	events []itemEvent
}

type itemEvent struct {
	method string
	json   string
}

func (r *itemRecorder) record(method string, item api.ThreadItem) {
	b, err := json.Marshal(item)
	if err != nil {
		panic(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, itemEvent{method, string(b)})
}

func (r *itemRecorder) ItemStarted(item api.ThreadItem) {
	r.record(api.MethodItemStarted, item)
}

func (r *itemRecorder) ItemCompletedFinal(item api.ThreadItem) {
	r.record(api.MethodItemCompleted, item)
}

func (r *itemRecorder) all() []itemEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]itemEvent(nil), r.events...)
}

// fakeClock advances 5 ms per reading, starting at 1000 ms.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *fakeClock { return &fakeClock{t: time.UnixMilli(1000)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.t
	c.t = c.t.Add(5 * time.Millisecond)
	return now
}

type handlerEnv struct {
	broker *Broker
	router *fakeRouter
	items  *itemRecorder
	reg    *registry.Registry
	specs  []registry.ConfiguredToolSpec
	m      *metricsRecorder
}

const weatherTools = `[
	{"type":"function","name":"lookup_weather","description":"Weather","inputSchema":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"],"additionalProperties":false}},
	{"type":"namespace","name":"geo","description":"Geo","tools":[{"type":"function","name":"locate","description":"Locate","inputSchema":{"type":"object","properties":{"q":{"type":"string"}}}}]}
]`

func newHandlerEnv(t *testing.T, cfg BrokerConfig) *handlerEnv {
	t.Helper()
	b, r, m := newTestBroker(t, cfg)
	tools, err := Validate(decodeSpecs(t, weatherTools), Options{Builtins: []string{"shell"}})
	require.NoError(t, err)
	items := &itemRecorder{}
	clock := newClock()
	h := NewHandler(HandlerConfig{ThreadID: "th", Tools: tools, Broker: b, Items: items, Now: clock.Now})
	builder := registry.NewBuilder(registry.Config{})
	require.NoError(t, tools.AddTo(builder, h))
	specs, reg := builder.Build()
	return &handlerEnv{broker: b, router: r, items: items, reg: reg, specs: tools.OfferedSpecs(specs), m: m}
}

func (e *handlerEnv) dispatch(ctx context.Context, call registry.Call) (registry.ResponseItem, error) {
	d := e.reg.NewDispatcher(registry.DispatcherConfig{Turn: registry.TurnContext{TurnID: "turn-1"}})
	return d.Dispatch(ctx, call)
}

func fnCall(id, ns, name, args string) registry.Call {
	return registry.Call{CallID: id, Namespace: ns, Name: name, Payload: registry.FunctionPayload{Arguments: args}}
}

func TestHandlerSuccessTranscript(t *testing.T) {
	leakCheck(t)
	e := newHandlerEnv(t, BrokerConfig{})
	c := e.router.connect(answerWith(`{"contentItems":[{"type":"inputText","text":"sunny"},{"type":"inputText","text":"21C"}],"success":true}`), "th")

	item, err := e.dispatch(context.Background(), fnCall("call-1", "", "lookup_weather", `{"city": "Paris"}`))
	require.NoError(t, err)
	assert.JSONEq(t, `{"type":"function_call_output","call_id":"call-1","output":"sunny\n21C"}`, mustJSON(t, item))
	assert.True(t, item.Output.Succeeded())

	ev := e.items.all()
	require.Len(t, ev, 2)
	assert.Equal(t, api.MethodItemStarted, ev[0].method)
	assert.JSONEq(t, `{"type":"dynamicToolCall","id":"call-1","namespace":null,"tool":"lookup_weather","arguments":{"city":"Paris"},
		"status":"inProgress","contentItems":null,"success":null,"durationMs":null,"startedAtMs":1000,"completedAtMs":null}`, ev[0].json)
	assert.Equal(t, api.MethodItemCompleted, ev[1].method)
	assert.JSONEq(t, `{"type":"dynamicToolCall","id":"call-1","namespace":null,"tool":"lookup_weather","arguments":{"city":"Paris"},
		"status":"completed","contentItems":[{"type":"inputText","text":"sunny"},{"type":"inputText","text":"21C"}],"success":true,
		"durationMs":5,"startedAtMs":1000,"completedAtMs":1005}`, ev[1].json)

	// The request the client got.
	received, _, _ := c.state()
	assert.Equal(t, []string{"call-1"}, received)
	assert.Equal(t, 1, e.m.outcome(OutcomeSuccess))
}

func TestHandlerNamespacedCall(t *testing.T) {
	leakCheck(t)
	e := newHandlerEnv(t, BrokerConfig{})
	var params api.DynamicToolCallParams
	e.router.connect(func(c *fakeConn, p *Pending) {
		params = p.Params()
		c.reply(p, `{"contentItems":[{"type":"inputText","text":"here"},{"type":"inputImage","imageUrl":"data:image/png;base64,AA"}],"success":true}`, nil)
	}, "th")
	item, err := e.dispatch(context.Background(), fnCall("call-2", "geo", "locate", ``))
	require.NoError(t, err)
	assert.JSONEq(t, `{"type":"function_call_output","call_id":"call-2","output":[{"type":"input_text","text":"here"},{"type":"input_image","image_url":"data:image/png;base64,AA"}]}`, mustJSON(t, item))
	assert.JSONEq(t, `{"threadId":"th","turnId":"turn-1","callId":"call-2","namespace":"geo","tool":"locate","arguments":{}}`, mustJSON(t, params))
	ev := e.items.all()
	require.Len(t, ev, 2)
	assert.Contains(t, ev[0].json, `"namespace":"geo"`)
}

func TestHandlerClientFailureAnswer(t *testing.T) {
	leakCheck(t)
	e := newHandlerEnv(t, BrokerConfig{})
	e.router.connect(answerError(), "th")
	item, err := e.dispatch(context.Background(), fnCall("call-1", "", "lookup_weather", `{"city":"Paris"}`))
	require.NoError(t, err)
	assert.Equal(t, "dynamic tool request failed", item.Output.Text)
	assert.False(t, item.Output.Succeeded())
	ev := e.items.all()
	require.Len(t, ev, 2)
	assert.JSONEq(t, `{"type":"dynamicToolCall","id":"call-1","namespace":null,"tool":"lookup_weather","arguments":{"city":"Paris"},
		"status":"failed","contentItems":[{"type":"inputText","text":"dynamic tool request failed"}],"success":false,
		"durationMs":5,"startedAtMs":1000,"completedAtMs":1005}`, ev[1].json)
}

func TestHandlerInvalidArgumentsNotForwarded(t *testing.T) {
	leakCheck(t)
	e := newHandlerEnv(t, BrokerConfig{})
	c := e.router.connect(answerWith(okResult), "th")
	cases := []struct{ args, want string }{
		{`{"town":"Paris"}`, `invalid arguments for lookup_weather: missing required property "city"`},
		{`{"city":"Paris","extra":1}`, `invalid arguments for lookup_weather: unexpected property "extra"`},
		{`{"city":"Paris","days":1.5}`, `invalid arguments for lookup_weather: /days: expected integer, got number`},
		{`{"city":`, `failed to parse function arguments: unexpected EOF`},
	}
	for _, tc := range cases {
		item, err := e.dispatch(context.Background(), fnCall("call-x", "", "lookup_weather", tc.args))
		require.NoError(t, err)
		assert.Equal(t, tc.want, item.Output.Text)
		assert.False(t, item.Output.Succeeded())
	}
	received, _, _ := c.state()
	assert.Empty(t, received, "the client is not bothered")
	assert.Empty(t, e.items.all(), "no item for a rejected call")
	assert.Equal(t, len(cases), e.m.outcome(OutcomeInvalidArguments))
	e.router.mu.Lock()
	assert.Equal(t, 0, e.router.offers)
	e.router.mu.Unlock()
}

func TestHandlerInterrupted(t *testing.T) {
	leakCheck(t)
	e := newHandlerEnv(t, BrokerConfig{})
	c := e.router.connect(hold(), "th")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan registry.ResponseItem, 1)
	go func() {
		item, err := e.dispatch(ctx, fnCall("call-1", "", "lookup_weather", `{"city":"Paris"}`))
		assert.NoError(t, err)
		done <- item
	}()
	c.waitGot(t)
	cancel()
	var item registry.ResponseItem
	select {
	case item = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("dispatch did not return")
	}
	assert.Regexp(t, `^aborted by user after \d+\.\ds$`, item.Output.Text)
	ev := e.items.all()
	require.Len(t, ev, 2)
	assert.JSONEq(t, `{"type":"dynamicToolCall","id":"call-1","namespace":null,"tool":"lookup_weather","arguments":{"city":"Paris"},
		"status":"failed","contentItems":[],"success":false,"durationMs":5,"startedAtMs":1000,"completedAtMs":1005}`, ev[1].json)
	_, notices, _ := c.state()
	assert.Equal(t, []string{"call-1"}, notices)
	assert.Equal(t, 0, e.broker.Len())
}

func TestHandlerTimeoutIsModelReadable(t *testing.T) {
	leakCheck(t)
	e := newHandlerEnv(t, BrokerConfig{ReconnectTimeout: 10 * time.Millisecond})
	item, err := e.dispatch(context.Background(), fnCall("call-1", "geo", "locate", `{"q":"x"}`))
	require.NoError(t, err)
	want := "dynamic tool call failed: no client that can run geo.locate was connected within 10ms"
	assert.Equal(t, want, item.Output.Text)
	assert.False(t, item.Output.Succeeded())
	ev := e.items.all()
	require.Len(t, ev, 2)
	assert.Contains(t, ev[1].json, `"status":"failed","contentItems":[{"type":"inputText","text":"`+want+`"}],"success":false`)
}

func TestHandlerContract(t *testing.T) {
	e := newHandlerEnv(t, BrokerConfig{})
	h, ok := e.reg.Handler("", "lookup_weather")
	require.True(t, ok)
	assert.Equal(t, registry.PayloadFunction, h.Kind())
	assert.True(t, h.IsMutating(context.Background(), registry.Invocation{}))
	_, err := h.Handle(context.Background(), registry.Invocation{Call: registry.Call{Name: "lookup_weather", Payload: registry.CustomPayload{Input: "x"}}})
	assert.EqualError(t, err, "dynamic tool handler received unsupported payload")
	_, err = h.Handle(context.Background(), registry.Invocation{Call: fnCall("c", "", "nope", "{}")})
	assert.EqualError(t, err, "unsupported call: nope")

	// A custom payload for a dynamic tool is a fatal mismatch in dispatch.
	_, err = e.dispatch(context.Background(), registry.Call{CallID: "c", Name: "lookup_weather", Payload: registry.CustomPayload{Input: "x"}})
	assert.ErrorIs(t, err, registry.ErrFatal)
	assert.Len(t, e.specs, 2)
}
