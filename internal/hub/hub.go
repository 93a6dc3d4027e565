package hub

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/appserver/appserver/internal/dynamic"
	"github.com/appserver/appserver/internal/turns"
)

// ConnID identifies a subscriber; it is the turns layer's connection id.
type ConnID = turns.ConnID

// Subscriber is one client as the hub sees it: a websocket session or an
// HTTP event log. Every method is called without hub locks held and must
// not block.
type Subscriber interface {
	// Notify delivers one notification.
	Notify(n *Notification)
	// Request delivers a server request under the request id id. It
	// reports whether the subscriber took it; a subscriber that took it
	// later calls r.Answer with the client's answer, or r.Lost when the
	// client went away without answering.
	Request(r *Request, id int64) bool
	// Settled tells a subscriber that took r that r is settled (answered,
	// by this client or another, withdrawn or timed out); it may drop what
	// it kept for r.
	Settled(r *Request)
}

// Kind is a class of server requests; each has its own delivery and
// timeout rule.
type Kind uint8

// The kinds of server requests.
const (
	// KindApproval: item/commandExecution/requestApproval and
	// item/fileChange/requestApproval, sent to every subscriber.
	KindApproval Kind = iota + 1
	// KindUserInput: item/tool/requestUserInput, sent to every subscriber.
	KindUserInput
	// KindToolCall: item/tool/call, sent to one live client.
	KindToolCall
	// KindElicitation: mcpServer/elicitation/request (MCP tool approvals
	// and MCP servers' own elicitations), sent to every subscriber, with
	// the approvals' timeouts.
	KindElicitation
)

// String names the kind for logs.
func (k Kind) String() string {
	switch k {
	case KindApproval:
		return "approval"
	case KindUserInput:
		return "userInput"
	case KindToolCall:
		return "toolCall"
	case KindElicitation:
		return "elicitation"
	}
	return "unknown"
}

// KindOf returns the kind of a server request method.
func KindOf(method string) Kind {
	switch method {
	case "item/tool/requestUserInput":
		return KindUserInput
	case "item/tool/call":
		return KindToolCall
	case "mcpServer/elicitation/request":
		return KindElicitation
	}
	return KindApproval
}

// Timeouts is the timeout rule of one kind of request.
type Timeouts struct {
	// NoClient is how long a request waits while no client holds it (none
	// subscribed, or its holders left without answering), counted from the
	// moment none did; then it fails (turns.ErrNoClient for approvals and
	// user input, a model-readable failure for tool calls). Negative waits
	// as long as the turn runs.
	NoClient time.Duration
	// Answer, when positive, bounds the whole request even while a client
	// holds it without answering. Zero waits as long as the turn runs.
	Answer time.Duration
}

// Default timeouts per kind, used for zero fields of Config.
var (
	// DefaultApprovalTimeouts: 30 s for a client to appear, then the
	// command or patch is declined; a held approval waits for its answer.
	DefaultApprovalTimeouts = Timeouts{NoClient: 30 * time.Second}
	// DefaultUserInputTimeouts: as approvals.
	DefaultUserInputTimeouts = Timeouts{NoClient: 30 * time.Second}
	// DefaultToolCallTimeouts: 5 minutes for a client that registered the
	// tools to come back; a held call waits for its answer.
	DefaultToolCallTimeouts = Timeouts{NoClient: dynamic.DefaultReconnectTimeout}
)

// Config configures a Hub. Zero values get the defaults noted per field.
type Config struct {
	// Approval, UserInput and ToolCall are the timeout rules per kind;
	// zero fields take DefaultApprovalTimeouts, DefaultUserInputTimeouts
	// and DefaultToolCallTimeouts.
	Approval, UserInput, ToolCall Timeouts
	// Encode encodes a notification as sent on websockets and recorded by
	// the HTTP event logs: {"method","params","emittedAtMs"}. nil uses
	// encoding/json.
	Encode func(method string, params any, emittedAtMs int64) ([]byte, error)
	// ToolMetrics receives the dynamic tool call measurements; nil
	// discards them.
	ToolMetrics dynamic.Metrics
	// ApprovalMetrics counts the approvals (command, file change and MCP
	// elicitation requests) pending and decided; nil discards them.
	ApprovalMetrics ApprovalMetrics
	// Journal numbers each thread's notifications and keeps them (the
	// durable event log); nil numbers them in memory only, from 1 in each
	// process.
	Journal Journal
	// Remote reaches the other daemons sharing the database (several
	// daemons on Postgres): the hub then publishes its server requests in
	// the thread's event log and presents theirs to its subscribers. nil
	// on a single daemon.
	Remote Remote
	// Logger receives warnings; nil discards them.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Journal gives each notification of a thread its sequence number in the
// thread's log and records it.
type Journal interface {
	// Record sets n.Seq to the thread's next sequence number, queues n for
	// the log and calls deliver before another notification of the thread
	// is numbered, so that subscribers get each thread's notifications in
	// sequence order. It must not block beyond deliver, except on the
	// first notification of a thread, which may read where the thread's
	// stored log ends.
	Record(n *Notification, deliver func())
	// LastSeq returns the sequence number of the thread's last notification
	// numbered or delivered here (or stored), 0 if none.
	LastSeq(threadID string) int64
	// After returns up to limit notifications of the thread's log after
	// afterSeq, in order, including those not yet stored; a journal that
	// keeps nothing returns none.
	After(ctx context.Context, threadID string, afterSeq int64, limit int) ([]*Notification, error)
}

// memJournal numbers notifications in memory: the journal of a hub that
// keeps no durable log.
type memJournal struct {
	mu   sync.Mutex
	last map[string]int64
}

// Record implements Journal.
func (j *memJournal) Record(n *Notification, deliver func()) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.last[n.ThreadID]++
	n.Seq = j.last[n.ThreadID]
	deliver()
}

