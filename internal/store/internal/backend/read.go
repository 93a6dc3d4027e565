package backend

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/store"
)

// Row is one result row, as both drivers' single-row queries return it.
type Row interface {
	Scan(dest ...any) error
}

// Rows is a result set being read.
type Rows interface {
	Row
	Next() bool
	Err() error
	Close() error
}

// DB is what the shared reads need of a backend's connections.
type DB interface {
	// Query runs a statement that returns rows.
	Query(ctx context.Context, sql string, args ...any) (Rows, error)
	// QueryRow runs a statement that returns at most one row; Scan reports
	// the absence of a row with an error NoRows recognises.
	QueryRow(ctx context.Context, sql string, args ...any) Row
	// NoRows reports whether err says QueryRow found no row.
	NoRows(err error) bool
	// StorageErr classifies an error of the database or the driver.
	StorageErr(err error) error
}

// Reader implements the reads of store.Store once for both backends; a
// backend's Store embeds it.
type Reader struct {
	db      DB
	d       Dialect
	observe store.ObserveFunc
	usable  func() error

	getThread, threadExists, getTurn, getItem, inProgressTurns string
	listEvents, lastEventSeq                                   string
}

// NewReader returns the reads of a store in dialect d over db; observe, if
// set, receives every operation, and usable refuses operations once the
// store is closed.
func NewReader(d Dialect, db DB, observe store.ObserveFunc, usable func() error) Reader {
	one := func(columns, table, where string) string {
		return "SELECT " + columns + " FROM " + table + " WHERE " + where
	}
	return Reader{
		db: db, d: d, observe: observe, usable: usable,
		getThread:       one(threadColumns, "threads", "id = "+d.Param(1)),
		threadExists:    one("1", "threads", "id = "+d.Param(1)),
		getTurn:         one(turnColumns, "turns", "thread_id = "+d.Param(1)+" AND id = "+d.Param(2)),
		getItem:         one(itemColumns, "items", "thread_id = "+d.Param(1)+" AND item_id = "+d.Param(2)),
		inProgressTurns: one(turnColumns, "turns", "status = 'inProgress'") + " ORDER BY thread_id, seq",
		listEvents: one(eventColumns, "events", "thread_id = "+d.Param(1)+" AND seq > "+d.Param(2)) +
			" ORDER BY seq LIMIT " + d.Param(3),
		lastEventSeq: one("COALESCE(MAX(seq), 0)", "events", "thread_id = "+d.Param(1)),
	}
}

const threadColumns = `id, name, preview, cwd, model_provider, model, source, forked_from_id,
	archived, created_at, updated_at, recency_at, meta, read_state`

func scanThread(r Row) (store.Thread, error) {
	var t store.Thread
	var created, updated, recency timeCol
	var meta, readState []byte
	err := r.Scan(&t.ID, &t.Name, &t.Preview, &t.Cwd, &t.ModelProvider, &t.Model, &t.Source,
		&t.ForkedFromID, &t.Archived, &created, &updated, &recency, &meta, &readState)
	t.CreatedAt, t.UpdatedAt, t.RecencyAt = created.t, updated.t, recency.t
	t.Meta, t.ReadState = rawJSON(meta), rawJSON(readState)
	return t, err
}

const turnColumns = `thread_id, id, seq, status, error, started_at, completed_at, meta`

func scanTurn(r Row) (store.Turn, error) {
	var t store.Turn
	var started, completed timeCol
	var errJSON, meta []byte
	err := r.Scan(&t.ThreadID, &t.ID, &t.Seq, &t.Status, &errJSON, &started, &completed, &meta)
	t.StartedAt, t.CompletedAt = started.ptr(), completed.ptr()
	t.Error, t.Meta = rawJSON(errJSON), rawJSON(meta)
	return t, err
}

const itemColumns = `thread_id, seq, turn_id, item_id, type, payload, created_at`

func scanItem(r Row) (store.Item, error) {
	var it store.Item
	var created timeCol
	var payload []byte
	err := r.Scan(&it.ThreadID, &it.Seq, &it.TurnID, &it.ItemID, &it.Type, &payload, &created)
	it.CreatedAt = created.t
	it.Payload = rawJSON(payload)
	return it, err
}

// eventColumns are those of a row of the log, which may hold several
// events (eventrows.go).
const eventColumns = `thread_id, seq, first_seq, method, data, created_at`

