package hub_test

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/dynamic"
	"github.com/appserver/appserver/internal/hub"
	"github.com/appserver/appserver/internal/turns"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// delivery is one request a fake client got.
type delivery struct {
	r  *hub.Request
	id int64
}

// client is a subscriber without a transport: it records what it gets.
type client struct {
	refuse   bool
	notes    chan *hub.Notification
	requests chan delivery
	settled  chan *hub.Request
}

func newClient() *client {
	return &client{notes: make(chan *hub.Notification, 16), requests: make(chan delivery, 16), settled: make(chan *hub.Request, 16)}
}

func (c *client) Notify(n *hub.Notification) { c.notes <- n }
func (c *client) Request(r *hub.Request, id int64) bool {
	if c.refuse {
		return false
	}
	c.requests <- delivery{r, id}
	return true
}
func (c *client) Settled(r *hub.Request) { c.settled <- r }

func (c *client) next(t *testing.T) delivery {
	t.Helper()
	select {
	case d := <-c.requests:
		return d
	case <-time.After(5 * time.Second):
		t.Fatal("no request delivered")
	}
	return delivery{}
}

func (c *client) none(t *testing.T) {
	t.Helper()
	select {
	case d := <-c.requests:
		t.Fatalf("unexpected request %s", d.r.Method)
	default:
	}
}

// attach attaches clients and subscribes them to thread "th".
func attach(h *hub.Hub, version uint64, cs ...*client) []hub.ConnID {
	ids := make([]hub.ConnID, len(cs))
	for i, c := range cs {
		ids[i] = h.NewConnID()
		h.Attach(ids[i], c, hub.AttachOptions{})
	}
	h.SubscribersChanged("th", version, ids)
	return ids
}

type result struct {
	raw  json.RawMessage
	id   api.RequestID
	sent bool
	err  error
}

func approve(ctx context.Context, h *hub.Hub) chan result {
	out := make(chan result, 1)
	go func() {
		raw, id, sent, err := h.Request(ctx, "th", "item/commandExecution/requestApproval", map[string]string{"threadId": "th"})
		out <- result{raw, id, sent, err}
	}()
	return out
}

func TestApprovalGoesToEverySubscriberFirstAnswerWins(t *testing.T) {
	h := hub.New(hub.Config{})
	defer h.Close()
	a, b := newClient(), newClient()
	ids := attach(h, 1, a, b)
	res := approve(context.Background(), h)
	da, db := a.next(t), b.next(t)
	require.Same(t, da.r, db.r)
	require.Equal(t, da.id, db.id, "every holder gets the same request id")

	require.True(t, db.r.Answer(ids[1], json.RawMessage(`{"decision":"accept"}`), nil))
	require.False(t, da.r.Answer(ids[0], json.RawMessage(`{"decision":"decline"}`), nil), "the second answer is not used")
	got := <-res
	require.NoError(t, got.err)
	require.True(t, got.sent)
	require.JSONEq(t, `{"decision":"accept"}`, string(got.raw))
	require.Equal(t, api.IntRequestID(da.id), got.id)
	require.True(t, da.r.AnsweredBy(ids[1]))
	// Both holders are told it is settled.
	require.Same(t, da.r, <-a.settled)
	require.Same(t, da.r, <-b.settled)
}

// An answer another daemon forwards settles the request as a local
// client's would, once, and only for the thread that asked.
func TestApprovalAnsweredFromAnotherDaemon(t *testing.T) {
	h := hub.New(hub.Config{})
	defer h.Close()
	a := newClient()
	attach(h, 1, a)
	res := approve(context.Background(), h)
	d := a.next(t)
	require.False(t, h.AnswerRemote("other", d.id, json.RawMessage(`{"decision":"accept"}`), nil), "a request of another thread")
	require.False(t, h.AnswerRemote("th", d.id+1, json.RawMessage(`{"decision":"accept"}`), nil), "no such request")
	require.True(t, h.AnswerRemote("th", d.id, json.RawMessage(`{"decision":"accept"}`), nil))
	got := <-res
	require.NoError(t, got.err)
	require.JSONEq(t, `{"decision":"accept"}`, string(got.raw))
	require.Same(t, d.r, <-a.settled, "the local holder is told it is settled")
	require.False(t, h.AnswerRemote("th", d.id, json.RawMessage(`{"decision":"decline"}`), nil), "settled already")
}

