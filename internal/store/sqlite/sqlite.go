package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/store/internal/backend"
)

// Config configures Open.
type Config struct {
	// Path is the database file, created if missing.
	Path string
	// Migrate applies pending migrations during Open.
	Migrate bool
	// ReadConns caps the read pool; zero means max(4, GOMAXPROCS).
	ReadConns int
	// BusyTimeout is how long a connection waits for a lock held by another
	// process; zero means 5s.
	BusyTimeout time.Duration
	// Observe, when set, receives the duration and outcome of every operation.
	Observe store.ObserveFunc
	// Now is the clock for defaulted timestamps; nil means time.Now.
	Now func() time.Time
	// Logger receives what Migrate does beyond the migrations (the one-off
	// VACUUM of an older file) and the message indexer's failures; nil
	// discards it.
	Logger *slog.Logger
	// IndexDelay is how long stored messages wait before the store adds
	// them to the search index (a search finds them meanwhile); zero
	// means 200 ms, a negative value leaves indexing to IndexMessages.
	IndexDelay time.Duration
}

// Store is a store.Store backed by one SQLite file. Writes go through a
// single connection, so they queue in Go instead of failing with SQLITE_BUSY;
// reads use a separate pool and, thanks to WAL, never wait for writes.
type Store struct {
	// Reader implements the reads.
	backend.Reader
	// Consumers keeps the event consumers' leases and cursors, on the
	// writer connection.
	backend.Consumers
	// Webhooks keeps the webhook subscriptions and delivery logs.
	backend.Webhooks
	// Audit reads and prunes the audit log.
	backend.Audit
	// Credentials keeps the browser credentials (tickets and sessions).
	backend.Credentials
	// Queue keeps the threads' queued submissions.
	backend.Queue
	// Budgets keeps what principals spent of their period budgets.
	backend.Budgets
	// EventSeqs reserves the numbers of the threads' event logs.
	backend.EventSeqs

	w, r  *sql.DB
	stmts *stmtCache // the writer's prepared statements
	// rstmts and wrstmts are the prepared reads of the read pool and of
	// the writer's (readPool, writerPool); apart from stmts, so that reads
	// never take the places of writes in it.
	rstmts, wrstmts *stmtCache
	cfg             Config
	// indexer adds stored messages to the search index (msgindex.go).
	indexer *messageIndexer
	closed  atomic.Bool
	once    sync.Once
	err     error
}

var _ store.Store = (*Store)(nil)

