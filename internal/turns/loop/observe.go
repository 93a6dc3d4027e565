package loop

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/registry"
)

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

// modelOutcome is the Outcome of a model request that ended with err, and
// the model's error if it was one.
func modelOutcome(err error) (string, *model.Error) {
	var me *model.Error
	switch {
	case err == nil:
		return "ok", nil
	case errors.Is(err, errPreempted) || errors.Is(err, ErrInterrupted) || errors.Is(err, ErrShutdown) || errors.Is(err, context.Canceled):
		return "canceled", nil
	case errors.As(err, &me):
		if me.Kind == model.KindCanceled {
			return "canceled", me
		}
		return string(me.Kind), me
	}
	return "error", nil
}

// observeModelRequest reports a model request (of ctx, from
// ModelRequestStarted) sent at sent that returned res and err, and logs
// its failure with the turn's ids.
func (r *Run) observeModelRequest(ctx context.Context, res model.Result, err error, sent time.Time, firstEvent time.Duration) {
	at := r.at
	outcome, me := modelOutcome(err)
	d := r.d.Now().Sub(sent)
	attempts := res.Attempts
	if me != nil {
		attempts = me.Attempts
	}
	r.d.Observer.ModelRequest(ctx, ModelRequestStats{
		Provider: at.Settings.Provider, Model: at.Settings.Model, Outcome: outcome,
		Duration: d, FirstEvent: firstEvent, Retries: max(attempts-1, 0), Usage: res.Usage,
	})
	if outcome == "ok" || outcome == "canceled" {
		return
	}
	attrs := []any{"thread", r.threadID, "turn", at.ID, "provider", at.Settings.Provider, "model", at.Settings.Model,
		"outcome", outcome, "duration", d, "err", err}
	if me != nil {
		attrs = append(attrs, "status", me.HTTPStatus, "attempts", me.Attempts)
	}
	r.d.Logger.WarnContext(ctx, "model request failed", attrs...)
}

// toolLogPreview bounds the output quoted in a failed tool call's log line.
const toolLogPreview = 200

// observeToolCall reports a tool call's end (registry.DispatcherConfig's
// Observe) and logs its failure with the turn's ids.
func (r *Run) observeToolCall(c registry.CallResult) {
	r.d.Observer.ToolCall(r.obs, c.Tool, c.Outcome, c.Duration)
	attrs := []any{"thread", r.threadID, "turn", r.at.ID, "tool", c.Tool, "call_id", c.CallID, "outcome", c.Outcome, "duration", c.Duration}
	switch c.Outcome {
	case registry.CallFatal:
		r.d.Logger.WarnContext(r.obs, "tool call failed", append(attrs, "err", c.Err)...)
	case registry.CallFailed, registry.CallUnsupported:
		out := c.Output.PlainText()
		if len(out) > toolLogPreview {
			out = strings.ToValidUTF8(out[:toolLogPreview], "") + "…"
		}
		r.d.Logger.InfoContext(r.obs, "tool call failed", append(attrs, "output", out)...)
	}
}

// observeEnd reports the turn's end and logs it: a failure at warn (at
// error when the failure is ours, which endStatus logged already), an
// interruption at info.
func (r *Run) observeEnd(status api.TurnStatus, turnErr *api.TurnError, runErr error, now time.Time) {
	at := r.at
	d := now.Sub(at.StartedAt)
	r.d.Observer.TurnEnded(r.obs, status, d)
	switch {
	case status == api.TurnFailed && isModelError(runErr):
		r.d.Logger.WarnContext(r.obs, "turn failed", "thread", r.threadID, "turn", at.ID, "duration", d, "error", turnErr.Message)
	case status == api.TurnInterrupted:
		r.d.Logger.InfoContext(r.obs, "turn interrupted", "thread", r.threadID, "turn", at.ID, "duration", d)
	}
}
