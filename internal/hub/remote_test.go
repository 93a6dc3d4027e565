package hub_test

import (
	"context"
	"encoding/json"
	"errors"
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

// pipeLog is the journal of daemon A as daemon B's event listener sees
// it: it numbers A's notifications and keeps them until pump hands them to
// B's hub, in order.
type pipeLog struct {
	mu   sync.Mutex
	last int64
	logs []*hub.Notification // not pumped yet
	all  []*hub.Notification
}

func (p *pipeLog) Record(n *hub.Notification, deliver func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last++
	n.Seq = p.last
	p.logs = append(p.logs, n)
	p.all = append(p.all, n)
	deliver()
}

func (p *pipeLog) RecordWith(ns []*hub.Notification, write func([]*store.Event) error, deliver func()) error {
	if err := write(nil); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, n := range ns {
		p.last++
		n.Seq = p.last
		p.logs = append(p.logs, n)
		p.all = append(p.all, n)
	}
	deliver()
	return nil
}

func (p *pipeLog) LastSeq(string) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

func (p *pipeLog) After(context.Context, string, int64, int) ([]*hub.Notification, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*hub.Notification(nil), p.all...), nil
}

// pump delivers what A logged since the last pump to B, as frames only,
// as the listener reads them from the store.
func (p *pipeLog) pump(b *hub.Hub) {
	p.mu.Lock()
	logs := p.logs
	p.logs = nil
	p.mu.Unlock()
	for _, n := range logs {
		b.Deliver(hub.StoredNotification(n.ThreadID, n.Seq, n.Method, n.Frame()))
	}
}

// pumpUntil pumps until c gets a request: what A logs from another
// goroutine reaches B by then.
func (p *pipeLog) pumpUntil(t *testing.T, b *hub.Hub, c *client) delivery {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		p.pump(b)
		select {
		case d := <-c.requests:
			return d
		case <-deadline:
			t.Fatal("no request delivered")
		case <-time.After(time.Millisecond):
		}
	}
}

// peer is the cluster between two hubs: it takes B's answers and held
// reports to A.
type peer struct{ to *hub.Hub }

func (p *peer) Answer(_ context.Context, threadID string, id int64, result json.RawMessage, clientErr error) error {
	if !p.to.AnswerRemote(threadID, id, result, clientErr) {
		return errors.New("not taken")
	}
	return nil
}

func (p *peer) Held(_ context.Context, threadID string, id int64, held bool) error {
	if !p.to.HeldRemote(threadID, id, "b", held) {
		return errors.New("not pending")
	}
	return nil
}

func (p *peer) Pending(_ context.Context, threadID string) ([]hub.Offer, error) {
	return p.to.PendingRequests(threadID), nil
}

// twoDaemons returns hub A, which runs the turns and logs to the pipe, and
// hub B, which presents A's requests.
func twoDaemons(t *testing.T, cfg hub.Config) (a, b *hub.Hub, log *pipeLog) {
	log = &pipeLog{}
	toA := &peer{}
	b = hub.New(hub.Config{Remote: toA})
	cfg.Journal, cfg.Remote = log, &peer{to: b}
	a = hub.New(cfg)
	toA.to = a
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b, log
}

// An approval of A's turn reaches B's client under B's id; its answer is
// the one A uses, and the serverRequest/resolved A logs withdraws it on B
// under B's id. Nothing of the exchange reaches a client replaying the log.
func TestApprovalAcrossDaemons(t *testing.T) {
	a, b, log := twoDaemons(t, hub.Config{})
	ca, cb := newClient(), newClient()
	attach(a, ca)
	idb := attach(b, cb)[0]
	res := approve(context.Background(), a)
	da := ca.next(t)
	log.pump(b)
	db := cb.next(t)
	require.Equal(t, "item/commandExecution/requestApproval", db.r.Method)
	require.JSONEq(t, `{"threadId":"th"}`, string(db.r.Params.(json.RawMessage)))

	require.True(t, db.r.Answer(idb, json.RawMessage(`{"decision":"accept"}`), nil))
	got := <-res
	require.NoError(t, got.err)
	require.True(t, got.sent)
	require.JSONEq(t, `{"decision":"accept"}`, string(got.raw))
	require.Same(t, da.r, recv(t, ca.settled), "A's holder is told it is settled")
	require.True(t, db.r.AnsweredBy(idb))
	require.False(t, db.r.Answer(idb, json.RawMessage(`{"decision":"decline"}`), nil), "settled already")

	// A's turns layer announces the settlement in the log.
	a.Publish(turns.Event{ThreadID: "th", Method: "serverRequest/resolved", Params: api.ServerRequestResolvedNotification{ThreadID: "th", RequestID: got.id}})
	log.pump(b)
	require.Same(t, db.r, recv(t, cb.settled))
	n := recv(t, cb.notes)
	require.Equal(t, "serverRequest/resolved", n.Method)
	require.JSONEq(t, `{"threadId":"th","requestId":`+jsonInt(db.id)+`}`, string(paramsOf(t, n)), "under B's id")

	evs, err := a.EventsAfter(context.Background(), "th", 0, 0)
	require.NoError(t, err)
	for _, e := range evs {
		require.NotContains(t, e.Method, "appserver/", "replays leave the exchange out")
	}
}

