package turns

import (
	"context"
	"time"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/turns/loop"
)

// Observer learns what the Manager's turns do, for metrics and traces; the
// composition root gives one backed by Prometheus (and OpenTelemetry when
// configured). Its methods are called on the turns' goroutines,
// concurrently, and must not block.
type Observer interface {
	// TurnStarted is called once per turn, when its goroutine starts,
	// before any other hook of the turn, with the turn's context (done
	// when the turn is interrupted or stopped). The context it returns
	// (ctx, or one derived from it, e.g. carrying the turn's span) is the
	// ctx of the turn's other hooks and of its work: its model requests
	// and tool calls run under it.
	TurnStarted(ctx context.Context, t TurnInfo) context.Context
	// TurnEnded is called once per turn, with its end status and how long
	// it ran.
	TurnEnded(ctx context.Context, status api.TurnStatus, d time.Duration)
	// TurnAbandoned is called instead of TurnEnded for a turn that never
	// was: its first write failed after TurnStarted (its first model
	// request runs while that write does), and turn/start answered the
	// error. Nothing of it is to be counted as a turn; what TurnStarted
	// began (a span) ends.
	TurnAbandoned(ctx context.Context)
	// ModelRequestStarted is called before each model request of a turn
	// is sent, with the turn's context (or one derived from it). The
	// context it returns (ctx, or one derived from it, e.g. carrying the
	// request's span) is the request's: the model client sends the
	// request under it, and ModelRequest gets it.
	ModelRequestStarted(ctx context.Context, provider, model string) context.Context
	// ModelRequest is called once per model request of a turn, when it
	// ended.
	ModelRequest(ctx context.Context, s ModelRequestStats)
	// ToolCall is called once per tool call, when it ended, with the
	// registry's outcome (registry.CallOK, ...).
	ToolCall(ctx context.Context, tool, outcome string, d time.Duration)
}

// ModelRequestStats describes one model request for an Observer.
type ModelRequestStats = loop.ModelRequestStats

// TurnInfo names a turn for an Observer.
type TurnInfo struct {
	ThreadID, TurnID string
	// Provider and Model are the turn's model settings.
	Provider, Model string
	// Caller is the context of the request that started the turn (an
	// HTTP request, a JSON-RPC method), for its values only: the trace
	// the turn continues. It may be done already.
	Caller context.Context
}

// nopObserver is the Observer of a Manager configured without one.
type nopObserver struct{}

func (nopObserver) TurnStarted(ctx context.Context, _ TurnInfo) context.Context { return ctx }
func (nopObserver) TurnEnded(context.Context, api.TurnStatus, time.Duration)    {}
func (nopObserver) TurnAbandoned(context.Context)                               {}
func (nopObserver) ModelRequestStarted(ctx context.Context, _, _ string) context.Context {
	return ctx
}
func (nopObserver) ModelRequest(context.Context, ModelRequestStats)         {}
func (nopObserver) ToolCall(context.Context, string, string, time.Duration) {}

// Counts returns how many threads are loaded and how many of them are
// running a turn.
func (m *Manager) Counts() (loaded, running int) {
	threads := m.loadedThreads()
	for _, t := range threads {
		t.mu.Lock()
		// A turn whose end is settled (ending) is no longer running,
		// though it stays active until turn/completed is out: a client
		// told the turn completed reads a gauge without it.
		if t.active != nil && !t.active.ending {
			running++
		}
		t.mu.Unlock()
	}
	return len(threads), running
}
