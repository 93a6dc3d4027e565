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

// readFacts are what a thread's read state derives from: how clients
// last marked it, its last finished turn, and the first finished turn
// after the mark ("" for none; not known under an unread mark, which puts
// the first unread position at the thread's start).
type readFacts struct {
	mark          storedReadState
	lastDoneID    string
	lastDoneSeq   int64
	firstUnreadID string
	// running is set when the turns read held one in progress: its end,
	// stored later (by another daemon's retry of an end the store missed),
	// may change the facts without a turn ending here, so they are not
	// kept.
	running bool
}

// markOf returns how clients last marked the thread rec (zero when never).
func markOf(rec store.Thread) (storedReadState, error) {
	var mark storedReadState
	if len(rec.ReadState) > 0 && string(rec.ReadState) != "null" {
		if err := json.Unmarshal(rec.ReadState, &mark); err != nil {
			return storedReadState{}, apperr.Wrap(apperr.Internal, err, "corrupt read state")
		}
	}
	return mark, nil
}

// readFactsOf reads a thread's read-state facts: its mark from rec, its
// turns from st.
func readFactsOf(ctx context.Context, st store.Store, rec store.Thread) (readFacts, error) {
	var f readFacts
	var err error
	if f.mark, err = markOf(rec); err != nil {
		return readFacts{}, err
	}
	// Only a thread's last turn can be running: two turns from either end
	// are enough.
	last, err := st.ListTurns(ctx, store.TurnsQuery{ThreadID: rec.ID, Desc: true, Limit: 2})
	if err != nil {
		return readFacts{}, err
	}
	for _, tr := range last.Turns {
		if tr.Status == store.TurnInProgress {
			f.running = true
			continue
		}
		f.lastDoneID, f.lastDoneSeq = tr.ID, tr.Seq
		break
	}
	if f.mark.Mark != markUnread && f.lastDoneSeq > f.mark.ThroughSeq {
		next, err := st.ListTurns(ctx, store.TurnsQuery{ThreadID: rec.ID, Limit: 2, Cursor: store.TurnCursor(rec.ID, f.mark.ThroughSeq+1)})
		if err != nil {
			return readFacts{}, err
		}
		for _, tr := range next.Turns {
			if tr.Status == store.TurnInProgress {
				f.running = true
				continue
			}
			f.firstUnreadID = tr.ID
			break
		}
	}
	return f, nil
}

// finished adds a turn that just finished, the thread's last: it is the
// last finished turn, and the first unread one if none after the mark was.
func (f *readFacts) finished(id string, seq int64) {
	f.lastDoneID, f.lastDoneSeq = id, seq
	if f.firstUnreadID == "" && seq > f.mark.ThroughSeq {
		f.firstUnreadID = id
	}
}

// state is the read state the facts give: the first finished turn after
// the mark is the first unread position, an unread mark puts it at the
// thread's start. The revision names the mark and the last finished
// turn, so that it changes with either.
func (f readFacts) state() api.ThreadReadState {
	state := api.ThreadReadState{}
	switch {
	case f.mark.Mark == markUnread:
		state.FirstUnread = &api.ThreadUnreadPosition{Type: "threadStart"}
	case f.firstUnreadID != "":
		state.FirstUnread = &api.ThreadUnreadPosition{Type: "turn", TurnID: f.firstUnreadID}
	}
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%d\x00%d\x00%s", f.mark.Mark, f.mark.ThroughSeq, f.lastDoneSeq, f.lastDoneID))
	state.Revision = hex.EncodeToString(sum[:12])
	return state
}

// readStateOf derives a thread's read state from its mark and its turns
// (readFacts). It also returns the last finished turn's sequence number.
func readStateOf(ctx context.Context, st store.Store, rec store.Thread) (api.ThreadReadState, int64, error) {
	f, err := readFactsOf(ctx, st, rec)
	if err != nil {
		return api.ThreadReadState{}, 0, err
	}
	return f.state(), f.lastDoneSeq, nil
}

