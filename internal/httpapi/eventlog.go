package httpapi

import (
	"context"
	"encoding/json"
	"slices"
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

// callState is what a log knows about a dynamic tool call it showed.
type callState uint8

const (
	callPending callState = iota + 1
	callSettled
)

// eventLog records the notifications of one thread for HTTP clients. It is
// a hub subscriber (a recorder) that follows the thread under its own
// connection id: it gets the turn and item notifications, and the hub
// gives it the thread's server requests. Events get growing positions (see posShift), all above
// floor-1; the last EventBuffer of them (at most EventBufferBytes) stay in
// a ring.
//
// Lock order: logs.mu before eventLog.mu.
type eventLog struct {
	logs   *logs
	thread string
	conn   turns.ConnID
	floor  int64         // one more than the position before this log's first event
	ready  chan struct{} // closed once the log follows its thread

	mu      sync.Mutex
	ring    []event // circular, len = capacity
	head    int     // index of the oldest event
	n       int     // events held
	bytes   int     // data bytes held
	next    int64   // one more than the position of the last event
	evicted int64   // the position of the last event evicted, floor-1 if none
	wake    chan struct{}
	// ended is closed (and replaced) when a turn/completed is recorded:
	// a request waiting for a turn's end then asks the thread table
	// whether it was that turn's.
	ended     chan struct{}
	uses      int // requests using the log: streams, waits, turn starts
	lastUsed  time.Time
	detached  bool
	calls     map[string]callState
	callOrder []string
	// requests are the approvals and user-input requests shown and not
	// settled, by requestId; settled remembers the last settled ids (to
	// answer a late answer 409 rather than 404), oldest first.
	requests map[string]*hub.Request
	settled  []string
}

const (
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
		ended:    make(chan struct{}),
		lastUsed: ls.a.now(),
		calls:    map[string]callState{},
		requests: map[string]*hub.Request{},
	}
}

// Notify implements hub.Subscriber: the frame is recorded as the event's
// data.
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
	if n.Method == "turn/completed" {
		close(l.ended)
		l.ended = make(chan struct{})
	}
}

// turnEnded returns a channel closed when the log next records a
// turn/completed.
func (l *eventLog) turnEnded() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ended
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

// busyLocked reports whether the log must stay subscribed for what it
// holds itself: a request uses it or a tool call it showed is pending.
// Whether its thread runs a turn is the thread table's to say
// (logs.idle).
func (l *eventLog) busyLocked() bool {
	if l.uses > 0 {
		return true
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
	ls.makeRoom()
	ls.mu.Lock()
	defer ls.mu.Unlock()
	l.thread = thread
	close(l.ready)
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
	if ls.lookup(thread) == nil {
		ls.makeRoom()
	}
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
		return l, nil
	}
	l := newEventLog(ls, thread, ls.floorLocked(thread))
	l.uses = 1
	ls.m[thread] = l
	ls.mu.Unlock()

	// One call: the hub subscribes the log to the thread and offers it
	// the thread's pending requests.
	l.conn = ls.a.cfg.Hub.Follow(thread, l, hub.AttachOptions{Recorder: true})
	close(l.ready)
	return l, nil
}

// makeRoom detaches idle logs, least recently used first, while the table
// is full. Busy logs are never detached, so the bound is soft.
func (ls *logs) makeRoom() {
	ls.mu.Lock()
	full := len(ls.m) >= ls.a.cfg.MaxThreadLogs
	ls.mu.Unlock()
	if !full {
		return
	}
	idle := ls.idle(func(*eventLog) bool { return true })
	sort.Slice(idle, func(i, j int) bool { return idle[i].lastUsed.Before(idle[j].lastUsed) })
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for _, l := range idle {
		if len(ls.m) < ls.a.cfg.MaxThreadLogs {
			break
		}
		ls.detachIfIdleLocked(l)
	}
}

// detachIdle detaches every log that has been idle for IdleDetach, so its
// thread can unload; a later request subscribes a new log.
func (ls *logs) detachIdle() {
	now := ls.a.now()
	idle := ls.idle(func(l *eventLog) bool { return now.Sub(l.lastUsed) >= ls.a.cfg.IdleDetach })
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for _, l := range idle {
		ls.detachIfIdleLocked(l)
	}
}

// idle returns the logs that are not busy, whose thread runs no turn here,
// and that pass keep (called with the log's lock held). The thread table is
// asked without the logs' locks held.
func (ls *logs) idle(keep func(*eventLog) bool) []*eventLog {
	ls.mu.Lock()
	var out []*eventLog
	for _, l := range ls.m {
		l.mu.Lock()
		if !l.busyLocked() && keep(l) {
			out = append(out, l)
		}
		l.mu.Unlock()
	}
	ls.mu.Unlock()
	return slices.DeleteFunc(out, func(l *eventLog) bool { return ls.a.threads.Running(l.thread) })
}

// detachIfIdleLocked detaches a log found idle unless it was used or
// replaced since; ls.mu must be held.
func (ls *logs) detachIfIdleLocked(l *eventLog) {
	l.mu.Lock()
	busy := l.busyLocked()
	l.mu.Unlock()
	if ls.m[l.thread] == l && !busy {
		ls.detachLocked(l)
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

// forget detaches the log of a thread that no longer exists, if it has one.
func (ls *logs) forget(thread string) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if l := ls.m[thread]; l != nil {
		ls.detachLocked(l)
	}
}

// lookup returns the thread's log if it has one (without taking a use).
func (ls *logs) lookup(thread string) *eventLog {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.m[thread]
}