// Open opens (creating if needed) the database at cfg.Path and, if
// cfg.Migrate is set, migrates it.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Path == "" || strings.Contains(cfg.Path, ":memory:") || strings.Contains(cfg.Path, "mode=memory") {
		// The writer and the readers are separate connections, which would
		// each see a different in-memory database.
		return nil, apperr.New(apperr.Invalid, "sqlite: a database file path is required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.ReadConns <= 0 {
		cfg.ReadConns = max(4, runtime.GOMAXPROCS(0))
	}
	if cfg.BusyTimeout <= 0 {
		cfg.BusyTimeout = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.IndexDelay == 0 {
		cfg.IndexDelay = defaultIndexDelay
	}
	sep := "?"
	if strings.Contains(cfg.Path, "?") {
		sep = "&"
	}
	if err := registerWALVFS(); err != nil {
		return nil, apperr.Wrap(apperr.Unavailable, err, "sqlite: cannot open database")
	}
	common := fmt.Sprintf("vfs=%s&_pragma=busy_timeout(%d)&_pragma=foreign_keys(1)", walVFSName, cfg.BusyTimeout.Milliseconds())
	// synchronous(FULL): an item acknowledged to a client must survive a
	// power loss, and group commit keeps the fsyncs few; the WAL VFS
	// (walvfs.go) relies on a sync at every commit. BEGIN IMMEDIATE
	// takes the write lock up front, where busy_timeout can wait for it.
	wdsn := cfg.Path + sep + common + "&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_txlock=immediate"
	rdsn := cfg.Path + sep + common + "&_pragma=query_only(1)"

	w, err := sql.Open("sqlite", wdsn)
	if err != nil {
		return nil, apperr.Wrap(apperr.Invalid, err, "sqlite: cannot open database")
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	// Opening the writer first switches the file to WAL before any reader.
	if err := w.PingContext(ctx); err != nil {
		_ = w.Close()
		return nil, apperr.Wrap(apperr.Unavailable, err, "sqlite: cannot open database")
	}
	// The WAL VFS publishes a commit's frames when SQLite syncs the log:
	// a path whose own parameters left the writer below FULL is refused.
	var syncMode int
	if err := w.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&syncMode); err != nil {
		_ = w.Close()
		return nil, apperr.Wrap(apperr.Unavailable, err, "sqlite: cannot open database")
	}
	if syncMode < synchronousFull {
		_ = w.Close()
		return nil, apperr.New(apperr.Invalid, "sqlite: the database path's parameters set synchronous below FULL")
	}
	r, err := sql.Open("sqlite", rdsn)
	if err != nil {
		_ = w.Close()
		return nil, apperr.Wrap(apperr.Invalid, err, "sqlite: cannot open database")
	}
	r.SetMaxOpenConns(cfg.ReadConns)
	r.SetMaxIdleConns(cfg.ReadConns)
	s := &Store{w: w, r: r, stmts: newStmtCache(w), rstmts: newStmtCache(r), wrstmts: newStmtCache(w), cfg: cfg}
	rd, wd := s.readPool(), s.writerPool()
	s.Reader = backend.NewReader(backend.SQLite, rd, cfg.Observe, s.usable)
	s.Consumers = backend.NewConsumers(backend.SQLite, wd, cfg.Observe, s.usable)
	s.Webhooks = backend.NewWebhooks(backend.SQLite, wd, cfg.Observe, s.usable)
	s.Audit = backend.NewAudit(backend.SQLite, wd, cfg.Observe, s.usable)
	s.Credentials = backend.NewCredentials(backend.SQLite, wd, rd, cfg.Observe, s.usable)
	s.Queue = backend.NewQueue(backend.SQLite, wd, cfg.Observe, s.usable, cfg.Now)
	s.Budgets = backend.NewBudgets(backend.SQLite, wd, cfg.Observe, s.usable)
	s.EventSeqs = backend.NewEventSeqs(backend.SQLite, wd, cfg.Observe, s.usable)
	if err := r.PingContext(ctx); err != nil {
		_ = s.Close()
		return nil, apperr.Wrap(apperr.Unavailable, err, "sqlite: cannot open database")
	}
	if cfg.Migrate {
		if err := s.Migrate(ctx); err != nil {
			_ = s.Close()
			return nil, err
		}
	}
	s.startIndexer()
	return s, nil
}

// Migrate applies pending migrations; `appserver migrate` calls it. It
// also puts the file in incremental auto-vacuum mode, so that Reclaim can
// give the pages that pruning frees back to the file system: a new file
// takes the mode at once, a file made before it needs one VACUUM, which
// rewrites it (it takes as long as copying the file, and as much free
// disk space again) and is logged.
func (s *Store) Migrate(ctx context.Context) error {
	if err := s.usable(); err != nil {
		return err
	}
	if err := s.incrementalVacuum(ctx); err != nil {
		return err
	}
	return store.Migrate(ctx, s.w, store.DialectSQLite)
}

// synchronousFull is PRAGMA synchronous's value for FULL.
const synchronousFull = 2

// autoVacuumIncremental is PRAGMA auto_vacuum's value for INCREMENTAL.
const autoVacuumIncremental = 2

