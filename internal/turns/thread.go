package turns

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/policy"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/turns/transcript"
)

// thread is one loaded thread. Its lock guards every field below it.
// While a turn runs, its notifications come from the turn goroutine, from
// the round commits and from tool goroutines; the loop's roundCommitter
// (internal/turns/loop) states how they are ordered.
type thread struct {
	m  *Manager
	id string
	// ancestors are the spawn chain of a spawned child, nearest first (nil
	// for other threads); its notifications and requests name them, and
	// the sink decides who hears them (Event.Ancestors).
	ancestors []string
	// store holds the thread's transcript: the Manager's durable store, or
	// its memory store for an ephemeral thread, which must never reach the
	// durable one. It never changes.
	store store.Store

	// metaMu is held from encoding the thread's meta to storing it
	// (update, a round's commit, finish), so that the store gets the
	// copies in the order they were made and never an older one last.
	// It comes before mu.
	metaMu sync.Mutex

	mu             sync.Mutex
	rec            store.Thread
	meta           transcript.ThreadMeta
	active         *activeTurn
	lastTurnFailed bool
	// history is the model history of finished turns, from the last
	// compaction on, when historyLoaded; else it is empty and read from
	// the store by the next turn (ensureHistory). historyGen grows with
	// every finished turn, so that a read racing a turn's end is retried.
	history       transcript.History
	historyLoaded bool
	historyGen    uint64
	// reqInput and reqWire are the request slices of the thread's last
	// turn, for its next one (loop.Run.UseRequestBuffers); dropped with
	// the history when it is trimmed.
	reqInput []model.InputItem
	reqWire  []json.RawMessage
	// historyUnsaved is set while the last turn's end (its history
	// included) has not reached the store; the history is then not
	// trimmed, since reading it back would miss that turn.
	historyUnsaved bool
	// itemIDs are the item ids taken since the history was last loaded;
	// older ones are looked up in the store (uniqueItemID), unless
	// allIDsInMemory: a thread started by this daemon, whose every item id
	// is in itemIDs until its history is first dropped or read again.
	itemIDs        map[string]struct{}
	allIDsInMemory bool
	// mcpUntold is set on a thread loaded from the store: its MCP
	// servers' start-up has not been told since, which its first
	// thread/resume does (tellMCPStartup).
	mcpUntold   bool
	unloadTimer *time.Timer
	// seenWatched is set when the unload timer last found the thread
	// heard by somebody (Sink.Watched): it then waits one more period
	// before unloading, so that a client that left without unsubscribing
	// has at least UnloadAfter to come back.
	seenWatched bool
	// trimTimer drops the history of a thread left idle (trim).
	trimTimer *time.Timer
	// pins counts callers using the thread between loading it and
	// subscribing (or giving up); a pinned thread is never unloaded.
	pins int
	// approvals are what the thread's approvals taught (acceptForSession,
	// amendments); memory only.
	approvals *policy.SessionApprovals
	// goalSince is when the goal clock started, zero while it is stopped
	// (startGoalClockLocked).
	goalSince time.Time
	// rateLimitsSent is the last account/rateLimits/updated the thread
	// sent (rateLimitsChanged), nil before the first.
	rateLimitsSent *api.RateLimitSnapshot
	// readFacts are the thread's read-state facts as its last end left
	// them, when readFactsKept (endReadState); readFactsGen grows each
	// time they are forgotten, so that facts read from the store
	// meanwhile are not kept.
	readFacts     readFacts
	readFactsKept bool
	readFactsGen  uint64
	// queueEmpty is set when the queue moving on by itself found it
	// empty, and cleared by every add (queueGen counts them, so that a
	// look that raced an add sets nothing): a thread alone on its store
	// then moves an empty queue on without reading it.
	queueEmpty bool
	queueGen   uint64
	// leaseToken is the token of the thread's lease when this daemon last
	// took it (Config.Ownership), 0 before.
	leaseToken int64
}

func newThread(m *Manager, rec store.Thread, meta transcript.ThreadMeta, st store.Store, ancestors []string) *thread {
	return &thread{
		m:         m,
		id:        rec.ID,
		ancestors: ancestors,
		store:     st,
		rec:       rec,
		meta:      meta,
		approvals: policy.NewSessionApprovals(),
	}
}

