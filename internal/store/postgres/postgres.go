package postgres

import (
	"context"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/jackc/puddle/v2"

	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/store/internal/backend"
)

// Config configures Open.
type Config struct {
	// URL is a libpq connection string or postgres:// URL.
	URL string
	// MaxConns caps the pool; zero keeps pgxpool's default.
	MaxConns int32
	// Migrate applies pending migrations during Open.
	Migrate bool
	// Observe, when set, receives the duration and outcome of every operation.
	Observe store.ObserveFunc
	// Now is the clock for defaulted timestamps; nil means time.Now.
	Now func() time.Time

	// tracer, when set, sees every statement the pool's connections send
	// (the package's tests count round trips with it).
	tracer pgx.QueryTracer
}

// Store is a store.Store backed by Postgres.
type Store struct {
	// Reader implements the reads.
	backend.Reader
	// Consumers keeps the event consumers' leases and cursors.
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

	pool   *pgxpool.Pool
	cfg    Config
	closed atomic.Bool
}

var _ store.Store = (*Store)(nil)

// Open connects to the database at cfg.URL, checks that it answers and, if
// cfg.Migrate is set, migrates it.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	pcfg, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, apperr.Wrap(apperr.Invalid, err, "invalid postgres URL")
	}
	if cfg.MaxConns > 0 {
		pcfg.MaxConns = cfg.MaxConns
	}
	if cfg.tracer != nil {
		pcfg.ConnConfig.Tracer = cfg.tracer
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, apperr.Wrap(apperr.Invalid, err, "invalid postgres configuration")
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, apperr.Wrap(apperr.Unavailable, err, "postgres is unavailable")
	}
	s := &Store{pool: pool, cfg: cfg}
	s.Reader = backend.NewReader(backend.Postgres, readDB{pool}, cfg.Observe, s.usable)
	s.Consumers = backend.NewConsumers(backend.Postgres, readDB{pool}, cfg.Observe, s.usable)
	s.Webhooks = backend.NewWebhooks(backend.Postgres, readDB{pool}, cfg.Observe, s.usable)
	s.Audit = backend.NewAudit(backend.Postgres, readDB{pool}, cfg.Observe, s.usable)
	s.Credentials = backend.NewCredentials(backend.Postgres, readDB{pool}, readDB{pool}, cfg.Observe, s.usable)
	s.Queue = backend.NewQueue(backend.Postgres, readDB{pool}, cfg.Observe, s.usable, cfg.Now)
	s.Budgets = backend.NewBudgets(backend.Postgres, readDB{pool}, cfg.Observe, s.usable)
	s.EventSeqs = backend.NewEventSeqs(backend.Postgres, readDB{pool}, cfg.Observe, s.usable)
	if cfg.Migrate {
		if err := s.Migrate(ctx); err != nil {
			pool.Close()
			return nil, err
		}
		return s, nil
	}
	var present bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass('items') IS NOT NULL`).Scan(&present); err != nil {
		pool.Close()
		return nil, apperr.Wrap(apperr.Unavailable, err, "postgres is unavailable")
	}
	if !present {
		pool.Close()
		return nil, apperr.New(apperr.Unavailable, "the database has no appserver schema: run `appserver migrate` or start with --migrate")
	}
	return s, nil
}

// Pool is the store's connection pool, for the parts of a daemon that keep
// their own tables in the same database or speak to Postgres beyond the
// transcript (thread leases, the event log's LISTEN).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Migrate applies pending migrations; `appserver migrate` calls it.
func (s *Store) Migrate(ctx context.Context) error {
	db := stdlib.OpenDBFromPool(s.pool)
	defer db.Close()
	return store.Migrate(ctx, db, store.DialectPostgres)
}

// Ping checks that Postgres answers.
func (s *Store) Ping(ctx context.Context) (err error) {
	defer func(start time.Time) { backend.Observe(s.cfg.Observe, store.OpPing, start, err) }(time.Now())
	if err := s.usable(); err != nil {
		return err
	}
	if err := s.pool.Ping(ctx); err != nil {
		return storageErr(err)
	}
	return nil
}

// Close closes the pool, waiting for connections in use to be returned.
func (s *Store) Close() error {
	if s.closed.CompareAndSwap(false, true) {
		s.pool.Close()
	}
	return nil
}

func (s *Store) usable() error {
	if s.closed.Load() {
		return apperr.New(apperr.Unavailable, "store is closed")
	}
	return nil
}

// Postgres error codes the store tells apart.
const (
	codeUniqueViolation     = "23505"
	codeForeignKeyViolation = "23503"
)

// storageErr classifies an error of the database or the driver. Callers
// handle the codes that mean NotFound or Conflict in their context first.
func storageErr(err error) error {
	if errors.Is(err, context.Canceled) {
		return apperr.Wrap(apperr.Unavailable, err, "storage request canceled")
	}
	// A deadline passes before the database answers when it is down or
	// hung; a connection the driver closed (cut mid-use) or a pool being
	// closed are the same outage seen later.
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, puddle.ErrClosedPool) {
		return apperr.Wrap(apperr.Unavailable, err, "storage unavailable")
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == "40001", pgErr.Code == "40P01", // serialization failure, deadlock
			pgErr.Code[:2] == "08", // connection exception
			pgErr.Code[:2] == "53", // insufficient resources
			pgErr.Code[:2] == "57": // operator intervention: shutdown, cancel
			return apperr.Wrap(apperr.Unavailable, err, "storage unavailable")
		case pgErr.Code[:2] == "22", pgErr.Code == "23514": // data exception, check violation
			return apperr.Wrap(apperr.Invalid, err, "value rejected by storage")
		}
		return apperr.Wrap(apperr.Internal, err, "storage error")
	}
	var netErr net.Error
	var connErr *pgconn.ConnectError
	if errors.As(err, &netErr) || errors.As(err, &connErr) || pgconn.Timeout(err) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return apperr.Wrap(apperr.Unavailable, err, "storage unavailable")
	}
	return apperr.Wrap(apperr.Internal, err, "storage error")
}

// pgCode returns the SQLSTATE of err, or "".
func pgCode(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

func isNoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }
