package audit

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/service"
	"github.com/appserver/appserver/internal/store"
)

// The kinds of entries.
const (
	// KindApproval is an approval, user-input or elicitation request
	// and its answer (or why it had none).
	KindApproval = "approval"
	// KindToolCall is a tool call with its decision path: policy, the
	// exec-policy rule that matched, sandboxed or not, the outcome.
	KindToolCall = "tool_call"
	// KindConfigWrite is a client's write of configuration keys.
	KindConfigWrite = "config_write"
	// KindThreadDelete is a thread deleted.
	KindThreadDelete = "thread_delete"
	// KindAdmin is an action only the operator may take.
	KindAdmin = "admin"
)

// Defaults of Config.
const (
	// DefaultRetention is how long entries are kept.
	DefaultRetention = 90 * 24 * time.Hour
	// DefaultPruneEvery is how often entries past the retention are
	// deleted.
	DefaultPruneEvery = time.Hour
	// DefaultFlushDelay is how long an entry waits for a transcript
	// commit round to carry it before the log writes it alone.
	DefaultFlushDelay = 5 * time.Millisecond
	// DefaultMaxPending bounds the entries waiting for the store.
	DefaultMaxPending = 10000
	// pruneBatch is how many entries one prune statement deletes.
	pruneBatch = 1000
)

// Actor is who acts: a principal (by name, "" for the operator) through
// a client (its name and, where the door has one, its connection id).
type Actor struct {
	Principal string
	Client    string
}

type actorKey struct{}

// WithActor returns ctx carrying the actor of the request it serves.
func WithActor(ctx context.Context, a Actor) context.Context {
	return context.WithValue(ctx, actorKey{}, a)
}

// ActorOf returns the actor ctx carries; false when it carries none.
func ActorOf(ctx context.Context) (Actor, bool) {
	a, ok := ctx.Value(actorKey{}).(Actor)
	return a, ok
}

// Entry is an action to record.
type Entry struct {
	Kind string
	// Actor is who acted; nil takes the actor ctx carries (none: the
	// operator, with no client).
	Actor            *Actor
	ThreadID, TurnID string
	// Detail is what exactly was done, encoded as a JSON object.
	Detail any
}

// Config configures a Log; zero fields take the defaults.
type Config struct {
	// Store is where entries go and are pruned: the group committer
	// Queue feeds. Required.
	Store store.Store
	// Queue is the group committer's audit queue (store.GroupCommitConfig
	// .Audit). Required.
	Queue *store.AuditQueue
	// Node is this daemon's node id, on every entry.
	Node string
	// TraceID returns the trace id of the span ctx carries, "" for none;
	// nil records none (the daemon, which builds the tracer, gives it).
	TraceID func(ctx context.Context) string
	// Retention is how long entries are kept (DefaultRetention).
	Retention time.Duration
	// PruneEvery is how often older entries are deleted
	// (DefaultPruneEvery).
	PruneEvery time.Duration
	// FlushDelay is how long an entry waits for a commit round to carry
	// it (DefaultFlushDelay).
	FlushDelay time.Duration
	Logger     *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Log records audit entries. A nil *Log records nothing, for the parts
// of the daemon built without one (tests of a single package).
type Log struct {
	service.Base
	cfg Config
}

// New returns a Log; Start runs its flusher and pruner.
func New(cfg Config) (*Log, error) {
	if cfg.Store == nil || cfg.Queue == nil {
		return nil, apperr.New(apperr.Invalid, "audit: a store and its queue are required")
	}
	if cfg.Retention <= 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.PruneEvery <= 0 {
		cfg.PruneEvery = DefaultPruneEvery
	}
	if cfg.FlushDelay <= 0 {
		cfg.FlushDelay = DefaultFlushDelay
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Log{cfg: cfg}, nil
}

// Record queues e for the store: it never waits for the store. The entry
// gets the time, this node, the trace of ctx's span and, unless e names
// one, the actor ctx carries. An entry the store could not take is
// logged, with what it was.
func (l *Log) Record(ctx context.Context, e Entry) {
	if l == nil {
		return
	}
	a, _ := ActorOf(ctx)
	if e.Actor != nil {
		a = *e.Actor
	}
	detail, err := json.Marshal(e.Detail)
	if err != nil || len(detail) == 0 || detail[0] != '{' {
		detail = []byte(`{}`)
	}
	rec := &store.AuditEntry{
		At: l.cfg.Now(), Kind: e.Kind, Principal: a.Principal, Client: a.Client, Node: l.cfg.Node,
		ThreadID: e.ThreadID, TurnID: e.TurnID, Detail: detail,
	}
	if l.cfg.TraceID != nil {
		rec.TraceID = l.cfg.TraceID(ctx)
	}
	if err := l.cfg.Queue.Push(rec); err != nil {
		l.cfg.Logger.Error("audit entry not recorded", "err", err, "kind", e.Kind, "principal", a.Principal,
			"thread", e.ThreadID, "detail", string(detail))
	}
}

// Start runs the flusher (what no commit round carried within FlushDelay
// is written alone) and the pruner (every PruneEvery, the entries older
// than Retention).
func (l *Log) Start(ctx context.Context) error {
	if _, run, err := l.Begin(ctx); !run {
		return err
	}
	l.Go(l.flushLoop)
	l.Go(l.pruneLoop)
	return l.Started(nil)
}

// Stop stops the flusher and the pruner, then writes what is still
// queued.
func (l *Log) Stop() {
	if l == nil {
		return
	}
	l.Base.Stop(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := l.cfg.Queue.Flush(ctx, l.cfg.Store); err != nil {
			l.cfg.Logger.Error("audit entries not written at shutdown", "err", err)
		}
	})
}

func (l *Log) flushLoop(ctx context.Context) {
	t := time.NewTimer(0)
	<-t.C
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.cfg.Queue.Wake():
		}
		// Give a commit round the chance to carry the entries.
		t.Reset(l.cfg.FlushDelay)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if err := l.cfg.Queue.Flush(ctx, l.cfg.Store); err != nil && ctx.Err() == nil {
			// Queued again: tried with the next commit round, or here
			// after a pause, not in a loop against a store that is down.
			l.cfg.Logger.Warn("audit entries not written yet", "err", err)
			t.Reset(time.Second)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}
}

func (l *Log) pruneLoop(ctx context.Context) {
	t := time.NewTicker(l.cfg.PruneEvery)
	defer t.Stop()
	for {
		l.Prune(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Prune deletes the entries older than the retention and returns how
// many it deleted.
func (l *Log) Prune(ctx context.Context) int64 {
	before := l.cfg.Now().Add(-l.cfg.Retention)
	var total int64
	for {
		n, err := l.cfg.Store.PruneAudit(ctx, before, pruneBatch)
		total += n
		if err != nil {
			if ctx.Err() == nil {
				l.cfg.Logger.Warn("pruning the audit log", "err", err)
			}
			return total
		}
		if n < pruneBatch {
			return total
		}
	}
}
