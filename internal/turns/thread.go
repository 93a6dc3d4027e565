package turns

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/policy"
	"github.com/appserver/appserver/internal/store"
)

// threadMeta is the part of a thread's settings kept in store.Thread.Meta.
type threadMeta struct {
	// Cwd and ModelProvider repeat the record's columns so that changes
	// made by resume and turn/start survive a reload.
	Cwd                   string                   `json:"cwd,omitempty"`
	ModelProvider         string                   `json:"modelProvider,omitempty"`
	ApprovalPolicy        api.AskForApproval       `json:"approvalPolicy"`
	ApprovalsReviewer     string                   `json:"approvalsReviewer,omitempty"`
	Sandbox               api.SandboxPolicy        `json:"sandbox"`
	ReasoningEffort       *string                  `json:"reasoningEffort,omitempty"`
	ReasoningSummary      string                   `json:"reasoningSummary,omitempty"`
	BaseInstructions      *string                  `json:"baseInstructions,omitempty"`
	DeveloperInstructions *string                  `json:"developerInstructions,omitempty"`
	Originator            *string                  `json:"originator,omitempty"`
	ThreadSource          *string                  `json:"threadSource,omitempty"`
	CLIVersion            string                   `json:"cliVersion"`
	ServiceTier           *string                  `json:"serviceTier,omitempty"`
	TokenTotal            *api.TokenUsageBreakdown `json:"tokenTotal,omitempty"`
	LastTurnID            string                   `json:"lastTurnId,omitempty"`
	LastUsage             *api.TokenUsageBreakdown `json:"lastUsage,omitempty"`
	// ContextTokens is how many tokens the last model request and its
	// response took, which the next request carries again; a compaction
	// sets it to 0. Reaching the auto-compact limit compacts the context.
	ContextTokens int64 `json:"contextTokens,omitempty"`
	// DynamicTools is the client's tool registration, validated.
	DynamicTools json.RawMessage `json:"dynamicTools,omitempty"`
	// Config is the thread's config overrides (thread/start and
	// thread/fork `config`), flattened to dotted keys; the ToolsFactory
	// reads the ones that shape the tool set.
	Config map[string]json.RawMessage `json:"config,omitempty"`
	// SubAgent is set on a child thread spawned by a parent's turn.
	SubAgent *subAgentMeta `json:"subAgent,omitempty"`
	// Spawned are the children this thread's turns spawned, in order.
	Spawned []spawnEdge `json:"spawned,omitempty"`
	// GitInfo and DaybreakEnabled are what clients saved with
	// thread/metadata/update.
	GitInfo         *api.GitInfo `json:"gitInfo,omitempty"`
	DaybreakEnabled *bool        `json:"daybreakEnabled,omitempty"`
	// Goal is the thread's goal (thread/goal/set), or nil.
	Goal *threadGoal `json:"goal,omitempty"`
}

// turnMeta is kept in store.Turn.Meta: the exact model history the turn
// added (its user input, every output item and every tool output, in
// order), so that the next request replays it byte for byte.
type turnMeta struct {
	// Compacted means the turn compacted the context: History is then
	// the whole model history from this turn on, the summary first.
	Compacted bool `json:"compacted,omitempty"`
	// RootTurnID is the turn that led to this one, when not itself.
	RootTurnID string            `json:"rootTurnId,omitempty"`
	History    []model.InputItem `json:"history"`
}

// thread is one loaded thread. Its lock guards every field below it.
// While a turn runs, its notifications come from the turn goroutine, from
// the round commits and from tool goroutines; roundCommitter states how
// they are ordered.
type thread struct {
	m  *Manager
	id string
	// parentID is the parent of a spawned child, "" for other threads;
	// the child's notifications also reach the parent's subscribers.
	parentID string
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
	meta           threadMeta
	subs           map[ConnID]struct{}
	subsVersion    uint64 // grows with every change of subs
	active         *activeTurn
	lastTurnFailed bool
	// history is the model history of finished turns, from the last
	// compaction on, when historyLoaded; else it is empty and read from
	// the store by the next turn (ensureHistory). historyGen grows with
	// every finished turn, so that a read racing a turn's end is retried.
	history       history
	historyLoaded bool
	historyGen    uint64
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
	unloadTimer    *time.Timer
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
	// leaseToken is the token of the thread's lease when this daemon last
	// took it (Config.Ownership), 0 before.
	leaseToken int64
}

