package turns

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/budget"
	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/turns/loop"
	"github.com/appserver/appserver/internal/turns/subagents"
	"github.com/appserver/appserver/internal/turns/transcript"
)

// activeTurn is the running turn of a thread: the loop's part of it
// (loop.Turn: identity, settings, context, pending input) and the table's.
type activeTurn struct {
	*loop.Turn
	// released is closed once the turn has given its thread's lease back
	// (after Done): a write that follows the turn's end on this daemon,
	// such as archiving the thread, then carries no stale fence.
	released chan struct{}
	// ending is set (under the thread's lock) once the turn has settled
	// and is announcing its end: the thread then reports its end status.
	ending bool
	// run is the turn's run, set before the turn is published: the
	// items of its children's ends join it (childEndItem).
	run *loop.Run
	// kind is "compact" for a compaction the client asked for, which
	// takes no input ("" for every other turn).
	kind string
	// completed is set (under the thread's lock) when the turn ended
	// completed: the thread's queue then moves on.
	completed bool
}

// The causes a turn is cancelled with.
var (
	errInterrupted = loop.ErrInterrupted
	errShutdown    = loop.ErrShutdown
	errLeaseLost   = loop.ErrLeaseLost
)

// The turn is its tools' ToolSink and ClientRequests.
var (
	_ ToolSink       = (*loop.Run)(nil)
	_ ClientRequests = (*loop.Run)(nil)
)

// turnThread is a thread as one of its turns' loop sees it (loop.Thread),
// with the thread's locks taken as the thread's own methods take them.
type turnThread struct {
	t  *thread
	at *activeTurn
}

var _ loop.Thread = turnThread{}

func (tt turnThread) Emit(method string, params any) { tt.t.emit(method, params) }

func (tt turnThread) Write(ctx context.Context, b *store.Batch) error { return tt.t.write(ctx, b) }

// WriteMeta stores b with the thread's meta; t.metaMu is held from
// encoding the meta to storing it.
func (tt turnThread) WriteMeta(ctx context.Context, b *store.Batch) error {
	t := tt.t
	t.metaMu.Lock()
	defer t.metaMu.Unlock()
	t.mu.Lock()
	b.UpdateThreads = []store.ThreadPatch{{ID: t.id, Meta: t.metaJSONLocked()}}
	t.mu.Unlock()
	return t.write(ctx, b)
}

func (tt turnThread) UniqueItemID(ctx context.Context, id, prefix string) string {
	return tt.t.uniqueItemID(ctx, id, prefix)
}

func (tt turnThread) BroadcastStatus() { tt.t.broadcastStatus() }

func (tt turnThread) NeedsPreview() bool {
	tt.t.mu.Lock()
	defer tt.t.mu.Unlock()
	return tt.t.rec.Preview == ""
}

func (tt turnThread) NeedsCompaction() bool {
	t := tt.t
	t.mu.Lock()
	defer t.mu.Unlock()
	limit := t.autoCompactLimitLocked()
	return limit > 0 && t.meta.ContextTokens >= limit
}

func (tt turnThread) AddUsage(turnID string, add, last api.TokenUsageBreakdown, contextTokens int64) api.TokenUsageBreakdown {
	t := tt.t
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.usageLocked(turnID, add, last, contextTokens)
}

// WriteUsage adds the usage and stores b with the thread's meta, t.metaMu
// held throughout.
func (tt turnThread) WriteUsage(ctx context.Context, b *store.Batch, turnID string, add, last api.TokenUsageBreakdown, contextTokens int64) (api.TokenUsageBreakdown, error) {
	t := tt.t
	t.metaMu.Lock()
	defer t.metaMu.Unlock()
	t.mu.Lock()
	total := t.usageLocked(turnID, add, last, contextTokens)
	b.UpdateThreads = []store.ThreadPatch{{ID: t.id, Meta: t.metaJSONLocked()}}
	t.mu.Unlock()
	return total, t.write(ctx, b)
}

func (tt turnThread) AddCost(micros int64) {
	tt.t.mu.Lock()
	tt.t.meta.BudgetCostMicros += micros
	tt.t.mu.Unlock()
}

func (tt turnThread) Spent() budget.Spend {
	tt.t.mu.Lock()
	defer tt.t.mu.Unlock()
	return tt.t.threadSpendLocked()
}

func (tt turnThread) RateLimitsChanged(provider string, rl *model.RateLimits) (api.AccountRateLimitsUpdatedNotification, bool) {
	return tt.t.rateLimitsChanged(provider, rl)
}

