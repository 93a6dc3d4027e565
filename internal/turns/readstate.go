package turns

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/store"
)

// storedReadState is how clients last marked a thread, as the store keeps
// it (store.Thread.ReadState): read through the turn of sequence number
// ThroughSeq, or unread from its start. A thread never marked has none,
// and every finished turn of it is unread.
type storedReadState struct {
	Mark       string `json:"mark"`
	ThroughSeq int64  `json:"throughSeq"`
}

// The marks of storedReadState.
const (
	markRead   = "read"
	markUnread = "unread"
)

// readStateOf derives a thread's read state from its mark and its turns:
// the first finished turn after the mark is the first unread position,
// an unread mark puts it at the thread's start. The revision names the
// mark and the last finished turn, so that it changes with either.
// It also returns the last finished turn's sequence number.
func readStateOf(ctx context.Context, st store.Store, rec store.Thread) (api.ThreadReadState, int64, error) {
	var mark storedReadState
	if len(rec.ReadState) > 0 && string(rec.ReadState) != "null" {
		if err := json.Unmarshal(rec.ReadState, &mark); err != nil {
			return api.ThreadReadState{}, 0, apperr.Wrap(apperr.Internal, err, "corrupt read state")
		}
	}
	// Only a thread's last turn can be running: two turns from either end
	// are enough.
	last, err := st.ListTurns(ctx, store.TurnsQuery{ThreadID: rec.ID, Desc: true, Limit: 2})
	if err != nil {
		return api.ThreadReadState{}, 0, err
	}
	var lastDone store.Turn
	for _, tr := range last.Turns {
		if tr.Status != store.TurnInProgress {
			lastDone = tr
			break
		}
	}
	state := api.ThreadReadState{}
	switch {
	case mark.Mark == markUnread:
		state.FirstUnread = &api.ThreadUnreadPosition{Type: "threadStart"}
	case lastDone.Seq > mark.ThroughSeq:
		next, err := st.ListTurns(ctx, store.TurnsQuery{ThreadID: rec.ID, Limit: 2, Cursor: store.TurnCursor(rec.ID, mark.ThroughSeq+1)})
		if err != nil {
			return api.ThreadReadState{}, 0, err
		}
		for _, tr := range next.Turns {
			if tr.Status != store.TurnInProgress {
				state.FirstUnread = &api.ThreadUnreadPosition{Type: "turn", TurnID: tr.ID}
				break
			}
		}
	}
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%d\x00%d\x00%s", mark.Mark, mark.ThroughSeq, lastDone.Seq, lastDone.ID))
	state.Revision = hex.EncodeToString(sum[:12])
	return state, lastDone.Seq, nil
}

// announceReadState tells every connection that may see the thread its
// read state once a finished turn is stored (thread/readState/changed, before
// the thread goes idle, as the reference orders it): the turn is unread
// until a client marks it read, which clients showing the thread do on
// hearing this.
func (t *thread) announceReadState(ctx context.Context) {
	rec, err := t.store.GetThread(ctx, t.id)
	if err == nil {
		var state api.ThreadReadState
		if state, _, err = readStateOf(ctx, t.store, rec); err == nil {
			t.m.broadcastThread(t.id, t.originator(), "thread/readState/changed", api.ThreadReadStateChangedNotification{ThreadID: t.id, ReadState: state})
			return
		}
	}
	t.m.log.Warn("read state not announced", "thread", t.id, "err", err)
}

// readStateTarget is the store a thread's read state is read from and
// written to, and its record there.
func (m *Manager) readStateTarget(ctx context.Context, rawID string) (store.Store, store.Thread, error) {
	id, err := parseThreadID(rawID)
	if err != nil {
		return nil, store.Thread{}, err
	}
	st := m.cfg.Store
	if t := m.loaded(id); t != nil {
		st = t.store
	}
	rec, err := st.GetThread(ctx, id)
	if apperr.Is(err, apperr.NotFound) {
		return nil, store.Thread{}, apperr.New(apperr.NotFound, "thread not loaded: %s", rawID)
	}
	return st, rec, err
}

