package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/store"
)

func TestPostTurnWaitReturnsMessageItemsAndUsage(t *testing.T) {
	e := newEnv(t, envOpts{script: `{"steps":[
		{"text":"Hello there, friend!","chunks":3,"usage":{"input_tokens":10,"output_tokens":5,"total_tokens":15}},
		{"text":"Second.","usage":{"input_tokens":20,"output_tokens":2,"total_tokens":22}}]}`})
	th := e.createThread(nil, nil)
	r, turn := e.postTurn(th.ID, "?wait=true", textInput("Say hello"), nil, nil)
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	require.Equal(t, "/v1/threads/"+th.ID+"/turns/"+turn.ID, r.header.Get("Location"))
	require.Equal(t, api.TurnCompleted, turn.Status)
	require.Equal(t, th.ID, turn.ThreadID)
	require.Nil(t, turn.Error)
	require.NotNil(t, turn.StartedAt)
	require.NotNil(t, turn.CompletedAt)
	require.NotNil(t, turn.EventsAfter)
	require.Equal(t, "Hello there, friend!", *turn.FinalMessage)
	require.Len(t, turn.Items, 2)
	require.IsType(t, &api.UserMessageItem{}, turn.Items[0].Body)
	require.IsType(t, &api.AgentMessageItem{}, turn.Items[1].Body)
	require.Equal(t, &api.TokenUsageBreakdown{TotalTokens: 15, InputTokens: 10, OutputTokens: 5}, turn.Usage)

	// Prefer: wait=N also waits, and says it did.
	r, turn2 := e.postTurn(th.ID, "", textInput("Again"), http.Header{"Prefer": {"wait=30"}}, nil)
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	require.Equal(t, "wait=30", r.header.Get("Preference-Applied"))
	require.Equal(t, "Second.", *turn2.FinalMessage)
	require.Equal(t, int64(22), turn2.Usage.TotalTokens, "usage is per turn, not the thread's total")

	// GET returns the same turn.
	var got api.HTTPTurn
	g := e.do(req{method: "GET", path: "/v1/threads/" + th.ID + "/turns/" + turn.ID})
	require.Equal(t, http.StatusOK, g.status)
	g.decode(t, &got)
	turn.EventsAfter = nil
	require.Equal(t, turn, got)

	// The items endpoint lists both turns with their sequence numbers.
	var items api.HTTPItemList
	e.do(req{method: "GET", path: "/v1/threads/" + th.ID + "/items"}).decode(t, &items)
	require.Len(t, items.Data, 4)
	for i, it := range items.Data {
		require.Equal(t, int64(i+1), *it.Seq)
	}
	e.do(req{method: "GET", path: "/v1/threads/" + th.ID + "/items?since=2&limit=1"}).decode(t, &items)
	require.Len(t, items.Data, 1)
	require.Equal(t, int64(3), *items.Data[0].Seq)
	require.NotNil(t, items.NextCursor)
	e.do(req{method: "GET", path: "/v1/threads/" + th.ID + "/items?since=2&limit=1&cursor=" + *items.NextCursor}).decode(t, &items)
	require.Equal(t, int64(4), *items.Data[0].Seq)
	require.Nil(t, items.NextCursor)
	e.do(req{method: "GET", path: "/v1/threads/" + th.ID + "/items?turnId=" + turn2.ID}).decode(t, &items)
	require.Len(t, items.Data, 2)
	require.Equal(t, turn2.ID, items.Data[0].TurnID)
}

func TestPreferWaitZeroAnswersAtOnce(t *testing.T) {
	e := newEnv(t, envOpts{script: `{"steps":[{"text":"slow","delay_ms":300}]}`})
	th := e.createThread(nil, nil)
	r, turn := e.postTurn(th.ID, "", textInput("hi"), http.Header{"Prefer": {"wait=0"}}, nil)
	require.Equal(t, http.StatusAccepted, r.status, string(r.body))
	require.Equal(t, api.TurnInProgress, turn.Status)
	require.Nil(t, turn.FinalMessage)
	require.Nil(t, turn.CompletedAt)

	var done api.HTTPTurn
	g := e.do(req{method: "GET", path: "/v1/threads/" + th.ID + "/turns/" + turn.ID + "?wait=true"})
	require.Equal(t, http.StatusOK, g.status, string(g.body))
	g.decode(t, &done)
	require.Equal(t, api.TurnCompleted, done.Status)
	require.Equal(t, "slow", *done.FinalMessage)
}

func TestFailedTurnReportsItsError(t *testing.T) {
	e := newEnv(t, envOpts{script: `{"steps":[{"error":{"status":401,"message":"bad key"}}]}`})
	th := e.createThread(nil, nil)
	r, turn := e.postTurn(th.ID, "?wait=true", textInput("hi"), nil, nil)
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	require.Equal(t, api.TurnFailed, turn.Status)
	require.NotNil(t, turn.Error)
	require.Contains(t, turn.Error.Message, "401")
	require.Nil(t, turn.FinalMessage)
}

