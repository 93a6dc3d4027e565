package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/store/internal/backend"
)

// row is what *sql.Row and *sql.Rows share.
type row interface{ Scan(dest ...any) error }

const threadColumns = `id, name, preview, cwd, model_provider, model, source, forked_from_id,
	archived, created_at, updated_at, recency_at, meta`

func scanThread(r row) (store.Thread, error) {
	var t store.Thread
	var created, updated, recency int64
	var meta []byte
	err := r.Scan(&t.ID, &t.Name, &t.Preview, &t.Cwd, &t.ModelProvider, &t.Model, &t.Source,
		&t.ForkedFromID, &t.Archived, &created, &updated, &recency, &meta)
	t.CreatedAt, t.UpdatedAt, t.RecencyAt = fromMicros(created), fromMicros(updated), fromMicros(recency)
	t.Meta = rawJSON(meta)
	return t, err
}

const turnColumns = `thread_id, id, seq, status, error, started_at, completed_at, meta`

func scanTurn(r row) (store.Turn, error) {
	var t store.Turn
	var started, completed sql.NullInt64
	var errJSON, meta []byte
	err := r.Scan(&t.ThreadID, &t.ID, &t.Seq, &t.Status, &errJSON, &started, &completed, &meta)
	t.StartedAt, t.CompletedAt = fromNullMicros(started), fromNullMicros(completed)
	t.Error, t.Meta = rawJSON(errJSON), rawJSON(meta)
	return t, err
}

const itemColumns = `thread_id, seq, turn_id, item_id, type, payload, created_at`

func scanItem(r row) (store.Item, error) {
	var it store.Item
	var created int64
	var payload []byte
	err := r.Scan(&it.ThreadID, &it.Seq, &it.TurnID, &it.ItemID, &it.Type, &payload, &created)
	it.CreatedAt = fromMicros(created)
	it.Payload = rawJSON(payload)
	return it, err
}

func rawJSON(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// GetThread returns the thread with the given id.
func (s *Store) GetThread(ctx context.Context, id string) (t store.Thread, err error) {
	defer func(start time.Time) { backend.Observe(s.cfg.Observe, store.OpGetThread, start, err) }(time.Now())
	if err := s.usable(); err != nil {
		return t, err
	}
	if !store.ValidThreadID(id) {
		return t, backend.ThreadNotFound(id)
	}
	t, err = scanThread(s.r.QueryRowContext(ctx,
		`SELECT `+threadColumns+` FROM threads WHERE id = ?`, backend.CanonicalID(id)))
	if errors.Is(err, sql.ErrNoRows) {
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
	where := []string{"archived = ?"}
	if len(q.Cwds) > 0 {
		where = append(where, "cwd IN ("+placeholders(len(q.Cwds))+")")
		for _, c := range q.Cwds {
			args = append(args, c)
		}
	}
	if len(q.ModelProviders) > 0 {
		where = append(where, "model_provider IN ("+placeholders(len(q.ModelProviders))+")")
		for _, m := range q.ModelProviders {
			args = append(args, m)
		}
	}
	if q.SearchTerm != "" {
		term := backend.Fold(q.SearchTerm)
		where = append(where, "(instr(name_fold, ?) > 0 OR instr(preview_fold, ?) > 0)")
		args = append(args, term, term)
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
		where = append(where, fmt.Sprintf("(%s, id) %s (?, ?)", col, cmp))
		args = append(args, c.Value, backend.CanonicalID(c.ID))
	}
	limit := backend.Limit(q.Limit)
	query := fmt.Sprintf(`SELECT %s FROM threads WHERE %s ORDER BY %s %s, id %s LIMIT %d`,
		threadColumns, strings.Join(where, " AND "), col, dir, dir, limit+1)
	threads, err := queryAll(ctx, s.r, query, args, scanThread)
	if err != nil {
		return page, err
	}
	page.Threads, page.NextCursor, page.BackwardsCursor = backend.Page(threads, limit, func(t store.Thread) backend.Cursor {
		return backend.Cursor{Scope: scope, Value: sortValue(t, col).UnixMicro(), ID: t.ID}
	})
	return page, nil
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
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
	t, err := scanTurn(s.r.QueryRowContext(ctx,
		`SELECT `+turnColumns+` FROM turns WHERE thread_id = ? AND id = ?`, backend.CanonicalID(threadID), turnID))
	if errors.Is(err, sql.ErrNoRows) {
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
	where := "thread_id = ?"
	dir, cmp := "ASC", ">"
	if q.Desc {
		dir, cmp = "DESC", "<"
	}
	if q.Cursor != "" {
		c, err := backend.DecodeCursor(q.Cursor, scope)
		if err != nil {
			return page, err
		}
		where += " AND seq " + cmp + " ?"
		args = append(args, c.Value)
	}
	limit := backend.Limit(q.Limit)
	query := fmt.Sprintf(`SELECT %s FROM turns WHERE %s ORDER BY seq %s LIMIT %d`, turnColumns, where, dir, limit+1)
	turns, err := queryAll(ctx, s.r, query, args, scanTurn)
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
	it, err = scanItem(s.r.QueryRowContext(ctx,
		`SELECT `+itemColumns+` FROM items WHERE thread_id = ? AND item_id = ?`, backend.CanonicalID(threadID), itemID))
	if errors.Is(err, sql.ErrNoRows) {
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
	where := []string{"thread_id = ?"}
	if q.TurnID != "" {
		where = append(where, "turn_id = ?")
		args = append(args, q.TurnID)
	}
	if q.AfterSeq > 0 {
		where = append(where, "seq > ?")
		args = append(args, q.AfterSeq)
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
		where = append(where, "seq "+cmp+" ?")
		args = append(args, c.Value)
	}
	limit := backend.Limit(q.Limit)
	query := fmt.Sprintf(`SELECT %s FROM items WHERE %s ORDER BY seq %s LIMIT %d`,
		itemColumns, strings.Join(where, " AND "), dir, limit+1)
	items, err := queryAll(ctx, s.r, query, args, scanItem)
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
	return queryAll(ctx, s.r, `SELECT `+turnColumns+` FROM turns WHERE status = 'inProgress' ORDER BY thread_id, seq`,
		nil, scanTurn)
}

// threadExists tells an empty page of an existing thread from an unknown thread.
func (s *Store) threadExists(ctx context.Context, id string) error {
	var one int
	err := s.r.QueryRowContext(ctx, `SELECT 1 FROM threads WHERE id = ?`, id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return backend.ThreadNotFound(id)
	}
	if err != nil {
		return storageErr(err)
	}
	return nil
}

func queryAll[T any](ctx context.Context, db *sql.DB, query string, args []any, scan func(row) (T, error)) ([]T, error) {
	rows, err := db.QueryContext(ctx, query, args...)
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