// After implements Journal: a memory journal keeps nothing.
func (j *memJournal) After(context.Context, string, int64, int) ([]*Notification, error) {
	return nil, nil
}

// LastSeq implements Journal.
func (j *memJournal) LastSeq(threadID string) int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.last[threadID]
}

// LastSeq returns the sequence number of a thread's last notification, 0
// if none: later ones have greater numbers.
func (h *Hub) LastSeq(threadID string) int64 { return h.cfg.Journal.LastSeq(threadID) }

// EventsAfter returns up to limit notifications of a thread's event log
// after afterSeq, for clients that resume: none without a durable journal.
// The events that carry server requests between daemons are left out (a
// gap in the numbers), so a page may be shorter than limit with more to
// come; it is empty only at the log's end.
func (h *Hub) EventsAfter(ctx context.Context, threadID string, afterSeq int64, limit int) ([]*Notification, error) {
	if h.cfg.Remote == nil {
		// A single daemon logs no such events.
		return h.cfg.Journal.After(ctx, threadID, afterSeq, limit)
	}
	for {
		evs, err := h.cfg.Journal.After(ctx, threadID, afterSeq, limit)
		if err != nil || len(evs) == 0 {
			return evs, err
		}
		last := evs[len(evs)-1].Seq
		out := slices.DeleteFunc(evs, func(n *Notification) bool { return internalEvent(n.Method) })
		if len(out) > 0 {
			return out, nil
		}
		afterSeq = last
	}
}

// AttachOptions says how a subscriber takes part.
type AttachOptions struct {
	// Recorder marks a subscriber that records the thread for clients who
	// poll it (the HTTP event log): it gets no broadcasts, holds every
	// dynamic tool call of its threads besides the one live client, and
	// does not count as that live client.
	Recorder bool
}

type attached struct {
	sub  Subscriber
	opts AttachOptions
}

