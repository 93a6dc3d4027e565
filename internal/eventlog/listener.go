package eventlog

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/appserver/appserver/internal/hub"
	"github.com/appserver/appserver/internal/pgnotify"
)

// ListenerConfig configures NewListener; every field but Logger is
// required.
type ListenerConfig struct {
	// Log is this daemon's event log, which tracks what was delivered.
	Log *Log
	// Hub gets the other daemons' events for its subscribers.
	Hub *hub.Hub
	// Notifier is the daemon's LISTEN connection; its owner starts it.
	Notifier *pgnotify.Notifier
	// Channel is the channel the store notifies on commit of events.
	Channel string
}

// NewListener subscribes the cross-daemon fan-out on Postgres to
// cfg.Channel: for the threads with subscribers here, the hub gets the
// events other daemons committed that it has not delivered yet, in
// order; the position kept of a thread nobody here follows moves on with
// its notifications. After a reconnection, the followed threads whose
// events this daemon delivered or numbered (and still remembers) get
// what the store holds past the last of them: what other daemons
// committed while no connection listened. What was missed of a thread
// without a position comes with its next notification, which fetches
// from where that one starts.
func NewListener(cfg ListenerConfig) error {
	if cfg.Log == nil || cfg.Hub == nil || cfg.Notifier == nil || cfg.Channel == "" {
		return errors.New("eventlog: the listener needs Log, Hub, Notifier and Channel")
	}
	return cfg.Notifier.Subscribe(cfg.Channel, pgnotify.Handler{
		Notify: func(ctx context.Context, payload string) {
			thread, first, last, ok := parseNote(payload)
			if !ok {
				return
			}
			if !cfg.Hub.Listening(thread) {
				// Threads nobody here watches cost nothing but these
				// look-ups: a position kept of one moves past what
				// nobody here was to get.
				cfg.Log.passed(thread, last)
				return
			}
			cfg.Log.catchUp(ctx, thread, first, last, cfg.Hub.Deliver)
		},
		Connected: func(context.Context) {
			cfg.Log.catchUpAllLater(cfg.Hub.Listening, cfg.Hub.Deliver)
		},
	})
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