// ListEvents returns up to limit events of a thread's log after afterSeq.
// An unknown thread has no events; that is no error, because the log may
// be read for a thread another daemon is still creating. The rows it reads
// are those whose last event is after afterSeq: each gives at least one
// event, so limit rows give limit events when the log has them.
func (r *Reader) ListEvents(ctx context.Context, threadID string, afterSeq int64, limit int) (evs []store.Event, err error) {
	defer func(start time.Time) { Observe(r.observe, store.OpListEvents, start, err) }(time.Now())
	if err := r.usable(); err != nil {
		return nil, err
	}
	if !store.ValidThreadID(threadID) {
		return nil, nil
	}
	if limit <= 0 || limit > store.MaxEventsLimit {
		limit = store.MaxEventsLimit
	}
	rows, err := r.db.Query(ctx, r.listEvents, CanonicalID(threadID), afterSeq, limit)
	if err != nil {
		return nil, r.db.StorageErr(err)
	}
	defer func() { _ = rows.Close() }()
	for len(evs) < limit && rows.Next() {
		var (
			thread, method string
			seq            int64
			first          *int64
			data           []byte
			created        timeCol
		)
		if err := rows.Scan(&thread, &seq, &first, &method, &data, &created); err != nil {
			return nil, r.db.StorageErr(err)
		}
		var from int64
		if first != nil {
			from = *first
		}
		if evs, err = splitEventRow(evs, thread, from, seq, method, data, created.t, afterSeq); err != nil {
			return nil, err
		}
	}
	if err := rows.Err(); err != nil {
		return nil, r.db.StorageErr(err)
	}
	if len(evs) > limit {
		evs = evs[:limit]
	}
	return evs, nil
}

// LastEventSeq returns the greatest Seq of a thread's log, 0 if none.
func (r *Reader) LastEventSeq(ctx context.Context, threadID string) (seq int64, err error) {
	defer func(start time.Time) { Observe(r.observe, store.OpLastEventSeq, start, err) }(time.Now())
	if err := r.usable(); err != nil {
		return 0, err
	}
	if !store.ValidThreadID(threadID) {
		return 0, nil
	}
	if err := r.db.QueryRow(ctx, r.lastEventSeq, CanonicalID(threadID)).Scan(&seq); err != nil {
		return 0, r.db.StorageErr(err)
	}
	return seq, nil
}

// eventsInRow is the number of events in a row of the log, counting the
// numbers it skips (eventrows.go) as events: the delta numbers between a
// commit's events, which were handed out, not stored.
const eventsInRow = "seq - COALESCE(first_seq, seq) + 1"

// PruneEventsSQL deletes up to Param(2) rows of the log created before
// Param(1), oldest first, in dialect d; each deleted row returns the number
// of its events (PruneEvents sums them).
func PruneEventsSQL(d Dialect) string {
	return "DELETE FROM events WHERE (thread_id, seq) IN (SELECT thread_id, seq FROM events WHERE created_at < " +
		d.Param(1) + " ORDER BY created_at LIMIT " + d.Param(2) + ") RETURNING " + eventsInRow
}

// PruneEvents implements store.Store.PruneEvents with the statement of
// PruneEventsSQL over db: it returns the events deleted, which may be
// more than the rows, up to limit, that it deleted.
func PruneEvents(ctx context.Context, db DB, q string, d Dialect, before time.Time, limit int) (int64, error) {
	return sumRows(ctx, db, q, d.TimeArg(Time(before)), limit)
}

// sumRows runs q and returns the sum of the one integer column of its rows.
func sumRows(ctx context.Context, db DB, q string, args ...any) (sum int64, err error) {
	rows, err := db.Query(ctx, q, args...)
	if err != nil {
		return 0, db.StorageErr(err)
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		var n int64
		if err := rows.Scan(&n); err != nil {
			return 0, db.StorageErr(err)
		}
		sum += n
	}
	if err := rows.Err(); err != nil {
		return 0, db.StorageErr(err)
	}
	return sum, nil
}

// PruneDB is a backend's writer as PruneThreadEvents needs it.
type PruneDB interface {
	DB
	Execer
}