// Hub is the subscriber table, the notification fan-out and the request
// router. It is safe for concurrent use.
//
// Lock order: Hub.mu before Request.mu; neither is held while calling a
// Subscriber or the broker.
type Hub struct {
	cfg    Config
	log    *slog.Logger
	now    func() time.Time
	broker *dynamic.Broker

	nextConn atomic.Uint64
	nextReq  atomic.Int64

	mu      sync.Mutex
	subs    map[ConnID]attached
	threads map[string]threadSubs
	changed chan struct{} // closed (and replaced) when subscribers change
	tools   map[*dynamic.Pending]*Request
	// waiting are the pending approval and user-input requests by id, so
	// that an answer another daemon forwards (AnswerRemote) finds its
	// request.
	waiting map[int64]*Request
	// remote are the requests of other daemons' turns presented here (only
	// with a Remote).
	remote map[remoteKey]*Request

	// ctx ends at Close; wg counts the goroutines that talk to other
	// daemons (watchers of published tool calls, held reports).
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// threadSubs is the last published subscriber list of a thread.
type threadSubs struct {
	version uint64
	conns   []ConnID // sorted: ids grow, so oldest first
}

// New returns a Hub and the broker of its dynamic tool calls.
func New(cfg Config) *Hub {
	cfg.Approval = cfg.Approval.orDefault(DefaultApprovalTimeouts)
	cfg.UserInput = cfg.UserInput.orDefault(DefaultUserInputTimeouts)
	cfg.ToolCall = cfg.ToolCall.orDefault(DefaultToolCallTimeouts)
	if cfg.Encode == nil {
		cfg.Encode = encodeJSON
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.ApprovalMetrics == nil {
		cfg.ApprovalMetrics = nopApprovalMetrics{}
	}
	if cfg.Journal == nil {
		cfg.Journal = &memJournal{last: map[string]int64{}}
	}
	h := &Hub{
		cfg:     cfg,
		log:     cfg.Logger,
		now:     cfg.Now,
		subs:    map[ConnID]attached{},
		threads: map[string]threadSubs{},
		changed: make(chan struct{}),
		tools:   map[*dynamic.Pending]*Request{},
		waiting: map[int64]*Request{},
		remote:  map[remoteKey]*Request{},
	}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	h.broker = dynamic.NewBroker(dynamic.BrokerConfig{
		Router:           toolRouter{h},
		ReconnectTimeout: cfg.ToolCall.NoClient,
		AnswerTimeout:    cfg.ToolCall.Answer,
		Metrics:          cfg.ToolMetrics,
		Logger:           cfg.Logger,
		Now:              cfg.Now,
	})
	return h
}

func (t Timeouts) orDefault(d Timeouts) Timeouts {
	if t.NoClient == 0 {
		t.NoClient = d.NoClient
	}
	if t.Answer == 0 {
		t.Answer = d.Answer
	}
	return t
}

func (h *Hub) timeouts(k Kind) Timeouts {
	switch k {
	case KindUserInput:
		return h.cfg.UserInput
	case KindToolCall:
		return h.cfg.ToolCall
	}
	return h.cfg.Approval
}

// Broker returns the broker of dynamic tool calls; its router is the hub.
func (h *Hub) Broker() *dynamic.Broker { return h.broker }

// Close fails every pending dynamic tool call (daemon shutdown).
func (h *Hub) Close() {
	h.cancel()
	h.broker.Close()
	h.wg.Wait()
}

// NewConnID returns a fresh subscriber id. Ids grow, so a smaller id is an
// older client.
func (h *Hub) NewConnID() ConnID { return ConnID(h.nextConn.Add(1)) }

// NextRequestID returns a fresh server→client request id, unique in the
// process; transports that send requests of their own take ids here too.
func (h *Hub) NextRequestID() int64 { return h.nextReq.Add(1) - 1 }

// Attach registers a subscriber under id (from NewConnID): notifications
// and requests for id reach it from now on.
func (h *Hub) Attach(id ConnID, sub Subscriber, opts AttachOptions) {
	h.mu.Lock()
	h.subs[id] = attached{sub, opts}
	h.mu.Unlock()
}

// Detach forgets a subscriber; call it when its client is gone. The
// requests it held are offered again once the turns layer publishes the
// thread's new subscribers (or at once for approvals, which re-check).
func (h *Hub) Detach(id ConnID) {
	h.mu.Lock()
	delete(h.subs, id)
	h.wakeLocked()
	h.mu.Unlock()
}

func (h *Hub) lookup(id ConnID) (attached, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	a, ok := h.subs[id]
	return a, ok
}

// SubscribersChanged records a thread's subscribers as the turns layer
// published them (version grows with every change of that thread, so a
// late publication of an older list is ignored) and offers the thread's
// pending requests to whoever can take them now.
func (h *Hub) SubscribersChanged(threadID string, version uint64, subs []ConnID) {
	subs = slices.Clone(subs)
	slices.Sort(subs)
	h.mu.Lock()
	cur, had := h.threads[threadID]
	if !had || cur.version < version {
		if len(subs) == 0 {
			delete(h.threads, threadID)
		} else {
			h.threads[threadID] = threadSubs{version, subs}
		}
	}
	_, has := h.threads[threadID]
	h.wakeLocked()
	h.mu.Unlock()
	h.broker.Reoffer(threadID)
	if h.cfg.Remote != nil {
		for _, r := range h.remoteOf(threadID) {
			h.offerRemote(r)
		}
		if !had && has {
			h.wg.Add(1)
			go h.fetchRemote(threadID)
		}
	}
}

// Subscribers returns the thread's subscribers, oldest first.
func (h *Hub) Subscribers(threadID string) []ConnID {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.threads[threadID].conns)
}

// subscribed returns the attached subscribers of a thread, oldest first.
func (h *Hub) subscribed(threadID string) []member {
	h.mu.Lock()
	defer h.mu.Unlock()
	conns := h.threads[threadID].conns
	out := make([]member, 0, len(conns))
	for _, c := range conns {
		if a, ok := h.subs[c]; ok {
			out = append(out, member{c, a})
		}
	}
	return out
}

type member struct {
	id ConnID
	attached
}

func (h *Hub) wakeLocked() {
	close(h.changed)
	h.changed = make(chan struct{})
}

func (h *Hub) wakeup() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.changed
}

