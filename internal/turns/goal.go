package turns

import (
	"context"
	"strings"
	"time"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/turns/transcript"
)

// goalStatuses are the states a client may set.
var goalStatuses = map[api.ThreadGoalStatus]bool{
	api.GoalActive: true, api.GoalPaused: true, api.GoalBlocked: true,
	api.GoalUsageLimited: true, api.GoalBudgetLimited: true, api.GoalComplete: true,
}

// tokenTotalLocked is the thread's token count so far; t.mu must be held.
func (t *thread) tokenTotalLocked() int64 {
	if t.meta.TokenTotal == nil {
		return 0
	}
	return t.meta.TokenTotal.TotalTokens
}

// goalLocked renders the thread's goal, or nil; its time includes the
// running turn's so far. t.mu must be held.
func (t *thread) goalLocked() *api.ThreadGoal {
	g := t.meta.Goal
	if g == nil {
		return nil
	}
	used := g.TimeUsedMs
	if !t.goalSince.IsZero() {
		used += max(t.m.now().Sub(t.goalSince).Milliseconds(), 0)
	}
	return &api.ThreadGoal{
		ThreadID: t.id, Objective: g.Objective, Status: g.Status, TokenBudget: g.TokenBudget,
		TokensUsed: max(t.tokenTotalLocked()-g.TokensBase, 0), TimeUsedSeconds: used / 1000,
		CreatedAt: g.CreatedAt, UpdatedAt: g.UpdatedAt,
	}
}

// The goal clock counts the time turns run while the thread's goal is
// active: it starts when a turn starts or a goal becomes active during
// one, and stops when the turn ends or the goal stops being active.

// startGoalClockLocked starts the clock at now if the thread has an active
// goal and a turn. t.mu must be held.
func (t *thread) startGoalClockLocked(now time.Time) {
	if g := t.meta.Goal; g != nil && g.Status == api.GoalActive && t.active != nil {
		t.goalSince = now
	}
}

// stopGoalClockLocked adds the time since the clock started to the goal
// and stops it. t.mu must be held.
func (t *thread) stopGoalClockLocked(now time.Time) {
	if t.goalSince.IsZero() {
		return
	}
	if g := t.meta.Goal; g != nil {
		g.TimeUsedMs += max(now.Sub(t.goalSince).Milliseconds(), 0)
	}
	t.goalSince = time.Time{}
}

// SetGoal creates the thread's goal, or changes the given fields of the
// one it has, persists it with the thread and tells the thread's
// subscribers (thread/goal/updated).
func (m *Manager) SetGoal(ctx context.Context, p api.ThreadGoalSetParams) (api.ThreadGoalSetResult, After, error) {
	return m.setGoal(ctx, p, false)
}

// setGoal is SetGoal; create refuses a thread that has a goal already (the
// model's create_goal), checked under the lock that orders goal writers.
func (m *Manager) setGoal(ctx context.Context, p api.ThreadGoalSetParams, create bool) (api.ThreadGoalSetResult, After, error) {
	if p.Objective != nil && strings.TrimSpace(*p.Objective) == "" {
		return api.ThreadGoalSetResult{}, nil, apperr.New(apperr.Invalid, "objective must not be empty")
	}
	if p.Status != nil && !goalStatuses[*p.Status] {
		return api.ThreadGoalSetResult{}, nil, apperr.New(apperr.Invalid, "unknown goal status: %s", *p.Status)
	}
	if p.TokenBudget != nil && *p.TokenBudget <= 0 {
		return api.ThreadGoalSetResult{}, nil, apperr.New(apperr.Invalid, "tokenBudget must be positive")
	}
	t, err := m.threadFor(ctx, p.ThreadID, "thread not found: %s")
	if err != nil {
		return api.ThreadGoalSetResult{}, nil, err
	}
	defer t.unpin()
	now := m.now()
	// metaMu keeps other metadata writers out from the read to the write.
	t.metaMu.Lock()
	defer t.metaMu.Unlock()
	t.mu.Lock()
	var g transcript.Goal
	if prev := t.meta.Goal; prev != nil {
		if create {
			t.mu.Unlock()
			return api.ThreadGoalSetResult{}, nil, apperr.New(apperr.Conflict, "cannot create a new goal because this thread already has a goal; use update_goal only when the existing goal is complete or blocked")
		}
		g = *prev
		if !t.goalSince.IsZero() {
			g.TimeUsedMs += max(now.Sub(t.goalSince).Milliseconds(), 0)
		}
	} else {
		if p.Objective == nil {
			t.mu.Unlock()
			return api.ThreadGoalSetResult{}, nil, apperr.New(apperr.Invalid, "objective is required to create a goal")
		}
		g = transcript.Goal{Status: api.GoalActive, TokensBase: t.tokenTotalLocked(), CreatedAt: now.Unix()}
	}
	t.mu.Unlock()
	if p.Objective != nil {
		g.Objective = strings.TrimSpace(*p.Objective)
	}
	if p.Status != nil {
		g.Status = *p.Status
	}
	if p.TokenBudget != nil {
		g.TokenBudget = p.TokenBudget
	}
	g.UpdatedAt = now.Unix()
	if err := t.putGoal(ctx, &g); err != nil {
		return api.ThreadGoalSetResult{}, nil, err
	}
	t.mu.Lock()
	// g holds the time counted up to now; the clock goes on from here
	// only if the goal is still active.
	t.goalSince = time.Time{}
	t.startGoalClockLocked(now)
	goal := *t.goalLocked()
	t.mu.Unlock()
	return api.ThreadGoalSetResult{Goal: goal}, func() {
		t.emit("thread/goal/updated", api.ThreadGoalUpdatedNotification{ThreadID: t.id, Goal: goal})
	}, nil
}

