package hub_test

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/dynamic"
	"github.com/appserver/appserver/internal/hub"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/turns"
)

// delivery is one request a fake client got.
type delivery struct {
	r  *hub.Request
	id int64
}

// client is a subscriber without a transport: it records what it gets.
type client struct {
	refuse bool
	// during, when set, runs inside Request: what the client's answer or
	// its going away does before Request has returned.
	during   func(r *hub.Request)
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
	if c.during != nil {
		c.during(r)
	}
	return true
}
func (c *client) Settled(r *hub.Request) { c.settled <- r }

// note returns the client's next notification, failing after 5 s.
func (c *client) note(t *testing.T) *hub.Notification {
	t.Helper()
	select {
	case n := <-c.notes:
		return n
	case <-time.After(5 * time.Second):
		t.Fatal("no notification")
		return nil
	}
}

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
func attach(h *hub.Hub, cs ...*client) []hub.ConnID {
	ids := make([]hub.ConnID, len(cs))
	for i, c := range cs {
		ids[i] = h.NewConnID()
		h.Attach(ids[i], c, hub.AttachOptions{})
		h.Subscribe("th", ids[i])
	}
	h.Welcome("th")
	return ids
}

// ask sends a server request of thread "th".
func ask(ctx context.Context, h *hub.Hub, method string, params any) (json.RawMessage, api.RequestID, bool, error) {
	return h.Request(ctx, turns.ServerRequest{ThreadID: "th", Method: method, Params: params})
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
		raw, id, sent, err := ask(ctx, h, "item/commandExecution/requestApproval", map[string]string{"threadId": "th"})
		out <- result{raw, id, sent, err}
	}()
	return out
}

func TestApprovalGoesToEverySubscriberFirstAnswerWins(t *testing.T) {
	h := hub.New(hub.Config{})
	defer h.Close()
	a, b := newClient(), newClient()
	ids := attach(h, a, b)
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
	attach(h, a)
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
	ids := attach(h, a)
	res := approve(context.Background(), h)
	d := a.next(t)

	// a leaves without answering; b subscribes and gets the same request.
	h.Detach(ids[0])
	d.r.Lost(ids[0])
	b := newClient()
	idB := h.NewConnID()
	h.Attach(idB, b, hub.AttachOptions{})
	h.Subscribe("th", idB)
	b.none(t) // pending requests reach a new subscriber once welcomed
	h.Welcome("th")
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
		_, _, _, err := ask(context.Background(), h, "item/tool/requestUserInput", struct{}{})
		require.ErrorIs(t, err, turns.ErrNoClient)
	})
	t.Run("held but unanswered", func(t *testing.T) {
		h := hub.New(hub.Config{Approval: hub.Timeouts{Answer: 20 * time.Millisecond}})
		defer h.Close()
		a := newClient()
		attach(h, a)
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
		ids := attach(h, a)
		res := approve(context.Background(), h)
		d := a.next(t)
		time.Sleep(100 * time.Millisecond) // past NoClient: the holder keeps it alive
		require.True(t, d.r.Answer(ids[0], json.RawMessage(`{"decision":"accept"}`), nil))
		require.NoError(t, (<-res).err)
	})
}

// The hub is the one owner of who hears a thread: subscribers come oldest
// first, and a detached client leaves every thread it heard.
func TestSubscriptions(t *testing.T) {
	h := hub.New(hub.Config{})
	defer h.Close()
	for _, id := range []hub.ConnID{3, 1, 2} {
		h.Attach(id, newClient(), hub.AttachOptions{})
	}
	require.True(t, h.Subscribe("th", 3))
	require.True(t, h.Subscribe("th", 1))
	require.False(t, h.Subscribe("th", 3), "already subscribed")
	require.True(t, h.Subscribe("other", 3))
	require.True(t, h.Subscribe("other", 2))
	require.Equal(t, []hub.ConnID{1, 3}, h.Subscribers("th"))
	require.True(t, h.Watched("th"))

	require.True(t, h.Unsubscribe("th", 1))
	require.False(t, h.Unsubscribe("th", 1), "not subscribed any more")
	h.Detach(3)
	require.False(t, h.Watched("th"), "a detached client hears nothing")
	require.Equal(t, []hub.ConnID{2}, h.Subscribers("other"))
	require.False(t, h.Unsubscribe("other", 3))

	// An archived thread is heard by nobody.
	h.Forget("other")
	require.False(t, h.Watched("other"))
	require.False(t, h.Unsubscribe("other", 2))
}