func (tt turnThread) Request(ctx context.Context, method string, params any) (json.RawMessage, api.RequestID, bool, error) {
	t := tt.t
	return t.m.cfg.Sink.Request(ctx, ServerRequest{ThreadID: t.id, Ancestors: t.ancestors, Method: method, Params: params, Ephemeral: t.ephemeral()})
}

func (tt turnThread) CommitEnd(e *loop.End) { tt.t.commitEnd(tt.at, e) }

// usageLocked adds a response's usage (add) to the thread's total and
// records last and contextTokens as the thread's last usage and context
// size, from turn turnID; it returns the new total. t.mu must be held.
func (t *thread) usageLocked(turnID string, add, last api.TokenUsageBreakdown, contextTokens int64) api.TokenUsageBreakdown {
	total := t.addTokensLocked(add)
	t.meta.LastUsage = &last
	t.meta.ContextTokens = contextTokens
	t.meta.LastTurnID = turnID
	return total
}

// commitEnd stores a turn's end with the thread's meta, then announces
// it (docs/protocol.md §8.1–§8.2): the thread's status, the error if any,
// turn/completed; the turn then lets go of the thread. The logged
// notifications of an end stored as it is (its usage's, the error,
// turn/completed) ride the end's commit, so that the event log holds
// them whenever the store holds the end; they go out once it is stored.
func (t *thread) commitEnd(at *activeTurn, e *loop.End) {
	now := e.At
	status, turnErr := e.Status, e.TurnErr
	patch := store.TurnPatch{ThreadID: t.id, ID: at.ID, Status: string(status), CompletedAt: &now, Meta: e.Meta}
	if turnErr != nil {
		patch.Error, _ = json.Marshal(turnErr)
	}
	// The run builds no request any more: its slices go to the thread
	// for the next turn, cleared here rather than under the locks.
	reqInput, reqWire := e.RequestBuffers()
	t.metaMu.Lock()
	t.mu.Lock()
	t.meta.LastTurnID = at.ID
	t.stopGoalClockLocked(now)
	t.meta.SubAgent = subagents.RecordEnd(t.meta.SubAgent, at.ID, status, turnErr, e.Final)
	threadPatch := store.ThreadPatch{ID: t.id, UpdatedAt: &now, RecencyAt: &now, Meta: t.metaJSONLocked()}
	rateLimitsSent := t.rateLimitsSent
	t.reqInput, t.reqWire = reqInput, reqWire
	t.mu.Unlock()
	persistCtx := context.WithoutCancel(at.Ctx)

	// What the end announces once stored as it is: the usage stored with
	// it (the thread's meta holds the usage, the batch the last items),
	// then the error if any and turn/completed.
	var notes []Event
	e.Usage(func(method string, params any) { notes = append(notes, t.event(method, params)) })
	usage := len(notes)
	if turnErr != nil {
		notes = append(notes, t.event("error", api.ErrorNotification{Error: *turnErr, WillRetry: false, ThreadID: t.id, TurnID: at.ID}))
	}
	notes = append(notes, t.event("turn/completed", api.TurnCompletedNotification{ThreadID: t.id, Turn: e.APITurn(status, turnErr)}))

	// settle is what comes between the end's usage and its turn/completed:
	// the thread takes the end, and its status goes out.
	settle := func(endErr error, sanitised bool) {
		t.metaMu.Unlock()
		e.Observe(status, turnErr)

		t.mu.Lock()
		if t.historyLoaded {
			t.history.AppendTurn(e.Hist)
		}
		t.historyGen++
		// Until a turn's end is stored with its history, memory has
		// history the store lacks.
		t.historyUnsaved = endErr != nil || sanitised
		t.lastTurnFailed = status == api.TurnFailed
		t.rec.UpdatedAt, t.rec.RecencyAt = now, now
		at.ending = true
		at.completed = status == api.TurnCompleted
		t.mu.Unlock()

		// Before the end is announced and the turn lets go of the thread:
		// a wait_agent on this child, or a client that saw its
		// turn/completed, finds the note in the parent's history.
		t.m.sub.TellParent(persistCtx, subagentThread{t})

		// The turn stays active until turn/completed is out, so that a
		// turn started meanwhile waits (StartTurn waits on done) and its
		// events never precede this one's end.
		end := api.ThreadStatus{Type: api.ThreadIdle}
		if status == api.TurnFailed {
			end = api.ThreadStatus{Type: api.ThreadSystemError}
		}
		if endErr == nil {
			t.announceReadState(persistCtx, at.ID, at.run.Seq())
		} else {
			// The store lacks this end for now: its read-state facts
			// are read again once it has it.
			t.forgetReadFacts()
		}
		t.m.broadcastThread(t.id, t.originator(), "thread/status/changed", api.ThreadStatusChangedNotification{ThreadID: t.id, Status: end})
	}

	// The last response's last item (and usage) ride the end: a plain
	// turn commits twice, its user message and its end.
	settled := false
	endErr := t.m.cfg.Sink.PublishWith(notes, func(evs []*store.Event) error {
		return t.write(persistCtx, &store.Batch{AppendItems: e.Items, UpdateTurns: []store.TurnPatch{patch},
			UpdateThreads: []store.ThreadPatch{threadPatch}, AppendEvents: evs})
	}, func(i int) {
		if i == usage {
			settled = true
			settle(nil, false)
		}
	})
	if endErr == nil && !settled {
		settle(nil, false) // a sink that ran no hook
	}
	if endErr != nil {
		// Nothing of the end went out: it is announced as stored below.
		t.mu.Lock()
		t.rateLimitsSent = rateLimitsSent
		t.mu.Unlock()
		sanitised := false
		if apperr.Is(endErr, apperr.Invalid) {
			// The store refuses what this end carries (its history or the
			// thread's meta), so no retry of it can pass: the end is stored
			// without them, so that the turn does not stay inProgress and
			// the thread takes its next turn. The history stays in memory.
			t.m.log.ErrorContext(e.Observed(), "turn end refused by the store; storing it without its history", "thread", t.id, "turn", at.ID, "err", endErr)
			status, turnErr = api.TurnFailed, &api.TurnError{Message: "the turn's end could not be stored: " + apperr.MessageOf(endErr)}
			patch = store.TurnPatch{ThreadID: t.id, ID: at.ID, Status: string(status), CompletedAt: &now}
			patch.Error, _ = json.Marshal(turnErr)
			threadPatch = store.ThreadPatch{ID: t.id, UpdatedAt: &now, RecencyAt: &now}
			sanitised = true
			endErr = t.write(persistCtx, &store.Batch{UpdateTurns: []store.TurnPatch{patch}, UpdateThreads: []store.ThreadPatch{threadPatch}})
		}
		switch err := endErr; {
		case err == nil:
		case errors.Is(e.RunErr, errLeaseLost) || t.m.cfg.Ownership != nil && apperr.Is(err, apperr.Conflict):
			// This daemon lost the thread's lease (its heartbeat found it
			// expired, or the store refused the end's fence): the turn's
			// end is the failover's, which stores it interrupted, and so
			// does this daemon once it can. It tells its clients that end,
			// never one it could not store.
			status, turnErr = api.TurnInterrupted, nil
			patch = store.TurnPatch{ThreadID: t.id, ID: at.ID, Status: string(status), CompletedAt: &now}
			t.m.ends.add(t.store, patch)
		default:
			// The end the client is told is the one the store gets: the
			// commit failed, so the turn did; that status is written again
			// until the store takes it (turnEnds), so that the turn does
			// not stay inProgress in the store while the daemon runs.
			status, turnErr = e.Failed(fmt.Errorf("persist turn end: %w", err))
			patch.Status = string(status)
			patch.Error, _ = json.Marshal(turnErr)
			// Any other refusal is final.
			if !permanent(err) {
				t.m.ends.add(t.store, patch)
			}
		}
		settle(endErr, sanitised)
		if turnErr != nil {
			t.emit("error", api.ErrorNotification{Error: *turnErr, WillRetry: false, ThreadID: t.id, TurnID: at.ID})
		}
		t.emit("turn/completed", api.TurnCompletedNotification{ThreadID: t.id, Turn: e.APITurn(status, turnErr)})
	}
	e.CompletedSent()
	t.m.sub.ShowEndToParent(subagentThread{t})

	t.mu.Lock()
	t.active = nil
	t.armUnloadLocked()
	t.mu.Unlock()
	t.childTurn(false)
	if status == api.TurnInterrupted {
		t.m.sub.InterruptChildren(t.id)
	}
}

// addTokensLocked adds a response's usage to the thread's total and
// returns the new total; t.mu must be held.
func (t *thread) addTokensLocked(u api.TokenUsageBreakdown) api.TokenUsageBreakdown {
	total := api.TokenUsageBreakdown{}
	if t.meta.TokenTotal != nil {
		total = *t.meta.TokenTotal
	}
	transcript.SumUsage(&total, u)
	t.meta.TokenTotal = &total
	return total
}