// statusLocked derives the protocol status; t.mu must be held.
func (t *thread) statusLocked() api.ThreadStatus {
	switch {
	case t.active != nil && !t.active.ending:
		return api.ThreadStatus{Type: api.ThreadActive, ActiveFlags: t.active.Flags()}
	case t.lastTurnFailed:
		return api.ThreadStatus{Type: api.ThreadSystemError}
	default:
		return api.ThreadStatus{Type: api.ThreadIdle}
	}
}

// apiThread renders the thread; t.mu must not be held.
func (t *thread) apiThread() api.Thread {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.apiThreadLocked()
}

// apiThreadLocked is apiThread with t.mu held.
func (t *thread) apiThreadLocked() api.Thread {
	th := transcript.ThreadToAPI(t.rec, t.meta, t.statusLocked(), t.ephemeral())
	// A loaded thread says whether a client may start its turns, as the
	// reference does.
	direct := !t.parentOwnedLocked()
	th.CanAcceptDirectInput = &direct
	return th
}

// parentOwnedLocked reports whether only the thread's parent drives it: a
// child spawned by the v2 collaboration tools (one with a task path).
// turn/start and turn/steer from a client are refused on it, as the
// reference refuses them. t.mu is held.
func (t *thread) parentOwnedLocked() bool {
	return t.meta.SubAgent != nil && t.meta.SubAgent.AgentPath != ""
}

// errParentOwned is the refusal of a client's input to a thread only its
// parent drives, in the reference's words.
func errParentOwned() error {
	return apperr.New(apperr.Invalid, "direct app-server input is not allowed for multi-agent v2 sub-agents")
}

// refuseParentOwned refuses a client's direct input (turn/start,
// turn/steer) to a thread only its parent drives; an unknown thread is
// left to the method's own error.
func (m *Manager) refuseParentOwned(ctx context.Context, threadID string) error {
	t, err := m.threadFor(ctx, threadID, "thread not found: %s")
	if err != nil {
		return nil
	}
	defer t.unpin()
	t.mu.Lock()
	owned := t.parentOwnedLocked()
	t.mu.Unlock()
	if owned {
		return errParentOwned()
	}
	return nil
}

// ephemeral reports whether the thread lives in memory only.
func (t *thread) ephemeral() bool { return t.m.mem != nil && t.store == store.Store(t.m.mem) }

// unsubscribed restarts the unload period of a thread a client left with
// thread/unsubscribe: it unloads UnloadAfter from now if nobody else
// hears it.
func (t *thread) unsubscribed() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.unloadTimer != nil {
		t.unloadTimer.Stop()
		t.unloadTimer = nil
	}
	t.seenWatched = false
	t.armUnloadLocked()
}

// pin keeps the thread loaded until unpin. Lock order: Manager.mu, then
// thread.mu (pin is called with Manager.mu held).
func (t *thread) pin() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pins++
	if t.unloadTimer != nil {
		t.unloadTimer.Stop()
		t.unloadTimer = nil
	}
}

// unpin releases a pin; a thread left unwatched and idle is then scheduled
// for unloading, so that reads, failed resumes and fork sources do not
// keep threads in memory forever.
func (t *thread) unpin() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pins--
	t.armUnloadLocked()
}

// armUnloadLocked schedules the unload check of an idle thread, and the
// trimming of its history.
func (t *thread) armUnloadLocked() {
	if t.active != nil || t.pins > 0 {
		return
	}
	if t.historyLoaded && t.trimTimer == nil {
		t.trimTimer = time.AfterFunc(t.m.cfg.TrimAfter, t.trim)
	}
	if t.unloadTimer != nil {
		return
	}
	t.unloadTimer = time.AfterFunc(t.m.cfg.UnloadAfter, t.unloadCheck)
}

// unloadCheck runs every UnloadAfter while the thread is idle: the sink
// owns who hears the thread, so the thread asks it. A thread nobody hears
// unloads once it was found unheard twice in a row (or once after
// thread/unsubscribe), so that a client that went away without
// unsubscribing has at least one period to come back.
func (t *thread) unloadCheck() {
	watched := t.m.cfg.Sink.Watched(t.id)
	t.mu.Lock()
	t.unloadTimer = nil
	wait := watched || t.seenWatched
	t.seenWatched = watched
	if wait {
		t.armUnloadLocked()
	}
	t.mu.Unlock()
	if !wait {
		t.m.unload(t)
	}
}