// PruneThreadEvents implements store.Store.PruneThreadEvents in dialect d
// over x: one statement deletes the oldest rows of the thread's log beyond
// its newest ones whose frames add up to at most maxBytes (up to limit
// rows, a row whole), another sums the frames left. A row that holds
// several events counts the bytes of its frames, not of the separators
// between them.
func PruneThreadEvents(ctx context.Context, x PruneDB, d Dialect, threadID string, maxBytes int64, limit int) (deleted, remaining int64, err error) {
	if !store.ValidThreadID(threadID) {
		return 0, 0, nil
	}
	size := "length(data)" // SQLite: the bytes of a BLOB
	if d.Typed {
		size = "octet_length(data)"
	}
	size += " - (seq - COALESCE(first_seq, seq))"
	prune := "DELETE FROM events WHERE thread_id = " + d.Param(1) + " AND seq IN (SELECT seq FROM (SELECT seq, SUM(" + size +
		") OVER (ORDER BY seq DESC) AS newer FROM events WHERE thread_id = " + d.Param(2) + ") x WHERE newer > " + d.Param(3) +
		" ORDER BY seq LIMIT " + d.Param(4) + ") RETURNING " + eventsInRow
	id := CanonicalID(threadID)
	if deleted, err = sumRows(ctx, x, prune, id, id, maxBytes, limit); err != nil {
		return 0, 0, err
	}
	sum := "SELECT COALESCE(SUM(" + size + "), 0) FROM events WHERE thread_id = " + d.Param(1)
	if err := x.QueryRow(ctx, sum, id).Scan(&remaining); err != nil {
		return deleted, 0, x.StorageErr(err)
	}
	return deleted, remaining, nil
}

// rawJSON maps SQL NULL, which scans as an empty slice, to absent JSON, and
// unescapes an object stored with U+0000 (store.UnescapeNUL).
func rawJSON(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return store.UnescapeNUL(b)
}

// timeCol scans a time column of either dialect: SQLite's INTEGER
// microseconds or Postgres's timestamptz, both drivers passing a Scanner
// the value as database/sql would. NULL leaves it unset.
type timeCol struct {
	t     time.Time
	valid bool
}

// Scan implements sql.Scanner.
func (c *timeCol) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*c = timeCol{}
	case int64:
		*c = timeCol{t: time.UnixMicro(v).UTC(), valid: true}
	case time.Time:
		*c = timeCol{t: v.UTC(), valid: true}
	default:
		return fmt.Errorf("cannot scan %T into a time", src)
	}
	return nil
}

func (c timeCol) ptr() *time.Time {
	if !c.valid {
		return nil
	}
	return &c.t
}

// GetThread returns the thread with the given id.
func (r *Reader) GetThread(ctx context.Context, id string) (t store.Thread, err error) {
	defer func(start time.Time) { Observe(r.observe, store.OpGetThread, start, err) }(time.Now())
	if err := r.usable(); err != nil {
		return t, err
	}
	if !store.ValidThreadID(id) {
		return t, ThreadNotFound(id)
	}
	t, err = scanThread(r.db.QueryRow(ctx, r.getThread, CanonicalID(id)))
	if r.db.NoRows(err) {
		return store.Thread{}, ThreadNotFound(id)
	}
	if err != nil {
		return store.Thread{}, r.db.StorageErr(err)
	}
	return t, nil
}

// ListThreads returns a page of threads in keyset order on (sort key, id).
func (r *Reader) ListThreads(ctx context.Context, q store.ListThreadsQuery) (page store.ThreadPage, err error) {
	defer func(start time.Time) { Observe(r.observe, store.OpListThreads, start, err) }(time.Now())
	if err := r.usable(); err != nil {
		return page, err
	}
	if err := q.Validate(); err != nil {
		return page, err
	}
	col, scope, err := SortColumn(q.SortKey)
	if err != nil {
		return page, err
	}
	k := Keyset{Column: col, Time: true, ID: "id", Desc: q.Desc}
	if q.Cursor != "" {
		c, err := DecodeCursor(q.Cursor, scope)
		if err != nil {
			return page, err
		}
		if !store.ValidThreadID(c.ID) {
			return page, apperr.New(apperr.Invalid, "invalid cursor: %s", q.Cursor)
		}
		k.After = &c
	}
	limit := Limit(q.Limit)
	sel := NewQuery(r.d).
		Eq("archived", q.Archived).
		In("cwd", q.Cwds).
		In("model_provider", q.ModelProviders).
		InIDs("id", q.IDs).
		Contains([]string{"name_fold", "preview_fold"}, Fold(q.SearchTerm), messageText(r.d))
	if q.HasPreview {
		sel.Greater("preview", "")
	}
	sql, args := sel.Page(threadColumns, "threads", k, limit+1)
	threads, err := queryAll(ctx, r.db, sql, args, scanThread)
	if err != nil {
		return page, err
	}
	page.Threads, page.NextCursor, page.BackwardsCursor = Page(threads, limit, func(t store.Thread) Cursor {
		return Cursor{Scope: scope, Value: sortValue(t, col).UnixMicro(), ID: t.ID}
	})
	return page, nil
}

