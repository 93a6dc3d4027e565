package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/store/internal/backend"
)

const threadColumns = `id, name, preview, cwd, model_provider, model, source, forked_from_id,
	archived, created_at, updated_at, recency_at, meta`

func scanThread(row pgx.Row) (store.Thread, error) {
	var t store.Thread
	var meta []byte
	err := row.Scan(&t.ID, &t.Name, &t.Preview, &t.Cwd, &t.ModelProvider, &t.Model, &t.Source,
		&t.ForkedFromID, &t.Archived, &t.CreatedAt, &t.UpdatedAt, &t.RecencyAt, &meta)
	t.CreatedAt, t.UpdatedAt, t.RecencyAt = t.CreatedAt.UTC(), t.UpdatedAt.UTC(), t.RecencyAt.UTC()
	t.Meta = rawJSON(meta)
	return t, err
}

const turnColumns = `thread_id, id, seq, status, error, started_at, completed_at, meta`

func scanTurn(row pgx.Row) (store.Turn, error) {
	var t store.Turn
	var errJSON, meta []byte
	err := row.Scan(&t.ThreadID, &t.ID, &t.Seq, &t.Status, &errJSON, &t.StartedAt, &t.CompletedAt, &meta)
	t.Error, t.Meta = rawJSON(errJSON), rawJSON(meta)
	t.StartedAt, t.CompletedAt = utcPtr(t.StartedAt), utcPtr(t.CompletedAt)
	return t, err
}

const itemColumns = `thread_id, seq, turn_id, item_id, type, payload, created_at`

func scanItem(row pgx.Row) (store.Item, error) {
	var it store.Item
	var payload []byte
	err := row.Scan(&it.ThreadID, &it.Seq, &it.TurnID, &it.ItemID, &it.Type, &payload, &it.CreatedAt)
	it.Payload = rawJSON(payload)
	it.CreatedAt = it.CreatedAt.UTC()
	return it, err
}

