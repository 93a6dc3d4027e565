package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
)

const weatherScript = `{"steps":[
	{"tool_calls":[{"call_id":"call_w1","name":"lookup_weather","arguments":{"city":"Paris"}}]},
	{"match":{"call_output":"call_w1"},"text":"It is sunny in Paris."}]}`

func answer(text string) map[string]any {
	return map[string]any{"contentItems": []any{map[string]any{"type": "inputText", "text": text}}, "success": true}
}

func TestToolCallAnsweredOverHTTP(t *testing.T) {
	e := newEnv(t, envOpts{script: weatherScript})
	th := e.createThread(map[string]any{"dynamicTools": []any{weatherTool}}, nil)
	_, turn := e.postTurn(th.ID, "", textInput("weather?"), nil, nil)
	s, _ := e.openStream(th.ID, sprintf("?after=%d&until=turnCompleted", *turn.EventsAfter), nil, nil)
	evs := s.until(api.HTTPToolCallEventMethod)
	var call api.DynamicToolCallParams
	require.NoError(t, json.Unmarshal(evs[len(evs)-1].params, &call))
	require.Equal(t, api.DynamicToolCallParams{ThreadID: th.ID, TurnID: turn.ID, CallID: "call_w1", Tool: "lookup_weather",
		Arguments: json.RawMessage(`{"city":"Paris"}`)}, call)

	path := "/v1/threads/" + th.ID + "/tool-calls/call_w1"
	r := e.do(req{method: "POST", path: path, body: answer("Sunny, 21C")})
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	var ok api.HTTPToolCallAnswered
	r.decode(t, &ok)
	require.Equal(t, api.HTTPToolCallAnswered{ThreadID: th.ID, CallID: "call_w1"}, ok)
	// Exactly one answer is used.
	r = e.do(req{method: "POST", path: path, body: answer("Rainy")})
	require.Equal(t, http.StatusConflict, r.status)
	require.Equal(t, api.ProblemConflict, r.problem(t).Type)

	rest := s.until("turn/completed")
	var resolved api.HTTPToolCallResolved
	require.Equal(t, api.HTTPToolCallResolvedMethod, rest[0].method)
	require.NoError(t, json.Unmarshal(rest[0].params, &resolved))
	require.Equal(t, api.HTTPToolCallResolved{ThreadID: th.ID, TurnID: turn.ID, CallID: "call_w1", Outcome: "success"}, resolved)

	var done api.HTTPTurn
	e.do(req{method: "GET", path: "/v1/threads/" + th.ID + "/turns/" + turn.ID + "?wait=true"}).decode(t, &done)
	require.Equal(t, "It is sunny in Paris.", *done.FinalMessage)
	reqs := e.fake.Requests()
	require.Len(t, reqs, 2)
	require.Contains(t, string(reqs[1].Body), "Sunny, 21C")
	require.NotContains(t, string(reqs[1].Body), "Rainy")
}

func TestToolCallPendingBeforeTheStreamOpensIsReplayed(t *testing.T) {
	// A bot that posts the turn with wait=true in the background and opens
	// the stream later still sees the call, and its answer completes the
	// waiting POST.
	e := newEnv(t, envOpts{script: weatherScript})
	th := e.createThread(map[string]any{"dynamicTools": []any{weatherTool}}, nil)
	type result struct {
		r    response
		turn api.HTTPTurn
	}
	waited := make(chan result, 1)
	go func() {
		r, turn := e.postTurnRaw(th.ID, "?wait=true", textInput("weather?"))
		waited <- result{r, turn}
	}()
	require.Eventually(t, func() bool { _, ok := e.broker.Lookup(th.ID, "call_w1"); return ok }, 10*time.Second, time.Millisecond)
	s, _ := e.openStream(th.ID, "?after=0", nil, nil)
	s.until(api.HTTPToolCallEventMethod)
	require.Equal(t, http.StatusOK, e.do(req{method: "POST", path: "/v1/threads/" + th.ID + "/tool-calls/call_w1", body: answer("Sunny")}).status)
	res := <-waited
	require.Equal(t, http.StatusOK, res.r.status, string(res.r.body))
	require.Equal(t, "It is sunny in Paris.", *res.turn.FinalMessage)
}

// postTurnRaw is postTurn without assertions, for other goroutines.
func (e *env) postTurnRaw(threadID, query string, body any) (response, api.HTTPTurn) {
	b, _ := json.Marshal(body)
	hr, _ := http.NewRequest("POST", e.url+"/v1/threads/"+threadID+"/turns"+query, strings.NewReader(string(b)))
	hr.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		return response{body: []byte(err.Error())}, api.HTTPTurn{}
	}
	defer resp.Body.Close()
	var turn api.HTTPTurn
	_ = json.NewDecoder(resp.Body).Decode(&turn)
	return response{status: resp.StatusCode, header: resp.Header}, turn
}

// wsClient is a websocket JSON-RPC client subscribed to a thread.
type wsClient struct {
	t  testing.TB
	ws *websocket.Conn
	id int
}

type wsFrame struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
	Seq    int64           `json:"seq"`
}

func (e *env) dialWS() *wsClient {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(e.url, "http"), nil)
	require.NoError(e.t, err)
	e.t.Cleanup(func() { _ = ws.CloseNow() })
	c := &wsClient{t: e.t, ws: ws}
	c.call("initialize", map[string]any{"clientInfo": map[string]any{"name": "ws-test", "version": "1"}, "capabilities": map[string]any{"experimentalApi": true, "eventSeq": true}})
	return c
}

