package memory

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/store/internal/backend"
)

// queuedIndexLocked returns where entry id is in its thread's entries,
// -1 when it is not queued (unknown, or taken).
func (s *Store) queuedIndexLocked(threadID, id string) int {
	return slices.IndexFunc(s.queued[threadID], func(q store.QueuedSubmission) bool { return q.ID == id && q.TurnID == "" })
}

// waitingLocked returns the thread's entries that are still queued.
func (s *Store) waitingLocked(threadID string) []store.QueuedSubmission {
	var out []store.QueuedSubmission
	for _, q := range s.queued[threadID] {
		if q.TurnID == "" {
			out = append(out, q)
		}
	}
	return out
}

// takeQueuedLocked marks a queued entry taken by turnID.
func (s *Store) takeQueuedLocked(q store.QueueTake) {
	if i := s.queuedIndexLocked(q.ThreadID, q.ID); i >= 0 {
		s.queued[q.ThreadID][i].TurnID = q.TurnID
	}
}

// deleteQueuedLocked deletes an entry and reports whether it was queued.
func (s *Store) deleteQueuedLocked(threadID, id string) bool {
	i := s.queuedIndexLocked(threadID, id)
	if i < 0 {
		return false
	}
	s.queued[threadID] = slices.Delete(s.queued[threadID], i, i+1)
	if len(s.queued[threadID]) == 0 {
		delete(s.queued, threadID)
	}
	return true
}

func cloneQueued(q store.QueuedSubmission) store.QueuedSubmission {
	q.Payload = cloneRaw(q.Payload)
	return q
}

func cloneRaw(b json.RawMessage) json.RawMessage { return append(json.RawMessage(nil), b...) }

// AddQueued implements store.Store.AddQueued.
func (s *Store) AddQueued(_ context.Context, q *store.QueuedSubmission) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usableLocked(); err != nil {
		return false, err
	}
	if s.threadLocked(q.ThreadID) == nil {
		return false, backend.ThreadNotFound(q.ThreadID)
	}
	if err := store.CheckQueued(q); err != nil {
		return false, err
	}
	tid := backend.CanonicalID(q.ThreadID)
	list := s.queued[tid]
	for _, e := range list {
		if e.ClientID == q.ClientID {
			*q = cloneQueued(e)
			return false, nil
		}
	}
	if len(s.waitingLocked(tid)) >= store.MaxQueued {
		return false, apperr.New(apperr.Invalid, "thread %s has %d queued submissions, the most it may have", tid, store.MaxQueued)
	}
	c := cloneQueued(*q)
	c.ThreadID = tid
	if c.CreatedAt.IsZero() {
		c.CreatedAt = s.now()
	}
	c.CreatedAt = backend.Time(c.CreatedAt)
	c.Ord = 0
	for _, e := range list {
		c.Ord = max(c.Ord, e.Ord+1)
	}
	s.queued[tid] = append(list, c)
	*q = cloneQueued(c)
	return true, nil
}

// ListQueued implements store.Store.ListQueued.
func (s *Store) ListQueued(_ context.Context, threadID string) ([]store.QueuedSubmission, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.usableLocked(); err != nil {
		return nil, err
	}
	var out []store.QueuedSubmission
	for _, q := range s.waitingLocked(backend.CanonicalID(threadID)) {
		out = append(out, cloneQueued(q))
	}
	return out, nil
}

// UpdateQueued implements store.Store.UpdateQueued.
func (s *Store) UpdateQueued(_ context.Context, threadID, id string, payload json.RawMessage) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usableLocked(); err != nil {
		return err
	}
	if err := store.CheckQueued(&store.QueuedSubmission{ThreadID: threadID, ID: id, Payload: payload}); err != nil {
		return err
	}
	tid := backend.CanonicalID(threadID)
	i := s.queuedIndexLocked(tid, id)
	if i < 0 {
		return store.QueuedNotFound(id)
	}
	s.queued[tid][i].Payload = cloneRaw(payload)
	return nil
}

// DeleteQueued implements store.Store.DeleteQueued.
func (s *Store) DeleteQueued(_ context.Context, threadID, id string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usableLocked(); err != nil {
		return false, err
	}
	return s.deleteQueuedLocked(backend.CanonicalID(threadID), id), nil
}

// ReorderQueued implements store.Store.ReorderQueued.
func (s *Store) ReorderQueued(_ context.Context, threadID string, ids []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usableLocked(); err != nil {
		return err
	}
	tid := backend.CanonicalID(threadID)
	if err := store.CheckReorder(s.waitingLocked(tid), ids); err != nil {
		return err
	}
	list := s.queued[tid]
	for i := range list {
		if list[i].TurnID == "" {
			list[i].Ord = int64(slices.Index(ids, list[i].ID))
		}
	}
	slices.SortStableFunc(list, func(a, b store.QueuedSubmission) int { return int(a.Ord - b.Ord) })
	return nil
}

// QueuedThreads implements store.Store.QueuedThreads.
func (s *Store) QueuedThreads(context.Context) ([]string, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.usableLocked(); err != nil {
		return nil, err
	}
	out := slices.Collect(func(yield func(string) bool) {
		for id := range s.queued {
			if len(s.waitingLocked(id)) > 0 && !yield(id) {
				return
			}
		}
	})
	slices.Sort(out)
	return out, nil
}
