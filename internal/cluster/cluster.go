package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/pgnotify"
	"github.com/appserver/appserver/internal/service"
)

// DefaultLeaseTTL is how long a lease outlives its last renewal when the
// configuration does not say.
const DefaultLeaseTTL = 10 * time.Second

// Config configures New.
type Config struct {
	// Pool is the Postgres store's pool; required.
	Pool *pgxpool.Pool
	// Notifier is the daemon's LISTEN connection, where the node hears
	// the requests forwarded to it and the answers to its own; required,
	// and started by its owner.
	Notifier *pgnotify.Notifier
	// Events hears of lost leases and recovered turns and runs the
	// forwarded requests; required. It is called only while the node
	// runs (between Start and Stop).
	Events Events
	// NodeID names this daemon in the lease table; "" means the host name
	// with a random suffix, new for every process. Two live daemons must
	// never share one.
	NodeID string
	// LeaseTTL is how long a lease outlives its last renewal (default
	// DefaultLeaseTTL). The heartbeat renews every LeaseTTL/3, so a node
	// survives one lost renewal; a dead node's turns are settled when its
	// leases expire, at most LeaseTTL after it died.
	LeaseTTL time.Duration
	// ScanInterval is the longest time between two failover scans, which
	// look for turns of dead nodes; 0 means LeaseTTL/2. A scan also runs
	// when the next lease of another node's running turn expires.
	ScanInterval time.Duration
	// Logger defaults to discarding.
	Logger *slog.Logger
}

// Events is what a node tells the turns manager. Its methods are called
// from the node's goroutine without locks held and must not block for
// long.
type Events interface {
	// LeaseLost says that a lease held for work running here expired or
	// was taken over: the database refuses the work's writes from now on,
	// so the work should stop.
	LeaseLost(threadID string)
	// TurnRecovered says that this node marked a dead node's turn
	// interrupted; it is called once per such turn across the cluster.
	TurnRecovered(threadID, turnID string)
	// Command runs a request another node forwarded here (Forward)
	// because this node runs the thread's turn; the result is encoded as
	// JSON for the sender, an error as its apperr code and message.
	Command(ctx context.Context, method string, params json.RawMessage) (any, error)
}

// Node is one daemon's side of thread ownership: the leases it holds, their
// heartbeat, the failover scan, and the fencing of its writes (Fenced).
type Node struct {
	cfg  Config
	log  *slog.Logger
	pool *pgxpool.Pool
	ttl  float64 // LeaseTTL in seconds, as the SQL takes it

	// mu guards leases and lastRenew. Lock order: a lease's mu, then mu;
	// mu is never held across a database round trip.
	mu        sync.Mutex
	leases    map[string]*lease
	lastRenew time.Time

	events Events
	// waiters are the forwarded requests of this node waiting for their
	// answers, by id; guarded by waitMu.
	waitMu  sync.Mutex
	waiters map[int64]chan struct{}

	base service.Base
	// runCtx is the context of the node's work, set by Start and ended
	// by Stop.
	runCtx context.Context
}

var _ service.Service = (*Node)(nil)

// lease is a thread's lease as this node holds it.
type lease struct {
	// mu is held across the round trips that take and give back the
	// lease, so that the node's callers of one thread take it once.
	mu   sync.Mutex
	refs int  // works of the thread running here; guarded by mu
	gone bool // removed from Node.leases; guarded by mu
	// token is the lease's token while it is held (refs > 0), else 0. The
	// write path reads it without mu: a write is fenced by whatever token
	// the node holds at that moment.
	token atomic.Int64
	// lost is set once the heartbeat found the lease expired or taken.
	lost atomic.Bool
}

