package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"strings"
	"time"

	"modernc.org/sqlite"

	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/store/internal/backend"
)

// The message index (migrations 00004, 00014 and 00015) is brought up to
// date off the commits that store messages, in two steps, each in
// transactions of its own on the writer connection, a short while after a
// write stored messages:
//
//   - extraction: the text of the message items past
//     item_text_extracted's mark goes to item_text. Parsing each message's
//     JSON and writing item_text and its index inside the commit cost
//     8–11 % of the store's CPU for a plain turn, the extraction off the
//     commit counted (BenchmarkPlainTurnWrites/events=7, three rounds
//     alternating, 2026-12-05: 596–622 µs a turn against 646–685 µs;
//     bench/README.md, "Stacks grown once; message text off the commit").
//   - indexing: the item_text rows past item_text_indexed's mark go to
//     the trigram index. Adding them inside the commit cost about a fifth
//     of the store's CPU (2026-12-03: 570–593 µs a turn before, 463–471 µs
//     after).
//
// A search scans the items past the first mark and the rows past the
// second meanwhile (backend.messageText), so that it finds a message as
// soon as it is stored.
const (
	// defaultIndexDelay is how long the indexer lets messages gather
	// after the first write that stored one, so that a batch holds many
	// (Config.IndexDelay).
	defaultIndexDelay = 200 * time.Millisecond
	// indexBatch bounds the rows one indexing transaction adds (and the
	// items one extraction reads), so that the commits queued behind it on
	// the writer connection wait little.
	indexBatch = 256
	// indexBatchBytes bounds the text of one indexing transaction too (and
	// the message JSON one extraction parses): a batch takes rows while
	// the text before them in the batch is under it (so at least one row,
	// and at most indexBatchBytes and its last row), so that a run of
	// large pasted messages does not hold the writer connection for long
	// either.
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

// IndexMessages extracts the text of every message item past the
// extraction's mark, then adds every item_text row past the index's mark
// to the search index, each in transactions of up to indexBatch rows, and
// returns how many rows it added to the index. The store's indexer calls
// it after writes that stored messages; a search finds a message before
// it too.
func (s *Store) IndexMessages(ctx context.Context) (int, error) {
	if err := s.usable(); err != nil {
		return 0, err
	}
	for more := true; more; {
		var err error
		if _, more, err = s.extractBatch(ctx); err != nil {
			return 0, err
		}
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

// extractText writes to item_text the text of the message items whose
// rowid is past ?1 and at most ?2, as the trigger of migration 00015 does
// for an item at or below the mark, in the items' order (as the trigger
// wrote them).
var extractText = "INSERT INTO item_text (thread_id, seq, text) SELECT thread_id, seq, text FROM (" +
	backend.MessageTexts("?1", "?2") + ") ORDER BY r, k"

// A batchStep is one of the indexer's two steps: the statements of a
// batch that takes the rows (or items) past the step's mark and moves the
// mark past them.
type batchStep struct {
	// mark reads the step's mark; move sets it to its one argument.
	mark, move string
	// window takes the next rows past the mark (?1), at most ?2 of them
	// by id, each with the bytes before it in the batch, and returns the
	// greatest id of those with fewer than ?3 bytes before them (NULL
	// when none), how many those are, and how many it read: the rows
	// taken are a prefix.
	window string
	// apply does the step's work on the rows past its first argument up
	// to its second.
	apply string
}

// windowOf is a batchStep's window over the ids (id) of table past the
// mark, length the bytes a row counts.
func windowOf(id, length, table string) string {
	return `SELECT max(CASE WHEN before < ?3 THEN id END), count(CASE WHEN before < ?3 THEN 1 END), count(*) FROM (
		SELECT id, sum(len) OVER (ORDER BY id ROWS UNBOUNDED PRECEDING) - len AS before
		FROM (SELECT ` + id + ` AS id, ` + length + ` AS len FROM ` + table + ` WHERE ` + id + ` > ?1 ORDER BY ` + id + ` LIMIT ?2)
	)`
}

var (
	// extractStep: the text of the next items (a message counts the bytes
	// of its JSON, other items nothing: their payloads are not read).
	extractStep = batchStep{
		mark:   `SELECT through FROM item_text_extracted`,
		move:   `UPDATE item_text_extracted SET through = ?`,
		window: windowOf("rowid", "CASE WHEN type IN ('agentMessage', 'userMessage') THEN length(CAST(payload AS BLOB)) ELSE 0 END", "items"),
		apply:  extractText,
	}
	// indexStep: the next item_text rows into the trigram index (a row
	// counts the bytes of its text).
	indexStep = batchStep{
		mark:   `SELECT through FROM item_text_indexed`,
		move:   `UPDATE item_text_indexed SET through = ?`,
		window: windowOf("id", "length(CAST(text AS BLOB))", "item_text"),
		apply:  `INSERT INTO item_text_fts (rowid, text) SELECT id, text FROM item_text WHERE id > ? AND id <= ?`,
	}
)

// extractBatch extracts the text of up to indexBatch items past the
// extraction's mark in one transaction, ending before the first message
// item that starts past indexBatchBytes of message JSON, and moves the
// mark past them; n is the number of items it read. more reports whether
// items may be left past the new mark.
func (s *Store) extractBatch(ctx context.Context) (n int, more bool, err error) {
	return s.runBatch(ctx, extractStep)
}

// indexBatch indexes up to indexBatch rows past the mark in one
// transaction, ending before the first row that starts past
// indexBatchBytes of text, and moves the mark past them. more reports
// whether rows may be left past the new mark (the batch was full or cut
// by its size).
func (s *Store) indexBatch(ctx context.Context) (n int, more bool, err error) {
	return s.runBatch(ctx, indexStep)
}

// runBatch runs one batch of step in a transaction of its own on the
// writer connection: up to indexBatch rows past the mark, ending before
// the first that starts past indexBatchBytes, and returns how many it
// took and whether more may be left (the batch was full or cut by size).
func (s *Store) runBatch(ctx context.Context, step batchStep) (n int, more bool, err error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, false, storageErr(err)
	}
	defer func() { _ = tx.Rollback() }()
	var through int64
	if err := tx.QueryRowContext(ctx, step.mark).Scan(&through); err != nil {
		return 0, false, storageErr(err)
	}
	var upTo sql.NullInt64
	var limited int
	if err := tx.QueryRowContext(ctx, step.window, through, indexBatch, indexBatchBytes).Scan(&upTo, &n, &limited); err != nil {
		return 0, false, storageErr(err)
	}
	if n == 0 {
		return 0, false, nil
	}
	more = limited == indexBatch || n < limited
	if _, err := tx.ExecContext(ctx, step.apply, through, upTo.Int64); err != nil {
		return 0, false, storageErr(err)
	}
	if _, err := tx.ExecContext(ctx, step.move, upTo.Int64); err != nil {
		return 0, false, storageErr(err)
	}
	if err := tx.Commit(); err != nil {
		return 0, false, storageErr(err)
	}
	return n, more, nil
}

// storesMessages reports whether b stores a message, whose text the
// indexer extracts.
func storesMessages(b *store.Batch) bool {
	for _, it := range b.AppendItems {
		if it.Type == "agentMessage" || it.Type == "userMessage" {
			return true
		}
	}
	return false
}
