package httpapi

import (
	"context"
	"encoding/json"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/hub"
	"github.com/appserver/appserver/internal/turns"
)

// Event positions. A thread notification numbered by the hub's journal
// (its durable event log) sits at position seq<<posShift, so a stream's
// Last-Event-ID names the same event on every daemon and after restarts;
// what only this log shows (dynamic tool calls, approval requests with
// their requestId, un-numbered notifications) takes the next position
// after the last one, between two numbered events.
const posShift = 16

// event is one recorded notification.
type event struct {
	seq    int64 // its position
	method string
	data   []byte // {"method","params","emittedAtMs"}, shared with websockets
}

// turnState is what a log knows about a turn of its thread: whether it is
// still running, how it ended and the token usage of its model responses.
// A turn the log saw from turn/started to turn/completed is recorded whole
// (its completed items, its end), so waiting requests are answered without
// reading the store back.
type turnState struct {
	id       string
	done     chan struct{} // closed when the turn completed
	status   api.TurnStatus
	usage    api.TokenUsageBreakdown
	hasUsage bool

	started bool              // turn/started was seen: items is the whole turn
	items   []json.RawMessage // completed items, as announced
	ended   *api.Turn         // the turn of turn/completed
}

// keptItemTurns is how many ended turns keep their items in the log;
// older ones are read from the store.
const keptItemTurns = 4

// callState is what a log knows about a dynamic tool call it showed.
type callState uint8

const (
	callPending callState = iota + 1
	callSettled
)

// eventLog records the notifications of one thread for HTTP clients. It is
// a hub subscriber (a recorder) subscribed to the thread under its own
// connection id, so turns.Manager treats it like any subscriber: it gets
// the turn and item notifications, and the hub gives it the thread's
// server requests. Events get growing positions (see posShift), all above
// floor-1; the last EventBuffer of them (at most EventBufferBytes) stay in
// a ring.
//
// Lock order: logs.mu before eventLog.mu.
type eventLog struct {
	logs   *logs
	thread string
	conn   turns.ConnID
	floor  int64         // one more than the position before this log's first event
	ready  chan struct{} // closed once the sink is subscribed (or failed)
	err    error         // why subscribing failed; written before ready closes

	mu        sync.Mutex
	ring      []event // circular, len = capacity
	head      int     // index of the oldest event
	n         int     // events held
	bytes     int     // data bytes held
	next      int64   // one more than the position of the last event
	evicted   int64   // the position of the last event evicted, floor-1 if none
	wake      chan struct{}
	uses      int // requests using the log: streams, waits, turn starts
	lastUsed  time.Time
	detached  bool
	turns     map[string]*turnState
	finished  []string // finished turn ids, oldest first
	calls     map[string]callState
	callOrder []string
	// requests are the approvals and user-input requests shown and not
	// settled, by requestId; settled remembers the last settled ids (to
	// answer a late answer 409 rather than 404), oldest first.
	requests map[string]*hub.Request
	settled  []string
}

const (
	// maxFinishedTurns is how many ended turns a log remembers (for their
	// usage and for waits that come late).
	maxFinishedTurns = 64
	// maxCalls is how many tool calls a log remembers (to tell an answer
	// to a settled call, 409, from an unknown one, 404).
	maxCalls = 256
	// readBatch bounds the events a stream copies under the lock at once.
	readBatch = 256
)

func newEventLog(ls *logs, thread string, floor int64) *eventLog {
	return &eventLog{
		logs:     ls,
		thread:   thread,
		floor:    floor,
		ready:    make(chan struct{}),
		ring:     make([]event, ls.a.cfg.EventBuffer),
		next:     floor,
		evicted:  floor - 1,
		wake:     make(chan struct{}),
		lastUsed: ls.a.now(),
		turns:    map[string]*turnState{},
		calls:    map[string]callState{},
		requests: map[string]*hub.Request{},
	}
}