func TestInterruptRunningTurn(t *testing.T) {
	e := newEnv(t, envOpts{script: `{"steps":[{"text":"never finished","chunks":4,"fail":{"kind":"stall","after_events":3}}]}`})
	th := e.createThread(nil, nil)
	r, turn := e.postTurn(th.ID, "", textInput("hi"), nil, nil)
	require.Equal(t, http.StatusAccepted, r.status)
	s, _ := e.openStream(th.ID, sprintf("?after=%d", *turn.EventsAfter), nil, nil)
	s.until("item/started") // the user message
	s.until("item/started") // the agent message, which stalls

	var running api.HTTPTurn
	e.do(req{method: "GET", path: "/v1/threads/" + th.ID + "/turns/" + turn.ID}).decode(t, &running)
	require.Equal(t, api.TurnInProgress, running.Status)

	ir := e.do(req{method: "POST", path: "/v1/threads/" + th.ID + "/turns/" + turn.ID + "/interrupt?wait=true"})
	require.Equal(t, http.StatusOK, ir.status, string(ir.body))
	var ended api.HTTPTurn
	ir.decode(t, &ended)
	require.Equal(t, api.TurnInterrupted, ended.Status)
	s.until("turn/completed")
	// A second interrupt finds nothing running.
	ir = e.do(req{method: "POST", path: "/v1/threads/" + th.ID + "/turns/" + turn.ID + "/interrupt"})
	require.Equal(t, http.StatusConflict, ir.status)
}

func TestPostWhileATurnRunsJoinsIt(t *testing.T) {
	// As turn/start does: input posted while a turn runs is added to it.
	e := newEnv(t, envOpts{script: `{"steps":[
		{"text":"working","chunks":4,"fail":{"kind":"stall","after_events":3}},
		{"match":{"user_text":"also this"},"text":"Both done."}]}`})
	th := e.createThread(nil, nil)
	_, first := e.postTurn(th.ID, "", textInput("start"), nil, nil)
	s, _ := e.openStream(th.ID, sprintf("?after=%d", *first.EventsAfter), nil, nil)
	s.until("item/started") // the user message
	s.until("item/started") // the agent message, which stalls
	r, second := e.postTurn(th.ID, "?wait=true", textInput("also this"), nil, nil)
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	require.Equal(t, first.ID, second.ID)
	require.Equal(t, api.TurnCompleted, second.Status)
	require.Equal(t, "Both done.", *second.FinalMessage)
}

// countTurns counts a thread's stored turns.
func (e *env) countTurns(threadID string) int {
	e.t.Helper()
	page, err := e.st.ListTurns(context.Background(), store.TurnsQuery{ThreadID: threadID, Limit: store.MaxLimit})
	require.NoError(e.t, err)
	return len(page.Turns)
}

func TestIdempotencyKeyStartsOneTurn(t *testing.T) {
	e := newEnv(t, envOpts{token: "op", principals: map[string]string{"ci": "ci"}, script: `{"steps":[{"text":"once","delay_ms":100}]}`})
	th := e.createThread(nil, nil)
	key := http.Header{"Idempotency-Key": {"build-42-step-1"}}

	// Concurrent identical posts (a client retrying while the first is in
	// flight) all get the one turn.
	const n = 8
	type result struct {
		status   int
		id       string
		replayed string
		err      error
	}
	results := make([]result, n)
	var wg sync.WaitGroup
	body := []byte(`{"input":[{"type":"text","text":"run the build"}]}`)
	for i := range n {
		wg.Go(func() {
			hr, _ := http.NewRequest("POST", e.url+"/v1/threads/"+th.ID+"/turns", bytes.NewReader(body))
			hr.Header.Set("Content-Type", "application/json")
			hr.Header.Set("Authorization", "Bearer op")
			hr.Header.Set("Idempotency-Key", key.Get("Idempotency-Key"))
			resp, err := http.DefaultClient.Do(hr)
			if err != nil {
				results[i].err = err
				return
			}
			defer resp.Body.Close()
			var turn api.HTTPTurn
			results[i].err = json.NewDecoder(resp.Body).Decode(&turn)
			results[i].status, results[i].id, results[i].replayed = resp.StatusCode, turn.ID, resp.Header.Get("Idempotent-Replayed")
		})
	}
	wg.Wait()
	replays := 0
	for _, r := range results {
		require.NoError(t, r.err)
		require.Equal(t, http.StatusAccepted, r.status)
		require.Equal(t, results[0].id, r.id)
		if r.replayed == "true" {
			replays++
		}
	}
	require.Equal(t, n-1, replays)

	// A retry after the turn ended, with wait, gets the finished turn.
	r, turn := e.postTurn(th.ID, "?wait=true", json.RawMessage(body), key, nil)
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	require.Equal(t, results[0].id, turn.ID)
	require.Equal(t, "true", r.header.Get("Idempotent-Replayed"))
	require.Equal(t, "once", *turn.FinalMessage)
	require.Equal(t, 1, e.countTurns(th.ID))
	require.Len(t, e.fake.Requests(), 1)

	// The same key with another body is refused.
	r, _ = e.postTurn(th.ID, "", textInput("something else"), key, nil)
	require.Equal(t, http.StatusUnprocessableEntity, r.status)
	require.Equal(t, api.ProblemIdempotencyKeyReused, r.problem(t).Type)

	// Keys are scoped to the thread and to the caller.
	other := e.createThread(nil, nil)
	r, t2 := e.postTurn(other.ID, "?wait=true", json.RawMessage(body), key, nil)
	require.Equal(t, http.StatusOK, r.status)
	require.NotEqual(t, turn.ID, t2.ID)
	ciThread := e.createThread(nil, tok("ci"))
	_, t3 := e.postTurn(ciThread.ID, "?wait=true", json.RawMessage(body), key, tok("ci"))
	_, t4 := e.postTurn(ciThread.ID, "?wait=true", json.RawMessage(body), key, nil)
	require.NotEqual(t, t3.ID, t4.ID)
	require.Equal(t, 2, e.countTurns(ciThread.ID))
}