// messageText is the search condition on a thread's messages: an agent
// message whose text, or a user message one of whose text inputs, contains
// term (folded). Both backends answer it from a trigram index of that text
// (migration 00004) for terms of at least three characters, the shortest a
// trigram index can look up; shorter terms, which match most threads
// anyway, scan. Postgres lowers message text with its lower(), which
// follows the database's locale; SQLite's FTS5 folds Unicode case, but the
// scan of shorter terms folds ASCII letters only.
func messageText(d Dialect) func(term string, arg func(any) string) string {
	if d.Typed {
		return func(term string, arg func(any) string) string {
			if utf8.RuneCountInString(term) < 3 {
				// Thread by thread in list order, each stopping at its first
				// match: a page of a term found nearly everywhere reads few
				// items. The expressions are spelled out rather than calling
				// item_message_text, a call per item that costs several times
				// more than the index it serves.
				p := arg(term)
				return "EXISTS (SELECT 1 FROM items i WHERE i.thread_id = threads.id AND i.type = 'agentMessage'" +
					" AND strpos(lower(i.payload->>'text'), " + p + ") > 0)" +
					" OR EXISTS (SELECT 1 FROM items i, jsonb_array_elements(CASE WHEN jsonb_typeof(i.payload->'content') = 'array'" +
					" THEN i.payload->'content' ELSE '[]'::jsonb END) c WHERE i.thread_id = threads.id AND i.type = 'userMessage'" +
					" AND strpos(lower(c->>'text'), " + p + ") > 0)"
			}
			return "threads.id IN (SELECT i.thread_id FROM items i WHERE i.type IN ('agentMessage', 'userMessage')" +
				" AND item_message_text(i.type, i.payload) LIKE " + arg("%"+likeEscaper.Replace(term)+"%") + ")"
		}
	}
	return func(term string, arg func(any) string) string {
		if utf8.RuneCountInString(term) < 3 {
			return "(EXISTS (SELECT 1 FROM item_text x WHERE x.thread_id = threads.id AND instr(lower(x.text), " + arg(term) + ") > 0)" +
				" OR threads.id IN (" + unextractedMessages("lower", term, arg) + "))"
		}
		// A phrase of trigrams matches where they follow one another: the
		// term as a substring. The rows the store has not indexed yet
		// (those past item_text_indexed's mark, migration 00014) and the
		// messages whose text it has not extracted yet (past
		// item_text_extracted's, 00015) are scanned, folded as terms are,
		// in the same statement.
		return "threads.id IN (SELECT x.thread_id FROM item_text_fts f JOIN item_text x ON x.id = f.rowid" +
			" WHERE item_text_fts MATCH " + arg(`"`+strings.ReplaceAll(term, `"`, `""`)+`"`) +
			" UNION ALL SELECT x.thread_id FROM item_text x WHERE x.id > (SELECT through FROM item_text_indexed)" +
			" AND instr(appserver_fold(x.text), " + arg(term) + ") > 0" +
			" UNION ALL " + unextractedMessages("appserver_fold", term, arg) + ")"
	}
}

// unextractedMessages selects the threads of the embedded store's message
// items past item_text_extracted's mark (migration 00015) whose text, as
// the extraction takes it (MessageTexts), folded with fold contains term
// (bound with arg).
func unextractedMessages(fold, term string, arg func(any) string) string {
	return "SELECT thread_id FROM (" + MessageTexts("(SELECT through FROM item_text_extracted)", "") +
		") WHERE instr(" + fold + "(text), " + arg(term) + ") > 0"
}