// Notify implements hub.Subscriber: the frame is recorded as the event's
// data, and the typed params keep the log's account of the turns.
func (l *eventLog) Notify(n *hub.Notification) {
	data := n.Frame()
	l.mu.Lock()
	defer l.mu.Unlock()
	if n.Seq > 0 {
		pos := n.Seq << posShift
		if pos < l.next {
			// Delivered already (the log's own daemon and the event log's
			// catch-up can both bring it): once is enough.
			return
		}
		l.next = pos
	}
	l.appendLocked(n.Method, data)
	switch p := n.Params.(type) {
	case api.TurnStartedNotification:
		if p.Turn.ID == "" {
			return
		}
		st := l.turnLocked(p.Turn.ID)
		if st.status == api.TurnInProgress && len(st.items) == 0 {
			st.started = true
		}
	case api.TurnCompletedNotification:
		if p.Turn.ID == "" {
			return
		}
		st := l.turnLocked(p.Turn.ID)
		turn := p.Turn
		st.ended = &turn
		l.finishLocked(st, p.Turn.Status)
	case api.ItemCompletedNotification:
		// Items completing after the turn (an exec session's) count too,
		// as they do in the store.
		if st := l.turns[p.TurnID]; st != nil && st.started {
			if item, err := json.Marshal(p.Item); err == nil {
				st.items = append(st.items, item)
			}
		}
	case api.ThreadTokenUsageUpdatedNotification:
		// Only running turns count: resume replays the last usage.
		if st := l.turns[p.TurnID]; st != nil && st.status == api.TurnInProgress {
			addUsage(&st.usage, p.TokenUsage.Last)
			st.hasUsage = true
		}
	}
}

func addUsage(to *api.TokenUsageBreakdown, u api.TokenUsageBreakdown) {
	to.TotalTokens += u.TotalTokens
	to.InputTokens += u.InputTokens
	to.CachedInputTokens += u.CachedInputTokens
	to.CacheWriteInputTokens += u.CacheWriteInputTokens
	to.OutputTokens += u.OutputTokens
	to.ReasoningOutputTokens += u.ReasoningOutputTokens
}

// Request implements hub.Subscriber. A dynamic tool call becomes an event
// its HTTP clients answer with POST .../tool-calls/{callId}; an approval
// or user-input request an event with a top-level requestId, answered with
// POST .../approvals/{requestId}.
func (l *eventLog) Request(r *hub.Request, id int64) bool {
	method, key := r.Method, strconv.FormatInt(id, 10)
	p, err := json.Marshal(r.Params)
	if err != nil {
		return false
	}
	ev := api.HTTPEvent{Method: method, Params: p, EmittedAtMs: l.logs.a.now().UnixMilli(), RequestID: &key}
	if r.Kind == hub.KindToolCall {
		method = api.HTTPToolCallEventMethod
		ev.Method, ev.RequestID = method, nil
	}
	data, err := json.Marshal(ev)
	if err != nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.detached {
		return false
	}
	l.appendLocked(method, data)
	if r.Kind == hub.KindToolCall {
		l.rememberCallLocked(r.Call.CallID(), callPending)
	} else {
		l.requests[key] = r
	}
	return true
}

// Settled implements hub.Subscriber.
func (l *eventLog) Settled(r *hub.Request) {
	if r.Kind != hub.KindToolCall {
		l.mu.Lock()
		defer l.mu.Unlock()
		for key, x := range l.requests {
			if x == r {
				delete(l.requests, key)
				l.rememberSettledLocked(key)
			}
		}
		return
	}
	p := r.Call
	data, err := encodeEvent(l.logs.a.now(), api.HTTPToolCallResolvedMethod, api.HTTPToolCallResolved{
		ThreadID: p.ThreadID(), TurnID: p.Request().TurnID, CallID: p.CallID(), Outcome: string(r.Outcome()),
	})
	if err != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.appendLocked(api.HTTPToolCallResolvedMethod, data)
	l.rememberCallLocked(p.CallID(), callSettled)
}

func encodeEvent(now time.Time, method string, params any) ([]byte, error) {
	p, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	return json.Marshal(api.HTTPEvent{Method: method, Params: p, EmittedAtMs: now.UnixMilli()})
}

func (l *eventLog) rememberCallLocked(id string, s callState) {
	if _, ok := l.calls[id]; !ok {
		l.callOrder = append(l.callOrder, id)
		if len(l.callOrder) > maxCalls {
			old := l.callOrder[0]
			l.callOrder = l.callOrder[1:]
			if l.calls[old] == callSettled {
				delete(l.calls, old)
			}
		}
	}
	l.calls[id] = s
}

// showedCall reports whether the log showed the call. When the broker no
// longer has such a call, it was settled (its settlement may not have
// reached the log yet).
func (l *eventLog) showedCall(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.calls[id]
	return ok
}

// appendLocked adds an event, evicting the oldest ones beyond the bounds,
// and wakes the streams.
func (l *eventLog) appendLocked(method string, data []byte) {
	capacity := len(l.ring)
	maxBytes := l.logs.a.cfg.EventBufferBytes
	for l.n > 0 && (l.n == capacity || l.bytes+len(data) > maxBytes) {
		old := &l.ring[l.head]
		l.bytes -= len(old.data)
		l.evicted = old.seq
		*old = event{}
		l.head = (l.head + 1) % capacity
		l.n--
	}
	l.ring[(l.head+l.n)%capacity] = event{seq: l.next, method: method, data: data}
	l.n++
	l.bytes += len(data)
	l.next++
	close(l.wake)
	l.wake = make(chan struct{})
}

