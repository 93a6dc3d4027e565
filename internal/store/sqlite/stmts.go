package sqlite

import (
	"context"
	"database/sql"
	"sync"
)

// maxCachedStmts bounds the writer's statement cache; the writes use a
// fixed set of statements (the patch variants included), well below it.
const maxCachedStmts = 512

// stmtCache keeps the writer connection's prepared statements by SQL text.
// Without it database/sql has SQLite parse every statement of every write
// again; in a tool-calling benchmark that parsing was about a tenth of the
// daemon's CPU. A statement is prepared after the first write that used it
// has finished, because the writer has one connection, which a transaction
// holds until it ends.
type stmtCache struct {
	db *sql.DB

	mu sync.Mutex
	m  map[string]*sql.Stmt
}

func newStmtCache(db *sql.DB) *stmtCache {
	return &stmtCache{db: db, m: map[string]*sql.Stmt{}}
}

// get returns the prepared statement of q, or nil.
func (c *stmtCache) get(q string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[q]
}

// prepare prepares each query not yet cached; it must not run inside a
// writer transaction. A failure only means the query is parsed each time.
func (c *stmtCache) prepare(ctx context.Context, queries []string) {
	for _, q := range queries {
		c.mu.Lock()
		_, ok := c.m[q]
		full := len(c.m) >= maxCachedStmts
		c.mu.Unlock()
		if ok || full {
			continue
		}
		st, err := c.db.PrepareContext(ctx, q)
		if err != nil {
			continue
		}
		c.mu.Lock()
		if _, ok := c.m[q]; ok {
			_ = st.Close()
		} else {
			c.m[q] = st
		}
		c.mu.Unlock()
	}
}

// lookup returns the prepared statement of q, preparing it now if it is
// not cached yet, or nil when the cache is full or q does not prepare (the
// caller then runs q as text). For reads outside the writer's
// transactions: on the writer's pool it waits for the connection as the
// query itself would.
func (c *stmtCache) lookup(ctx context.Context, q string) *sql.Stmt {
	if st := c.get(q); st != nil {
		return st
	}
	c.prepare(ctx, []string{q})
	return c.get(q)
}

// close closes the cached statements.
func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for q, st := range c.m {
		_ = st.Close()
		delete(c.m, q)
	}
}

// txWriter runs the statements of one write transaction, through the cache
// where it can, and notes the queries it had to parse.
type txWriter struct {
	ctx    context.Context
	tx     *sql.Tx
	cache  *stmtCache
	missed []string
}

func (w *txWriter) exec(q string, args ...any) (sql.Result, error) {
	if st := w.cache.get(q); st != nil {
		return w.tx.StmtContext(w.ctx, st).ExecContext(w.ctx, args...)
	}
	w.missed = append(w.missed, q)
	return w.tx.ExecContext(w.ctx, q, args...)
}

func (w *txWriter) queryRow(q string, args ...any) *sql.Row {
	if st := w.cache.get(q); st != nil {
		return w.tx.StmtContext(w.ctx, st).QueryRowContext(w.ctx, args...)
	}
	w.missed = append(w.missed, q)
	return w.tx.QueryRowContext(w.ctx, q, args...)
}