// The sub-agent rule: a child's notifications reach the subscribers of the
// child and of its ancestors, each once; its requests go to the child's
// subscribers, or to its nearest ancestor's that has any.
func TestSpawnedChildrenAreHeardThroughTheirAncestors(t *testing.T) {
	h := hub.New(hub.Config{Approval: hub.Timeouts{NoClient: time.Hour}})
	defer h.Close()
	child, parent, root, stranger := newClient(), newClient(), newClient(), newClient()
	for i, c := range []*client{child, parent, root, stranger} {
		h.Attach(hub.ConnID(i+1), c, hub.AttachOptions{})
	}
	h.Subscribe("child", 1)
	h.Subscribe("root", 2) // the parent's client watches the root too
	h.Subscribe("parent", 2)
	h.Subscribe("root", 3)
	h.Subscribe("unrelated", 4)
	lineage := []string{"parent", "root"}
	h.Publish(turns.Event{ThreadID: "child", Ancestors: lineage, Method: "turn/started", Params: api.TurnStartedNotification{ThreadID: "child"}})
	for _, c := range []*client{child, parent, root} {
		require.Equal(t, "child", (<-c.notes).ThreadID)
	}
	for _, c := range []*client{child, parent, root, stranger} {
		select {
		case n := <-c.notes:
			t.Fatalf("a second or stray delivery: %s", n.Method)
		default:
		}
	}

	asked := func(threadID string, ancestors []string) chan error {
		out := make(chan error, 1)
		go func() {
			_, _, _, err := h.Request(context.Background(), turns.ServerRequest{ThreadID: threadID, Ancestors: ancestors, Method: "item/commandExecution/requestApproval", Params: struct{}{}})
			out <- err
		}()
		return out
	}
	// The child has a subscriber: the request is the child's clients'.
	res := asked("child", lineage)
	d := child.next(t)
	parent.none(t)
	require.True(t, d.r.Answer(1, json.RawMessage(`{"decision":"accept"}`), nil))
	require.NoError(t, <-res)
	// A grandchild nobody watches: its parent ("child") is watched.
	res = asked("grandchild", append([]string{"child"}, lineage...))
	d = child.next(t)
	require.Equal(t, "child", d.r.ThreadID)
	require.True(t, d.r.Answer(1, json.RawMessage(`{"decision":"accept"}`), nil))
	require.NoError(t, <-res)
	// Once the child's client leaves, the child's requests go up the chain.
	h.Detach(1)
	res = asked("child", lineage)
	d = parent.next(t)
	require.Equal(t, "parent", d.r.ThreadID)
	require.True(t, d.r.Answer(2, json.RawMessage(`{"decision":"accept"}`), nil))
	require.NoError(t, <-res)
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
	attach(h, a, b)
	params := api.TurnStartedNotification{ThreadID: "th"}
	h.Publish(turns.Event{ThreadID: "th", Method: "turn/started", Params: params})
	na, nb := <-a.notes, <-b.notes
	require.Same(t, na, nb)
	require.Equal(t, params, na.Params, "subscribers get the typed value")
	require.Equal(t, 1, encodes)
}

