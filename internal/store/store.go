package store

import (
	"context"
	"encoding/json"
	"time"

	"github.com/appserver/appserver/internal/apperr"
)

// Turn statuses, as in the protocol's Turn.status.
const (
	TurnInProgress  = "inProgress"
	TurnCompleted   = "completed"
	TurnInterrupted = "interrupted"
	TurnFailed      = "failed"
)

// Page sizes of the list calls.
const (
	// DefaultLimit is the page size used when a query's Limit is zero or negative.
	DefaultLimit = 25
	// MaxLimit caps a query's Limit; larger values are clamped to it.
	MaxLimit = 100
	// MaxEventsLimit caps a ListEvents page.
	MaxEventsLimit = 1000
)

// SortKey names the column thread/list orders by.
type SortKey string

// The sort keys of thread/list.
const (
	SortCreatedAt SortKey = "created_at"
	SortUpdatedAt SortKey = "updated_at"
	SortRecencyAt SortKey = "recency_at"
)

// Operation names passed to a backend's Observe hook, usable as metric labels.
const (
	OpWrite               = "write"
	OpDeleteThread        = "delete_thread"
	OpGetThread           = "get_thread"
	OpListThreads         = "list_threads"
	OpGetTurn             = "get_turn"
	OpListTurns           = "list_turns"
	OpGetItem             = "get_item"
	OpListItems           = "list_items"
	OpListInProgressTurns = "list_in_progress_turns"
	OpPing                = "ping"
	OpListEvents          = "list_events"
	OpLastEventSeq        = "last_event_seq"
	OpPruneEvents         = "prune_events"
	OpIdempotencyKey      = "idempotency_key"
)

// ObserveFunc receives the duration and outcome of every store operation; op
// is one of the Op constants. It must be cheap and safe for concurrent use.
type ObserveFunc func(op string, d time.Duration, err error)

// Thread is a stored conversation. Ephemeral threads never reach a durable
// store: the turns layer keeps them in a memory store.
type Thread struct {
	// ID is a UUID; the store keeps and returns it in canonical lower-case form.
	ID            string
	Name          *string
	Preview       string
	Cwd           string
	ModelProvider string
	Model         *string
	Source        string  // the protocol's SessionSource, as the turns layer encodes it
	ForkedFromID  *string // the source thread of a fork
	Archived      bool
	// CreatedAt, UpdatedAt and RecencyAt are kept with microsecond precision
	// in UTC; zero values are defaulted on create (now, CreatedAt, UpdatedAt).
	CreatedAt time.Time
	UpdatedAt time.Time
	RecencyAt time.Time
	// Meta is opaque to the store: whatever else the turns layer keeps
	// (settings, dynamic tools, ...).
	Meta json.RawMessage
}

// Turn is one user-initiated exchange within a thread.
type Turn struct {
	ThreadID string
	ID       string
	// Seq is the 1-based, gap-free position of the turn in its thread; the
	// store assigns it on create.
	Seq         int64
	Status      string          // one of the Turn* constants
	Error       json.RawMessage // the protocol's TurnError; nil unless failed
	StartedAt   *time.Time
	CompletedAt *time.Time
	Meta        json.RawMessage
}

// Item is one persisted ThreadItem of a turn.
type Item struct {
	ThreadID string
	// Seq orders the items of a thread across all its turns; the store
	// assigns it on append, starting at 1, without gaps.
	Seq    int64
	TurnID string // must name an existing turn of the thread
	// ItemID is the protocol item id, unique within the thread.
	ItemID string
	// Type is the ThreadItem "type" discriminator.
	Type string
	// Payload is the full ThreadItem JSON.
	Payload   json.RawMessage
	CreatedAt time.Time
}

// Event is one notification of a thread's durable event log.
type Event struct {
	ThreadID string
	// Seq is the event's position in its thread's log, assigned by the
	// daemon that runs the thread (not by the store): consecutive, from 1.
	Seq    int64
	Method string
	// Data is the notification frame exactly as clients got it; the store
	// keeps the bytes as they are.
	Data      []byte
	CreatedAt time.Time
}

// ThreadPatch changes some fields of an existing thread; nil fields are left
// as they are.
type ThreadPatch struct {
	ID        string
	Name      *string
	Preview   *string
	Archived  *bool
	Model     *string
	UpdatedAt *time.Time
	RecencyAt *time.Time
	// Meta, when non-nil, replaces the stored meta; JSON null clears it.
	Meta json.RawMessage
}

