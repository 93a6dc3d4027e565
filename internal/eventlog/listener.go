package eventlog

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/appserver/appserver/internal/hub"
)

// ListenerConfig configures a Listener; every field but Logger is required.
type ListenerConfig struct {
	// Log is this daemon's event log, which tracks what was delivered.
	Log *Log
	// Hub gets the other daemons' events for its subscribers.
	Hub *hub.Hub
	// Pool is where the listener takes its one dedicated connection.
	Pool *pgxpool.Pool
	// Channel is the channel the store notifies on commit of events.
	Channel string
	// Logger receives warnings; nil discards them.
	Logger *slog.Logger
}

// Listener is the cross-daemon fan-out on Postgres: it LISTENs for the
// commits of events and, for the threads with subscribers here, gives the
// hub the events it has not delivered yet, in order.
type Listener struct {
	cfg    ListenerConfig
	log    *slog.Logger
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// NewListener returns a Listener; Start runs it.
func NewListener(cfg ListenerConfig) (*Listener, error) {
	if cfg.Log == nil || cfg.Hub == nil || cfg.Pool == nil || cfg.Channel == "" {
		return nil, errors.New("eventlog: the listener needs Log, Hub, Pool and Channel")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Listener{cfg: cfg, log: cfg.Logger}, nil
}

// Start runs the listening goroutine.
func (ln *Listener) Start(ctx context.Context) error {
	ctx, ln.cancel = context.WithCancel(context.WithoutCancel(ctx))
	ln.wg.Add(1)
	go ln.run(ctx)
	return nil
}

// Stop stops listening; it tolerates a Listener never started and
// repeated calls.
func (ln *Listener) Stop() {
	ln.once.Do(func() {
		if ln.cancel != nil {
			ln.cancel()
			ln.wg.Wait()
		}
	})
}

// run keeps one connection listening, reconnecting after a failure. After
// a reconnect nothing is replayed: a notification missed meanwhile is
// caught up by the thread's next one, which fetches from the last sequence
// number delivered.
func (ln *Listener) run(ctx context.Context) {
	defer ln.wg.Done()
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := ln.listen(ctx)
		if ctx.Err() != nil {
			return
		}
		ln.log.Warn("event log: listener lost its connection; reconnecting", "err", err)
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

func (ln *Listener) listen(ctx context.Context) error {
	pc, err := ln.cfg.Pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// A LISTENing connection must not go back to other pool users.
	conn := pc.Hijack()
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	if _, err := conn.Exec(ctx, "LISTEN "+ln.cfg.Channel); err != nil {
		return err
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		thread, first, last, ok := parseNote(n.Payload)
		if !ok || len(ln.cfg.Hub.Subscribers(thread)) == 0 {
			// Threads nobody here watches cost nothing but this look-up.
			continue
		}
		ln.cfg.Log.catchUp(ctx, thread, first, last, ln.cfg.Hub.Deliver)
	}
}

// parseNote reads a payload "<thread>:<first>:<last>".
func parseNote(p string) (thread string, first, last int64, ok bool) {
	thread, rest, ok1 := strings.Cut(p, ":")
	a, b, ok2 := strings.Cut(rest, ":")
	if !ok1 || !ok2 {
		return "", 0, 0, false
	}
	first, err1 := strconv.ParseInt(a, 10, 64)
	last, err2 := strconv.ParseInt(b, 10, 64)
	return thread, first, last, err1 == nil && err2 == nil && first > 0 && last >= first
}