func rawJSON(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// GetThread returns the thread with the given id.
func (s *Store) GetThread(ctx context.Context, id string) (t store.Thread, err error) {
	defer func(start time.Time) { backend.Observe(s.cfg.Observe, store.OpGetThread, start, err) }(time.Now())
	if err := s.usable(); err != nil {
		return store.Thread{}, err
	}
	if !store.ValidThreadID(id) {
		return store.Thread{}, backend.ThreadNotFound(id)
	}
	t, err = scanThread(s.pool.QueryRow(ctx, `SELECT `+threadColumns+` FROM threads WHERE id = $1`, id))
	if isNoRows(err) {
		return store.Thread{}, backend.ThreadNotFound(id)
	}
	if err != nil {
		return store.Thread{}, storageErr(err)
	}
	return t, nil
}

// ListThreads returns a page of threads in keyset order on (sort key, id).
func (s *Store) ListThreads(ctx context.Context, q store.ListThreadsQuery) (page store.ThreadPage, err error) {
	defer func(start time.Time) { backend.Observe(s.cfg.Observe, store.OpListThreads, start, err) }(time.Now())
	if err := s.usable(); err != nil {
		return page, err
	}
	col, scope, err := backend.SortColumn(q.SortKey)
	if err != nil {
		return page, err
	}
	args := []any{q.Archived}
	where := []string{"archived = $1"}
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	if len(q.Cwds) > 0 {
		where = append(where, "cwd = ANY("+arg(q.Cwds)+"::text[])")
	}
	if len(q.ModelProviders) > 0 {
		where = append(where, "model_provider = ANY("+arg(q.ModelProviders)+"::text[])")
	}
	if q.SearchTerm != "" {
		p := arg(backend.Fold(q.SearchTerm))
		where = append(where, fmt.Sprintf("(strpos(name_fold, %[1]s) > 0 OR strpos(preview_fold, %[1]s) > 0)", p))
	}
	dir, cmp := "ASC", ">"
	if q.Desc {
		dir, cmp = "DESC", "<"
	}
	if q.Cursor != "" {
		c, err := backend.DecodeCursor(q.Cursor, scope)
		if err != nil {
			return page, err
		}
		if !store.ValidThreadID(c.ID) {
			return page, apperr.New(apperr.Invalid, "invalid cursor: %s", q.Cursor)
		}
		where = append(where, fmt.Sprintf("(%s, id) %s (%s::timestamptz, %s::uuid)",
			col, cmp, arg(time.UnixMicro(c.Value).UTC()), arg(c.ID)))
	}
	limit := backend.Limit(q.Limit)
	sql := fmt.Sprintf(`SELECT %s FROM threads WHERE %s ORDER BY %s %s, id %s LIMIT %d`,
		threadColumns, strings.Join(where, " AND "), col, dir, dir, limit+1)
	threads, err := queryAll(ctx, s, sql, args, scanThread)
	if err != nil {
		return page, err
	}
	page.Threads, page.NextCursor, page.BackwardsCursor = backend.Page(threads, limit, func(t store.Thread) backend.Cursor {
		return backend.Cursor{Scope: scope, Value: sortValue(t, col).UnixMicro(), ID: t.ID}
	})
	return page, nil
}

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
func (s *Store) GetTurn(ctx context.Context, threadID, turnID string) (t store.Turn, err error) {
	defer func(start time.Time) { backend.Observe(s.cfg.Observe, store.OpGetTurn, start, err) }(time.Now())
	if err := s.usable(); err != nil {
		return t, err
	}
	return s.getTurn(ctx, threadID, turnID)
}

func (s *Store) getTurn(ctx context.Context, threadID, turnID string) (store.Turn, error) {
	if !store.ValidThreadID(threadID) {
		return store.Turn{}, backend.TurnNotFound(threadID, turnID)
	}
	t, err := scanTurn(s.pool.QueryRow(ctx,
		`SELECT `+turnColumns+` FROM turns WHERE thread_id = $1 AND id = $2`, threadID, turnID))
	if isNoRows(err) {
		return store.Turn{}, backend.TurnNotFound(threadID, turnID)
	}
	if err != nil {
		return store.Turn{}, storageErr(err)
	}
	return t, nil
}

// ListTurns returns a page of a thread's turns in Seq order.
func (s *Store) ListTurns(ctx context.Context, q store.TurnsQuery) (page store.TurnPage, err error) {
	defer func(start time.Time) { backend.Observe(s.cfg.Observe, store.OpListTurns, start, err) }(time.Now())
	if err := s.usable(); err != nil {
		return page, err
	}
	if !store.ValidThreadID(q.ThreadID) {
		return page, backend.ThreadNotFound(q.ThreadID)
	}
	threadID := backend.CanonicalID(q.ThreadID)
	scope := backend.TurnsScope(threadID)
	args := []any{threadID}
	where := "thread_id = $1"
	dir, cmp := "ASC", ">"
	if q.Desc {
		dir, cmp = "DESC", "<"
	}
	if q.Cursor != "" {
		c, err := backend.DecodeCursor(q.Cursor, scope)
		if err != nil {
			return page, err
		}
		args = append(args, c.Value)
		where += " AND seq " + cmp + " $2"
	}
	limit := backend.Limit(q.Limit)
	sql := fmt.Sprintf(`SELECT %s FROM turns WHERE %s ORDER BY seq %s LIMIT %d`, turnColumns, where, dir, limit+1)
	turns, err := queryAll(ctx, s, sql, args, scanTurn)
	if err != nil {
		return page, err
	}
	if len(turns) == 0 {
		if err := s.threadExists(ctx, threadID); err != nil {
			return page, err
		}
	}
	page.Turns, page.NextCursor, page.BackwardsCursor = backend.Page(turns, limit, func(t store.Turn) backend.Cursor {
		return backend.Cursor{Scope: scope, Value: t.Seq}
	})
	return page, nil
}

// GetItem returns one item of a thread by its protocol item id.
func (s *Store) GetItem(ctx context.Context, threadID, itemID string) (it store.Item, err error) {
	defer func(start time.Time) { backend.Observe(s.cfg.Observe, store.OpGetItem, start, err) }(time.Now())
	if err := s.usable(); err != nil {
		return it, err
	}
	notFound := apperr.New(apperr.NotFound, "item %s not found in thread %s", itemID, threadID)
	if !store.ValidThreadID(threadID) {
		return it, notFound
	}
	it, err = scanItem(s.pool.QueryRow(ctx,
		`SELECT `+itemColumns+` FROM items WHERE thread_id = $1 AND item_id = $2`, threadID, itemID))
	if isNoRows(err) {
		return store.Item{}, notFound
	}
	if err != nil {
		return store.Item{}, storageErr(err)
	}
	return it, nil
}

// ListItems returns a page of a thread's items in Seq order.
func (s *Store) ListItems(ctx context.Context, q store.ItemsQuery) (page store.ItemPage, err error) {
	defer func(start time.Time) { backend.Observe(s.cfg.Observe, store.OpListItems, start, err) }(time.Now())
	if err := s.usable(); err != nil {
		return page, err
	}
	if !store.ValidThreadID(q.ThreadID) {
		return page, backend.ThreadNotFound(q.ThreadID)
	}
	threadID := backend.CanonicalID(q.ThreadID)
	scope := backend.ItemsScope(threadID)
	args := []any{threadID}
	where := []string{"thread_id = $1"}
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	if q.TurnID != "" {
		where = append(where, "turn_id = "+arg(q.TurnID))
	}
	if q.AfterSeq > 0 {
		where = append(where, "seq > "+arg(q.AfterSeq))
	}
	dir, cmp := "ASC", ">"
	if q.Desc {
		dir, cmp = "DESC", "<"
	}
	if q.Cursor != "" {
		c, err := backend.DecodeCursor(q.Cursor, scope)
		if err != nil {
			return page, err
		}
		where = append(where, "seq "+cmp+" "+arg(c.Value))
	}
	limit := backend.Limit(q.Limit)
	sql := fmt.Sprintf(`SELECT %s FROM items WHERE %s ORDER BY seq %s LIMIT %d`,
		itemColumns, strings.Join(where, " AND "), dir, limit+1)
	items, err := queryAll(ctx, s, sql, args, scanItem)
	if err != nil {
		return page, err
	}
	if len(items) == 0 {
		if err := s.threadExists(ctx, threadID); err != nil {
			return page, err
		}
		if q.TurnID != "" {
			if _, err := s.getTurn(ctx, threadID, q.TurnID); err != nil {
				return page, err
			}
		}
	}
	page.Items, page.NextCursor, page.BackwardsCursor = backend.Page(items, limit, func(it store.Item) backend.Cursor {
		return backend.Cursor{Scope: scope, Value: it.Seq}
	})
	return page, nil
}

// ListInProgressTurns returns every turn still marked inProgress.
func (s *Store) ListInProgressTurns(ctx context.Context) (turns []store.Turn, err error) {
	defer func(start time.Time) { backend.Observe(s.cfg.Observe, store.OpListInProgressTurns, start, err) }(time.Now())
	if err := s.usable(); err != nil {
		return nil, err
	}
	return queryAll(ctx, s, `SELECT `+turnColumns+` FROM turns WHERE status = 'inProgress' ORDER BY thread_id, seq`,
		nil, scanTurn)
}

// threadExists tells an empty page of an existing thread from an unknown thread.
func (s *Store) threadExists(ctx context.Context, id string) error {
	var one int
	err := s.pool.QueryRow(ctx, `SELECT 1 FROM threads WHERE id = $1`, id).Scan(&one)
	if isNoRows(err) {
		return backend.ThreadNotFound(id)
	}
	if err != nil {
		return storageErr(err)
	}
	return nil
}

func queryAll[T any](ctx context.Context, s *Store, sql string, args []any, scan func(pgx.Row) (T, error)) ([]T, error) {
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, storageErr(err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, storageErr(err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, storageErr(err)
	}
	return out, nil
}