// New returns a node, subscribed to its channel on cfg.Notifier; Start
// runs it.
func New(cfg Config) (*Node, error) {
	if cfg.Pool == nil || cfg.Notifier == nil || cfg.Events == nil {
		return nil, errors.New("cluster: Pool, Notifier and Events are required")
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = DefaultLeaseTTL
	}
	if cfg.ScanInterval <= 0 {
		cfg.ScanInterval = cfg.LeaseTTL / 2
	}
	if cfg.NodeID == "" {
		cfg.NodeID = defaultNodeID()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	n := &Node{
		cfg: cfg, log: cfg.Logger.With("node", cfg.NodeID), pool: cfg.Pool,
		ttl:     cfg.LeaseTTL.Seconds(),
		leases:  map[string]*lease{},
		events:  cfg.Events,
		waiters: map[int64]chan struct{}{},
	}
	if err := cfg.Notifier.Subscribe(channel(cfg.NodeID), pgnotify.Handler{
		Notify:    func(_ context.Context, payload string) { n.onNote(payload) },
		Connected: func(context.Context) { n.catchUp() },
	}); err != nil {
		return nil, err
	}
	return n, nil
}

// defaultNodeID is the host name with a random suffix: a restarted daemon
// is a new node, so the leases of its previous process expire as any dead
// node's do instead of being mistaken for its own.
func defaultNodeID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "node"
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	return host + "-" + hex.EncodeToString(b[:])
}

// ID is the node's id in the lease table.
func (n *Node) ID() string { return n.cfg.NodeID }

// Start settles the turns of dead nodes once (start-up recovery), then
// runs the heartbeat, the periodic failover scan and the forwarded
// requests until Stop; it then runs the requests it may have missed
// before. Events hears of lost leases and recovered turns.
func (n *Node) Start(ctx context.Context) error {
	runCtx, run, err := n.base.Begin(ctx)
	if !run {
		return err
	}
	n.runCtx = runCtx
	n.mu.Lock()
	n.lastRenew = time.Now()
	n.mu.Unlock()
	// Leases under this node's id are a previous process's (a daemon
	// restarted with a fixed node_id): its turns died with it, so the
	// scan below settles them now rather than after the TTL.
	if _, err := n.pool.Exec(ctx, releaseAllSQL, n.cfg.NodeID); err != nil {
		return n.base.Started(apperr.Wrap(apperr.Unavailable, err, "storage unavailable"))
	}
	if err := n.scan(ctx); err != nil {
		return n.base.Started(err)
	}
	n.base.Go(n.loop)
	if err := n.base.Started(nil); err != nil {
		return err
	}
	// Requests sent before the node ran were not run when heard.
	n.catchUp()
	return nil
}

// Stop ends the heartbeat, the scan and the forwarded requests, and gives
// back the leases still held, so that other nodes can take their threads
// at once. Call it after the work of the threads has stopped. It
// tolerates being called twice and before Start.
func (n *Node) Stop() {
	// The forwarded requests run as the base's goroutines (runAsync): the
	// base has waited for them before the leases are given back.
	n.base.Stop(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := n.pool.Exec(ctx, releaseAllSQL, n.cfg.NodeID); err != nil {
			n.log.Warn("giving back leases", "err", err)
		}
	})
}

func (n *Node) loop(ctx context.Context) {
	beat := time.NewTicker(n.cfg.LeaseTTL / 3)
	defer beat.Stop()
	scan := time.NewTimer(n.cfg.ScanInterval)
	defer scan.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-beat.C:
			n.renew()
		case <-scan.C:
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), n.cfg.LeaseTTL)
			if err := n.scan(sctx); err != nil {
				n.log.Warn("failover scan", "err", err)
			}
			scan.Reset(n.nextScan(sctx))
			cancel()
		}
	}
}