// Notification is a notification as every transport gets it: the typed
// params, for subscribers that keep state from them, and the frame,
// encoded once and shared by every subscriber.
type Notification struct {
	// Method is the notification's method.
	Method string
	// Params is the typed value the notification was made of (an api
	// notification struct); do not modify it.
	Params any
	// EmittedAtMs is the notification's emittedAtMs stamp.
	EmittedAtMs int64
	// ThreadID is the thread of a thread-scoped notification (SendThread,
	// Deliver), "" for others.
	ThreadID string
	// Seq is the notification's position in its thread's event log, from
	// 1; 0 for notifications that are not thread-scoped.
	Seq   int64
	frame []byte

	seqOnce  sync.Once
	seqFrame []byte
}

// SeqFrame returns the frame with the notification's sequence number as a
// last member, {"method","params","emittedAtMs","seq"}, for clients that
// resume from it; without a number it is Frame. Encoded once, shared.
func (n *Notification) SeqFrame() []byte {
	if n.Seq == 0 || len(n.frame) == 0 {
		return n.frame
	}
	n.seqOnce.Do(func() {
		f := make([]byte, 0, len(n.frame)+24)
		f = append(f, n.frame[:len(n.frame)-1]...) // the frame is an object: drop its '}'
		f = append(f, `,"seq":`...)
		f = strconv.AppendInt(f, n.Seq, 10)
		n.seqFrame = append(f, '}')
	})
	return n.seqFrame
}

// StoredNotification rebuilds a thread's notification from its event log
// entry: the frame as sent, without typed params.
func StoredNotification(threadID string, seq int64, method string, frame []byte) *Notification {
	return &Notification{Method: method, ThreadID: threadID, Seq: seq, frame: frame}
}

// Frame returns {"method","params","emittedAtMs"} as sent on websockets
// and recorded on HTTP event streams. It is shared: do not modify it.
func (n *Notification) Frame() []byte { return n.frame }

// NewNotification encodes a notification stamped with the hub's clock.
func (h *Hub) NewNotification(method string, params any) (*Notification, error) {
	ms := h.now().UnixMilli()
	frame, err := h.cfg.Encode(method, params, ms)
	if err != nil {
		return nil, err
	}
	return &Notification{Method: method, Params: params, EmittedAtMs: ms, frame: frame}, nil
}

// Broadcast implements turns.Notifier: every attached subscriber but the
// recorders gets the notification.
func (h *Hub) Broadcast(method string, params any) {
	n, err := h.NewNotification(method, params)
	if err != nil {
		h.log.Error("encode notification", "method", method, "err", err)
		return
	}
	h.mu.Lock()
	to := make([]Subscriber, 0, len(h.subs))
	for _, a := range h.subs {
		if !a.opts.Recorder {
			to = append(to, a.sub)
		}
	}
	h.mu.Unlock()
	for _, s := range to {
		s.Notify(n)
	}
}

// Send implements turns.Notifier.
func (h *Hub) Send(to []ConnID, method string, params any) {
	n, err := h.NewNotification(method, params)
	if err != nil {
		h.log.Error("encode notification", "method", method, "err", err)
		return
	}
	for _, id := range to {
		if a, ok := h.lookup(id); ok {
			a.sub.Notify(n)
		}
	}
}

// SendThread implements turns.ThreadNotifier: a notification of a thread,
// numbered and recorded by the journal (whether or not anybody is
// subscribed here: clients on other daemons and later clients read it from
// the log), for the given connections.
func (h *Hub) SendThread(threadID string, to []ConnID, method string, params any) {
	n, err := h.NewNotification(method, params)
	if err != nil {
		h.log.Error("encode notification", "method", method, "err", err)
		return
	}
	n.ThreadID = threadID
	h.cfg.Journal.Record(n, func() {
		for _, id := range to {
			if a, ok := h.lookup(id); ok {
				a.sub.Notify(n)
			}
		}
	})
}

// Deliver gives a thread's notification that another daemon ran (read
// from the event log) to the thread's subscribers here. The caller
// delivers each thread's notifications in sequence order, once.
func (h *Hub) Deliver(n *Notification) {
	if h.cfg.Remote != nil && h.remoteEvent(n) {
		return
	}
	for _, m := range h.subscribed(n.ThreadID) {
		m.sub.Notify(n)
	}
}

// encodeJSON is the default encoder.
func encodeJSON(method string, params any, emittedAtMs int64) ([]byte, error) {
	p, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	return json.Marshal(struct {
		Method      string          `json:"method"`
		Params      json.RawMessage `json:"params"`
		EmittedAtMs int64           `json:"emittedAtMs"`
	}{method, p, emittedAtMs})
}