// readStateOrNil is ReadState for thread/read: nil for a thread the store
// does not hold (yet), whose read state is unavailable.
func (m *Manager) readStateOrNil(ctx context.Context, threadID string) (*api.ThreadReadState, error) {
	state, err := m.ReadState(ctx, threadID)
	if apperr.Is(err, apperr.NotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &state, nil
}

// ReadState returns a thread's read state (thread/read's readState).
func (m *Manager) ReadState(ctx context.Context, threadID string) (api.ThreadReadState, error) {
	st, rec, err := m.readStateTarget(ctx, threadID)
	if err != nil {
		return api.ThreadReadState{}, err
	}
	state, _, err := readStateOf(ctx, st, rec)
	return state, err
}

// ReadStateConflict is the data of the error thread/readState/update
// answers when the revision the client saw is not the thread's.
type ReadStateConflict struct {
	// Reason is "readStateConflict".
	Reason string `json:"reason"`
	// ReadState is the thread's read state now.
	ReadState api.ThreadReadState `json:"readState"`
}

// ErrReadStateConflict is the message of that error.
const ErrReadStateConflict = "read state changed"

// UpdateReadState answers thread/readState/update: marks the thread read
// through its last finished turn, or unread from its start, if the
// revision the client saw is still the thread's. On a conflict it returns
// the current state and an apperr.Conflict. The After tells every
// connection that may see the thread (thread/readState/changed).
func (m *Manager) UpdateReadState(ctx context.Context, p api.ThreadReadStateUpdateParams) (api.ThreadReadStateUpdateResult, *ReadStateConflict, After, error) {
	var next storedReadState
	switch p.Operation.Type {
	case markRead, markUnread:
		next.Mark = p.Operation.Type
	default:
		return api.ThreadReadStateUpdateResult{}, nil, nil, apperr.New(apperr.Invalid, "Invalid request: unknown variant `%s`, expected `read` or `unread`", p.Operation.Type)
	}
	// One update at a time in this daemon, so that two clients that saw
	// the same revision cannot both win.
	m.readStateMu.Lock()
	defer m.readStateMu.Unlock()
	st, rec, err := m.readStateTarget(ctx, p.ThreadID)
	if err != nil {
		return api.ThreadReadStateUpdateResult{}, nil, nil, err
	}
	cur, lastDone, err := readStateOf(ctx, st, rec)
	if err != nil {
		return api.ThreadReadStateUpdateResult{}, nil, nil, err
	}
	if cur.Revision != p.ExpectedRevision {
		return api.ThreadReadStateUpdateResult{}, &ReadStateConflict{Reason: "readStateConflict", ReadState: cur}, nil,
			apperr.New(apperr.Conflict, ErrReadStateConflict)
	}
	next.ThroughSeq = lastDone
	raw, err := json.Marshal(next)
	if err != nil {
		return api.ThreadReadStateUpdateResult{}, nil, nil, apperr.Wrap(apperr.Internal, err, "read state")
	}
	if err := st.Write(ctx, &store.Batch{UpdateThreads: []store.ThreadPatch{{ID: rec.ID, ReadState: raw}}}); err != nil {
		return api.ThreadReadStateUpdateResult{}, nil, nil, err
	}
	rec.ReadState = raw
	state, _, err := readStateOf(ctx, st, rec)
	if err != nil {
		return api.ThreadReadStateUpdateResult{}, nil, nil, err
	}
	owner := m.ownerOf(ctx, rec.ID)
	return api.ThreadReadStateUpdateResult{ReadState: state}, nil, func() {
		if state.Revision != cur.Revision {
			m.broadcastThread(rec.ID, owner, "thread/readState/changed", api.ThreadReadStateChangedNotification{ThreadID: rec.ID, ReadState: state})
		}
	}, nil
}