func TestApprovalReachesALateSubscriberAndOutlivesAHolder(t *testing.T) {
	h := hub.New(hub.Config{})
	defer h.Close()
	a := newClient()
	ids := attach(h, 1, a)
	res := approve(context.Background(), h)
	d := a.next(t)

	// a leaves without answering; b subscribes and gets the same request.
	h.Detach(ids[0])
	d.r.Lost(ids[0])
	b := newClient()
	idB := h.NewConnID()
	h.Attach(idB, b, hub.AttachOptions{})
	h.SubscribersChanged("th", 2, []hub.ConnID{idB})
	db := b.next(t)
	require.Equal(t, d.id, db.id)
	require.True(t, db.r.Answer(idB, json.RawMessage(`{"decision":"accept"}`), nil))
	require.NoError(t, (<-res).err)
}

func TestApprovalTimeouts(t *testing.T) {
	t.Run("no client", func(t *testing.T) {
		h := hub.New(hub.Config{Approval: hub.Timeouts{NoClient: 20 * time.Millisecond}})
		defer h.Close()
		got := <-approve(context.Background(), h)
		require.ErrorIs(t, got.err, turns.ErrNoClient)
		require.False(t, got.sent)
	})
	t.Run("user input has its own rule", func(t *testing.T) {
		h := hub.New(hub.Config{Approval: hub.Timeouts{NoClient: time.Hour}, UserInput: hub.Timeouts{NoClient: 20 * time.Millisecond}})
		defer h.Close()
		_, _, _, err := h.Request(context.Background(), "th", "item/tool/requestUserInput", struct{}{})
		require.ErrorIs(t, err, turns.ErrNoClient)
	})
	t.Run("held but unanswered", func(t *testing.T) {
		h := hub.New(hub.Config{Approval: hub.Timeouts{Answer: 20 * time.Millisecond}})
		defer h.Close()
		a := newClient()
		attach(h, 1, a)
		res := approve(context.Background(), h)
		d := a.next(t)
		got := <-res
		require.ErrorIs(t, got.err, turns.ErrNoClient)
		require.True(t, got.sent)
		require.False(t, d.r.Answer(1, json.RawMessage(`{}`), nil), "a late answer is refused")
	})
	t.Run("a subscriber stops the no-client clock", func(t *testing.T) {
		h := hub.New(hub.Config{Approval: hub.Timeouts{NoClient: 50 * time.Millisecond}})
		defer h.Close()
		a := newClient()
		ids := attach(h, 1, a)
		res := approve(context.Background(), h)
		d := a.next(t)
		time.Sleep(100 * time.Millisecond) // past NoClient: the holder keeps it alive
		require.True(t, d.r.Answer(ids[0], json.RawMessage(`{"decision":"accept"}`), nil))
		require.NoError(t, (<-res).err)
	})
}

func TestSubscriberListVersions(t *testing.T) {
	h := hub.New(hub.Config{})
	defer h.Close()
	h.SubscribersChanged("th", 2, []hub.ConnID{3, 1})
	h.SubscribersChanged("th", 1, []hub.ConnID{9}) // older: ignored
	require.Equal(t, []hub.ConnID{1, 3}, h.Subscribers("th"))
}

func TestNotificationEncodedOnceForEverySubscriber(t *testing.T) {
	var mu sync.Mutex
	encodes := 0
	h := hub.New(hub.Config{Encode: func(method string, params any, ms int64) ([]byte, error) {
		mu.Lock()
		encodes++
		mu.Unlock()
		return []byte(`{"method":"` + method + `"}`), nil
	}})
	defer h.Close()
	a, b := newClient(), newClient()
	ids := attach(h, 1, a, b)
	params := api.TurnStartedNotification{ThreadID: "th"}
	h.Send(ids, "turn/started", params)
	na, nb := <-a.notes, <-b.notes
	require.Same(t, na, nb)
	require.Equal(t, params, na.Params, "subscribers get the typed value")
	require.Equal(t, 1, encodes)
}