// A dynamic tool call no live client of A can take goes to one live client
// of B, the oldest; when that client leaves it moves to the next, whose
// answer A's call gets, and the call's end withdraws it on B.
func TestToolCallAcrossDaemons(t *testing.T) {
	a, b, log := twoDaemons(t, hub.Config{})
	c1, c2 := newClient(), newClient()
	ids := attach(b, c1, c2)
	out := make(chan api.DynamicToolCallResult, 1)
	go func() {
		res, err := a.Broker().Call(context.Background(), dynamic.CallRequest{ThreadID: "th", TurnID: "tu", CallID: "c1", Tool: "t"})
		require.NoError(t, err)
		out <- res
	}()
	d1 := log.pumpUntil(t, b, c1)
	require.Equal(t, hub.KindToolCall, d1.r.Kind)
	c2.none(t)

	b.Detach(ids[0])
	d1.r.Lost(ids[0])
	d2 := c2.next(t)
	require.Same(t, d1.r, d2.r)
	require.NotEqual(t, d1.id, d2.id, "a new id for the new holder")
	require.True(t, d2.r.Answer(ids[1], json.RawMessage(`{"contentItems":[{"type":"inputText","text":"ok"}],"success":true}`), nil))
	res := <-out
	require.True(t, res.Success)

	// The call's end reaches B through the log.
	for {
		log.pump(b)
		select {
		case r := <-c2.settled:
			require.Same(t, d2.r, r)
			return
		case <-time.After(time.Millisecond):
		}
	}
}

// recv receives from ch, failing after a while.
func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(5 * time.Second):
		t.Fatal("nothing received")
	}
	var zero T
	return zero
}

// A client that subscribes on B while A's approval is pending gets it,
// though the log offered it before B had subscribers to listen for.
func TestLateSubscriberOfAnotherDaemonGetsPendingRequest(t *testing.T) {
	a, b, _ := twoDaemons(t, hub.Config{})
	ca, cb := newClient(), newClient()
	attach(a, ca)
	res := approve(context.Background(), a)
	ca.next(t)
	idb := attach(b, cb)[0]
	db := cb.next(t)
	require.Equal(t, "item/commandExecution/requestApproval", db.r.Method)
	require.True(t, db.r.Answer(idb, json.RawMessage(`{"decision":"decline"}`), nil))
	require.JSONEq(t, `{"decision":"decline"}`, string(recv(t, res).raw))
}

// While B's client holds A's approval, A waits for the answer; once that
// client left without answering, A's no-client timeout runs again.
func TestApprovalReleasedByAnotherDaemon(t *testing.T) {
	a, b, log := twoDaemons(t, hub.Config{Approval: hub.Timeouts{NoClient: 300 * time.Millisecond}})
	cb := newClient()
	idb := attach(b, cb)[0]
	res := approve(context.Background(), a)
	db := log.pumpUntil(t, b, cb)
	b.Detach(idb)
	db.r.Lost(idb)
	got := recv(t, res)
	require.ErrorIs(t, got.err, turns.ErrNoClient)
}

// A client of B that goes away while A's approval is being delivered to
// it (before its Request returned) does not hold it: A's no-client timeout
// runs again.
func TestApprovalLostDuringDeliveryIsNotHeld(t *testing.T) {
	a, b, log := twoDaemons(t, hub.Config{Approval: hub.Timeouts{NoClient: 300 * time.Millisecond}})
	cb := newClient()
	idb := b.NewConnID()
	cb.during = func(r *hub.Request) {
		lost := make(chan struct{})
		go func() {
			b.Detach(idb)
			r.Lost(idb)
			close(lost)
		}()
		<-lost
	}
	b.Attach(idb, cb, hub.AttachOptions{})
	b.Subscribe("th", idb)
	res := approve(context.Background(), a)
	log.pumpUntil(t, b, cb)
	got := recv(t, res)
	require.ErrorIs(t, got.err, turns.ErrNoClient)
}