// TurnPatch changes some fields of an existing turn; zero fields are left as
// they are.
type TurnPatch struct {
	ThreadID string
	ID       string
	// Status, when non-empty, replaces the stored status.
	Status string
	// Error, when non-nil, replaces the stored error; JSON null clears it.
	Error       json.RawMessage
	StartedAt   *time.Time
	CompletedAt *time.Time
	// Meta, when non-nil, replaces the stored meta; JSON null clears it.
	Meta json.RawMessage
}

// Batch is a set of writes applied atomically by Store.Write. Within a batch
// the groups apply in field order (thread creates, thread updates, turn
// creates, turn updates, item appends, event appends), each group in slice order, so a batch
// may create a thread and its first turn and items at once. On success Write
// fills store-assigned fields back into the pointed-to records: Seq, the
// canonical thread ID and defaulted or normalised timestamps. On failure
// nothing is written and the records are left untouched.
type Batch struct {
	CreateThreads []*Thread
	UpdateThreads []ThreadPatch
	CreateTurns   []*Turn
	UpdateTurns   []TurnPatch
	AppendItems   []*Item
	// Fences make the batch conditional on leases (internal/cluster): it
	// is written only if every fence's thread is still leased with that
	// token and the lease has not expired, checked in the same
	// transaction; otherwise nothing is written and Write returns
	// Conflict. Only the Postgres store has leases; the embedded stores
	// refuse a fenced batch. Fences alone make no write.
	Fences []Fence
	// AppendEvents are written as they are; an event whose (thread, seq)
	// is already stored is a Conflict.
	AppendEvents []*Event
}

// Fence is the lease a write depends on: the thread's lease must still
// carry Token.
type Fence struct {
	ThreadID string
	Token    int64
}

// Empty reports whether the batch holds no writes.
func (b *Batch) Empty() bool {
	return b == nil || len(b.CreateThreads)+len(b.UpdateThreads)+len(b.CreateTurns)+
		len(b.UpdateTurns)+len(b.AppendItems)+len(b.AppendEvents) == 0
}

// ListThreadsQuery selects a page of threads for thread/list.
type ListThreadsQuery struct {
	// Archived true lists only archived threads, false only the others.
	Archived bool
	// SortKey defaults to SortCreatedAt.
	SortKey SortKey
	// Desc lists newest first; thread/list defaults to it.
	Desc bool
	// Limit defaults to DefaultLimit and is clamped to MaxLimit.
	Limit int
	// Cursor is a NextCursor or BackwardsCursor of an earlier page, or "".
	Cursor string
	// Cwds, when non-empty, keeps threads whose cwd equals one of them.
	Cwds []string
	// ModelProviders, when non-empty, keeps threads of one of them.
	ModelProviders []string
	// SearchTerm, when non-empty, keeps threads whose name or preview, or
	// the text of one of whose user or agent messages, contains it,
	// ignoring case (in message text: as the database's lower() folds it on
	// Postgres; beyond ASCII in SQLite for terms of three or more characters).
	SearchTerm string
}

// ThreadPage is one page of ListThreads.
type ThreadPage struct {
	Threads []Thread
	// NextCursor continues in the same direction; "" on the last page.
	NextCursor string
	// BackwardsCursor, used with the opposite direction, lists what comes
	// before this page; "" when the page is empty.
	BackwardsCursor string
}

// TurnsQuery selects a page of a thread's turns in Seq order; Limit and
// Cursor work as in ListThreadsQuery.
type TurnsQuery struct {
	ThreadID string
	Desc     bool // newest first
	Limit    int
	Cursor   string
}

// TurnPage is one page of ListTurns; its cursors work as in ThreadPage.
type TurnPage struct {
	Turns           []Turn
	NextCursor      string
	BackwardsCursor string
}

// ItemsQuery selects a page of a thread's items in Seq order; Limit and
// Cursor work as in ListThreadsQuery.
type ItemsQuery struct {
	ThreadID string
	// TurnID, when non-empty, keeps the items of that turn only.
	TurnID string
	// AfterSeq keeps items with Seq greater than it, for catching up.
	AfterSeq int64
	Desc     bool // newest first
	Limit    int
	Cursor   string
}