func TestToolCallGoesToOneClientAndIsReofferedOnDisconnect(t *testing.T) {
	h := hub.New(hub.Config{})
	defer h.Close()
	a, b, rec := newClient(), newClient(), newClient()
	ids := attach(h, a, b)
	h.Follow("th", rec, hub.AttachOptions{Recorder: true})

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
	ids := attach(h, a)
	answer := func(method, raw string) {
		t.Helper()
		res := make(chan error, 1)
		go func() {
			_, _, _, err := ask(context.Background(), h, method, struct{}{})
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
		_, _, _, err := ask(context.Background(), h, "item/tool/requestUserInput", struct{}{})
		res <- err
	}()
	d := a.next(t)
	require.True(t, d.r.Answer(ids[0], json.RawMessage(`{"answers":{}}`), nil))
	require.NoError(t, <-res)
	<-a.settled
	// Nobody to ask.
	h.Detach(ids[0])
	_, _, _, err := ask(context.Background(), h, "item/commandExecution/requestApproval", struct{}{})
	require.ErrorIs(t, err, turns.ErrNoClient)

	pending, decisions := counts.get()
	require.Zero(t, pending)
	require.Equal(t, []string{
		"approval:acceptForSession", "approval:acceptWithExecpolicyAmendment", "approval:decline",
		"elicitation:accept", "approval:other", "approval:no_client",
	}, decisions)
}

// An all-threads subscriber (an in-process consumer of the event log)
// hears every thread's logged notifications, its own daemon's and those
// delivered from the log, without subscribing: no broadcast, no ephemeral
// thread's notifications; a server request only as its log entry.
func TestAllThreadsSubscriber(t *testing.T) {
	h := hub.New(hub.Config{Approval: hub.Timeouts{NoClient: 10 * time.Millisecond}})
	defer h.Close()
	c := newClient()
	id := h.NewConnID()
	h.Attach(id, c, hub.AttachOptions{AllThreads: true})
	require.False(t, h.Watched("th"), "it keeps no thread loaded")
	require.True(t, h.Listening("th"), "the log's listener delivers every thread here")

	h.Broadcast("thread/started", struct{}{})
	h.Publish(turns.Event{ThreadID: "eph", Method: "turn/started", Params: struct{}{}, Ephemeral: true})
	h.Publish(turns.Event{ThreadID: "th", Method: "turn/started", Params: struct{}{}})
	h.Deliver(hub.StoredNotification("other", 7, "turn/completed", []byte(`{"method":"turn/completed","params":{},"emittedAtMs":1}`)))
	_, _, _, err := ask(context.Background(), h, "item/commandExecution/requestApproval", struct{}{})
	require.ErrorIs(t, err, turns.ErrNoClient)
	n := <-c.notes
	require.Equal(t, "th", n.ThreadID)
	require.EqualValues(t, 1, n.Seq)
	n = <-c.notes
	require.Equal(t, "other", n.ThreadID)
	n = <-c.notes
	require.Equal(t, hub.MethodRequestOffered, n.Method, "the request's entry of the log")
	require.Equal(t, "th", n.ThreadID)
	require.EqualValues(t, 2, n.Seq)
	c.none(t)
	select {
	case n := <-c.notes:
		t.Fatalf("unexpected %s of %q", n.Method, n.ThreadID)
	default:
	}

	h.Detach(id)
	require.False(t, h.Listening("th"))
}

// recordingJournal numbers notifications as the durable log does and keeps
// them, for replays.
type recordingJournal struct {
	mu   sync.Mutex
	last map[string]int64
	kept []*hub.Notification
}

func (j *recordingJournal) Record(n *hub.Notification, deliver func()) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.last == nil {
		j.last = map[string]int64{}
	}
	j.last[n.ThreadID]++
	n.Seq = j.last[n.ThreadID]
	j.kept = append(j.kept, n)
	deliver()
}

func (j *recordingJournal) RecordWith(ns []*hub.Notification, write func([]*store.Event) error, deliver func()) error {
	if err := write(nil); err != nil {
		return err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.last == nil {
		j.last = map[string]int64{}
	}
	for _, n := range ns {
		j.last[n.ThreadID]++
		n.Seq = j.last[n.ThreadID]
		j.kept = append(j.kept, n)
	}
	deliver()
	return nil
}

func (j *recordingJournal) LastSeq(thread string) int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.last[thread]
}

func (j *recordingJournal) After(_ context.Context, thread string, after int64, _ int) ([]*hub.Notification, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []*hub.Notification
	for _, n := range j.kept {
		if n.ThreadID == thread && n.Seq > after {
			out = append(out, n)
		}
	}
	return out, nil
}

func (j *recordingJournal) methods(thread string) []string {
	evs, _ := j.After(context.Background(), thread, 0, 0)
	out := make([]string, len(evs))
	for i, n := range evs {
		out[i] = n.Method
	}
	return out
}

