package turns

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/turns/transcript"
)

// ConnID identifies a client of the Sink: a websocket session, an HTTP
// event log, an MCP session.
type ConnID uint64

// Sink is the one place the thread table speaks to: every notification and
// server request of its threads goes there, typed, and the sink owns who
// hears which thread (the hub, in the daemon). The thread table keeps no
// copy of any subscriber set; it asks the sink (Watched). Its methods must
// not block on a slow client.
type Sink interface {
	// Publish sends a notification of a thread to whoever hears the
	// thread. Who that is, for a spawned child (Event.Ancestors), is the
	// sink's rule. A durable thread's notifications are numbered in its
	// event log, even with nobody listening here: clients of other daemons
	// and clients that come back later read them from the log.
	Publish(ev Event)
	// PublishWith publishes evs, all of one thread, together with a write
	// of the caller's: a durable thread's notifications are numbered and
	// their log entries handed to write, which stores them in the same
	// transaction as the caller's batch (an ephemeral thread's write gets
	// none). Only once write has succeeded do they go out, in order, as
	// Publish sends them, with before(i) (when not nil) called just
	// before evs[i]; when write fails none goes out, no hook runs, and its
	// error is returned.
	PublishWith(evs []Event, write func([]*store.Event) error, before func(i int)) error
	// Broadcast sends a notification that concerns no thread to every
	// client.
	Broadcast(method string, params any)
	// BroadcastThread sends a notification about a thread that is not part
	// of its run (thread/started, thread/status/changed, thread/closed,
	// ...) to every client that may see the thread: the thread's
	// originator is owner (nil when it has none).
	BroadcastThread(threadID string, owner *string, method string, params any)
	// Send sends a notification to one client (the token usage replayed
	// after thread/resume).
	Send(to ConnID, method string, params any)
	// Subscribe makes conn hear the thread's notifications from now on; it
	// reports whether conn did not already. The thread's pending server
	// requests reach conn once Welcome is called: a method that subscribes
	// its caller calls it after its response.
	Subscribe(threadID string, conn ConnID) bool
	// Welcome offers the thread's pending server requests to its
	// subscribers that do not hold them yet.
	Welcome(threadID string)
	// Unsubscribe ends conn's subscription; it reports whether conn was
	// subscribed.
	Unsubscribe(threadID string, conn ConnID) bool
	// Watched reports whether anybody hears the thread: a thread nobody
	// hears may leave memory.
	Watched(threadID string) bool
	// Forget ends every subscription to a thread that was archived or
	// deleted.
	Forget(threadID string)
	// Request sends a server request of a thread (an approval, a user
	// input request, an MCP elicitation) to the clients the sink's rule
	// picks and waits for the first answer, or ctx. sent reports whether
	// the request went out, and id is then its JSON-RPC id (for
	// serverRequest/resolved). A client's JSON-RPC error reply is returned
	// as an error; ErrNoClient means no client could take it within the
	// sink's bounded wait.
	Request(ctx context.Context, req ServerRequest) (result json.RawMessage, id api.RequestID, sent bool, err error)
}

// Event is one notification of a thread, as the thread table publishes it:
// typed params, encoded once by the sink for every client and the log.
type Event struct {
	// ThreadID is the thread the notification belongs to.
	ThreadID string
	// Ancestors are the thread's spawn chain, nearest first: the thread
	// whose turn spawned it, that thread's parent, and so on; empty for a
	// thread a client started.
	Ancestors []string
	// Method and Params are the notification: Params is an api
	// notification struct, not to be modified.
	Method string
	Params any
	// Ephemeral marks a thread that lives in memory only: its
	// notifications never reach the durable log.
	Ephemeral bool
}

// ServerRequest is a server→client request of a thread.
type ServerRequest struct {
	// ThreadID is the thread whose turn asks.
	ThreadID string
	// Ancestors are the thread's spawn chain, as in Event.
	Ancestors []string
	// Method and Params are the request as sent.
	Method string
	Params any
	// Ephemeral marks a thread that lives in memory only, as in Event:
	// its requests never reach the durable log.
	Ephemeral bool
}

// ErrNoClient is returned by a Sink when no client could be reached to
// answer a request.
var ErrNoClient = errors.New("no client is connected to answer the request")

// maxLineage bounds the spawn chain read for a thread; spawn depth is
// limited far below it.
const maxLineage = 64

// lineage returns the spawn chain of a thread whose meta is meta, nearest
// first, reading from memory the loaded ancestors and from the store the
// others; a link that cannot be read ends the chain there.
func (m *Manager) lineage(ctx context.Context, meta transcript.ThreadMeta) []string {
	var out []string
	pid := meta.Parent()
	for pid != "" && len(out) < maxLineage {
		out = append(out, pid)
		if p := m.loaded(pid); p != nil {
			return append(out, p.ancestors...)
		}
		rec, err := m.cfg.Store.GetThread(ctx, pid)
		if err != nil {
			break
		}
		var pm transcript.ThreadMeta
		if json.Unmarshal(rec.Meta, &pm) != nil {
			break
		}
		pid = pm.Parent()
	}
	return out
}

// emit publishes a notification of the thread.
func (t *thread) emit(method string, params any) { t.m.cfg.Sink.Publish(t.event(method, params)) }

// event is a notification of the thread, as the sink takes it.
func (t *thread) event(method string, params any) Event {
	return Event{ThreadID: t.id, Ancestors: t.ancestors, Method: method, Params: params, Ephemeral: t.ephemeral()}
}

// broadcastStatus tells every connection that may see the thread its
// status.
func (t *thread) broadcastStatus() {
	t.mu.Lock()
	st, owner := t.statusLocked(), t.meta.Originator
	t.mu.Unlock()
	t.m.broadcastThread(t.id, owner, "thread/status/changed", api.ThreadStatusChangedNotification{ThreadID: t.id, Status: st})
}

// subscribe makes conn hear the thread (conn 0, the caller of a turn that
// another thread's tools started, hears nothing); it reports whether conn
// is a new subscriber.
func (t *thread) subscribe(conn ConnID) bool {
	if conn == 0 {
		return false
	}
	return t.m.cfg.Sink.Subscribe(t.id, conn)
}