// stopUnloadTimer stops the unload and trim timers.
func (t *thread) stopUnloadTimer() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.unloadTimer != nil {
		t.unloadTimer.Stop()
		t.unloadTimer = nil
	}
	if t.trimTimer != nil {
		t.trimTimer.Stop()
		t.trimTimer = nil
	}
}

// trim drops the model history of an idle thread: a loaded thread that
// waits for its user costs its settings, not its transcript. The store
// has every finished turn's history (unless historyUnsaved); the next turn
// reads it back.
func (t *thread) trim() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.trimTimer = nil
	if t.active != nil || t.pins > 0 || t.historyUnsaved {
		return // armed again when a turn ends or the pin goes
	}
	t.history, t.historyLoaded, t.itemIDs = transcript.History{}, false, nil
	t.allIDsInMemory = false
	t.reqInput, t.reqWire = nil, nil
}

// ensureHistory reads the model history from the store unless it is in
// memory. The caller holds a pin, so that it is not trimmed again before
// the caller's turn takes its snapshot.
func (t *thread) ensureHistory(ctx context.Context) error {
	for {
		t.mu.Lock()
		loaded, gen := t.historyLoaded, t.historyGen
		t.mu.Unlock()
		if loaded {
			return nil
		}
		h, err := t.transcript().ModelHistory(ctx)
		if err != nil {
			return err
		}
		t.mu.Lock()
		if t.historyGen == gen && !t.historyLoaded {
			t.history, t.historyLoaded = h, true
		}
		// Else a turn ended during the read, which may have missed it:
		// read again.
		retry := t.historyGen != gen
		t.mu.Unlock()
		if !retry {
			return nil
		}
	}
}

// unloadable reports whether the thread may leave memory now. The caller
// holds Manager.mu, under which pins are taken, and nobody subscribes to a
// thread without a pin: a thread found unpinned and unheard here cannot
// gain a subscriber before it is out of the table.
func (t *thread) unloadable() bool {
	t.mu.Lock()
	idle := t.active == nil && t.pins == 0
	t.mu.Unlock()
	return idle && !t.m.cfg.Sink.Watched(t.id)
}

// interruptActive cancels the running turn, if any, with cause.
func (t *thread) interruptActive(cause error) {
	t.mu.Lock()
	at := t.active
	t.mu.Unlock()
	if at != nil {
		at.Cancel(cause)
	}
}

// write persists a batch in the thread's store.
func (t *thread) write(ctx context.Context, b *store.Batch) error {
	return t.store.Write(ctx, b)
}

// metaJSON encodes the thread metadata; t.mu must be held.
func (t *thread) metaJSONLocked() json.RawMessage {
	b, err := json.Marshal(t.meta)
	if err != nil {
		panic(err) // plain data: cannot fail
	}
	return b
}

// uniqueItemID keeps upstream ids (as the reference does) unless one was
// already used in this thread, which a restarted or fake provider can do.
// Ids taken since the history was loaded are in memory; older ones are
// looked up in the store, so that a loaded thread does not hold the ids of
// its whole transcript.
func (t *thread) uniqueItemID(ctx context.Context, id, prefix string) string {
	if id == "" || !store.ValidKey(id) {
		// An id the store cannot keep (a model's call id holding NUL) is
		// replaced; the history keeps the call id as the model sent it.
		return prefix + "_" + newID()
	}
	t.mu.Lock()
	_, dup := t.itemIDs[id]
	inMemory := t.allIDsInMemory
	t.mu.Unlock()
	if !dup && !inMemory {
		// Any failure but "not found" takes a fresh id: a conflict would
		// fail the commit.
		_, err := t.store.GetItem(ctx, t.id, id)
		dup = !apperr.Is(err, apperr.NotFound)
	}
	if dup {
		id = id + "_" + newID()
	}
	t.mu.Lock()
	if t.itemIDs == nil {
		t.itemIDs = map[string]struct{}{}
	}
	t.itemIDs[id] = struct{}{}
	t.mu.Unlock()
	return id
}