// nextScan is when to scan again: when the next lease of another node's
// running turn expires, unless renewed, so that a dead node's turns are
// taken over as soon as its leases end rather than up to a scan interval
// later; ScanInterval at the latest.
func (n *Node) nextScan(ctx context.Context) time.Duration {
	var secs *float64
	if err := n.pool.QueryRow(ctx, nextExpirySQL, n.cfg.NodeID).Scan(&secs); err != nil || secs == nil {
		return n.cfg.ScanInterval
	}
	// Just after the expiry, so that the scan finds it expired.
	wait := time.Duration(*secs*float64(time.Second)) + 10*time.Millisecond
	return max(min(wait, n.cfg.ScanInterval), 10*time.Millisecond)
}

// The lease statements. Every time is the database's clock_timestamp(),
// so that the nodes' clocks never matter and a lease given back is free to
// a transaction that started before. A lease changes hands (a new token)
// only under its thread's row lock, which every store write of the thread
// takes before it checks its fence: a write in flight finishes before the
// token changes, and a later one sees the new token.
const (
	// acquireSQL takes a free or expired lease, or creates it, with a new
	// token; it returns no row while another node holds it. A live lease
	// under this node's own id is taken too: Acquire asks the database
	// only when no work of the thread holds the lease here, so that one is
	// left over (a release lost in an outage, an acquire whose answer
	// was).
	acquireSQL = `WITH th AS (SELECT id FROM threads WHERE id = $1 FOR NO KEY UPDATE)
	INSERT INTO thread_leases (thread_id, node_id, token, expires_at)
	SELECT id, $2, nextval('thread_lease_tokens'), clock_timestamp() + make_interval(secs => $3) FROM th
	ON CONFLICT (thread_id) DO UPDATE SET node_id = excluded.node_id, token = excluded.token,
		prev_token = thread_leases.token, expires_at = excluded.expires_at
	WHERE thread_leases.expires_at <= clock_timestamp() OR thread_leases.node_id = excluded.node_id
	RETURNING token, coalesce(prev_token, 0)`
	ownerSQL   = `SELECT node_id FROM thread_leases WHERE thread_id = $1`
	releaseSQL = `UPDATE thread_leases SET expires_at = clock_timestamp()
	WHERE thread_id = $1 AND token = $2 AND expires_at > clock_timestamp()`
	releaseAllSQL = `UPDATE thread_leases SET expires_at = clock_timestamp()
	WHERE node_id = $1 AND expires_at > clock_timestamp()`
	// renewSQL extends the node's unexpired leases among the tokens given,
	// locking them in thread order; an expired lease is not revived,
	// whoever takes it.
	renewSQL = `UPDATE thread_leases l SET expires_at = clock_timestamp() + make_interval(secs => $3)
	FROM (SELECT thread_id FROM thread_leases
		WHERE node_id = $1 AND token = ANY($2::bigint[]) AND expires_at > clock_timestamp()
		ORDER BY thread_id FOR UPDATE) held
	WHERE l.thread_id = held.thread_id
	RETURNING l.token`
	// deadSQL finds the threads with a running turn and no live lease.
	deadSQL = `SELECT DISTINCT t.thread_id::text FROM turns t
	LEFT JOIN thread_leases l ON l.thread_id = t.thread_id
	WHERE t.status = 'inProgress' AND (l.thread_id IS NULL OR l.expires_at <= clock_timestamp())`
	// nextExpirySQL is the time in seconds until the first lease of
	// another node's running turn expires, NULL when there is none.
	nextExpirySQL = `SELECT extract(epoch FROM min(l.expires_at) - clock_timestamp())::float8
	FROM thread_leases l
	WHERE l.node_id <> $1 AND l.expires_at > clock_timestamp()
	  AND EXISTS (SELECT 1 FROM turns t WHERE t.thread_id = l.thread_id AND t.status = 'inProgress')`
	// takeOverSQL fences a dead node out of a thread: a new token, and the
	// lease left free. No row means a live node holds it now.
	takeOverSQL = `WITH th AS (SELECT id FROM threads WHERE id = $1 FOR NO KEY UPDATE)
	INSERT INTO thread_leases (thread_id, node_id, token, expires_at)
	SELECT id, $2, nextval('thread_lease_tokens'), clock_timestamp() FROM th
	ON CONFLICT (thread_id) DO UPDATE SET node_id = excluded.node_id, token = excluded.token,
		prev_token = thread_leases.token, expires_at = excluded.expires_at
	WHERE thread_leases.expires_at <= clock_timestamp()
	RETURNING token`
	// interruptSQL settles the dead turns; its condition makes one node,
	// and one scan, the one that announces each.
	interruptSQL = `UPDATE turns SET status = 'interrupted', completed_at = clock_timestamp()
	WHERE thread_id = $1 AND status = 'inProgress' RETURNING id`
)

