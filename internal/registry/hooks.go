package registry

import (
	"context"
	"errors"
	"log/slog"
	"runtime/debug"
	"time"
	"unicode/utf8"
)

// previewLimit is the byte size of AfterToolUseEvent.OutputPreview.
const previewLimit = 2048

// AfterToolUseEvent describes an executed call to after-tool-use hooks
// (docs/tools.md §7, classic AfterToolUse).
type AfterToolUseEvent struct {
	// TurnID is the turn the call belongs to.
	TurnID string
	// CallID is the model's call id.
	CallID string
	// ToolName is the tool's display name ("ns.name" when namespaced).
	ToolName string
	// ToolKind is function, custom, local_shell or mcp.
	ToolKind PayloadKind
	// ToolInput is the payload as the model sent it.
	ToolInput Payload
	// Executed is true when the handler ran.
	Executed bool
	// Success is the output's success flag (false when unknown).
	Success bool
	// Duration is how long the call took, waiting included.
	Duration time.Duration
	// Mutating is the handler's IsMutating answer.
	Mutating bool
	// OutputPreview is the start of the output text (at most 2 KiB).
	OutputPreview string
	// Output is the full output, as replaced by earlier hooks.
	Output Output
}

// HookAction is what a hook decided.
type HookAction int

const (
	// HookPass keeps the output. With a non-nil Err the hook failed but the
	// call proceeds (fail-open); the error is logged.
	HookPass HookAction = iota
	// HookReplace sends HookResult.Output to the model instead.
	HookReplace
	// HookAbort fails the call and ends the turn with a HookAbortError
	// carrying HookResult.Err.
	HookAbort
)

// HookResult is a hook's answer.
type HookResult struct {
	// Action is pass, replace or abort.
	Action HookAction
	// Output replaces the call's output when Action is HookReplace.
	Output Output
	// Err is the abort reason, or a failure to log with HookPass.
	Err error
}

// AfterToolUseHook runs after every executed call (not for unknown tools,
// payload mismatches or calls interrupted before or while running), while
// the call still holds its place in the parallel lock. Hooks run in order;
// later hooks see earlier replacements; the first abort wins. A hook that
// panics is logged and treated as a pass. Run gets a context bounded by
// Config.HookTimeout and must honour it.
type AfterToolUseHook struct {
	// Name identifies the hook in logs and abort messages.
	Name string
	// Run inspects the call and its output.
	Run func(ctx context.Context, ev AfterToolUseEvent) HookResult
}

// runHooks applies the hooks to out. It returns the possibly replaced output
// and, when a hook aborted, a *HookAbortError.
func (r *Registry) runHooks(ctx context.Context, ev AfterToolUseEvent) (Output, error) {
	out := ev.Output
	for _, h := range r.cfg.Hooks {
		if h.Run == nil {
			continue
		}
		ev.Output = out
		ev.Success = out.Succeeded()
		ev.OutputPreview = preview(out.PlainText())
		res := r.runHook(ctx, h, ev)
		log := r.cfg.Logger.With(slog.String("call_id", ev.CallID), slog.String("tool_name", ev.ToolName), slog.String("hook_name", h.Name))
		switch res.Action {
		case HookReplace:
			out = res.Output
		case HookAbort:
			reason := res.Err
			if reason == nil {
				reason = errors.New("aborted")
			}
			log.Warn("after_tool_use hook failed; aborting operation", slog.Any("error", reason))
			return out, &HookAbortError{Hook: h.Name, Err: reason}
		default:
			if res.Err != nil {
				log.Warn("after_tool_use hook failed; continuing", slog.Any("error", res.Err))
			}
		}
	}
	return out, nil
}

func (r *Registry) runHook(ctx context.Context, h AfterToolUseHook, ev AfterToolUseEvent) (res HookResult) {
	hctx, cancel := context.WithTimeout(ctx, r.cfg.HookTimeout)
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			r.cfg.Logger.Error("after_tool_use hook panicked",
				slog.String("hook_name", h.Name), slog.String("call_id", ev.CallID),
				slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
			res = HookResult{Action: HookPass}
		}
	}()
	return h.Run(hctx, ev)
}

// preview cuts s to previewLimit bytes on a UTF-8 boundary.
func preview(s string) string {
	if len(s) <= previewLimit {
		return s
	}
	cut := previewLimit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
