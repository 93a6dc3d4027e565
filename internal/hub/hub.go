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

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/audit"
	"github.com/appserver/appserver/internal/dynamic"
	"github.com/appserver/appserver/internal/store"
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
	// client went away without answering. Those calls may come before
	// Request returns, from another goroutine, never from Request's own
	// (a dynamic tool call is offered under its broker's lock).
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
	// daemons on Postgres): the hub then presents the server requests they
	// logged to its subscribers and forwards its clients' answers. nil on
	// a single daemon (its own requests are logged either way).
	Remote Remote
	// Audit records every approval and elicitation request with its
	// answer and who gave it; nil records nothing.
	Audit *audit.Log
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
	// sequence order; a notification the journal does not keep (a delta
	// past its item's bound) is delivered with Seq 0. It must not block
	// beyond deliver, except where it reserves numbers in the store (the
	// first notification of a thread, and one in many thousands after).
	Record(n *Notification, deliver func())
	// RecordWith numbers ns, all of one thread, in order as Record does
	// and hands write the log entries of those the journal keeps: write
	// stores them in the caller's own batch, so that they are stored in
	// the same transaction as what the batch carries. Only once write has
	// succeeded is deliver called (once, for all of ns); when it fails,
	// the numbers are given back, nothing is delivered and its error is
	// returned. No other notification of the thread is numbered in
	// between.
	RecordWith(ns []*Notification, write func([]*store.Event) error, deliver func()) error
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