// Acquire takes the lease of a thread for work about to run here (a turn),
// or enters it again when this node already holds it. It returns the
// lease's token and the token it replaced: the same token when this node
// already held it, 0 when nobody ever held it. A loaded copy of the
// thread last written under another token than prev is stale: another
// node ran turns of it meanwhile. While another live node holds the
// lease, Acquire fails with Conflict naming that node. Every Acquire
// needs one Release.
func (n *Node) Acquire(ctx context.Context, threadID string) (token, prev int64, err error) {
	for {
		l := n.entry(threadID)
		l.mu.Lock()
		if l.gone {
			// Released and forgotten between entry and Lock: start over.
			l.mu.Unlock()
			continue
		}
		defer l.mu.Unlock()
		if l.refs > 0 {
			if l.lost.Load() {
				return 0, 0, apperr.New(apperr.Conflict, "thread %s: this node lost its lease", threadID)
			}
			l.refs++
			tok := l.token.Load()
			return tok, tok, nil
		}
		err := n.pool.QueryRow(ctx, acquireSQL, threadID, n.cfg.NodeID, n.ttl).Scan(&token, &prev)
		if errors.Is(err, pgx.ErrNoRows) {
			n.forgetLocked(threadID, l)
			var owner string
			if err := n.pool.QueryRow(ctx, ownerSQL, threadID).Scan(&owner); err != nil {
				owner = "another node"
			}
			return 0, 0, apperr.New(apperr.Conflict, "thread %s is busy on node %s", threadID, owner)
		}
		if err != nil {
			n.forgetLocked(threadID, l)
			// The store's own words for an outage, as every write gives.
			return 0, 0, apperr.Wrap(apperr.Unavailable, err, "storage unavailable")
		}
		l.refs = 1
		l.lost.Store(false)
		l.token.Store(token)
		return token, prev, nil
	}
}

// Release ends one Acquire; the last gives the lease back, so that any
// node can take the idle thread for its next turn.
func (n *Node) Release(threadID string) {
	n.mu.Lock()
	l := n.leases[threadID]
	n.mu.Unlock()
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.refs == 0 {
		return
	}
	l.refs--
	if l.refs > 0 {
		return
	}
	token := l.token.Swap(0)
	if !l.lost.Load() {
		ctx, cancel := context.WithTimeout(context.Background(), n.cfg.LeaseTTL)
		if _, err := n.pool.Exec(ctx, releaseSQL, threadID, token); err != nil {
			// It expires on its own within the TTL.
			n.log.Warn("giving back a lease", "thread", threadID, "err", err)
		}
		cancel()
	}
	n.forgetLocked(threadID, l)
}

// entry returns the thread's lease record, creating it.
func (n *Node) entry(threadID string) *lease {
	n.mu.Lock()
	defer n.mu.Unlock()
	l := n.leases[threadID]
	if l == nil {
		l = &lease{}
		n.leases[threadID] = l
	}
	return l
}

// forgetLocked drops an unheld lease record; l.mu must be held.
func (n *Node) forgetLocked(threadID string, l *lease) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if l.refs == 0 && n.leases[threadID] == l {
		delete(n.leases, threadID)
		l.gone = true
	}
}