// A single daemon (no Remote) logs its own entries too: a durable
// thread's server request and its archiving and unarchiving, which the
// event consumers act on (webhooks), with the request's method and params;
// an ephemeral thread's request is not logged, and replays leave every
// entry out.
func TestSingleDaemonLogsItsEntries(t *testing.T) {
	j := &recordingJournal{}
	h := hub.New(hub.Config{Journal: j, Approval: hub.Timeouts{NoClient: time.Millisecond}})
	defer h.Close()
	params := map[string]string{"threadId": "th", "command": "make"}
	_, _, sent, err := ask(context.Background(), h, "item/commandExecution/requestApproval", params)
	require.ErrorIs(t, err, turns.ErrNoClient)
	require.False(t, sent, "logging the request is not sending it")
	_, _, _, err = h.Request(context.Background(), turns.ServerRequest{ThreadID: "eph", Method: "item/commandExecution/requestApproval", Params: params, Ephemeral: true})
	require.ErrorIs(t, err, turns.ErrNoClient)
	h.BroadcastThread("th", nil, api.MethodThreadArchived, api.ThreadArchivedNotification{ThreadID: "th"})
	h.BroadcastThread("th", nil, api.MethodThreadUnarchived, api.ThreadUnarchivedNotification{ThreadID: "th"})
	h.BroadcastThread("th", nil, "thread/name/updated", api.ThreadIDNotification{ThreadID: "th"})

	require.Equal(t, []string{hub.MethodRequestOffered, hub.MethodThreadArchived, hub.MethodThreadUnarchived}, j.methods("th"))
	require.Empty(t, j.methods("eph"), "an ephemeral thread keeps no log")
	evs, _ := j.After(context.Background(), "th", 0, 0)
	var offer hub.Offer
	var frame struct {
		Params json.RawMessage `json:"params"`
	}
	require.NoError(t, json.Unmarshal(evs[0].Frame(), &frame))
	require.NoError(t, json.Unmarshal(frame.Params, &offer))
	require.Equal(t, "item/commandExecution/requestApproval", offer.Method)
	require.JSONEq(t, `{"threadId":"th","command":"make"}`, string(offer.Params))

	replay, err := h.EventsAfter(context.Background(), "th", 0, 0)
	require.NoError(t, err)
	require.Empty(t, replay, "no client replays the hub's entries")
}

// Broadcasts, which every subscriber gets, are marked so that a transport
// may write them together with others; a thread's own notifications and
// those sent to one connection are not.
func TestBroadcastsAreMarked(t *testing.T) {
	h := hub.New(hub.Config{})
	defer h.Close()
	c := newClient()
	ids := attach(h, c)
	h.Broadcast("account/updated", map[string]any{})
	require.True(t, c.note(t).Broadcast)
	h.BroadcastThread("other", nil, "thread/status/changed", api.ThreadStatusChangedNotification{ThreadID: "other"})
	require.True(t, c.note(t).Broadcast)
	h.Send(ids[0], "model/rerouted", map[string]any{})
	require.False(t, c.note(t).Broadcast)
}

// A broadcast about a thread reaches a subscriber that does not hear the
// thread marked Distant, with the broadcast's audience, and the same
// frame; one that subscribed to the thread gets it unmarked. A broadcast
// about no thread is never distant.
func TestBroadcastsAboutOtherThreadsAreDistant(t *testing.T) {
	h := hub.New(hub.Config{})
	defer h.Close()
	near, far := newClient(), newClient()
	attach(h, near)
	h.Attach(h.NewConnID(), far, hub.AttachOptions{})
	h.BroadcastThread("th", nil, "thread/status/changed", api.ThreadStatusChangedNotification{ThreadID: "th"})
	n, f := near.note(t), far.note(t)
	require.False(t, n.Distant)
	require.True(t, f.Distant)
	require.True(t, f.Broadcast)
	require.Equal(t, 2, f.Audience)
	require.Equal(t, 2, n.Audience)
	require.Equal(t, string(n.Frame()), string(f.Frame()))
	require.Equal(t, "thread/status/changed", f.Method)

	h.Broadcast("account/updated", map[string]any{})
	for _, c := range []*client{near, far} {
		require.False(t, c.note(t).Distant)
	}
}