// announceReadState tells every connection that may see the thread its
// read state once a finished turn is stored (thread/readState/changed, before
// the thread goes idle, as the reference orders it): the turn is unread
// until a client marks it read, which clients showing the thread do on
// hearing this. turnID and seq are the turn that finished (seq 0 when the
// store gave none).
func (t *thread) announceReadState(ctx context.Context, turnID string, seq int64) {
	state, err := t.endReadState(ctx, turnID, seq)
	if err != nil {
		t.m.log.Warn("read state not announced", "thread", t.id, "err", err)
		return
	}
	t.m.broadcastThread(t.id, t.originator(), "thread/readState/changed", api.ThreadReadStateChangedNotification{ThreadID: t.id, ReadState: state})
}

// endReadState is the thread's read state once the turn turnID (at seq)
// finished. Unless an earlier end of the thread still waits for the
// store, the facts it kept at the last end are brought up to date with
// the turn instead of read again: a plain turn's end then reads nothing
// from the store (BenchmarkTurns). When daemons share the store
// (Ownership), another daemon may have marked the thread meanwhile, so
// the thread's record is read, and the facts serve only while its mark
// is the one they were read with; turns run elsewhere made this
// daemon's lease stale, which forgot them (own). Whatever changes the
// facts otherwise (a mark here, a rollback, an end not stored) forgets
// them (forgetReadFacts), and facts read while that happened are not
// kept.
func (t *thread) endReadState(ctx context.Context, turnID string, seq int64) (api.ThreadReadState, error) {
	keep := seq > 0 && !t.m.ends.pendingFor(t.id)
	shared := t.m.cfg.Ownership != nil
	t.mu.Lock()
	if keep && !shared && t.readFactsKept {
		t.readFacts.finished(turnID, seq)
		f := t.readFacts
		t.mu.Unlock()
		return f.state(), nil
	}
	gen := t.readFactsGen
	t.mu.Unlock()
	rec, err := t.store.GetThread(ctx, t.id)
	if err != nil {
		return api.ThreadReadState{}, err
	}
	if keep && shared {
		mark, err := markOf(rec)
		if err != nil {
			return api.ThreadReadState{}, err
		}
		t.mu.Lock()
		if t.readFactsKept && t.readFactsGen == gen && t.readFacts.mark == mark {
			t.readFacts.finished(turnID, seq)
			f := t.readFacts
			t.mu.Unlock()
			return f.state(), nil
		}
		t.mu.Unlock()
	}
	f, err := readFactsOf(ctx, t.store, rec)
	if err != nil {
		return api.ThreadReadState{}, err
	}
	if keep && f.lastDoneID == turnID && !f.running {
		t.mu.Lock()
		if t.readFactsGen == gen {
			t.readFacts, t.readFactsKept = f, true
		}
		t.mu.Unlock()
	}
	return f.state(), nil
}

// forgetReadFacts drops the read-state facts the thread kept
// (endReadState): the next end reads them from the store.
func (t *thread) forgetReadFacts() {
	t.mu.Lock()
	t.forgetReadFactsLocked()
	t.mu.Unlock()
}

// forgetReadFactsLocked is forgetReadFacts with t.mu held.
func (t *thread) forgetReadFactsLocked() {
	t.readFactsKept = false
	t.readFactsGen++
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
	// Forgotten before the write too, so that an end meanwhile reads the
	// store instead of announcing the old mark from memory.
	if lt := m.loaded(rec.ID); lt != nil {
		lt.forgetReadFacts()
	}
	if err := st.Write(ctx, &store.Batch{UpdateThreads: []store.ThreadPatch{{ID: rec.ID, ReadState: raw}}}); err != nil {
		return api.ThreadReadStateUpdateResult{}, nil, nil, err
	}
	if lt := m.loaded(rec.ID); lt != nil {
		lt.forgetReadFacts()
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
