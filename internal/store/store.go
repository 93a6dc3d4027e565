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
	OpReserveEventSeqs    = "reserve_event_seqs"
	OpPruneEvents         = "prune_events"
	OpPruneThreadEvents   = "prune_thread_events"
	OpReclaim             = "reclaim"
	OpIdempotencyKey      = "idempotency_key"
	OpCredential          = "credential"
	OpEventConsumer       = "event_consumer"
	OpWebhook             = "webhook"
	OpAudit               = "audit"
	OpQueue               = "queue"
	OpBudgetSpend         = "budget_spend"
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
	// ReadState is opaque to the store: how clients marked the thread
	// read or unread; nil while never marked.
	ReadState json.RawMessage
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
	Data []byte
	// CreatedAt is when the event was logged; the events of a thread that
	// one commit stored together (the embedded store) read back with the
	// newest one's.
	CreatedAt time.Time
}

// CredentialKind is what a browser credential is for.
type CredentialKind string

// The kinds of browser credentials.
const (
	// CredentialTicket is a single-use ticket that opens one websocket or
	// one event stream.
	CredentialTicket CredentialKind = "ticket"
	// CredentialSession is the session behind a session cookie.
	CredentialSession CredentialKind = "session"
)

// Credential is a credential the daemon gave a browser in exchange for a
// bearer token (internal/auth): kept in the store so that any daemon of a
// shared database takes it, and so that a ticket is used once across all
// of them.
type Credential struct {
	// Digest is the SHA-256 of the secret the client holds (32 bytes); the
	// secret itself is never stored.
	Digest []byte
	Kind   CredentialKind
	// Subject is whom it stands for: a principal's name, "" for the
	// operator.
	Subject string
	// Origin is the Origin header of the request that asked for it, ""
	// when it had none.
	Origin string
	// Expires is when it stops being valid; the store keeps it with
	// microsecond precision in UTC.
	Expires time.Time
}

// BudgetSpend is what a principal spent of a period budget.
type BudgetSpend struct {
	// Tokens are the models' reported total tokens.
	Tokens int64
	// CostMicros is the cost in millionths of the prices' currency.
	CostMicros int64
}

// Webhook is a webhook subscription made over the HTTP API: kept in the
// store so that every daemon of a shared database delivers it (one at a
// time, under its event consumer's lease).
type Webhook struct {
	// ID names it (and its event consumer and delivery log).
	ID string
	// Owner is the principal that made it, "" for the operator.
	Owner string
	URL   string
	// Events are the event types it takes, none for all.
	Events []string
	// Thread is the one thread it takes events of, "" for all the threads
	// its owner may see.
	Thread string
	// Secret is the Standard Webhooks signing secret (whsec_…).
	Secret       string
	AllowPrivate bool
	// CreatedAt is kept with microsecond precision in UTC.
	CreatedAt time.Time
}

// WebhookDelivery is one attempt to deliver a webhook's notice.
type WebhookDelivery struct {
	// Webhook is the webhook's id (a subscription's or a [[webhooks]]
	// entry's).
	Webhook string
	// Seq orders a webhook's attempts; the store assigns it.
	Seq       int64
	EventID   string
	EventType string
	// At is when the attempt started (microsecond precision, UTC).
	At time.Time
	// Status is the receiver's HTTP status, 0 when it gave none.
	Status int
	// Error says why the attempt failed, "" for a success.
	Error    string
	Duration time.Duration
	// NextRetry is when the notice is tried again, nil when it is not.
	NextRetry *time.Time
}

// MaxWebhookDeliveriesLimit bounds a page of ListWebhookDeliveries.
const MaxWebhookDeliveriesLimit = 200

// EventCursor is how far an event consumer got in the event log.
type EventCursor struct {
	// Created is when the consumer was first claimed.
	Created time.Time
	// Positions are the last sequence numbers handled, per thread.
	Positions map[string]int64
}

// EventSpan is the sequence numbers of a thread's events in a period.
type EventSpan struct {
	ThreadID    string
	First, Last int64
}