// MessageTexts is the embedded store's query of the searchable text of
// the message items whose rowid is past after and, unless upTo is "", at
// most upTo (both SQL expressions): rows (r, k, thread_id, seq, text), r
// the item's rowid and k the text's place in it, for an agent message its
// text, for a user message each of its text inputs. The store extracts
// them to item_text with it; a search scans the items not extracted yet
// with it. The CASEs keep the JSON functions off an invalid payload and
// off a content element that is no object.
func MessageTexts(after, upTo string) string {
	rows := "i.rowid > " + after
	if upTo != "" {
		rows += " AND i.rowid <= " + upTo
	}
	return "SELECT i.rowid AS r, 0 AS k, i.thread_id, i.seq, json_extract(i.payload, '$.text') AS text FROM items i" +
		" WHERE " + rows + " AND i.type = 'agentMessage'" +
		" AND CASE WHEN json_valid(i.payload) THEN json_type(i.payload, '$.text') = 'text' END" +
		" UNION ALL SELECT i.rowid, c.key, i.thread_id, i.seq, json_extract(c.value, '$.text') FROM items i," +
		" json_each(CASE WHEN i.type = 'userMessage' AND json_valid(i.payload)" +
		" AND json_type(i.payload, '$.content') = 'array' THEN i.payload END, '$.content') c" +
		" WHERE " + rows + " AND i.type = 'userMessage'" +
		" AND CASE WHEN c.type = 'object' THEN json_type(c.value, '$.text') = 'text' END"
}

