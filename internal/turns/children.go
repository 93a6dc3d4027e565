package turns

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/turns/subagents"
	"github.com/appserver/appserver/internal/turns/transcript"
)

// The sub-agents of threads live in internal/turns/subagents; this file is
// the thread table as they see it (subagents.Table and subagents.Thread)
// and the read of a thread's children the HTTP API lists.

// subagentTable is the Manager as subagents.Table.
type subagentTable struct{ m *Manager }

// subagentThread is a thread as subagents.Thread.
type subagentThread struct{ t *thread }

// childrenLocked returns the Children of t for its turn at; t.mu must be
// held.
func (t *thread) childrenLocked(at *activeTurn) *subagents.Children {
	return t.m.sub.Of(subagents.Parent{ThreadID: t.id, SubAgent: t.meta.SubAgent, RootTurnID: *at.RootID()})
}

func (s subagentTable) Load(ctx context.Context, id string) (subagents.Thread, func(), error) {
	if _, err := parseThreadID(id); err != nil {
		return nil, nil, apperr.New(apperr.NotFound, "thread not found: %s", id)
	}
	t, err := s.m.load(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	return subagentThread{t}, t.unpin, nil
}

func (s subagentTable) Loaded(id string) subagents.Thread {
	if t := s.m.loaded(id); t != nil {
		return subagentThread{t}
	}
	return nil
}

func (s subagentTable) LoadedThreads() []subagents.Thread {
	s.m.mu.Lock()
	all := make([]subagents.Thread, 0, len(s.m.threads))
	for _, t := range s.m.threads {
		all = append(all, subagentThread{t})
	}
	s.m.mu.Unlock()
	return all
}

func (s subagentTable) CreateChild(ctx context.Context, parentID string, fork bool, build func(string, time.Time, store.Thread, transcript.ThreadMeta) (store.Thread, transcript.ThreadMeta, transcript.SpawnEdge)) error {
	m := s.m
	parent, err := m.load(ctx, parentID)
	if err != nil {
		return err
	}
	defer parent.unpin()
	now := m.now()
	b := &store.Batch{}
	childID := newID()
	if fork {
		// The child starts from the parent's transcript as stored: its
		// finished turns and the rounds of the running one committed so
		// far (the copy ends as interrupted).
		if err := m.copyTranscript(ctx, parent, childID, nil, now, b); err != nil {
			return err
		}
	}
	// The child and its edge in the parent's meta are stored together:
	// metaMu keeps other writers of the parent's meta out until then.
	parent.metaMu.Lock()
	parent.mu.Lock()
	pm := parent.meta
	rec, meta, edge := build(childID, now, parent.rec, pm)
	parent.meta.Spawned = append(slices.Clip(pm.Spawned), edge)
	parentPatch := store.ThreadPatch{ID: parent.id, Meta: parent.metaJSONLocked()}
	parent.mu.Unlock()
	rec.Meta, _ = json.Marshal(meta)
	b.CreateThreads, b.UpdateThreads = []*store.Thread{&rec}, []store.ThreadPatch{parentPatch}
	err = parent.store.Write(ctx, b)
	if err != nil {
		parent.mu.Lock()
		parent.meta.Spawned = pm.Spawned
		parent.mu.Unlock()
	}
	parent.metaMu.Unlock()
	if err != nil {
		return err
	}
	return m.register(newThread(m, rec, meta, parent.store, append([]string{parent.id}, parent.ancestors...)))
}

func (s subagentTable) StartTurn(ctx context.Context, threadID, rootTurnID string, input []api.UserInput) (func(), error) {
	_, after, err := s.m.startTurn(ctx, Caller{}, api.TurnStartParams{ThreadID: threadID, Input: input, RootTurnID: &rootTurnID}, nil)
	return after, err
}

func (s subagentTable) SpawnEdges(ctx context.Context, id string) ([]transcript.SpawnEdge, error) {
	return s.m.spawnEdges(ctx, id)
}

func (s subagentTable) DefaultModel() string { return s.m.cfg.Defaults.Model }

func (s subagentTable) Now() time.Time { return s.m.now() }

func (s subagentThread) ID() string { return s.t.id }

func (s subagentThread) State() (*transcript.SubAgent, <-chan struct{}) {
	t := s.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.active == nil {
		return t.meta.SubAgent, nil
	}
	return t.meta.SubAgent, t.active.Done
}

func (s subagentThread) Interrupt() { s.t.interruptActive(errInterrupted) }

func (s subagentThread) Inject(ctx context.Context, items []model.InputItem) error {
	return s.t.inject(ctx, items)
}

func (s subagentThread) UpdateSpawned(ctx context.Context, f func([]transcript.SpawnEdge) ([]transcript.SpawnEdge, error)) error {
	t := s.t
	t.metaMu.Lock()
	defer t.metaMu.Unlock()
	t.mu.Lock()
	prev := t.meta.Spawned
	next, err := f(prev)
	if err != nil {
		t.mu.Unlock()
		return err
	}
	t.meta.Spawned = next
	patch := store.ThreadPatch{ID: t.id, Meta: t.metaJSONLocked()}
	t.mu.Unlock()
	if err := t.write(ctx, &store.Batch{UpdateThreads: []store.ThreadPatch{patch}}); err != nil {
		t.mu.Lock()
		t.meta.Spawned = prev
		t.mu.Unlock()
		return err
	}
	return nil
}

func (s subagentThread) ShowOnTurn(items func() (api.ThreadItem, api.ThreadItem)) {
	t := s.t
	t.mu.Lock()
	at := t.active
	t.mu.Unlock()
	if at == nil || at.ending || at.run == nil {
		return
	}
	started, completed := items()
	at.run.ItemStarted(started)
	at.run.ItemCompleted(completed)
}

// spawnEdges returns the children thread id recorded, loaded or not.
func (m *Manager) spawnEdges(ctx context.Context, id string) ([]transcript.SpawnEdge, error) {
	if t := m.loaded(id); t != nil {
		t.mu.Lock()
		defer t.mu.Unlock()
		return slices.Clone(t.meta.Spawned), nil
	}
	rec, err := m.cfg.Store.GetThread(ctx, id)
	if err != nil {
		return nil, err
	}
	meta, err := transcript.DecodeThreadMeta(rec.Meta)
	return meta.Spawned, err
}

// ListChildren returns the threads a thread spawned, in spawn order, as
// thread/read shows them without turns (the HTTP API lists them under
// their parent).
func (m *Manager) ListChildren(ctx context.Context, threadID string) ([]api.Thread, error) {
	id, err := parseThreadID(threadID)
	if err != nil {
		return nil, err
	}
	edges, err := m.spawnEdges(ctx, id)
	if err != nil {
		if apperr.Is(err, apperr.NotFound) {
			return nil, apperr.New(apperr.NotFound, "thread not found: %s", threadID)
		}
		return nil, err
	}
	out := make([]api.Thread, 0, len(edges))
	for _, e := range edges {
		rec, err := m.cfg.Store.GetThread(ctx, e.ID)
		if apperr.Is(err, apperr.NotFound) {
			if t := m.loaded(e.ID); t != nil {
				out = append(out, t.apiThread()) // an ephemeral child
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		th, err := m.storedThread(rec)
		if err != nil {
			return nil, err
		}
		out = append(out, th)
	}
	return out, nil
}

// optional is s as an optional setting: nil when empty.
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// deref is *s, "" for nil.
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