func (c *wsClient) write(v any) {
	c.t.Helper()
	b, err := json.Marshal(v)
	require.NoError(c.t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(c.t, c.ws.Write(ctx, websocket.MessageText, b))
}

func (c *wsClient) read() wsFrame {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	_, data, err := c.ws.Read(ctx)
	require.NoError(c.t, err)
	var f wsFrame
	require.NoError(c.t, json.Unmarshal(data, &f))
	return f
}

func (c *wsClient) call(method string, params any) json.RawMessage {
	c.t.Helper()
	c.id++
	id := c.id
	c.write(map[string]any{"id": id, "method": method, "params": params})
	for {
		f := c.read()
		if f.Method == "" && string(f.ID) == sprintf("%d", id) {
			require.Empty(c.t, f.Error, "%s", f.Error)
			return f.Result
		}
	}
}

// until reads frames until one with method arrives.
func (c *wsClient) until(method string) wsFrame {
	c.t.Helper()
	for {
		if f := c.read(); f.Method == method {
			return f
		}
	}
}

func TestToolCallAnsweredOnceAcrossTransports(t *testing.T) {
	for _, first := range []string{"http", "websocket"} {
		t.Run(first+" answers first", func(t *testing.T) {
			e := newEnv(t, envOpts{script: weatherScript})
			th := e.createThread(map[string]any{"dynamicTools": []any{weatherTool}}, nil)
			ws := e.dialWS()
			ws.call("thread/resume", map[string]any{"threadId": th.ID})
			_, turn := e.postTurn(th.ID, "", textInput("weather?"), nil, nil)
			s, _ := e.openStream(th.ID, sprintf("?after=%d&until=turnCompleted", *turn.EventsAfter), nil, nil)
			s.until(api.HTTPToolCallEventMethod)
			// The websocket subscriber holds the same call.
			wreq := ws.until("item/tool/call")
			path := "/v1/threads/" + th.ID + "/tool-calls/call_w1"
			ignored := testutil.ToFloat64(e.srv.Metrics().DynamicIgnoredAnswers.WithLabelValues("duplicate"))

			var want string
			if first == "http" {
				require.Equal(t, http.StatusOK, e.do(req{method: "POST", path: path, body: answer("from http")}).status)
				ws.until("serverRequest/resolved")
				ws.write(map[string]any{"id": wreq.ID, "result": answer("from websocket")})
				want = "from http"
			} else {
				ws.write(map[string]any{"id": wreq.ID, "result": answer("from websocket")})
				s.until(api.HTTPToolCallResolvedMethod)
				r := e.do(req{method: "POST", path: path, body: answer("from http")})
				require.Equal(t, http.StatusConflict, r.status)
				want = "from websocket"
			}
			s.until("turn/completed")
			var done api.HTTPTurn
			e.do(req{method: "GET", path: "/v1/threads/" + th.ID + "/turns/" + turn.ID}).decode(t, &done)
			require.Equal(t, api.TurnCompleted, done.Status)
			body := string(e.fake.Requests()[1].Body)
			require.Contains(t, body, want)
			require.Equal(t, 1, strings.Count(body, "from "), "the model got exactly one answer")
			if first == "http" {
				require.Eventually(t, func() bool {
					return testutil.ToFloat64(e.srv.Metrics().DynamicIgnoredAnswers.WithLabelValues("duplicate")) == ignored+1
				}, 5*time.Second, time.Millisecond, "the websocket's late answer is counted as ignored")
			}
		})
	}
}

func TestToolCallOfAnInterruptedTurnIsConflict(t *testing.T) {
	e := newEnv(t, envOpts{script: weatherScript})
	th := e.createThread(map[string]any{"dynamicTools": []any{weatherTool}}, nil)
	_, turn := e.postTurn(th.ID, "", textInput("weather?"), nil, nil)
	s, _ := e.openStream(th.ID, sprintf("?after=%d&until=turnCompleted", *turn.EventsAfter), nil, nil)
	s.until(api.HTTPToolCallEventMethod)
	r := e.do(req{method: "POST", path: "/v1/threads/" + th.ID + "/turns/" + turn.ID + "/interrupt?wait=true"})
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	rest := s.until("turn/completed")
	var resolved api.HTTPToolCallResolved
	require.NoError(t, json.Unmarshal(rest[0].params, &resolved))
	require.Equal(t, "cancelled", resolved.Outcome)
	r = e.do(req{method: "POST", path: "/v1/threads/" + th.ID + "/tool-calls/call_w1", body: answer("late")})
	require.Equal(t, http.StatusConflict, r.status)
	require.Contains(t, r.problem(t).Detail, "already answered or has ended")
}

func TestHTTPHolderKeepsTheCallFromTimingOut(t *testing.T) {
	// With no websocket subscriber, the thread's log holds the call: it
	// does not fail after the reconnect timeout meant for absent clients.
	e := newEnv(t, envOpts{script: weatherScript, reconnect: 50 * time.Millisecond})
	th := e.createThread(map[string]any{"dynamicTools": []any{weatherTool}}, nil)
	_, turn := e.postTurn(th.ID, "", textInput("weather?"), nil, nil)
	s, _ := e.openStream(th.ID, sprintf("?after=%d&until=turnCompleted", *turn.EventsAfter), nil, nil)
	s.until(api.HTTPToolCallEventMethod)
	time.Sleep(200 * time.Millisecond) // longer than the reconnect timeout
	require.Equal(t, http.StatusOK, e.do(req{method: "POST", path: "/v1/threads/" + th.ID + "/tool-calls/call_w1", body: answer("Sunny")}).status)
	s.until("turn/completed")
}