// RecordWith implements Journal: a memory journal keeps nothing, so write
// gets no events; the numbers are taken once it has succeeded, without
// holding the journal's lock across it.
func (j *memJournal) RecordWith(ns []*Notification, write func([]*store.Event) error, deliver func()) error {
	if err := write(nil); err != nil {
		return err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, n := range ns {
		j.last[n.ThreadID]++
		n.Seq = j.last[n.ThreadID]
	}
	deliver()
	return nil
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
// The hub's own entries (server requests, archiving: MethodRequestOffered
// and the others) are left out (a gap in the numbers), so a page may be
// shorter than limit with more to come; it is empty only at the log's
// end.
func (h *Hub) EventsAfter(ctx context.Context, threadID string, afterSeq int64, limit int) ([]*Notification, error) {
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
	// AllThreads marks an in-process consumer of the event log: it hears
	// the logged notifications of every thread (those of ephemeral
	// threads excepted) without subscribing to any, gets no broadcasts and
	// no server requests. Its order is each thread's.
	AllThreads bool
	// Recorder marks a subscriber that records the thread for clients who
	// poll it (the HTTP event log): it gets no broadcasts, holds every
	// dynamic tool call of its threads besides the one live client, and
	// does not count as that live client.
	Recorder bool
	// OptOut are the methods the subscriber never wants (a websocket
	// client's optOutNotificationMethods): the hub leaves it out of their
	// broadcasts without calling it. The subscriber filters the rest of
	// what it is sent itself.
	OptOut map[string]struct{}
}

type attached struct {
	sub  Subscriber
	opts AttachOptions
}

var _ turns.Sink = (*Hub)(nil)

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

	mu   sync.Mutex
	subs map[ConnID]attached
	// hearers are, for each method broadcast so far, the subscribers its
	// broadcasts reach (neither recorders nor opted out of it): built at
	// the method's first broadcast, kept by Attach and Detach. A broadcast
	// costs nothing for a subscriber that opted out of it, where a loop
	// over every subscriber cost about 5 ms of daemon CPU a turn with
	// 10,000 connections opted out of its three broadcasts
	// (BenchmarkCrowd/optout, bench/README.md).
	hearers map[string]map[ConnID]Subscriber
	// threads are the subscribers of each thread, oldest first (ids grow);
	// joined are the threads each subscriber hears. The hub is their one
	// owner: the turns layer subscribes its callers here and asks Watched.
	threads map[string][]ConnID
	joined  map[ConnID]map[string]struct{}
	// everyone are the subscribers that hear every thread (AllThreads).
	everyone map[ConnID]Subscriber
	// fetched marks the threads whose pending requests were read from the
	// daemon running their turn since they last had no subscriber (only
	// with a Remote).
	fetched map[string]bool
	// unwelcomed are, per thread, the subscribers that joined while
	// requests of the thread were pending: they get those requests from
	// the thread's next Welcome (after the answer that subscribed them),
	// not before.
	unwelcomed map[string]map[ConnID]struct{}
	changed    chan struct{} // closed (and replaced) when subscribers change
	tools      map[*dynamic.Pending]*Request
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
		cfg:        cfg,
		log:        cfg.Logger,
		now:        cfg.Now,
		subs:       map[ConnID]attached{},
		hearers:    map[string]map[ConnID]Subscriber{},
		threads:    map[string][]ConnID{},
		joined:     map[ConnID]map[string]struct{}{},
		everyone:   map[ConnID]Subscriber{},
		fetched:    map[string]bool{},
		unwelcomed: map[string]map[ConnID]struct{}{},
		changed:    make(chan struct{}),
		tools:      map[*dynamic.Pending]*Request{},
		waiting:    map[int64]*Request{},
		remote:     map[remoteKey]*Request{},
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

// Attach registers a subscriber under id (from NewConnID): broadcasts
// (unless it is a recorder), and the notifications and requests of the
// threads it subscribes to, reach it from now on.
func (h *Hub) Attach(id ConnID, sub Subscriber, opts AttachOptions) {
	h.mu.Lock()
	if opts.AllThreads {
		h.everyone[id] = sub
	} else {
		h.subs[id] = attached{sub, opts}
		for method, set := range h.hearers {
			if opts.hears(method) {
				set[id] = sub
			}
		}
	}
	h.mu.Unlock()
}

// hears reports whether a subscriber attached with o gets the broadcasts
// of method.
func (o AttachOptions) hears(method string) bool {
	if o.Recorder {
		return false
	}
	_, out := o.OptOut[method]
	return !out
}

// Follow attaches sub under a fresh id, subscribed to one thread, and
// offers it the thread's pending requests: one call for a client that
// follows a single thread (an HTTP event log). Detach ends it.
func (h *Hub) Follow(threadID string, sub Subscriber, opts AttachOptions) ConnID {
	id := h.NewConnID()
	h.Attach(id, sub, opts)
	h.Subscribe(threadID, id)
	h.Welcome(threadID)
	return id
}

// Detach forgets a subscriber and its subscriptions; call it when its
// client is gone. The requests it held are offered again to the threads'
// other subscribers (approvals re-check at once).
func (h *Hub) Detach(id ConnID) {
	h.mu.Lock()
	delete(h.subs, id)
	delete(h.everyone, id)
	for _, set := range h.hearers {
		delete(set, id)
	}
	left := make([]string, 0, len(h.joined[id]))
	for th := range h.joined[id] {
		h.leaveLocked(th, id)
		left = append(left, th)
	}
	delete(h.joined, id)
	h.wakeLocked()
	h.mu.Unlock()
	for _, th := range left {
		h.reoffer(th)
	}
}

func (h *Hub) lookup(id ConnID) (attached, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	a, ok := h.subs[id]
	return a, ok
}

// Subscribe implements turns.Sink: conn hears the thread's notifications
// from now on, and gets its pending requests from the next Welcome.
func (h *Hub) Subscribe(threadID string, conn ConnID) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	subs := h.threads[threadID]
	i, found := slices.BinarySearch(subs, conn)
	if found {
		return false
	}
	h.threads[threadID] = slices.Insert(subs, i, conn)
	if h.pendingLocked(threadID) {
		if h.unwelcomed[threadID] == nil {
			h.unwelcomed[threadID] = map[ConnID]struct{}{}
		}
		h.unwelcomed[threadID][conn] = struct{}{}
	}
	if h.joined[conn] == nil {
		h.joined[conn] = map[string]struct{}{}
	}
	h.joined[conn][threadID] = struct{}{}
	return true
}

// Welcome implements turns.Sink: the thread's pending requests are offered
// to whoever can take them now, and, with several daemons, the requests
// of the daemon running the thread's turn are fetched when the thread got
// its first subscribers here.
func (h *Hub) Welcome(threadID string) {
	h.mu.Lock()
	delete(h.unwelcomed, threadID)
	h.wakeLocked()
	fetch := h.cfg.Remote != nil && len(h.threads[threadID]) > 0 && !h.fetched[threadID]
	if fetch {
		h.fetched[threadID] = true
	}
	h.mu.Unlock()
	h.reoffer(threadID)
	if fetch {
		h.wg.Add(1)
		go h.fetchRemote(threadID)
	}
}

// Unsubscribe implements turns.Sink.
func (h *Hub) Unsubscribe(threadID string, conn ConnID) bool {
	h.mu.Lock()
	_, ok := h.joined[conn][threadID]
	if ok {
		h.leaveLocked(threadID, conn)
		delete(h.joined[conn], threadID)
		h.wakeLocked()
	}
	h.mu.Unlock()
	if ok {
		h.reoffer(threadID)
	}
	return ok
}

// Forget implements turns.Sink: nobody hears the thread any more.
func (h *Hub) Forget(threadID string) {
	h.mu.Lock()
	for _, c := range h.threads[threadID] {
		delete(h.joined[c], threadID)
	}
	delete(h.threads, threadID)
	delete(h.fetched, threadID)
	delete(h.unwelcomed, threadID)
	h.wakeLocked()
	h.mu.Unlock()
	h.reoffer(threadID)
}

// leaveLocked removes conn from the thread's subscribers; h.mu must be
// held.
func (h *Hub) leaveLocked(threadID string, conn ConnID) {
	if w := h.unwelcomed[threadID]; w != nil {
		delete(w, conn)
		if len(w) == 0 {
			delete(h.unwelcomed, threadID)
		}
	}
	subs := slices.DeleteFunc(h.threads[threadID], func(c ConnID) bool { return c == conn })
	if len(subs) == 0 {
		delete(h.threads, threadID)
		delete(h.fetched, threadID)
		return
	}
	h.threads[threadID] = subs
}

// reoffer offers the thread's pending dynamic tool calls, and the requests
// of other daemons presented here, to whoever can take them now.
func (h *Hub) reoffer(threadID string) {
	h.broker.Reoffer(threadID)
	if h.cfg.Remote != nil {
		for _, r := range h.remoteOf(threadID) {
			h.offerRemote(r)
		}
	}
}

// Watched implements turns.Sink: whether the thread has subscribers here.
func (h *Hub) Watched(threadID string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.threads[threadID]) > 0
}