// fence returns the token of the thread's lease held here, or 0.
func (n *Node) fence(threadID string) int64 {
	n.mu.Lock()
	l := n.leases[threadID]
	n.mu.Unlock()
	if l == nil {
		return 0
	}
	return l.token.Load()
}

// renew is the heartbeat: one UPDATE for every lease held here. A lease it
// cannot renew is lost; so is every lease when the database has not
// answered for a whole TTL, since another node may have taken them.
func (n *Node) renew() {
	n.mu.Lock()
	held := make(map[int64]string, len(n.leases))
	for id, l := range n.leases {
		if tok := l.token.Load(); tok != 0 && !l.lost.Load() {
			held[tok] = id
		}
	}
	n.mu.Unlock()
	if len(held) == 0 {
		n.mu.Lock()
		n.lastRenew = time.Now()
		n.mu.Unlock()
		return
	}
	tokens := make([]int64, 0, len(held))
	for tok := range held {
		tokens = append(tokens, tok)
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.LeaseTTL/3)
	defer cancel()
	rows, err := n.pool.Query(ctx, renewSQL, n.cfg.NodeID, tokens, n.ttl)
	var renewed []int64
	if err == nil {
		renewed, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	}
	if err != nil {
		n.mu.Lock()
		expired := time.Since(n.lastRenew) > n.cfg.LeaseTTL
		n.mu.Unlock()
		n.log.Warn("renewing leases", "err", err, "leases", len(held))
		if !expired {
			return
		}
	} else {
		n.mu.Lock()
		n.lastRenew = start
		n.mu.Unlock()
		for _, tok := range renewed {
			delete(held, tok)
		}
	}
	for tok, id := range held {
		n.lose(id, tok)
	}
}

// lose marks a lease lost, once, and tells the manager.
func (n *Node) lose(threadID string, token int64) {
	n.mu.Lock()
	l := n.leases[threadID]
	n.mu.Unlock()
	if l == nil || l.token.Load() != token || !l.lost.CompareAndSwap(false, true) {
		return
	}
	n.log.Warn("lease lost", "thread", threadID)
	n.events.LeaseLost(threadID)
}

// scan settles the turns left running by dead nodes: for each thread with
// a running turn and no live lease, it takes the lease over (fencing the
// dead node out) and marks the turns interrupted in the same transaction.
func (n *Node) scan(ctx context.Context) error {
	// Requests whose sender died before reading the answer.
	if _, err := n.pool.Exec(ctx, `DELETE FROM node_commands WHERE created_at < now() - interval '1 hour'`); err != nil {
		return apperr.Wrap(apperr.Unavailable, err, "failover scan")
	}
	rows, err := n.pool.Query(ctx, deadSQL)
	if err != nil {
		return apperr.Wrap(apperr.Unavailable, err, "failover scan")
	}
	threads, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return apperr.Wrap(apperr.Unavailable, err, "failover scan")
	}
	for _, id := range threads {
		turns, err := n.takeOver(ctx, id)
		if err != nil {
			n.log.Warn("taking over a thread", "thread", id, "err", err)
			continue
		}
		for _, turn := range turns {
			n.log.Info("interrupted a turn of a dead node", "thread", id, "turn", turn)
			n.events.TurnRecovered(id, turn)
		}
	}
	return nil
}

// takeOver fences a dead node out of a thread and interrupts its running
// turns; it returns the turns it interrupted, none when a live node holds
// the thread by now.
func (n *Node) takeOver(ctx context.Context, threadID string) ([]string, error) {
	tx, err := n.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var token int64
	if err := tx.QueryRow(ctx, takeOverSQL, threadID, n.cfg.NodeID).Scan(&token); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, nil
		}
		return nil, err
	}
	rows, err := tx.Query(ctx, interruptSQL, threadID)
	if err != nil {
		return nil, err
	}
	turns, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	return turns, tx.Commit(ctx)
}
