package loop

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/budget"
	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/registry"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/turns/transcript"
)

// Thread is the thread table's side of a running turn: all the loop does
// to its thread goes through it. The table implements it for each turn,
// keeping its locks and the order of the thread's meta writes.
type Thread interface {
	// Emit publishes a notification of the thread.
	Emit(method string, params any)
	// Write stores a batch in the thread's store.
	Write(ctx context.Context, b *store.Batch) error
	// WriteMeta stores b with the thread's meta as it is when the batch
	// is written, in the order the meta's copies were made.
	WriteMeta(ctx context.Context, b *store.Batch) error
	// UniqueItemID is id unless the thread used it already (then a fresh
	// one, prefixed with prefix when id is no key the store can keep).
	UniqueItemID(ctx context.Context, id, prefix string) string
	// BroadcastStatus tells every client that may see the thread its
	// status.
	BroadcastStatus()
	// NeedsPreview reports whether the thread has no preview yet (its
	// first user message gives it one).
	NeedsPreview() bool
	// NeedsCompaction reports whether the thread's context has reached
	// its auto-compact limit.
	NeedsCompaction() bool
	// AddUsage adds a response's usage (add) to the thread's total, with
	// last as its last usage and contextTokens as its context size, the
	// turn as its last; it returns the new total.
	AddUsage(turnID string, add, last api.TokenUsageBreakdown, contextTokens int64) api.TokenUsageBreakdown
	// WriteUsage is AddUsage and WriteMeta as one step: no other copy of
	// the meta is stored between them.
	WriteUsage(ctx context.Context, b *store.Batch, turnID string, add, last api.TokenUsageBreakdown, contextTokens int64) (api.TokenUsageBreakdown, error)
	// AddCost adds a response's cost to what the thread spent.
	AddCost(micros int64)
	// Spent is what the thread spent over its life.
	Spent() budget.Spend
	// RateLimitsChanged returns the account/rateLimits/updated params of
	// a response's rate limits, and whether they differ from the last the
	// thread announced (nil limits never do); the caller announces them
	// then, and the thread counts them as announced from now on.
	RateLimitsChanged(provider string, rl *model.RateLimits) (api.AccountRateLimitsUpdatedNotification, bool)
	// Request sends a server request of the thread and waits for the
	// answer (the table's Sink.Request).
	Request(ctx context.Context, method string, params any) (result json.RawMessage, id api.RequestID, sent bool, err error)
	// CommitEnd stores the turn's end and announces it; the turn then
	// lets go of the thread.
	CommitEnd(e *End)
}

// Models resolves a provider id to its model client.
type Models interface {
	Client(provider string) (model.Client, error)
}

// Observer learns what turns do, for metrics and traces: the part of the
// thread table's Observer the loop calls. Its methods are called
// concurrently and must not block.
type Observer interface {
	// TurnEnded is called once per turn, with its end status and how long
	// it ran.
	TurnEnded(ctx context.Context, status api.TurnStatus, d time.Duration)
	// ModelRequestStarted is called before each model request; the
	// context it returns is the request's.
	ModelRequestStarted(ctx context.Context, provider, model string) context.Context
	// ModelRequest is called once per model request, when it ended.
	ModelRequest(ctx context.Context, s ModelRequestStats)
	// ToolCall is called once per tool call, when it ended.
	ToolCall(ctx context.Context, tool, outcome string, d time.Duration)
}

// Deps are what every turn's loop shares, set once by the thread table.
type Deps struct {
	Models   Models
	Observer Observer
	Logger   *slog.Logger
	Now      func() time.Time
	// CompactPrompt ends a compaction's request.
	CompactPrompt string
	// ContextWindow is the context window token usage reports; 0 none.
	ContextWindow int64
	// MaxCommitDelay bounds how long a round's commit waits for the next
	// request to be written (roundCommitter).
	MaxCommitDelay time.Duration
}

// contextWindow is ContextWindow as token usage carries it.
func (d *Deps) contextWindow() *int64 {
	if w := d.ContextWindow; w > 0 {
		return &w
	}
	return nil
}

// NewRun returns the loop of turn at on thread t (threadID): prior is the
// model history of the thread's finished turns (a snapshot), b the turn's
// budget (nil without budgets).
func NewRun(d *Deps, t Thread, threadID string, at *Turn, prior transcript.History, b *Budget) *Run {
	return &Run{
		d: d, t: t, threadID: threadID, at: at,
		commits: roundCommitter{delay: d.MaxCommitDelay},
		prior:   prior,
		hist:    transcript.History{Root: at.Root},
		budget:  b,
	}
}

// SetTools gives the turn its tool set; called before the turn runs.
func (r *Run) SetTools(specs []registry.ConfiguredToolSpec, reg *registry.Registry) {
	r.specs, r.registry = specs, reg
}

// UseRequestBuffers gives the turn the request slices the thread's last
// turn built (End.RequestBuffers), to build its requests in; called
// before the turn runs.
func (r *Run) UseRequestBuffers(input []model.InputItem, wire []json.RawMessage) {
	r.reqInput, r.reqWire = input[:0], wire[:0]
}

// SetObserved gives the turn the Observer's context of it (TurnStarted);
// called before the turn runs.
func (r *Run) SetObserved(ctx context.Context) { r.obs = ctx }

// newID is a fresh item id.
func newID() string { return uuid.Must(uuid.NewV7()).String() }
