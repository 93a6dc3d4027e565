package turns

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/stackgrow"
	"github.com/appserver/appserver/internal/store"
)

// A thread's queue (thread/queue/*) holds user messages that wait for the
// thread to be free. The entries live in the thread's store, and each
// becomes exactly one turn: the batch that stores the turn takes its entry
// (store.Batch.TakeQueued), so that of two starts of one entry (two
// requests, two daemons, a start racing a restart) one stores a turn and
// the other finds the entry gone. The queue moves on by itself when an
// entry is added to an idle thread, when a turn ends completed, and when
// a daemon starts (or takes over a dead daemon's thread); an interrupted
// or failed turn leaves it waiting for thread/queue/start, as the
// reference does.

// queuedPayload is what the store keeps of an entry besides its ids.
type queuedPayload struct {
	Input    []api.UserInput   `json:"input"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

func encodeQueued(input []api.UserInput, metadata map[string]string) (json.RawMessage, error) {
	if len(input) == 0 {
		return nil, apperr.New(apperr.Invalid, "only user input can be added to the user-message queue")
	}
	if len(metadata) == 0 {
		metadata = nil
	}
	b, err := json.Marshal(queuedPayload{Input: input, Metadata: metadata})
	if err != nil {
		return nil, apperr.Wrap(apperr.Invalid, err, "queued input cannot be encoded")
	}
	return b, nil
}

// apiQueued is an entry on the wire.
func apiQueued(q store.QueuedSubmission) (api.QueuedSubmission, error) {
	var p queuedPayload
	if err := json.Unmarshal(q.Payload, &p); err != nil {
		return api.QueuedSubmission{}, apperr.Wrap(apperr.Internal, err, "queued submission %s cannot be read", q.ID)
	}
	return api.QueuedSubmission{ID: q.ID, Input: p.Input, ClientUserMessageID: q.ClientID, ResponsesapiClientMetadata: p.Metadata}, nil
}

// queueChanged tells the thread's subscribers that its queue changed.
func (t *thread) queueChanged() {
	t.emit(api.MethodThreadQueueChanged, api.ThreadQueueChangedNotification{ThreadID: t.id})
}

// QueueAdd queues a user message (thread/queue/add). An entry of the
// thread with the same clientUserMessageId is answered instead of adding
// another. On an idle thread, the queue's first entry starts at once.
func (m *Manager) QueueAdd(ctx context.Context, p api.ThreadQueueAddParams) (api.ThreadQueueAddResult, After, error) {
	payload, err := encodeQueued(p.Input, p.ResponsesapiClientMetadata)
	if err != nil {
		return api.ThreadQueueAddResult{}, nil, err
	}
	t, err := m.threadFor(ctx, p.ThreadID, "thread not found: %s")
	if err != nil {
		return api.ThreadQueueAddResult{}, nil, err
	}
	defer t.unpin()
	q := store.QueuedSubmission{ThreadID: t.id, ID: newID(), ClientID: p.ClientUserMessageID, Payload: payload}
	added, err := t.store.AddQueued(ctx, &q)
	t.mu.Lock()
	t.queueGen++
	t.queueEmpty = false
	t.mu.Unlock()
	if err != nil {
		return api.ThreadQueueAddResult{}, nil, err
	}
	sub, err := apiQueued(q)
	if err != nil {
		return api.ThreadQueueAddResult{}, nil, err
	}
	return api.ThreadQueueAddResult{QueuedSubmission: sub}, func() {
		if added {
			t.queueChanged()
		}
		m.kickQueue(t.id)
	}, nil
}

// QueueList returns a page of the thread's queue (thread/queue/list); the
// cursor is the position of the page's first entry, as the reference's.
func (m *Manager) QueueList(ctx context.Context, p api.ThreadQueueListParams) (api.ThreadQueueListResult, error) {
	start := 0
	if p.Cursor != nil {
		n, err := strconv.ParseUint(*p.Cursor, 10, 31)
		if err != nil {
			return api.ThreadQueueListResult{}, apperr.New(apperr.Invalid, "invalid queue pagination cursor: %v", err)
		}
		start = int(n)
	}
	limit := store.DefaultLimit
	if p.Limit != nil && *p.Limit > 0 {
		limit = int(min(*p.Limit, store.MaxLimit))
	}
	t, err := m.threadFor(ctx, p.ThreadID, "thread not found: %s")
	if err != nil {
		return api.ThreadQueueListResult{}, err
	}
	defer t.unpin()
	all, err := t.store.ListQueued(ctx, t.id)
	if err != nil {
		return api.ThreadQueueListResult{}, err
	}
	res := api.ThreadQueueListResult{Data: api.List[api.QueuedSubmission]{}}
	for i := start; i < len(all) && i < start+limit; i++ {
		sub, err := apiQueued(all[i])
		if err != nil {
			return api.ThreadQueueListResult{}, err
		}
		res.Data = append(res.Data, sub)
	}
	if next := start + limit; next < len(all) {
		cursor := strconv.Itoa(next)
		res.NextCursor = &cursor
	}
	return res, nil
}

// QueueUpdate replaces an entry's input (thread/queue/update); its
// metadata too when the params carry some.
func (m *Manager) QueueUpdate(ctx context.Context, p api.ThreadQueueUpdateParams) (api.ThreadQueueUpdateResult, After, error) {
	if len(p.Input) == 0 {
		return api.ThreadQueueUpdateResult{}, nil, apperr.New(apperr.Invalid, "only user input can be added to the user-message queue")
	}
	t, err := m.threadFor(ctx, p.ThreadID, "thread not found: %s")
	if err != nil {
		return api.ThreadQueueUpdateResult{}, nil, err
	}
	defer t.unpin()
	q, err := t.queued(ctx, p.QueuedSubmissionID)
	if err != nil {
		return api.ThreadQueueUpdateResult{}, nil, err
	}
	sub, err := apiQueued(q)
	if err != nil {
		return api.ThreadQueueUpdateResult{}, nil, err
	}
	sub.Input = p.Input
	if len(p.ResponsesapiClientMetadata) > 0 {
		sub.ResponsesapiClientMetadata = p.ResponsesapiClientMetadata
	}
	payload, err := encodeQueued(sub.Input, sub.ResponsesapiClientMetadata)
	if err != nil {
		return api.ThreadQueueUpdateResult{}, nil, err
	}
	if err := t.store.UpdateQueued(ctx, t.id, q.ID, payload); err != nil {
		return api.ThreadQueueUpdateResult{}, nil, err
	}
	return api.ThreadQueueUpdateResult{QueuedSubmission: sub}, t.queueChanged, nil
}

// QueueDelete deletes an entry (thread/queue/delete); deleted is false
// when it was not queued.
func (m *Manager) QueueDelete(ctx context.Context, p api.ThreadQueueDeleteParams) (api.ThreadQueueDeleteResult, After, error) {
	t, err := m.threadFor(ctx, p.ThreadID, "thread not found: %s")
	if err != nil {
		return api.ThreadQueueDeleteResult{}, nil, err
	}
	defer t.unpin()
	deleted, err := t.store.DeleteQueued(ctx, t.id, p.QueuedSubmissionID)
	if err != nil || !deleted {
		return api.ThreadQueueDeleteResult{}, nil, err
	}
	return api.ThreadQueueDeleteResult{Deleted: true}, t.queueChanged, nil
}

// QueueReorder puts the thread's entries in a new order
// (thread/queue/reorder); the ids must name each entry once.
func (m *Manager) QueueReorder(ctx context.Context, p api.ThreadQueueReorderParams) (api.ThreadQueueReorderResult, After, error) {
	t, err := m.threadFor(ctx, p.ThreadID, "thread not found: %s")
	if err != nil {
		return api.ThreadQueueReorderResult{}, nil, err
	}
	defer t.unpin()
	if err := t.store.ReorderQueued(ctx, t.id, p.QueuedSubmissionIDs); err != nil {
		return api.ThreadQueueReorderResult{}, nil, err
	}
	return api.ThreadQueueReorderResult{}, t.queueChanged, nil
}

// QueueStart starts an entry, or the queue's first, as a turn
// (thread/queue/start): only on an idle thread.
func (m *Manager) QueueStart(ctx context.Context, c Caller, p api.ThreadQueueStartParams) (api.TurnStartResult, After, error) {
	id := ""
	if p.QueuedSubmissionID != nil {
		id = *p.QueuedSubmissionID
	}
	return m.startQueued(ctx, c, p.ThreadID, id, false)
}

// queued returns one entry of the thread's queue.
func (t *thread) queued(ctx context.Context, id string) (store.QueuedSubmission, error) {
	all, err := t.store.ListQueued(ctx, t.id)
	if err != nil {
		return store.QueuedSubmission{}, err
	}
	for _, q := range all {
		if q.ID == id {
			return q, nil
		}
	}
	return store.QueuedSubmission{}, store.QueuedNotFound(id)
}

// startQueued starts entry id of the thread's queue, or its first when id
// is "", as a turn whose user message carries the entry's client id. auto
// is the queue moving on by itself: an empty queue or a busy thread is
// then no error.
func (m *Manager) startQueued(ctx context.Context, c Caller, threadID, id string, auto bool) (api.TurnStartResult, After, error) {
	if auto && m.loaded(threadID) == nil {
		// A thread that is not loaded stays so unless its queue has
		// something to start (a durable thread: ephemeral ones are always
		// loaded).
		waiting, err := m.cfg.Store.ListQueued(ctx, threadID)
		if err != nil || len(waiting) == 0 {
			return api.TurnStartResult{}, nil, err
		}
	}
	t, err := m.threadFor(ctx, threadID, "thread not found: %s")
	if err != nil {
		return api.TurnStartResult{}, nil, err
	}
	defer t.unpin()
	var gen uint64
	if auto {
		t.mu.Lock()
		busy := t.active != nil
		// On a daemon alone on its store, an add goes through QueueAdd
		// here: a queue found empty since is empty still.
		empty := t.queueEmpty && m.cfg.Ownership == nil
		gen = t.queueGen
		t.mu.Unlock()
		if busy || empty {
			return api.TurnStartResult{}, nil, nil // its end moves the queue on
		}
	}
	var q store.QueuedSubmission
	if id != "" {
		q, err = t.queued(ctx, id)
	} else {
		var all []store.QueuedSubmission
		all, err = t.store.ListQueued(ctx, t.id)
		switch {
		case err != nil:
		case len(all) == 0 && auto:
			t.mu.Lock()
			if t.queueGen == gen {
				t.queueEmpty = true
			}
			t.mu.Unlock()
			return api.TurnStartResult{}, nil, nil
		case len(all) == 0:
			err = apperr.New(apperr.Invalid, "queue is empty")
		default:
			q = all[0]
		}
	}
	if err != nil {
		return api.TurnStartResult{}, nil, err
	}
	sub, err := apiQueued(q)
	if err != nil {
		return api.TurnStartResult{}, nil, err
	}
	clientID := q.ClientID
	p := api.TurnStartParams{ThreadID: t.id, Input: sub.Input, ClientUserMessageID: &clientID}
	res, after, err := m.startTurnWith(ctx, c, p, nil, &store.QueueTake{ThreadID: t.id, ID: q.ID})
	if err != nil {
		return api.TurnStartResult{}, nil, err
	}
	return res, func() {
		t.queueChanged()
		after()
	}, nil
}

// kickQueue moves a thread's queue on, on a goroutine of the turns'
// group: if the thread is idle, its first entry starts.
func (m *Manager) kickQueue(threadID string) {
	m.mu.Lock()
	stopped := m.stopped
	if !stopped {
		m.turns.Add(1)
	}
	m.mu.Unlock()
	if stopped {
		return
	}
	go func() {
		stackgrow.Grow()
		defer m.turns.Done()
		_, after, err := m.startQueued(context.Background(), Caller{}, threadID, "", true)
		switch {
		case err == nil:
			if after != nil {
				after()
			}
		case apperr.Is(err, apperr.Invalid) || apperr.Is(err, apperr.NotFound) || apperr.Is(err, apperr.Conflict):
			// A turn started meanwhile (its end moves the queue on), the
			// entry went to another start, or the thread runs on another
			// daemon, which moves it on.
			m.log.Debug("queue not moved on", "thread", threadID, "err", err)
		default:
			m.log.Warn("queue not moved on", "thread", threadID, "err", err)
		}
	}()
}

// resumeQueues moves on the queues a daemon finds when it starts.
func (m *Manager) resumeQueues(ctx context.Context) error {
	ids, err := m.cfg.Store.QueuedThreads(ctx)
	if err != nil {
		return fmt.Errorf("queued threads: %w", err)
	}
	for _, id := range ids {
		m.kickQueue(id)
	}
	return nil
}