// incrementalVacuum switches the file to incremental auto-vacuum: VACUUM
// applies the mode set before it.
func (s *Store) incrementalVacuum(ctx context.Context) error {
	var mode int
	if err := s.w.QueryRowContext(ctx, "PRAGMA auto_vacuum").Scan(&mode); err != nil {
		return storageErr(err)
	}
	if mode == autoVacuumIncremental {
		return nil
	}
	if _, err := s.w.ExecContext(ctx, "PRAGMA auto_vacuum = INCREMENTAL"); err != nil {
		return storageErr(err)
	}
	var tables int
	if err := s.w.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema").Scan(&tables); err != nil {
		return storageErr(err)
	}
	// A new file in WAL mode already has its first page: VACUUM applies
	// the mode there too, at no cost.
	start := time.Now()
	if tables > 0 {
		s.cfg.Logger.Info("sqlite: rewriting the database once for incremental auto-vacuum", "path", s.cfg.Path)
	}
	if _, err := s.w.ExecContext(ctx, "VACUUM"); err != nil {
		return apperr.Wrap(apperr.Unavailable, err, "sqlite: VACUUM for incremental auto-vacuum")
	}
	if tables > 0 {
		s.cfg.Logger.Info("sqlite: database rewritten for incremental auto-vacuum", "path", s.cfg.Path, "took", time.Since(start))
	}
	return nil
}

// Ping checks that both the writer and the readers answer.
func (s *Store) Ping(ctx context.Context) (err error) {
	defer func(start time.Time) { backend.Observe(s.cfg.Observe, store.OpPing, start, err) }(time.Now())
	if err := s.usable(); err != nil {
		return err
	}
	for _, db := range []*sql.DB{s.w, s.r} {
		var one int
		if err := db.QueryRowContext(ctx, `SELECT 1`).Scan(&one); err != nil {
			return storageErr(err)
		}
	}
	return nil
}

// Close closes both connection pools; later calls return the first result.
// readPool runs reads on the read pool.
func (s *Store) readPool() readDB { return readDB{s.r, s.rstmts} }

// writerPool runs reads and lone statements on the writer's connection.
func (s *Store) writerPool() readDB { return readDB{s.w, s.wrstmts} }

func (s *Store) Close() error {
	s.once.Do(func() {
		s.stopIndexer()
		s.closed.Store(true)
		s.stmts.close()
		s.rstmts.close()
		s.wrstmts.close()
		s.err = errors.Join(s.r.Close(), s.w.Close())
	})
	return s.err
}

func (s *Store) usable() error {
	if s.closed.Load() {
		return apperr.New(apperr.Unavailable, "store is closed")
	}
	return nil
}

// sqliteCode returns the extended result code of err, or 0.
func sqliteCode(err error) int {
	if err == nil {
		// Most calls see a statement that succeeded; returning before se
		// spares its heap allocation (errors.As takes its address).
		return 0
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code()
	}
	return 0
}

func isUniqueViolation(err error) bool {
	c := sqliteCode(err)
	return c == sqlite3.SQLITE_CONSTRAINT_UNIQUE || c == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
}

func isForeignKeyViolation(err error) bool {
	return sqliteCode(err) == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY
}

// storageErr classifies an error of SQLite or database/sql. Callers handle
// the codes that mean NotFound or Conflict in their context first.
func storageErr(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return apperr.Wrap(apperr.Unavailable, err, "storage request canceled")
	}
	if errors.Is(err, sql.ErrConnDone) || errors.Is(err, sql.ErrTxDone) {
		return apperr.Wrap(apperr.Unavailable, err, "storage unavailable")
	}
	if c := sqliteCode(err); c != 0 {
		switch c & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_INTERRUPT, sqlite3.SQLITE_IOERR,
			sqlite3.SQLITE_FULL, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_NOMEM:
			return apperr.Wrap(apperr.Unavailable, err, "storage unavailable")
		case sqlite3.SQLITE_CONSTRAINT, sqlite3.SQLITE_TOOBIG, sqlite3.SQLITE_MISMATCH:
			return apperr.Wrap(apperr.Invalid, err, "value rejected by storage")
		}
	}
	return apperr.Wrap(apperr.Internal, err, "storage error")
}

// textArg binds b as TEXT without copying it into a Go string first; JSON
// values (a turn's meta holds its whole history) are most of the bytes a
// write would otherwise allocate. Sharing b's memory is safe because the
// string does not outlive the Exec it is an argument of: database/sql keeps
// no reference to arguments after the call, and modernc.org/sqlite's
// bindText copies every string into SQLite-owned memory (libc.CString) before
// stepping the statement. A Batch must not change while Write runs anyway.
func textArg(b []byte) string {
	return unsafe.String(unsafe.SliceData(b), len(b))
}
