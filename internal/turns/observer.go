package turns

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/registry"
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

// ModelRequestStats describes one model request for an Observer.
type ModelRequestStats struct {
	// Provider is the model provider id; Model the model requested.
	Provider, Model string
	// Outcome is "ok", "canceled" (interrupted, or abandoned for new
	// input), the model error's kind (e.g. "unauthorized",
	// "rate_limited") or "error" for a failure of ours.
	Outcome string
	// Duration is from sending the request to the end of its response.
	Duration time.Duration
	// FirstEvent is from sending the request to its first streamed event;
	// 0 when none came.
	FirstEvent time.Duration
	// Retries is how many requests were repeated after a transient failure.
	Retries int
	// Usage is the response's token accounting (zero on failure).
	Usage model.Usage
}

// nopObserver is the Observer of a Manager configured without one.
type nopObserver struct{}

func (nopObserver) TurnStarted(ctx context.Context, _ TurnInfo) context.Context { return ctx }
func (nopObserver) TurnEnded(context.Context, api.TurnStatus, time.Duration)    {}
func (nopObserver) ModelRequestStarted(ctx context.Context, _, _ string) context.Context {
	return ctx
}
func (nopObserver) ModelRequest(context.Context, ModelRequestStats)         {}
func (nopObserver) ToolCall(context.Context, string, string, time.Duration) {}

// modelOutcome is the Outcome of a model request that ended with err, and
// the model's error if it was one.
func modelOutcome(err error) (string, *model.Error) {
	var me *model.Error
	switch {
	case err == nil:
		return "ok", nil
	case errors.Is(err, errPreempted) || errors.Is(err, errInterrupted) || errors.Is(err, errShutdown) || errors.Is(err, context.Canceled):
		return "canceled", nil
	case errors.As(err, &me):
		if me.Kind == model.KindCanceled {
			return "canceled", me
		}
		return string(me.Kind), me
	}
	return "error", nil
}

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

// observeModelRequest reports a model request (of ctx, from
// ModelRequestStarted) sent at sent that returned res and err, and logs
// its failure with the turn's ids.
func (r *turnRun) observeModelRequest(ctx context.Context, res model.Result, err error, sent time.Time, firstEvent time.Duration) {
	t, at := r.t, r.at
	outcome, me := modelOutcome(err)
	d := t.m.now().Sub(sent)
	attempts := res.Attempts
	if me != nil {
		attempts = me.Attempts
	}
	t.m.cfg.Observer.ModelRequest(ctx, ModelRequestStats{
		Provider: at.settings.provider, Model: at.settings.model, Outcome: outcome,
		Duration: d, FirstEvent: firstEvent, Retries: max(attempts-1, 0), Usage: res.Usage,
	})
	if outcome == "ok" || outcome == "canceled" {
		return
	}
	attrs := []any{"thread", t.id, "turn", at.id, "provider", at.settings.provider, "model", at.settings.model,
		"outcome", outcome, "duration", d, "err", err}
	if me != nil {
		attrs = append(attrs, "status", me.HTTPStatus, "attempts", me.Attempts)
	}
	t.m.log.WarnContext(ctx, "model request failed", attrs...)
}

// toolLogPreview bounds the output quoted in a failed tool call's log line.
const toolLogPreview = 200

// observeToolCall reports a tool call's end (registry.DispatcherConfig's
// Observe) and logs its failure with the turn's ids.
func (r *turnRun) observeToolCall(c registry.CallResult) {
	t := r.t
	t.m.cfg.Observer.ToolCall(r.obs, c.Tool, c.Outcome, c.Duration)
	attrs := []any{"thread", t.id, "turn", r.at.id, "tool", c.Tool, "call_id", c.CallID, "outcome", c.Outcome, "duration", c.Duration}
	switch c.Outcome {
	case registry.CallFatal:
		t.m.log.WarnContext(r.obs, "tool call failed", append(attrs, "err", c.Err)...)
	case registry.CallFailed, registry.CallUnsupported:
		out := c.Output.PlainText()
		if len(out) > toolLogPreview {
			out = strings.ToValidUTF8(out[:toolLogPreview], "") + "…"
		}
		t.m.log.InfoContext(r.obs, "tool call failed", append(attrs, "output", out)...)
	}
}

// observeEnd reports the turn's end and logs it: a failure at warn (at
// error when the failure is ours, which endStatus logged already), an
// interruption at info.
func (r *turnRun) observeEnd(status api.TurnStatus, turnErr *api.TurnError, runErr error, now time.Time) {
	t, at := r.t, r.at
	d := now.Sub(at.startedAt)
	t.m.cfg.Observer.TurnEnded(r.obs, status, d)
	switch {
	case status == api.TurnFailed && isModelError(runErr):
		t.m.log.WarnContext(r.obs, "turn failed", "thread", t.id, "turn", at.id, "duration", d, "error", turnErr.Message)
	case status == api.TurnInterrupted:
		t.m.log.InfoContext(r.obs, "turn interrupted", "thread", t.id, "turn", at.id, "duration", d)
	}
}