// likeEscaper makes a term literal in a Postgres LIKE pattern, whose
// default escape character is the backslash.
var likeEscaper = strings.NewReplacer(`\`, `\\`, "%", `\%`, "_", `\_`)

func sortValue(t store.Thread, col string) time.Time {
	switch col {
	case "updated_at":
		return t.UpdatedAt
	case "recency_at":
		return t.RecencyAt
	}
	return t.CreatedAt
}

// GetTurn returns one turn of a thread.
func (r *Reader) GetTurn(ctx context.Context, threadID, turnID string) (t store.Turn, err error) {
	defer func(start time.Time) { Observe(r.observe, store.OpGetTurn, start, err) }(time.Now())
	if err := r.usable(); err != nil {
		return t, err
	}
	return r.turn(ctx, threadID, turnID)
}

func (r *Reader) turn(ctx context.Context, threadID, turnID string) (store.Turn, error) {
	if !store.ValidThreadID(threadID) || !store.ValidKey(turnID) {
		return store.Turn{}, TurnNotFound(threadID, turnID)
	}
	t, err := scanTurn(r.db.QueryRow(ctx, r.getTurn, CanonicalID(threadID), turnID))
	if r.db.NoRows(err) {
		return store.Turn{}, TurnNotFound(threadID, turnID)
	}
	if err != nil {
		return store.Turn{}, r.db.StorageErr(err)
	}
	return t, nil
}

// ListTurns returns a page of a thread's turns in Seq order.
func (r *Reader) ListTurns(ctx context.Context, q store.TurnsQuery) (page store.TurnPage, err error) {
	defer func(start time.Time) { Observe(r.observe, store.OpListTurns, start, err) }(time.Now())
	if err := r.usable(); err != nil {
		return page, err
	}
	l := seqListing{table: "turns", columns: turnColumns, scopeOf: TurnsScope,
		threadID: q.ThreadID, cursor: q.Cursor, desc: q.Desc, limit: q.Limit}
	page.Turns, page.NextCursor, page.BackwardsCursor, err = listBySeq(ctx, r, l, scanTurn,
		func(t store.Turn) int64 { return t.Seq })
	return page, err
}

// GetItem returns one item of a thread by its protocol item id.
func (r *Reader) GetItem(ctx context.Context, threadID, itemID string) (it store.Item, err error) {
	defer func(start time.Time) { Observe(r.observe, store.OpGetItem, start, err) }(time.Now())
	if err := r.usable(); err != nil {
		return it, err
	}
	notFound := apperr.New(apperr.NotFound, "item %s not found in thread %s", itemID, threadID)
	if !store.ValidThreadID(threadID) || !store.ValidKey(itemID) {
		return it, notFound
	}
	it, err = scanItem(r.db.QueryRow(ctx, r.getItem, CanonicalID(threadID), itemID))
	if r.db.NoRows(err) {
		return store.Item{}, notFound
	}
	if err != nil {
		return store.Item{}, r.db.StorageErr(err)
	}
	return it, nil
}

// ListItems returns a page of a thread's items in Seq order.
func (r *Reader) ListItems(ctx context.Context, q store.ItemsQuery) (page store.ItemPage, err error) {
	defer func(start time.Time) { Observe(r.observe, store.OpListItems, start, err) }(time.Now())
	if err := r.usable(); err != nil {
		return page, err
	}
	l := seqListing{table: "items", columns: itemColumns, scopeOf: ItemsScope,
		threadID: q.ThreadID, turnID: q.TurnID, afterSeq: q.AfterSeq, cursor: q.Cursor, desc: q.Desc, limit: q.Limit}
	page.Items, page.NextCursor, page.BackwardsCursor, err = listBySeq(ctx, r, l, scanItem,
		func(it store.Item) int64 { return it.Seq })
	return page, err
}

// seqListing is a page of one thread's turns or items in Seq order.
type seqListing struct {
	table, columns string
	scopeOf        func(threadID string) string
	threadID       string
	turnID         string // when set, only the rows of this turn
	afterSeq       int64  // when positive, only the rows after this Seq
	cursor         string
	desc           bool
	limit          int
}

// listBySeq returns the page l describes and the cursors of its ends. An
// empty page of an unknown thread, or of an unknown turn of it, is the
// NotFound of that thread or turn.
func listBySeq[T any](ctx context.Context, r *Reader, l seqListing, scan func(Row) (T, error), seqOf func(T) int64) (rows []T, next, back string, err error) {
	if !store.ValidThreadID(l.threadID) {
		return nil, "", "", ThreadNotFound(l.threadID)
	}
	threadID := CanonicalID(l.threadID)
	if !store.ValidKey(l.turnID) {
		return nil, "", "", TurnNotFound(threadID, l.turnID)
	}
	scope := l.scopeOf(threadID)
	k := Keyset{Column: "seq", Desc: l.desc}
	if l.cursor != "" {
		c, err := DecodeCursor(l.cursor, scope)
		if err != nil {
			return nil, "", "", err
		}
		k.After = &c
	}
	query := NewQuery(r.d).Eq("thread_id", threadID)
	if l.turnID != "" {
		query.Eq("turn_id", l.turnID)
	}
	if l.afterSeq > 0 {
		query.Greater("seq", l.afterSeq)
	}
	limit := Limit(l.limit)
	sql, args := query.Page(l.columns, l.table, k, limit+1)
	rows, err = queryAll(ctx, r.db, sql, args, scan)
	if err != nil {
		return nil, "", "", err
	}
	if len(rows) == 0 {
		if err := r.exists(ctx, threadID); err != nil {
			return nil, "", "", err
		}
		if l.turnID != "" {
			if _, err := r.turn(ctx, threadID, l.turnID); err != nil {
				return nil, "", "", err
			}
		}
	}
	rows, next, back = Page(rows, limit, func(v T) Cursor { return Cursor{Scope: scope, Value: seqOf(v)} })
	return rows, next, back, nil
}

// ListInProgressTurns returns every turn still marked inProgress.
func (r *Reader) ListInProgressTurns(ctx context.Context) (turns []store.Turn, err error) {
	defer func(start time.Time) { Observe(r.observe, store.OpListInProgressTurns, start, err) }(time.Now())
	if err := r.usable(); err != nil {
		return nil, err
	}
	return queryAll(ctx, r.db, r.inProgressTurns, nil, scanTurn)
}

// exists tells an empty page of an existing thread from an unknown thread.
func (r *Reader) exists(ctx context.Context, id string) error {
	var one int
	err := r.db.QueryRow(ctx, r.threadExists, id).Scan(&one)
	if r.db.NoRows(err) {
		return ThreadNotFound(id)
	}
	if err != nil {
		return r.db.StorageErr(err)
	}
	return nil
}

func queryAll[T any](ctx context.Context, db DB, sql string, args []any, scan func(Row) (T, error)) ([]T, error) {
	rows, err := db.Query(ctx, sql, args...)
	if err != nil {
		return nil, db.StorageErr(err)
	}
	defer func() { _ = rows.Close() }()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, db.StorageErr(err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, db.StorageErr(err)
	}
	return out, nil
}