// Whether a broadcast is distant follows the thread's subscribers as they
// change: among several, each subscriber of the thread gets it unmarked,
// one that unsubscribed or subscribed to another thread marked.
func TestDistantFollowsSubscriptions(t *testing.T) {
	h := hub.New(hub.Config{})
	defer h.Close()
	cs := []*client{newClient(), newClient(), newClient(), newClient()}
	ids := attach(h, cs[0], cs[1], cs[2])
	other := h.NewConnID()
	h.Attach(other, cs[3], hub.AttachOptions{})
	h.Subscribe("elsewhere", other)
	require.True(t, h.Unsubscribe("th", ids[1]))
	h.BroadcastThread("th", nil, "thread/status/changed", api.ThreadStatusChangedNotification{ThreadID: "th"})
	for i, want := range []bool{false, true, false, true} {
		require.Equal(t, want, cs[i].note(t).Distant, "client %d", i)
	}
	h.Subscribe("th", other)
	h.BroadcastThread("th", nil, "thread/status/changed", api.ThreadStatusChangedNotification{ThreadID: "th"})
	for i, want := range []bool{false, true, false, false} {
		require.Equal(t, want, cs[i].note(t).Distant, "client %d", i)
	}
}

// A subscriber that opted out of a method is left out of its broadcasts
// without being called, whether it attached before or after the method's
// first broadcast, and hears the methods it did not opt out of; one that
// detached hears nothing more; the audience counts only those reached.
func TestBroadcastsSkipOptedOut(t *testing.T) {
	h := hub.New(hub.Config{})
	defer h.Close()
	status := map[string]struct{}{"thread/status/changed": {}}
	deaf, plain := newClient(), newClient()
	h.Attach(h.NewConnID(), deaf, hub.AttachOptions{OptOut: status})
	plainID := h.NewConnID()
	h.Attach(plainID, plain, hub.AttachOptions{})
	h.Attach(h.NewConnID(), newClient(), hub.AttachOptions{Recorder: true})
	broadcast := func() {
		h.BroadcastThread("th", nil, "thread/status/changed", api.ThreadStatusChangedNotification{ThreadID: "th"})
	}
	broadcast()
	require.Equal(t, 1, plain.note(t).Audience)

	lateDeaf, latePlain := newClient(), newClient()
	h.Attach(h.NewConnID(), lateDeaf, hub.AttachOptions{OptOut: status})
	h.Attach(h.NewConnID(), latePlain, hub.AttachOptions{})
	broadcast()
	require.Equal(t, 2, plain.note(t).Audience)
	require.Equal(t, 2, latePlain.note(t).Audience)

	h.Detach(plainID)
	broadcast()
	require.Equal(t, 1, latePlain.note(t).Audience)

	h.BroadcastThread("th", nil, "thread/name/updated", map[string]any{"threadId": "th"})
	for _, c := range []*client{deaf, lateDeaf, latePlain} {
		require.Equal(t, "thread/name/updated", c.note(t).Method)
	}
	for _, c := range []*client{deaf, lateDeaf, plain} {
		require.Empty(t, c.notes, "nothing else reached it")
	}
}

// BenchmarkBroadcastOptedOut is a broadcast about a thread with 10,000
// subscribers that opted out of its method and one that did not.
func BenchmarkBroadcastOptedOut(b *testing.B) {
	h := hub.New(hub.Config{})
	defer h.Close()
	status := map[string]struct{}{"thread/status/changed": {}}
	for range 10_000 {
		h.Attach(h.NewConnID(), discard{}, hub.AttachOptions{OptOut: status})
	}
	h.Attach(h.NewConnID(), discard{}, hub.AttachOptions{})
	params := api.ThreadStatusChangedNotification{ThreadID: "th"}
	for b.Loop() {
		h.BroadcastThread("th", nil, "thread/status/changed", params)
	}
}

// discard is a subscriber that drops what it is sent.
type discard struct{}

func (discard) Notify(*hub.Notification)         {}
func (discard) Request(*hub.Request, int64) bool { return false }
func (discard) Settled(*hub.Request)             {}