// Goal returns the thread's goal, or nil.
func (m *Manager) Goal(ctx context.Context, p api.ThreadGoalGetParams) (api.ThreadGoalGetResult, error) {
	t, err := m.threadFor(ctx, p.ThreadID, "thread not found: %s")
	if err != nil {
		return api.ThreadGoalGetResult{}, err
	}
	defer t.unpin()
	t.mu.Lock()
	defer t.mu.Unlock()
	return api.ThreadGoalGetResult{Goal: t.goalLocked()}, nil
}

// ClearGoal removes the thread's goal and tells its subscribers
// (thread/goal/cleared); false when it had none.
func (m *Manager) ClearGoal(ctx context.Context, p api.ThreadGoalClearParams) (api.ThreadGoalClearResult, After, error) {
	t, err := m.threadFor(ctx, p.ThreadID, "thread not found: %s")
	if err != nil {
		return api.ThreadGoalClearResult{}, nil, err
	}
	defer t.unpin()
	t.metaMu.Lock()
	defer t.metaMu.Unlock()
	t.mu.Lock()
	had := t.meta.Goal != nil
	t.mu.Unlock()
	if !had {
		return api.ThreadGoalClearResult{}, nil, nil
	}
	if err := t.putGoal(ctx, nil); err != nil {
		return api.ThreadGoalClearResult{}, nil, err
	}
	t.mu.Lock()
	t.goalSince = time.Time{}
	t.mu.Unlock()
	return api.ThreadGoalClearResult{Cleared: true}, func() {
		t.emit("thread/goal/cleared", api.ThreadGoalClearedNotification{ThreadID: t.id})
	}, nil
}

// putGoal replaces the thread's goal (nil clears it) and persists it with
// the thread's metadata; on a failed write the goal is as it was. t.metaMu
// must be held.
func (t *thread) putGoal(ctx context.Context, g *transcript.Goal) error {
	t.mu.Lock()
	prev := t.meta.Goal
	t.meta.Goal = g
	patch := store.ThreadPatch{ID: t.id, Meta: t.metaJSONLocked()}
	t.mu.Unlock()
	if err := t.write(ctx, &store.Batch{UpdateThreads: []store.ThreadPatch{patch}}); err != nil {
		t.mu.Lock()
		t.meta.Goal = prev
		t.mu.Unlock()
		return err
	}
	return nil
}

// ThreadGoals is a thread's goal as the model's goal tools reach it
// (ToolContext.Goals): the same operations as thread/goal/set and get, whose
// changes go out to the thread's subscribers at once.
type ThreadGoals struct {
	m        *Manager
	threadID string
}

// Get returns the thread's goal, or nil when it has none.
func (g *ThreadGoals) Get(ctx context.Context) (*api.ThreadGoal, error) {
	res, err := g.m.Goal(ctx, api.ThreadGoalGetParams{ThreadID: g.threadID})
	return res.Goal, err
}

// Create gives the thread an active goal; it fails when the thread has one.
func (g *ThreadGoals) Create(ctx context.Context, objective string, tokenBudget *int64) (api.ThreadGoal, error) {
	return g.set(ctx, api.ThreadGoalSetParams{ThreadID: g.threadID, Objective: &objective, TokenBudget: tokenBudget}, true)
}

// SetStatus changes the status of the thread's goal; it fails when the
// thread has none.
func (g *ThreadGoals) SetStatus(ctx context.Context, status api.ThreadGoalStatus) (api.ThreadGoal, error) {
	if cur, err := g.Get(ctx); err != nil {
		return api.ThreadGoal{}, err
	} else if cur == nil {
		return api.ThreadGoal{}, apperr.New(apperr.NotFound, "this thread has no goal to update")
	}
	return g.set(ctx, api.ThreadGoalSetParams{ThreadID: g.threadID, Status: &status}, false)
}

func (g *ThreadGoals) set(ctx context.Context, p api.ThreadGoalSetParams, create bool) (api.ThreadGoal, error) {
	res, after, err := g.m.setGoal(ctx, p, create)
	if err != nil {
		return api.ThreadGoal{}, err
	}
	after()
	return res.Goal, nil
}

// goalsLocked is the thread's goal for its tools; nil for an ephemeral
// thread, whose goal could not outlive it (the reference offers such
// threads no goal tools). t.mu must be held.
func (t *thread) goalsLocked() *ThreadGoals {
	if t.ephemeral() {
		return nil
	}
	return &ThreadGoals{m: t.m, threadID: t.id}
}
