package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"strings"
	"time"

	"modernc.org/sqlite"

	"github.com/appserver/appserver/internal/store"
)

// The message index (migrations 00004 and 00014) is brought up to date
// off the commits that store messages: adding a row to the trigram index
// inside the commit cost about a fifth of the store's CPU for a plain
// turn (BenchmarkPlainTurnWrites/events=7, test binaries of the builds
// before and after alternating, 2026-12-03: 570–593 µs a turn before,
// 463–471 µs after, the batches' indexing included; bench/README.md).
// The indexer adds the rows
// past the mark in batches, each in a transaction of its own on the
// writer connection, a short while after a write stored messages; a
// search scans the rows past the mark meanwhile (backend.messageText).
const (
	// defaultIndexDelay is how long the indexer lets messages gather
	// after the first write that stored one, so that a batch holds many
	// (Config.IndexDelay).
	defaultIndexDelay = 200 * time.Millisecond
	// indexBatch bounds the rows one indexing transaction adds, so that
	// the commits queued behind it on the writer connection wait little.
	indexBatch = 256
	// indexBatchBytes bounds the text of one indexing transaction too: a
	// batch takes rows while the text before them in the batch is under
	// it (so at least one row, and at most indexBatchBytes and its last
	// row), so that a run of large pasted messages does not hold the
	// writer connection for long either.
	indexBatchBytes = 1 << 20
)

// foldFunc is the SQL function the scan of rows past the index's mark
// folds text with: the fold of search terms (backend.Fold), close to the
// trigram index's Unicode case folding, where SQLite's lower() folds ASCII
// letters only.
const foldFunc = "appserver_fold"

func init() {
	err := sqlite.RegisterDeterministicScalarFunction(foldFunc, 1, func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		switch v := args[0].(type) {
		case string:
			return strings.ToLower(v), nil
		case []byte:
			return strings.ToLower(string(v)), nil
		default:
			return v, nil
		}
	})
	if err != nil {
		panic(err)
	}
}

// messageIndexer runs IndexMessages on its own goroutine when kicked.
type messageIndexer struct {
	kick chan struct{}
	stop context.CancelFunc
	done chan struct{}
}

// startIndexer starts the store's message indexer, unless
// Config.IndexDelay says not to; it first catches up with what a previous
// process left unindexed.
func (s *Store) startIndexer() {
	if s.cfg.IndexDelay < 0 {
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	ix := &messageIndexer{kick: make(chan struct{}, 1), stop: stop, done: make(chan struct{})}
	s.indexer = ix
	ix.kick <- struct{}{}
	go func() {
		defer close(ix.done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-ix.kick:
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(s.cfg.IndexDelay):
			}
			if _, err := s.IndexMessages(ctx); err != nil && ctx.Err() == nil {
				s.cfg.Logger.Warn("sqlite: indexing messages for search; the next write retries", "err", err)
			}
		}
	}()
}

// kickIndexer tells the indexer that messages were stored.
func (s *Store) kickIndexer() {
	if s.indexer == nil {
		return
	}
	select {
	case s.indexer.kick <- struct{}{}:
	default:
	}
}

// stopIndexer stops the indexer and waits for it.
func (s *Store) stopIndexer() {
	if s.indexer == nil {
		return
	}
	s.indexer.stop()
	<-s.indexer.done
}

// IndexMessages adds every message row past the index's mark to the
// search index, in transactions of up to indexBatch rows, and returns how
// many it added. The store's indexer calls it after writes that stored
// messages; a search finds a message before it too.
func (s *Store) IndexMessages(ctx context.Context) (int, error) {
	if err := s.usable(); err != nil {
		return 0, err
	}
	total := 0
	for {
		n, more, err := s.indexBatch(ctx)
		total += n
		if err != nil || !more {
			return total, err
		}
	}
}

// indexBatch indexes up to indexBatch rows past the mark in one
// transaction, ending before the first row that starts past
// indexBatchBytes of text, and moves the mark past them. more reports
// whether rows may be left past the new mark (the batch was full or cut
// by its size).
func (s *Store) indexBatch(ctx context.Context) (n int, more bool, err error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, false, storageErr(err)
	}
	defer func() { _ = tx.Rollback() }()
	var through int64
	if err := tx.QueryRowContext(ctx, `SELECT through FROM item_text_indexed`).Scan(&through); err != nil {
		return 0, false, storageErr(err)
	}
	var upTo sql.NullInt64
	var limited int
	// The next rows by id, each with the bytes of text before it in the
	// batch; the window runs over the limited rows only. The rows taken
	// are those with less than indexBatchBytes before them, a prefix.
	err = tx.QueryRowContext(ctx, `SELECT max(CASE WHEN before < ?3 THEN id END), count(CASE WHEN before < ?3 THEN 1 END), count(*) FROM (
		SELECT id, sum(len) OVER (ORDER BY id ROWS UNBOUNDED PRECEDING) - len AS before
		FROM (SELECT id, length(CAST(text AS BLOB)) AS len FROM item_text WHERE id > ?1 ORDER BY id LIMIT ?2)
	)`, through, indexBatch, indexBatchBytes).Scan(&upTo, &n, &limited)
	if err != nil {
		return 0, false, storageErr(err)
	}
	if n == 0 {
		return 0, false, nil
	}
	more = limited == indexBatch || n < limited
	if _, err := tx.ExecContext(ctx, `INSERT INTO item_text_fts (rowid, text) SELECT id, text FROM item_text WHERE id > ? AND id <= ?`, through, upTo.Int64); err != nil {
		return 0, false, storageErr(err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE item_text_indexed SET through = ?`, upTo.Int64); err != nil {
		return 0, false, storageErr(err)
	}
	if err := tx.Commit(); err != nil {
		return 0, false, storageErr(err)
	}
	return n, more, nil
}

// storesMessages reports whether b stores a message, whose text the
// items' triggers add to item_text.
func storesMessages(b *store.Batch) bool {
	for _, it := range b.AppendItems {
		if it.Type == "agentMessage" || it.Type == "userMessage" {
			return true
		}
	}
	return false
}
