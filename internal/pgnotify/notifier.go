package pgnotify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/appserver/appserver/internal/service"
)

// Defaults of the Config fields left zero.
const (
	DefaultMinBackoff = 100 * time.Millisecond
	DefaultMaxBackoff = 5 * time.Second
	// queueSize is how many notifications of one subscription may wait
	// for its handler before the connection waits too.
	queueSize = 256
	// ApplicationName is the application_name of the connection, which
	// names it in pg_stat_activity.
	ApplicationName = "appserver-notifier"
)

// Config configures New.
type Config struct {
	// Pool is the store's pool, whose connection settings the notifier
	// dials with; its connection is its own, not one of the pool's.
	Pool *pgxpool.Pool
	// MinBackoff and MaxBackoff bound the pause before a reconnection,
	// which doubles with every failure in a row.
	MinBackoff, MaxBackoff time.Duration
	// Logger receives the lost connections; nil discards them.
	Logger *slog.Logger
}

// Handler is what a subscriber is told. Both functions run on the
// subscription's own goroutine, one call at a time, in the order of the
// connection's events; a slow handler delays only its own channel until
// its queue fills. ctx ends when the notifier stops.
type Handler struct {
	// Notify gets every notification's payload on the channel.
	Notify func(ctx context.Context, payload string)
	// Connected, if set, is called after every connection once its
	// LISTEN is in effect, before the notifications that follow it:
	// what was sent while no connection listened is lost, and this is
	// where a subscriber looks for it.
	Connected func(ctx context.Context)
}

// Notifier holds the daemon's one LISTEN connection. Subscribe before
// Start; Stop ends the connection and the handlers' goroutines.
type Notifier struct {
	cfg  Config
	log  *slog.Logger
	conn *pgx.ConnConfig
	base service.Base

	mu     sync.Mutex // guards subs and frozen
	subs   map[string]*subscription
	frozen bool // set by Start: subs no longer change

	// listening is closed once the first connection's LISTEN is in effect.
	listening     chan struct{}
	listeningOnce sync.Once
}

var _ service.Service = (*Notifier)(nil)

// subscription is one channel's handler and its queue.
type subscription struct {
	h Handler
	// events carries payloads; connected marks a (re)connection.
	events chan event
}

type event struct {
	connected bool
	payload   string
}

// New returns a Notifier on the database of cfg.Pool.
func New(cfg Config) (*Notifier, error) {
	if cfg.Pool == nil {
		return nil, errors.New("pgnotify: Pool is required")
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = DefaultMinBackoff
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = max(DefaultMaxBackoff, cfg.MinBackoff)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	conn := cfg.Pool.Config().ConnConfig.Copy()
	conn.RuntimeParams["application_name"] = ApplicationName
	return &Notifier{cfg: cfg, log: cfg.Logger, conn: conn, subs: map[string]*subscription{}, listening: make(chan struct{})}, nil
}

// Listening is closed once the first connection's LISTEN is in effect on
// every channel: a notification sent after that reaches the subscribers.
// A daemon waits for it before it serves, so that a client it serves
// never misses what another daemon sends meanwhile.
func (n *Notifier) Listening() <-chan struct{} { return n.listening }

// Subscribe gives channel's notifications to h from Start on. A channel
// has one subscriber; subscribing after Start is refused.
func (n *Notifier) Subscribe(channel string, h Handler) error {
	if channel == "" || h.Notify == nil {
		return errors.New("pgnotify: a subscription needs a channel and Notify")
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.frozen {
		return fmt.Errorf("pgnotify: subscribe to %s after Start", channel)
	}
	if _, dup := n.subs[channel]; dup {
		return fmt.Errorf("pgnotify: channel %s has a subscriber already", channel)
	}
	n.subs[channel] = &subscription{h: h, events: make(chan event, queueSize)}
	return nil
}

// Start runs the connection and the subscriptions' goroutines; it does
// not wait for the first connection (each subscriber hears of it through
// Connected, and Listening says when it is in effect).
func (n *Notifier) Start(ctx context.Context) error {
	_, run, err := n.base.Begin(ctx)
	if !run {
		return err
	}
	n.mu.Lock()
	n.frozen = true
	subs := n.subs
	n.mu.Unlock()
	for _, s := range subs {
		n.base.Go(s.deliver)
	}
	n.base.Go(func(ctx context.Context) { n.run(ctx, subs) })
	return n.base.Started(nil)
}

// Stop closes the connection and waits for the handlers to return.
func (n *Notifier) Stop() { n.base.Stop(nil) }

// deliver runs the subscription's handler until ctx ends.
func (s *subscription) deliver(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-s.events:
			switch {
			case !ev.connected:
				s.h.Notify(ctx, ev.payload)
			case s.h.Connected != nil:
				s.h.Connected(ctx)
			}
		}
	}
}

// run keeps one connection listening, reconnecting after a failure: the
// pause starts at MinBackoff, doubles with every failure in a row up to
// MaxBackoff, and starts again after a connection that listened.
func (n *Notifier) run(ctx context.Context, subs map[string]*subscription) {
	backoff := n.cfg.MinBackoff
	for ctx.Err() == nil {
		listened, err := n.listen(ctx, subs)
		if ctx.Err() != nil {
			return
		}
		if listened {
			backoff = n.cfg.MinBackoff
		}
		n.log.Warn("postgres notifier lost its connection; reconnecting", "err", err, "after", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
		backoff = min(2*backoff, n.cfg.MaxBackoff)
	}
}

// listen connects, LISTENs on every channel and hands out notifications
// until the connection fails; listened reports whether it got that far.
func (n *Notifier) listen(ctx context.Context, subs map[string]*subscription) (listened bool, err error) {
	conn, err := pgx.ConnectConfig(ctx, n.conn)
	if err != nil {
		return false, err
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	for ch := range subs {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return false, err
		}
	}
	n.listeningOnce.Do(func() { close(n.listening) })
	for _, s := range subs {
		if !s.put(ctx, event{connected: true}) {
			return true, ctx.Err()
		}
	}
	for {
		note, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true, err
		}
		if s := subs[note.Channel]; s != nil && !s.put(ctx, event{payload: note.Payload}) {
			return true, ctx.Err()
		}
	}
}

// put queues ev, waiting while the queue is full; false when ctx ended.
func (s *subscription) put(ctx context.Context, ev event) bool {
	select {
	case s.events <- ev:
		return true
	case <-ctx.Done():
		return false
	}
}