// lastSeq is the sequence number of the last event recorded, floor-1 if
// none: every later event has a greater one.
func (l *eventLog) lastSeq() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.next - 1
}

// resumable reports whether every event after `after` is still held, so a
// stream can resume after it without a gap.
func (l *eventLog) resumable(after int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.resumableLocked(after)
}

func (l *eventLog) resumableLocked(after int64) bool {
	return after >= l.evicted && after < l.next
}

// start is the sequence number just before the oldest event held: a
// stream that asks for no particular position starts there.
func (l *eventLog) start() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.evicted
}

// read returns up to readBatch events after `after`, a channel closed when
// more arrive, and gone when events after `after` were already evicted.
func (l *eventLog) read(after int64) (evs []event, wake <-chan struct{}, gone bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.resumableLocked(after) {
		return nil, nil, true
	}
	at := func(i int) *event { return &l.ring[(l.head+i)%len(l.ring)] }
	i := sort.Search(l.n, func(i int) bool { return at(i).seq > after })
	for ; i < l.n && len(evs) < readBatch; i++ {
		evs = append(evs, *at(i))
	}
	return evs, l.wake, false
}

// turnLocked returns the state of a turn, creating it as running.
func (l *eventLog) turnLocked(id string) *turnState {
	st := l.turns[id]
	if st == nil {
		st = &turnState{id: id, done: make(chan struct{}), status: api.TurnInProgress}
		l.turns[id] = st
	}
	return st
}

func (l *eventLog) finishLocked(st *turnState, status api.TurnStatus) {
	if st.status != api.TurnInProgress {
		return
	}
	if status == "" || status == api.TurnInProgress {
		status = api.TurnCompleted
	}
	st.status = status
	close(st.done)
	l.finished = append(l.finished, st.id)
	if n := len(l.finished); n > keptItemTurns {
		if old := l.turns[l.finished[n-1-keptItemTurns]]; old != nil {
			old.started, old.items = false, nil
		}
	}
	if len(l.finished) > maxFinishedTurns {
		delete(l.turns, l.finished[0])
		l.finished = l.finished[1:]
	}
}

// track returns the state of a turn, creating it as running if the log has
// not seen it end: the caller knows the turn exists and is waiting for it.
func (l *eventLog) track(turnID string) *turnState {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.turnLocked(turnID)
}

// finishFromStore settles a tracked turn that the store says has ended
// (its turn/completed went out before this log subscribed).
func (l *eventLog) finishFromStore(turnID string, status api.TurnStatus) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if st := l.turns[turnID]; st != nil {
		l.finishLocked(st, status)
	}
}

// busyLocked reports whether the log must stay subscribed: a request uses
// it, a turn is running or a tool call it showed is pending.
func (l *eventLog) busyLocked() bool {
	if l.uses > 0 {
		return true
	}
	for _, st := range l.turns {
		if st.status == api.TurnInProgress {
			return true
		}
	}
	for _, c := range l.calls {
		if c == callPending {
			return true
		}
	}
	return false
}

// release ends one use of the log.
func (l *eventLog) release() {
	l.mu.Lock()
	l.uses--
	l.lastUsed = l.logs.a.now()
	l.mu.Unlock()
}

// logs is the table of event logs, one per thread the HTTP API touched.
type logs struct {
	a *API

	mu   sync.Mutex
	m    map[string]*eventLog
	last map[string]int64 // last sequence number of detached logs
	gone []string         // keys of last, oldest first
}

// maxTombstones bounds how many detached logs' last sequence numbers are
// remembered.
const maxTombstones = 4096

func newLogs(a *API) *logs {
	return &logs{a: a, m: map[string]*eventLog{}, last: map[string]int64{}}
}

// floorLocked picks the floor of a new log for a thread: just after the
// position of the thread's last numbered notification, and above any
// position this process already used for the thread.
func (ls *logs) floorLocked(thread string) int64 {
	f := ls.a.cfg.Hub.LastSeq(thread)<<posShift + 1
	if last, ok := ls.last[thread]; ok && f <= last {
		f = last + 1
	}
	return f
}