// A request of A settled on B (A's turn ended) while it is being
// delivered to B's client is told to that client as settled once its
// Request returned, not before: the client keeps what it holds only from
// there.
func TestSettledDuringDeliveryIsToldAfterRequest(t *testing.T) {
	a, b, log := twoDaemons(t, hub.Config{})
	cb := newClient()
	idb := b.NewConnID()
	early := make(chan *hub.Request, 1)
	cb.during = func(r *hub.Request) {
		done := make(chan struct{})
		go func() {
			a.Publish(turns.Event{ThreadID: "th", Method: "turn/completed", Params: map[string]any{"threadId": "th"}})
			log.pump(b)
			close(done)
		}()
		<-done
		select {
		case s := <-cb.settled:
			early <- s
		default:
		}
	}
	b.Attach(idb, cb, hub.AttachOptions{})
	b.Subscribe("th", idb)
	ctx, cancel := context.WithCancel(context.Background())
	res := approve(ctx, a)
	d := log.pumpUntil(t, b, cb)
	require.Same(t, d.r, recv(t, cb.settled))
	select {
	case <-early:
		t.Fatal("told settled before its Request returned")
	default:
	}
	cancel()
	<-res
}

// A turn's end withdraws on B the requests of A that nothing else settled
// (A died before announcing them).
func TestTurnEndWithdrawsRemoteRequests(t *testing.T) {
	a, b, log := twoDaemons(t, hub.Config{})
	cb := newClient()
	attach(b, cb)
	ctx, cancel := context.WithCancel(context.Background())
	res := approve(ctx, a)
	db := log.pumpUntil(t, b, cb)
	a.Publish(turns.Event{ThreadID: "th", Method: "turn/completed", Params: map[string]any{"threadId": "th"}})
	log.pump(b)
	require.Same(t, db.r, recv(t, cb.settled))
	cancel()
	<-res
}

func paramsOf(t *testing.T, n *hub.Notification) json.RawMessage {
	t.Helper()
	var f struct {
		Params json.RawMessage `json:"params"`
	}
	require.NoError(t, json.Unmarshal(n.Frame(), &f))
	return f.Params
}

func jsonInt(v int64) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// Another daemon's turn start and end reach the thread's subscribers here
// with the thread's status, as that daemon tells its own connections:
// active before turn/started, idle before turn/completed. A subscriber
// that opted out of the status hears only the turn events.
func TestRemoteTurnRelaysThreadStatus(t *testing.T) {
	a, b, log := twoDaemons(t, hub.Config{})
	plain, deaf := newClient(), newClient()
	attach(b, plain)
	deafID := b.NewConnID()
	b.Attach(deafID, deaf, hub.AttachOptions{OptOut: map[string]struct{}{"thread/status/changed": {}}})
	b.Subscribe("th", deafID)
	a.Publish(turns.Event{ThreadID: "th", Method: "turn/started", Params: api.TurnStartedNotification{ThreadID: "th", Turn: api.Turn{ID: "t1"}}})
	a.Publish(turns.Event{ThreadID: "th", Method: "turn/completed", Params: api.TurnCompletedNotification{ThreadID: "th", Turn: api.Turn{ID: "t1"}}})
	log.pump(b)

	var got []string
	for range 4 {
		n := plain.note(t)
		got = append(got, n.Method+" "+string(paramsOf(t, n)))
	}
	require.Equal(t, "thread/status/changed "+`{"threadId":"th","status":{"type":"active","activeFlags":[]}}`, got[0])
	require.Contains(t, got[1], "turn/started ")
	require.Equal(t, "thread/status/changed "+`{"threadId":"th","status":{"type":"idle"}}`, got[2])
	require.Contains(t, got[3], "turn/completed ")
	require.Equal(t, "turn/started", deaf.note(t).Method)
	require.Equal(t, "turn/completed", deaf.note(t).Method)
	select {
	case n := <-deaf.notes:
		t.Fatalf("an opted-out subscriber got %s", n.Method)
	default:
	}

	// A failed turn leaves the thread in systemError.
	a.Publish(turns.Event{ThreadID: "th", Method: "turn/completed", Params: api.TurnCompletedNotification{ThreadID: "th", Turn: api.Turn{ID: "t2", Status: api.TurnFailed}}})
	log.pump(b)
	n := plain.note(t)
	require.Equal(t, "thread/status/changed", n.Method)
	require.JSONEq(t, `{"threadId":"th","status":{"type":"systemError"}}`, string(paramsOf(t, n)))
	require.Equal(t, "turn/completed", plain.note(t).Method)
}
