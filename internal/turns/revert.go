package turns

import (
	"context"
	"encoding/json"
	"reflect"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/store"
)

// RevertThread answers thread/revert: the turn p.BeforeTurnID and every
// later turn leave the thread's history, its stored turns and items and
// the model history the next turn starts from; files are not touched. A
// turn running on the thread is among them (it is always the last): it is
// interrupted first, and the revert waits for its end, as the reference
// drops a running turn too. The After tells the connections that may see
// the thread its read state when that changed (thread/readState/changed)
// and the thread's subscribers that it was reverted (thread/reverted).
func (m *Manager) RevertThread(ctx context.Context, p api.ThreadRevertParams) (api.ThreadRevertResult, After, error) {
	var res api.ThreadRevertResult
	if ok, err := m.remote(ctx, p.ThreadID, "thread/revert", p, &res); ok {
		return res, nil, err
	}
	t, err := m.threadFor(ctx, p.ThreadID, "thread not found: %s")
	if err != nil {
		return res, nil, err
	}
	defer t.unpin()
	turnNotFound := apperr.New(apperr.Invalid, "turn not found: %s", p.BeforeTurnID)
	if p.BeforeTurnID == "" || !store.ValidKey(p.BeforeTurnID) {
		return res, nil, turnNotFound
	}
	// A turn that is not the thread's interrupts nothing.
	if _, err := t.store.GetTurn(ctx, t.id, p.BeforeTurnID); apperr.Is(err, apperr.NotFound) {
		return res, nil, turnNotFound
	} else if err != nil {
		return res, nil, err
	}
	// The lease first, as a turn takes it: the drop is this daemon's
	// write, and another daemon that held the thread reads its history
	// again when it takes the lease back.
	release, err := m.own(ctx, t)
	if err != nil {
		return res, nil, err
	}
	defer release()
	// t.metaMu and t.mu are then held across the drop and the reading of
	// the history kept, so that no turn starts meanwhile: it would start
	// from the history being dropped, or store its turn where the drop
	// removes it. A turn's end takes t.metaMu: a running turn is waited
	// for without it, and so is one started while the first ended.
	for {
		t.mu.Lock()
		at := t.active
		t.mu.Unlock()
		if at != nil {
			at.Cancel(errInterrupted)
			select {
			case <-at.Done:
			case <-ctx.Done():
				return res, nil, ctx.Err()
			}
			continue
		}
		t.metaMu.Lock()
		t.mu.Lock()
		if t.active == nil {
			break
		}
		t.mu.Unlock()
		t.metaMu.Unlock()
	}
	defer t.metaMu.Unlock()
	unlocked := false
	defer func() {
		if !unlocked {
			t.mu.Unlock()
		}
	}()
	turn, err := t.store.GetTurn(ctx, t.id, p.BeforeTurnID)
	if apperr.Is(err, apperr.NotFound) {
		return res, nil, turnNotFound
	}
	if err != nil {
		return res, nil, err
	}
	// The read state is written without the loaded thread
	// (UpdateReadState): the store has it.
	rec, err := t.store.GetThread(ctx, t.id)
	if err != nil {
		return res, nil, err
	}
	before, _, err := readStateOf(ctx, t.store, rec)
	if err != nil {
		return res, nil, err
	}
	now := m.now()
	prevMeta := t.meta
	t.meta.Reverted = true
	// The context the last request carried is gone with its turns; the
	// next request measures it again.
	t.meta.ContextTokens = 0
	patch := store.ThreadPatch{ID: t.id, UpdatedAt: &now, Meta: t.metaJSONLocked()}
	var mark storedReadState
	if len(rec.ReadState) > 0 && string(rec.ReadState) != "null" && json.Unmarshal(rec.ReadState, &mark) == nil && mark.ThroughSeq >= turn.Seq {
		// Read through a turn that goes: the turns that take its place
		// are new, hence unread.
		mark.ThroughSeq = turn.Seq - 1
		patch.ReadState, _ = json.Marshal(mark)
	}
	if err := t.write(ctx, &store.Batch{UpdateThreads: []store.ThreadPatch{patch}, DropTurns: []store.TurnDrop{{ThreadID: t.id, TurnID: turn.ID}}}); err != nil {
		t.meta = prevMeta
		if apperr.Is(err, apperr.NotFound) {
			return res, nil, turnNotFound
		}
		return res, nil, err
	}
	t.rec.UpdatedAt = now
	rec.UpdatedAt = now
	t.forgetReadFactsLocked()
	if patch.ReadState != nil {
		rec.ReadState = patch.ReadState
	}
	// The store holds the revert: should the history kept not be read
	// now, the next turn reads it (ensureHistory).
	hist, err := t.transcript().ModelHistory(ctx)
	t.history, t.historyLoaded = hist, err == nil
	t.historyGen++
	t.historyUnsaved = false
	t.itemIDs, t.allIDsInMemory = nil, false
	last, err := t.store.ListTurns(ctx, store.TurnsQuery{ThreadID: t.id, Desc: true, Limit: 1})
	if err != nil {
		return res, nil, err
	}
	t.lastTurnFailed = len(last.Turns) > 0 && last.Turns[0].Status == store.TurnFailed
	if len(last.Turns) > 0 {
		c := store.TurnCursor(t.id, last.Turns[0].Seq)
		res.TurnsBackwardsCursor = &c
	}
	items, err := t.store.ListItems(ctx, store.ItemsQuery{ThreadID: t.id, Desc: true, Limit: 1})
	if err != nil {
		return res, nil, err
	}
	if len(items.Items) > 0 {
		c := store.ItemCursor(t.id, items.Items[0].Seq)
		res.ItemsBackwardsCursor = &c
	}
	after, _, err := readStateOf(ctx, t.store, rec)
	if err != nil {
		return res, nil, err
	}
	owner := t.meta.Originator
	t.mu.Unlock()
	unlocked = true
	res.Thread = t.apiThread()
	return res, func() {
		// As the reference: a new revision alone is not announced, a
		// new first unread position is.
		if !reflect.DeepEqual(before.FirstUnread, after.FirstUnread) {
			m.broadcastThread(t.id, owner, "thread/readState/changed", api.ThreadReadStateChangedNotification{ThreadID: t.id, ReadState: after})
		}
		t.emit("thread/reverted", api.ThreadRevertedNotification{ThreadID: t.id})
	}, nil
}