// Listening reports whether a notification of the thread logged by another
// daemon has anybody to reach here: a subscriber of the thread or an
// all-threads consumer.
func (h *Hub) Listening(threadID string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.threads[threadID]) > 0 || len(h.everyone) > 0
}

// Subscribers returns the thread's subscribers, oldest first.
func (h *Hub) Subscribers(threadID string) []ConnID {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.threads[threadID])
}

// subscribed returns the attached subscribers of a thread, oldest first.
func (h *Hub) subscribed(threadID string) []member {
	return h.members(threadID, nil)
}

// offerable returns the attached subscribers of a thread that its pending
// requests may be offered to now: the welcomed ones, oldest first.
func (h *Hub) offerable(threadID string) []member {
	return h.members(threadID, func(c ConnID) bool {
		_, later := h.unwelcomed[threadID][c]
		return later
	})
}

// members returns the attached subscribers of a thread, oldest first,
// but those skip (called under h.mu) leaves out.
func (h *Hub) members(threadID string, skip func(ConnID) bool) []member {
	h.mu.Lock()
	defer h.mu.Unlock()
	conns := h.threads[threadID]
	out := make([]member, 0, len(conns))
	for _, c := range conns {
		if skip != nil && skip(c) {
			continue
		}
		if a, ok := h.subs[c]; ok {
			out = append(out, member{c, a})
		}
	}
	return out
}

// pendingLocked reports whether an approval, user-input request or
// elicitation offered to the thread's subscribers is pending.
func (h *Hub) pendingLocked(threadID string) bool {
	for _, r := range h.waiting {
		if r.ThreadID == threadID {
			return true
		}
	}
	return false
}

type member struct {
	id ConnID
	attached
}

// The rule for spawned children (sub-agents), stated here once: a child's
// notifications reach the subscribers of the child and of each of its
// ancestors (turns.Event.Ancestors), each subscriber once, so that a
// client watching a thread sees the work it delegated; a child's server
// requests go to the subscribers of the child, or, when it has none, to
// those of its nearest ancestor that has any (the request still names the
// child's thread). Events read back from the log (another daemon's) carry
// no ancestors and reach the thread's own subscribers.