func TestIdempotencyKeyOfAFailedStartCanBeRetried(t *testing.T) {
	e := newEnv(t, envOpts{})
	th := e.createThread(map[string]any{"model": ""}, nil)
	key := http.Header{"Idempotency-Key": {"k"}}
	// No model configured: the start fails and the key is not kept.
	r, _ := e.postTurn(th.ID, "", textInput("x"), key, nil)
	require.Equal(t, http.StatusBadRequest, r.status, string(r.body))
	require.Contains(t, r.problem(t).Detail, "no model configured")
	require.Equal(t, 0, e.api.idem.len())
}

func TestIdempotencyStoreBoundAndTTL(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	x := newIdempotency(time.Hour, 3, func() time.Time { return now })
	ctx := context.Background()
	var h [32]byte
	for _, k := range []string{"a", "b", "c", "d"} {
		e, owner, p := x.begin(ctx, idemKey{key: k}, h)
		require.Nil(t, p)
		require.True(t, owner)
		x.succeed(e, "turn-"+k, 0)
	}
	require.Equal(t, 3, x.len(), "the oldest key is forgotten beyond the bound")
	_, owner, _ := x.begin(ctx, idemKey{key: "a"}, h)
	require.True(t, owner, "a was forgotten, so it starts anew")
	e, owner, _ := x.begin(ctx, idemKey{key: "d"}, h)
	require.False(t, owner)
	require.Equal(t, "turn-d", e.turnID)
	now = now.Add(2 * time.Hour)
	x.expire()
	require.Equal(t, 0, x.len())
}

func TestTurnBodyMatchesHTTPTurn(t *testing.T) {
	tags := func(v any) []string {
		var out []string
		rt := reflect.TypeOf(v)
		for i := range rt.NumField() {
			out = append(out, rt.Field(i).Name+" "+rt.Field(i).Tag.Get("json"))
		}
		return out
	}
	require.Equal(t, tags(api.HTTPTurn{}), tags(turnBody{}))
}

// An Idempotency-Key is shared by the daemons of one database: the same
// POST retried against another daemon answers with the turn the first one
// started, and starts none; another body under the key is refused there
// too.
func TestIdempotencyKeyAcrossDaemons(t *testing.T) {
	db := filepath.Join(t.TempDir(), "a.db")
	script := `{"steps":[{"text":"first"},{"text":"second"}]}`
	a := newEnv(t, envOpts{script: script, dbPath: db})
	b := newEnv(t, envOpts{script: script, dbPath: db})
	th := a.createThread(nil, nil)
	key := http.Header{"Idempotency-Key": {"ci-run-7"}}
	r1, t1 := a.postTurn(th.ID, "?wait=true", textInput("go"), key, nil)
	require.Equal(t, http.StatusOK, r1.status)

	r2, t2 := b.postTurn(th.ID, "?wait=true", textInput("go"), key, nil)
	require.Equal(t, http.StatusOK, r2.status)
	require.Equal(t, t1.ID, t2.ID)
	require.Equal(t, "true", r2.header.Get("Idempotent-Replayed"))
	page, err := b.st.ListTurns(t.Context(), store.TurnsQuery{ThreadID: th.ID})
	require.NoError(t, err)
	require.Len(t, page.Turns, 1, "one turn for one key")

	r3, _ := b.postTurn(th.ID, "", textInput("something else"), key, nil)
	require.Equal(t, http.StatusUnprocessableEntity, r3.status)
}