// create starts a log for a thread about to be created: it is registered as
// a sink (so its connection id can subscribe) but not yet in the table;
// bind adds it once the thread id is known.
func (ls *logs) create() *eventLog {
	ls.mu.Lock()
	l := newEventLog(ls, "", ls.floorLocked(""))
	l.uses = 1
	ls.mu.Unlock()
	ls.attachLog(l)
	return l
}

// bind enters a log made by create under its new thread's id.
func (ls *logs) bind(l *eventLog, thread string) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	l.thread = thread
	close(l.ready)
	ls.makeRoomLocked()
	ls.m[thread] = l
}

// abandon drops a log made by create whose thread was not created.
func (ls *logs) abandon(l *eventLog) { ls.a.cfg.Hub.Detach(l.conn) }

// attachLog makes the log a hub subscriber under a fresh connection id.
func (ls *logs) attachLog(l *eventLog) {
	l.conn = ls.a.cfg.Hub.NewConnID()
	ls.a.cfg.Hub.Attach(l.conn, l, hub.AttachOptions{Recorder: true})
}

// attach returns the thread's log, subscribing a new one if needed, with
// one use taken; the caller must release it.
func (ls *logs) attach(ctx context.Context, thread string) (*eventLog, error) {
	ls.mu.Lock()
	if l := ls.m[thread]; l != nil {
		l.mu.Lock()
		l.uses++
		l.lastUsed = ls.a.now()
		l.mu.Unlock()
		ls.mu.Unlock()
		select {
		case <-l.ready:
		case <-ctx.Done():
			l.release()
			return nil, ctx.Err()
		}
		if l.err != nil {
			l.release()
			return nil, l.err
		}
		return l, nil
	}
	ls.makeRoomLocked()
	l := newEventLog(ls, thread, ls.floorLocked(thread))
	l.uses = 1
	ls.m[thread] = l
	ls.mu.Unlock()

	ls.attachLog(l)
	excl := true
	_, after, err := ls.a.cfg.Manager.ResumeThread(ctx, turns.Caller{Conn: l.conn, ClientName: Originator},
		api.ThreadResumeParams{ThreadID: thread, ExcludeTurns: &excl})
	if err != nil {
		l.err = err
		close(l.ready)
		ls.mu.Lock()
		if ls.m[thread] == l {
			delete(ls.m, thread)
		}
		ls.mu.Unlock()
		ls.a.cfg.Hub.Detach(l.conn)
		return nil, err
	}
	close(l.ready)
	if after != nil {
		// Replays the last usage and re-offers pending tool calls,
		// which now include this log.
		after()
	}
	return l, nil
}

// makeRoomLocked detaches idle logs, least recently used first, while the
// table is full. Busy logs are never detached, so the bound is soft.
func (ls *logs) makeRoomLocked() {
	if len(ls.m) < ls.a.cfg.MaxThreadLogs {
		return
	}
	var idle []*eventLog
	for _, l := range ls.m {
		l.mu.Lock()
		if !l.busyLocked() {
			idle = append(idle, l)
		}
		l.mu.Unlock()
	}
	sort.Slice(idle, func(i, j int) bool { return idle[i].lastUsed.Before(idle[j].lastUsed) })
	for _, l := range idle {
		if len(ls.m) < ls.a.cfg.MaxThreadLogs {
			break
		}
		ls.detachLocked(l)
	}
}

// detachIdle detaches every log that has been idle for IdleDetach, so its
// thread can unload; a later request subscribes a new log.
func (ls *logs) detachIdle() {
	now := ls.a.now()
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for _, l := range ls.m {
		l.mu.Lock()
		idle := !l.busyLocked() && now.Sub(l.lastUsed) >= ls.a.cfg.IdleDetach
		l.mu.Unlock()
		if idle {
			ls.detachLocked(l)
		}
	}
}

// detachLocked removes a log from the table and unsubscribes it. The
// unsubscribe runs on its own goroutine because it calls back into the
// broker and must not run under ls.mu.
func (ls *logs) detachLocked(l *eventLog) {
	l.mu.Lock()
	l.detached = true
	last := l.next - 1
	l.mu.Unlock()
	delete(ls.m, l.thread)
	if _, ok := ls.last[l.thread]; !ok {
		ls.gone = append(ls.gone, l.thread)
		if len(ls.gone) > maxTombstones {
			delete(ls.last, ls.gone[0])
			ls.gone = ls.gone[1:]
		}
	}
	ls.last[l.thread] = last
	ls.a.unsubscribe(l)
}

// lookup returns the thread's log if it has one (without taking a use).
func (ls *logs) lookup(thread string) *eventLog {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.m[thread]
}