func newThread(m *Manager, rec store.Thread, meta threadMeta, st store.Store) *thread {
	parentID := ""
	if meta.SubAgent != nil {
		parentID = meta.SubAgent.ParentThreadID
	}
	return &thread{
		m:         m,
		id:        rec.ID,
		parentID:  parentID,
		store:     st,
		rec:       rec,
		meta:      meta,
		subs:      map[ConnID]struct{}{},
		approvals: policy.NewSessionApprovals(),
	}
}

// statusLocked derives the protocol status; t.mu must be held.
func (t *thread) statusLocked() api.ThreadStatus {
	switch {
	case t.active != nil && !t.active.ending:
		return api.ThreadStatus{Type: api.ThreadActive, ActiveFlags: t.active.flags()}
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
	return threadToAPI(t.rec, t.meta, t.statusLocked(), t.ephemeral())
}

// ephemeral reports whether the thread lives in memory only.
func (t *thread) ephemeral() bool { return t.store == store.Store(t.m.mem) }

// subscribe adds conn; it reports whether it was new.
func (t *thread) subscribe(conn ConnID) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, had := t.subs[conn]
	t.subs[conn] = struct{}{}
	if !had {
		t.subsVersion++
	}
	if t.unloadTimer != nil {
		t.unloadTimer.Stop()
		t.unloadTimer = nil
	}
	return !had
}

// unsubscribe removes conn and arms the unload timer when nobody is left.
func (t *thread) unsubscribe(conn ConnID) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.subs[conn]; !ok {
		return false
	}
	delete(t.subs, conn)
	t.subsVersion++
	t.armUnloadLocked()
	return true
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

// armUnloadLocked schedules unloading if the thread is idle and unwatched,
// and the trimming of its history if it is idle.
func (t *thread) armUnloadLocked() {
	if t.active != nil || t.pins > 0 {
		return
	}
	if t.historyLoaded && t.trimTimer == nil {
		t.trimTimer = time.AfterFunc(t.m.cfg.TrimAfter, t.trim)
	}
	if len(t.subs) > 0 || t.unloadTimer != nil {
		return
	}
	t.unloadTimer = time.AfterFunc(t.m.cfg.UnloadAfter, func() {
		t.mu.Lock()
		t.unloadTimer = nil
		t.mu.Unlock()
		t.m.unload(t)
	})
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
	t.history, t.historyLoaded, t.itemIDs = history{}, false, nil
	t.allIDsInMemory = false
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
		h, err := t.transcript().modelHistory(ctx)
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

// unloadable reports whether the thread may leave memory now.
func (t *thread) unloadable() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.subs) == 0 && t.active == nil && t.pins == 0
}

// subscribers returns a snapshot of the subscribed connections.
func (t *thread) subscribers() []ConnID {
	subs, _ := t.subscriberList()
	return subs
}

// subscriberList returns a snapshot of the subscribed connections and the
// version of the set it was taken from.
func (t *thread) subscriberList() ([]ConnID, uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]ConnID, 0, len(t.subs))
	for c := range t.subs {
		out = append(out, c)
	}
	return out, t.subsVersion
}

// emit sends a thread-scoped notification to the subscribers, and for a
// spawned child to those of its loaded ancestors too: a client watching a
// thread sees the work it delegated.
func (t *thread) emit(method string, params any) {
	subs := t.subscribers()
	for pid := t.parentID; pid != ""; {
		p := t.m.loaded(pid)
		if p == nil {
			break
		}
		for _, c := range p.subscribers() {
			if !slices.Contains(subs, c) {
				subs = append(subs, c)
			}
		}
		pid = p.parentID
	}
	if tn, ok := t.m.cfg.Notifier.(ThreadNotifier); ok && !t.ephemeral() {
		// Logged even with no subscriber here: clients of other daemons
		// and clients that come back later read it from the log. An
		// ephemeral thread's notifications never reach the durable log.
		tn.SendThread(t.id, subs, method, params)
		return
	}
	if len(subs) == 0 {
		return
	}
	t.m.cfg.Notifier.Send(subs, method, params)
}

// broadcastStatus tells every connection the thread's status.
func (t *thread) broadcastStatus() {
	t.mu.Lock()
	st := t.statusLocked()
	t.mu.Unlock()
	t.m.cfg.Notifier.Broadcast("thread/status/changed", api.ThreadStatusChangedNotification{ThreadID: t.id, Status: st})
}

// interruptActive cancels the running turn, if any, with cause.
func (t *thread) interruptActive(cause error) {
	t.mu.Lock()
	at := t.active
	t.mu.Unlock()
	if at != nil {
		at.cancel(cause)
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