func TestToolCallGoesToOneClientAndIsReofferedOnDisconnect(t *testing.T) {
	h := hub.New(hub.Config{})
	defer h.Close()
	a, b, rec := newClient(), newClient(), newClient()
	ids := attach(h, 1, a, b)
	recID := h.NewConnID()
	h.Attach(recID, rec, hub.AttachOptions{Recorder: true})
	h.SubscribersChanged("th", 2, append(ids, recID))

	out := make(chan api.DynamicToolCallResult, 1)
	go func() {
		res, err := h.Broker().Call(context.Background(), dynamic.CallRequest{ThreadID: "th", TurnID: "tu", CallID: "c1", Tool: "t"})
		require.NoError(t, err)
		out <- res
	}()
	rd := rec.next(t) // the recorder holds every call
	require.Equal(t, hub.KindToolCall, rd.r.Kind)
	da := a.next(t) // the oldest live client
	b.none(t)

	// a disconnects: the call moves to b under a new id.
	h.Detach(ids[0])
	h.SubscribersChanged("th", 3, []hub.ConnID{ids[1], recID})
	da.r.Lost(ids[0])
	db := b.next(t)
	require.NotEqual(t, da.id, db.id)
	require.True(t, db.r.Answer(ids[1], json.RawMessage(`{"contentItems":[],"success":true}`), nil))
	res := <-out
	require.True(t, res.Success)
	<-b.settled
	require.Equal(t, dynamic.OutcomeSuccess, (<-rec.settled).Outcome())
}

func TestToolCallTimeout(t *testing.T) {
	h := hub.New(hub.Config{ToolCall: hub.Timeouts{NoClient: 20 * time.Millisecond}})
	defer h.Close()
	_, err := h.Broker().Call(context.Background(), dynamic.CallRequest{ThreadID: "th", TurnID: "tu", CallID: "c1", Tool: "t"})
	var ce *dynamic.CallError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, dynamic.OutcomeTimeout, ce.Outcome)
}

// approvalCounts records a hub's approval measurements.
type approvalCounts struct {
	mu        sync.Mutex
	pending   int
	decisions []string
}

func (c *approvalCounts) ApprovalPending(delta int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending += delta
}

func (c *approvalCounts) ApprovalDecided(kind, decision string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.decisions = append(c.decisions, kind+":"+decision)
}

func (c *approvalCounts) get() (int, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pending, slices.Clone(c.decisions)
}

func TestApprovalMetrics(t *testing.T) {
	counts := &approvalCounts{}
	h := hub.New(hub.Config{Approval: hub.Timeouts{NoClient: 20 * time.Millisecond}, ApprovalMetrics: counts})
	defer h.Close()
	a := newClient()
	ids := attach(h, 1, a)
	answer := func(method, raw string) {
		t.Helper()
		res := make(chan error, 1)
		go func() {
			_, _, _, err := h.Request(context.Background(), "th", method, struct{}{})
			res <- err
		}()
		d := a.next(t)
		pending, _ := counts.get()
		require.Equal(t, 1, pending, "counted as pending while it waits")
		require.True(t, d.r.Answer(ids[0], json.RawMessage(raw), nil))
		require.NoError(t, <-res)
		<-a.settled
	}
	answer("item/commandExecution/requestApproval", `{"decision":"acceptForSession"}`)
	answer("item/commandExecution/requestApproval", `{"decision":{"acceptWithExecpolicyAmendment":{"execpolicy_amendment":["ls"]}}}`)
	answer("item/fileChange/requestApproval", `{"decision":"decline"}`)
	answer("mcpServer/elicitation/request", `{"action":"accept"}`)
	answer("item/fileChange/requestApproval", `{"decision":"yes please"}`)
	// User input is not an approval.
	res := make(chan error, 1)
	go func() {
		_, _, _, err := h.Request(context.Background(), "th", "item/tool/requestUserInput", struct{}{})
		res <- err
	}()
	d := a.next(t)
	require.True(t, d.r.Answer(ids[0], json.RawMessage(`{"answers":{}}`), nil))
	require.NoError(t, <-res)
	<-a.settled
	// Nobody to ask.
	h.SubscribersChanged("th", 2, nil)
	_, _, _, err := h.Request(context.Background(), "th", "item/commandExecution/requestApproval", struct{}{})
	require.ErrorIs(t, err, turns.ErrNoClient)

	pending, decisions := counts.get()
	require.Zero(t, pending)
	require.Equal(t, []string{
		"approval:acceptForSession", "approval:acceptWithExecpolicyAmendment", "approval:decline",
		"elicitation:accept", "approval:other", "approval:no_client",
	}, decisions)
}