// ItemPage is one page of ListItems; its cursors work as in ThreadPage.
type ItemPage struct {
	Items           []Item
	NextCursor      string
	BackwardsCursor string
}

// Store persists transcripts. All methods are safe for concurrent use and
// return *apperr.Error values: NotFound, Conflict, Invalid, Unavailable or
// Internal.
type Store interface {
	// Write applies b atomically in one transaction.
	Write(ctx context.Context, b *Batch) error
	// GetThread returns the thread with the given id.
	GetThread(ctx context.Context, id string) (Thread, error)
	// ListThreads returns a page of threads using keyset pagination on (sort key, id).
	ListThreads(ctx context.Context, q ListThreadsQuery) (ThreadPage, error)
	// GetTurn returns one turn of a thread.
	GetTurn(ctx context.Context, threadID, turnID string) (Turn, error)
	// ListTurns returns a page of a thread's turns in Seq order.
	ListTurns(ctx context.Context, q TurnsQuery) (TurnPage, error)
	// GetItem returns one item of a thread by its protocol item id.
	GetItem(ctx context.Context, threadID, itemID string) (Item, error)
	// ListItems returns a page of a thread's items in Seq order.
	ListItems(ctx context.Context, q ItemsQuery) (ItemPage, error)
	// ListEvents returns up to limit (clamped to MaxEventsLimit) events of
	// a thread's log with Seq greater than afterSeq, in Seq order.
	ListEvents(ctx context.Context, threadID string, afterSeq int64, limit int) ([]Event, error)
	// LastEventSeq returns the greatest Seq stored for the thread, 0 if none.
	LastEventSeq(ctx context.Context, threadID string) (int64, error)
	// PruneEvents deletes up to limit events created before `before`, oldest
	// first, and returns how many it deleted.
	PruneEvents(ctx context.Context, before time.Time, limit int) (int64, error)
	// ClaimIdempotencyKey claims key within scope for a request whose
	// canonical hash is hash, until expires (a claim expired at now is
	// replaced). claimed true: the caller owns the key and must
	// CompleteIdempotencyKey or ReleaseIdempotencyKey it. Otherwise turnID
	// is the turn the key started, "" while its owner is still starting
	// it. A key held with another hash is a Conflict.
	ClaimIdempotencyKey(ctx context.Context, scope, key string, hash []byte, now, expires time.Time) (claimed bool, turnID string, err error)
	// CompleteIdempotencyKey records the turn a claimed key started.
	CompleteIdempotencyKey(ctx context.Context, scope, key, turnID string) error
	// ReleaseIdempotencyKey forgets a claimed key whose request started no
	// turn, so that a retry may.
	ReleaseIdempotencyKey(ctx context.Context, scope, key string) error
	// PruneIdempotencyKeys deletes the keys expired at now.
	PruneIdempotencyKeys(ctx context.Context, now time.Time) (int64, error)
	// DeleteThread removes a thread with its turns, items and events, atomically;
	// NotFound when there is no such thread.
	DeleteThread(ctx context.Context, id string) error
	// ListInProgressTurns returns every turn still marked inProgress, so that
	// start-up can settle the turns of a daemon that crashed.
	ListInProgressTurns(ctx context.Context) ([]Turn, error)
	// Ping checks that the storage answers.
	Ping(ctx context.Context) error
	// Close releases the store's resources.
	Close() error
}

// MessageTexts are the texts of a user or agent message item, the ones a
// thread search (ListThreadsQuery.SearchTerm) matches; none for other
// items or a payload that does not parse.
func MessageTexts(it Item) []string {
	var msg struct {
		Text    string `json:"text"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if (it.Type != "agentMessage" && it.Type != "userMessage") || json.Unmarshal(it.Payload, &msg) != nil {
		return nil
	}
	if it.Type == "agentMessage" {
		return []string{msg.Text}
	}
	texts := make([]string, len(msg.Content))
	for i, c := range msg.Content {
		texts[i] = c.Text
	}
	return texts
}

// ErrNoLeases is what a store without leases (the embedded ones, which
// serve one daemon) answers a fenced batch.
var ErrNoLeases = apperr.New(apperr.Invalid, "fenced writes need the Postgres store")