// QueuedSubmission is a user message queued on a thread
// (thread/queue/*), waiting to become one turn.
type QueuedSubmission struct {
	ThreadID string
	ID       string
	// ClientID is the client's id of the message (clientUserMessageId):
	// one entry per thread has it, so that a retried add adds nothing.
	ClientID string
	// Payload is opaque to the store: the input and its metadata.
	Payload json.RawMessage
	// Ord orders the thread's entries (then CreatedAt, then ID); the
	// store assigns it on add, after the thread's last entry.
	Ord int64
	// CreatedAt is kept with microsecond precision in UTC; zero is
	// defaulted to now.
	CreatedAt time.Time
	// TurnID is the turn the entry became, "" while it is queued.
	TurnID string
}

// MaxQueued bounds the entries queued on one thread.
const MaxQueued = 100

// QueueTake names a queued entry that a batch consumes, and the turn it
// becomes.
type QueueTake struct {
	ThreadID string
	ID       string
	TurnID   string
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
	// ReadState, when non-nil, replaces the stored read state; JSON null
	// clears it.
	ReadState json.RawMessage
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

// TurnDrop removes a turn and every later turn of its thread (by Seq),
// with their items, as thread/revert does: the thread's history becomes
// the prefix before TurnID, and the next turn or item created takes the
// Seq after the last one kept. Events are kept: the event log records
// what clients were told.
type TurnDrop struct {
	ThreadID string
	// TurnID must name a stored turn of the thread; otherwise the write
	// is NotFound.
	TurnID string
}

// Batch is a set of writes applied atomically by Store.Write. Within a batch
// the groups apply in field order (thread creates, thread updates, turn
// drops, turn creates, turn updates, item appends, event appends), each group in slice order, so a batch
// may create a thread and its first turn and items at once. On success Write
// fills store-assigned fields back into the pointed-to records: Seq, the
// canonical thread ID and defaulted or normalised timestamps. On failure
// nothing is written and the records are left untouched.
type Batch struct {
	CreateThreads []*Thread
	UpdateThreads []ThreadPatch
	DropTurns     []TurnDrop
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
	// is already stored is a Conflict. So is, on the embedded store, which
	// stores a commit's events of a thread together, one whose number
	// falls among those of such a group: between two of its events (a
	// number it skipped, which nothing writes later: deltas') or around
	// them.
	AppendEvents []*Event
	// AppendAudit are audit log entries; the store assigns their Seq.
	AppendAudit []*AuditEntry
	// TakeQueued takes queued entries (they leave the queue, marked with
	// their turn): each must still be queued, otherwise the batch is a
	// Conflict and writes nothing. A batch that stores a turn takes the
	// entry the turn was made of, so that the entry becomes that one turn
	// or stays queued.
	TakeQueued []QueueTake
}

// Fence is the lease a write depends on: the thread's lease must still
// carry Token and not have expired; Token 0 requires the thread to have no
// live lease at all (a lease given back, whoever gave it).
type Fence struct {
	ThreadID string
	Token    int64
}

// Empty reports whether the batch holds no writes.
func (b *Batch) Empty() bool {
	return b == nil || len(b.CreateThreads)+len(b.UpdateThreads)+len(b.DropTurns)+len(b.CreateTurns)+
		len(b.UpdateTurns)+len(b.AppendItems)+len(b.AppendEvents)+len(b.TakeQueued)+len(b.AppendAudit) == 0
}

// AuditEntry is one record of the append-only audit log: who did what,
// when, from which client and node.
type AuditEntry struct {
	// Seq orders the log; the store assigns it on append, increasing.
	Seq int64
	// At is when the action happened (microsecond precision, UTC);
	// defaulted to now on append.
	At time.Time
	// Kind is what was done: approval, tool_call, config_write,
	// thread_delete, admin, ...
	Kind string
	// Principal is whom the action was done for, "" for the operator.
	Principal string
	// Client names the connection's client ("" when unknown).
	Client string
	// Node is the daemon's node id.
	Node string
	// TraceID is the request's OpenTelemetry trace id, "" when none.
	TraceID string
	// ThreadID and TurnID are the thread and turn the action belongs to,
	// "" when none.
	ThreadID, TurnID string
	// Detail is a JSON object saying what exactly was done.
	Detail json.RawMessage
}

// AuditQuery selects a page of the audit log, oldest first; empty fields
// do not filter.
type AuditQuery struct {
	Kind     string
	ThreadID string
	// Principal, when non-nil, keeps the entries of that principal ("" is
	// the operator).
	Principal *string
	// Since keeps entries at or after it; Until entries before it.
	Since, Until time.Time
	// AfterSeq keeps entries with Seq greater than it: the cursor.
	AfterSeq int64
	// Limit defaults to DefaultLimit and is clamped to MaxAuditLimit.
	Limit int
}

// MaxAuditLimit caps a ListAudit page.
const MaxAuditLimit = 1000

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
	// HasPreview, when true, keeps only threads with a preview: those a
	// user message with text has started.
	HasPreview bool
	// IDs, when non-empty, keeps the threads with one of these ids.
	IDs []string
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
	// ReserveEventSeqs reserves the next n (> 0) sequence numbers of a
	// thread's log and returns the first of them: one past the greatest
	// number reserved or stored for the thread so far. The reservation is
	// stored when it returns, so a daemon that hands out only numbers it
	// reserved never hands out one twice, even when it dies before the
	// events it numbered are stored. A thread id that is not a UUID, or n
	// < 1, is Invalid.
	ReserveEventSeqs(ctx context.Context, threadID string, n int64) (first int64, err error)
	// PruneEvents deletes up to limit events created before `before`, oldest
	// first, and returns how many it deleted. A backend that stores a
	// commit's events of a thread together (the embedded store) deletes
	// them together: limit then bounds such groups, not events, and the
	// count takes in the numbers such a group skips (deltas' numbers,
	// never stored there).
	PruneEvents(ctx context.Context, before time.Time, limit int) (int64, error)
	// PruneThreadEvents deletes a thread's oldest events, up to limit of
	// them (of groups, as PruneEvents), until the bytes of the events it
	// keeps (the sum of their Data) are at most maxBytes; it returns how
	// many it deleted and the bytes left.
	PruneThreadEvents(ctx context.Context, threadID string, maxBytes int64, limit int) (deleted, remaining int64, err error)
	// Reclaim gives the space that deletions freed back to the file system
	// where the backend owns its file (the embedded store: an incremental
	// vacuum, then a truncating WAL checkpoint); other backends do nothing
	// (Postgres's autovacuum makes the space reusable).
	Reclaim(ctx context.Context) error
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
	// PutCredential stores c, whose digest must be new (else Conflict),
	// and deletes the credentials expired at now.
	PutCredential(ctx context.Context, c Credential, now time.Time) error
	// GetCredential returns the credential of that kind and digest;
	// found is false when there is none.
	GetCredential(ctx context.Context, kind CredentialKind, digest []byte) (c Credential, found bool, err error)
	// DeleteCredential deletes the credential of that kind and digest and
	// returns it; found is false when there is none. Of the calls that
	// delete one credential at once (on every daemon of a shared
	// database), exactly one finds it.
	DeleteCredential(ctx context.Context, kind CredentialKind, digest []byte) (c Credential, found bool, err error)
	// ClaimEventConsumer takes the lease of the event consumer name for
	// holder until expires, creating the consumer (and its empty cursor,
	// created at now) on first use. The holder of an unexpired lease
	// renews it and keeps its token; another holder gets the lease only
	// once it expired at now, with a new token. ok is false while another
	// holder's lease runs.
	ClaimEventConsumer(ctx context.Context, name, holder string, now, expires time.Time) (token int64, ok bool, err error)
	// ReleaseEventConsumer ends the lease of consumer name held under
	// token at now, so that another holder may take it at once.
	ReleaseEventConsumer(ctx context.Context, name string, token int64, now time.Time) error
	// DeleteEventConsumer deletes consumer name's lease and cursor (a
	// consumer whose events nobody will read again: a deleted webhook
	// subscription's); none is not an error. A holder that claims it
	// again later starts it anew.
	DeleteEventConsumer(ctx context.Context, name string) error
	// EventCursor returns consumer name's cursor: when it was created and
	// the last sequence number handled in each thread. NotFound for a
	// consumer never claimed.
	EventCursor(ctx context.Context, name string) (EventCursor, error)
	// SaveEventCursor moves consumer name's cursor forward to positions
	// (thread id → last sequence number handled; a stored position is never
	// moved back), while token is its lease's token: otherwise, another
	// holder took the consumer over, and it is a Conflict.
	SaveEventCursor(ctx context.Context, name string, token int64, positions map[string]int64) error
	// EventSpans returns, for every thread with events created at or after
	// since, the first and last sequence numbers of those events.
	EventSpans(ctx context.Context, since time.Time) ([]EventSpan, error)
	// PutWebhook stores a new subscription; an id stored already is a
	// Conflict.
	PutWebhook(ctx context.Context, w Webhook) error
	// GetWebhook returns a subscription; NotFound when there is none.
	GetWebhook(ctx context.Context, id string) (Webhook, error)
	// ListWebhooks returns every subscription, oldest first.
	ListWebhooks(ctx context.Context) ([]Webhook, error)
	// DeleteWebhook deletes a subscription and its delivery log; NotFound
	// when there is none.
	DeleteWebhook(ctx context.Context, id string) error
	// AppendWebhookDelivery logs an attempt of d.Webhook (a subscription
	// or a [[webhooks]] entry) and deletes its older attempts beyond the
	// newest keep.
	AppendWebhookDelivery(ctx context.Context, d WebhookDelivery, keep int) error
	// ListWebhookDeliveries returns up to limit (clamped to
	// MaxWebhookDeliveriesLimit) attempts of a webhook with Seq below
	// beforeSeq (0: from the newest), newest first.
	ListWebhookDeliveries(ctx context.Context, webhook string, beforeSeq int64, limit int) ([]WebhookDelivery, error)
	// ListAudit returns a page of the audit log in Seq order.
	ListAudit(ctx context.Context, q AuditQuery) ([]AuditEntry, error)
	// PruneAudit deletes up to limit audit entries from before `before`,
	// oldest first, and returns how many it deleted.
	PruneAudit(ctx context.Context, before time.Time, limit int) (int64, error)
	// AddQueued queues q after the thread's last entry and fills in the
	// fields the store assigns. When the thread has an entry with
	// q.ClientID already, queued or taken (TurnID set), it adds nothing,
	// fills q with that entry and returns added false. NotFound for an
	// unknown thread; Invalid when the thread has MaxQueued entries
	// queued.
	AddQueued(ctx context.Context, q *QueuedSubmission) (added bool, err error)
	// ListQueued returns a thread's queued entries in order (not the
	// taken ones).
	ListQueued(ctx context.Context, threadID string) ([]QueuedSubmission, error)
	// UpdateQueued replaces a queued entry's payload; NotFound when it is
	// not queued.
	UpdateQueued(ctx context.Context, threadID, id string, payload json.RawMessage) error
	// DeleteQueued deletes a queued entry and reports whether it was
	// queued.
	DeleteQueued(ctx context.Context, threadID, id string) (bool, error)
	// ReorderQueued puts a thread's entries in the order of ids, which
	// must name each of them once (else Invalid).
	ReorderQueued(ctx context.Context, threadID string, ids []string) error
	// QueuedThreads returns the threads that have queued entries (not
	// only taken ones).
	QueuedThreads(ctx context.Context) ([]string, error)
	// AddBudgetSpend adds add to what principal spent in the budget period
	// that starts at periodStart and returns the new sum, in one atomic
	// statement: daemons sharing the database never lose each other's
	// spending.
	AddBudgetSpend(ctx context.Context, principal string, periodStart time.Time, add BudgetSpend) (BudgetSpend, error)
	// GetBudgetSpend returns what principal spent in the budget period that
	// starts at periodStart (zero when nothing).
	GetBudgetSpend(ctx context.Context, principal string, periodStart time.Time) (BudgetSpend, error)
	// DeleteThread removes a thread with its turns, items, events and
	// queued entries, atomically; NotFound when there is no such thread.
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