// audience returns the attached subscribers of a thread and its
// ancestors, each once.
func (h *Hub) audience(threadID string, ancestors []string) []member {
	if len(ancestors) == 0 {
		return h.subscribed(threadID)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []member
	seen := map[ConnID]bool{}
	for _, th := range append([]string{threadID}, ancestors...) {
		for _, c := range h.threads[th] {
			if a, ok := h.subs[c]; ok && !seen[c] {
				seen[c] = true
				out = append(out, member{c, a})
			}
		}
	}
	return out
}

// requestThread is the thread whose subscribers a request of threadID is
// offered to: its own, or its nearest ancestor's that has subscribers.
func (h *Hub) requestThread(threadID string, ancestors []string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.threads[threadID]) > 0 {
		return threadID
	}
	for _, a := range ancestors {
		if len(h.threads[a]) > 0 {
			return a
		}
	}
	return threadID
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
// params, for subscribers that map them onto another wire (MCP's
// codex/event), and the frame, encoded once and shared by every
// subscriber, with its sequence number appended once for those who ask
// (SeqFrame). One read back from the log has the frame only.
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
	Seq int64
	// Owned is set on a broadcast about one thread (BroadcastThread), whose
	// originator Owner is (nil when it has none): a transport keeps it from
	// clients that may not see the thread.
	Owned bool
	Owner *string
	// Broadcast is set on a notification sent to every subscriber
	// (Broadcast, BroadcastThread): a transport may hold it briefly to
	// write it together with others.
	Broadcast bool
	// Distant is set on a broadcast about a thread the subscriber does not
	// hear (it has not subscribed to it): a transport may hold it longer
	// than other broadcasts, the longer the larger its Audience, the
	// number of subscribers the broadcast went to.
	Distant bool
	// Audience is the number of subscribers a broadcast, or a thread's
	// notification, went to: a transport may hold a notification of a
	// thread many follow briefly, to write it with the connection's next.
	Audience int
	frame    []byte

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

// Broadcast implements turns.Sink: every attached subscriber but the
// recorders gets the notification.
func (h *Hub) Broadcast(method string, params any) {
	n, err := h.NewNotification(method, params)
	if err != nil {
		h.log.Error("encode notification", "method", method, "err", err)
		return
	}
	h.broadcast(n)
}

// BroadcastThread implements turns.Sink: a broadcast about one
// thread, marked with the thread's originator (Notification.Owner).
func (h *Hub) BroadcastThread(threadID string, owner *string, method string, params any) {
	n, err := h.NewNotification(method, params)
	if err != nil {
		h.log.Error("encode notification", "method", method, "err", err)
		return
	}
	n.Owned, n.Owner = true, owner
	h.broadcastAbout(n, threadID)
	// The event consumers hear of an archiving from the thread's log.
	switch method {
	case api.MethodThreadArchived:
		h.publish(threadID, MethodThreadArchived, params)
	case api.MethodThreadUnarchived:
		h.publish(threadID, MethodThreadUnarchived, params)
	}
}

func (h *Hub) broadcast(n *Notification) { h.broadcastAbout(n, "") }

// broadcastAbout sends n to every subscriber but the recorders. When n is
// about a thread (threadID not ""), the subscribers that do not hear that
// thread get a copy marked Distant, sharing n's frame.
func (h *Hub) broadcastAbout(n *Notification, threadID string) {
	n.Broadcast = true
	type recipient struct {
		sub     Subscriber
		distant bool
	}
	h.mu.Lock()
	set := h.hearers[n.Method]
	if set == nil {
		set = make(map[ConnID]Subscriber, len(h.subs))
		for id, a := range h.subs {
			if a.opts.hears(n.Method) {
				set[id] = a.sub
			}
		}
		h.hearers[n.Method] = set
	}
	to := make([]recipient, 0, len(set))
	distant := 0
	// The thread's own subscribers (a sorted list, usually of one or two)
	// rather than each recipient's joined set: with 400 connections, a
	// lookup in 400 maps per broadcast was 5 % of the daemon's CPU
	// (BenchmarkCrowdTurns/threads=400).
	near := h.threads[threadID]
	for id, sub := range set {
		_, hears := slices.BinarySearch(near, id)
		far := threadID != "" && !hears
		if far {
			distant++
		}
		to = append(to, recipient{sub, far})
	}
	h.mu.Unlock()
	n.Audience = len(to)
	var far *Notification
	if distant > 0 {
		far = &Notification{Method: n.Method, Params: n.Params, EmittedAtMs: n.EmittedAtMs,
			Owned: n.Owned, Owner: n.Owner, Broadcast: true, Distant: true, Audience: n.Audience, frame: n.frame}
	}
	for _, r := range to {
		if r.distant {
			r.sub.Notify(far)
		} else {
			r.sub.Notify(n)
		}
	}
}

// Send implements turns.Sink.
func (h *Hub) Send(to ConnID, method string, params any) {
	n, err := h.NewNotification(method, params)
	if err != nil {
		h.log.Error("encode notification", "method", method, "err", err)
		return
	}
	if a, ok := h.lookup(to); ok {
		a.sub.Notify(n)
	}
}

// Publish implements turns.Sink: the notification is encoded once, and,
// for a durable thread, numbered and recorded by the journal whether or
// not anybody here hears it (clients of other daemons and later clients
// read it from the log); then it goes to the thread's audience.
func (h *Hub) Publish(ev turns.Event) {
	n, err := h.NewNotification(ev.Method, ev.Params)
	if err != nil {
		h.log.Error("encode notification", "method", ev.Method, "err", err)
		return
	}
	n.ThreadID = ev.ThreadID
	if ev.Ephemeral {
		h.deliverEvent(ev, n)
		return
	}
	h.cfg.Journal.Record(n, func() { h.deliverEvent(ev, n) })
}

// PublishWith implements turns.Sink: each notification is encoded once;
// a durable thread's are numbered by the journal, and their log entries
// go to write, which stores them with the caller's batch. Once write has
// succeeded they go out in order, as Publish sends them, before(i) called
// just before evs[i]; when it fails none does. A notification that cannot
// be encoded is logged and left out (its hook still runs).
func (h *Hub) PublishWith(evs []turns.Event, write func([]*store.Event) error, before func(i int)) error {
	ns := make([]*Notification, len(evs))
	keep := make([]*Notification, 0, len(evs))
	for i, ev := range evs {
		n, err := h.NewNotification(ev.Method, ev.Params)
		if err != nil {
			h.log.Error("encode notification", "method", ev.Method, "err", err)
			continue
		}
		n.ThreadID = ev.ThreadID
		ns[i] = n
		keep = append(keep, n)
	}
	deliver := func() {
		for i, ev := range evs {
			if before != nil {
				before(i)
			}
			if ns[i] != nil {
				h.deliverEvent(ev, ns[i])
			}
		}
	}
	if len(evs) == 0 || evs[0].Ephemeral {
		if err := write(nil); err != nil {
			return err
		}
		deliver()
		return nil
	}
	return h.cfg.Journal.RecordWith(keep, write, deliver)
}

// deliverEvent gives a thread's notification n (ev, encoded) to the
// thread's audience and, for a durable thread, to the all-threads
// consumers.
func (h *Hub) deliverEvent(ev turns.Event, n *Notification) {
	to := h.audience(ev.ThreadID, ev.Ancestors)
	n.Audience = len(to)
	for _, m := range to {
		m.sub.Notify(n)
	}
	if !ev.Ephemeral {
		h.notifyEveryone(n)
	}
}

// Deliver gives a thread's notification that another daemon ran (read
// from the event log) to the thread's subscribers here. The caller
// delivers each thread's notifications in sequence order, once.
func (h *Hub) Deliver(n *Notification) {
	if h.cfg.Remote != nil && h.remoteEvent(n) {
		h.notifyEveryone(n) // the event consumers get the entry as logged
		return
	}
	to := h.subscribed(n.ThreadID)
	n.Audience = len(to)
	for _, m := range to {
		m.sub.Notify(n)
	}
	h.notifyEveryone(n)
}

// notifyEveryone gives a logged notification to the all-threads consumers.
func (h *Hub) notifyEveryone(n *Notification) {
	h.mu.Lock()
	if len(h.everyone) == 0 {
		h.mu.Unlock()
		return
	}
	to := make([]Subscriber, 0, len(h.everyone))
	for _, s := range h.everyone {
		to = append(to, s)
	}
	h.mu.Unlock()
	for _, s := range to {
		s.Notify(n)
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
