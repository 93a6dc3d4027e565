package orchestrate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/config"
	"github.com/appserver/appserver/internal/policy"
	"github.com/appserver/appserver/internal/registry"
	"github.com/appserver/appserver/internal/tools/applypatch"
	"github.com/appserver/appserver/internal/tools/execsession"
	"github.com/appserver/appserver/internal/tools/files"
	"github.com/appserver/appserver/internal/tools/shell"
	"github.com/appserver/appserver/internal/turns"
)

// register adds the built-in tools of one turn to b (docs/tools.md §2):
//
//   - the shell tool the model's shell_type selects ([models.<id>]
//     shell_type; shell_command by default), with every shell alias;
//   - apply_patch, freeform for the Responses wire API and as a JSON
//     function for chat (or as apply_patch_tool_type says);
//   - exec_command and write_stdin (PTY sessions), unless the shell is
//     disabled;
//   - read_file, list_dir, grep_files and view_image;
//   - request_user_input, offered in plan collaboration mode only (calls
//     elsewhere get the reference's refusal).
//
// Commands and patches follow the thread's approval and sandbox policies.
func (s *Service) register(b *registry.Builder, tc turns.ToolContext, sw switches) error {
	webSearch := s.cfg.WebSearch
	if sw.webSearch != "" {
		webSearch = sw.webSearch
	}
	if webSearch != "" && webSearch != "disabled" {
		// Hosted: the provider runs it and its web_search_call items
		// become webSearch items; Chat Completions models do not get it.
		live := webSearch == "live"
		if err := b.AddSpec(registry.WebSearchSpec{ExternalWebAccess: &live}, false); err != nil {
			return err
		}
	}
	tt := s.newTurnTools(tc)
	entry := s.cfg.Models[tc.Model]
	shellType := entry.ShellType
	if shellType == "" {
		shellType = "shell_command"
	}
	toolType, err := shell.ParseToolType(shellType)
	if err != nil {
		return err
	}
	if !sw.unifiedExec && toolType == shell.ToolUnifiedExec {
		toolType = shell.ToolShellCommand
	}
	if !sw.shell {
		toolType = shell.ToolDisabled
	}
	guard := s.cfg.Guard
	patchH := &applypatch.Handler{Guard: guard, Access: tt.access, Planned: tt.patchPlanned, Finished: tt.patchFinished, Now: s.cfg.Now}
	tt.interceptPatch = &applypatch.Handler{Guard: guard, Access: tt.access, Planned: tt.patchPlanned, Finished: tt.patchFinished, Format: applypatch.OutputStructured, Now: s.cfg.Now}
	shellCfg := shell.Config{
		Runner:              tt,
		Shell:               s.userShell,
		Env:                 s.env,
		Snapshots:           s.snapshots,
		SnapshotOwner:       tc.Originator,
		OnOutputDelta:       tt.outputDelta,
		InterceptApplyPatch: tt.interceptApplyPatch,
	}
	if err := shell.Register(b, toolType, shellCfg, shell.SpecOptions{}); err != nil {
		return err
	}
	freeform := s.cfg.Providers[tc.Provider].WireAPI != config.WireAPIChat
	switch entry.ApplyPatchToolType {
	case "freeform":
		freeform = true
	case "function":
		freeform = false
	}
	if sw.shell && sw.applyPatch {
		if err := applypatch.Register(b, patchH, freeform); err != nil {
			return err
		}
	}
	if toolType != shell.ToolDisabled && sw.unifiedExec {
		mgr, err := s.execs.Manager(tc.ThreadID)
		if err != nil {
			return err
		}
		h, err := execsession.NewHandler(execsession.HandlerConfig{Manager: mgr, Prepare: tt.execPrepare})
		if err != nil {
			return err
		}
		et := &execTool{Handler: h, tt: tt}
		if err := b.Register(execsession.ExecCommandSpec(true), et, true); err != nil {
			return err
		}
		if err := b.Register(execsession.WriteStdinSpec(), et, false); err != nil {
			return err
		}
	}
	var fileTools []func(*registry.Builder) error
	if sw.shell {
		fileTools = append(fileTools,
			(&files.ReadFile{Guard: guard, Access: tt.access}).Register,
			(&files.ListDir{Guard: guard, Access: tt.access}).Register,
			(&files.GrepFiles{Guard: guard, Access: tt.access, Sandbox: s.sandbox}).Register)
	}
	if sw.viewImage {
		fileTools = append(fileTools, (&files.ViewImage{Items: tc.Sink, Guard: guard, Access: tt.access}).Register)
	}
	for _, reg := range fileTools {
		if err := reg(b); err != nil {
			return err
		}
	}
	ask := &files.RequestUserInput{Asker: tt, Mode: func(registry.Invocation) string { return tt.modeName() }}
	if tt.modeName() == "Plan" && !sw.disabled[files.RequestUserInputName] {
		return ask.Register(b)
	}
	return b.AddHandler(files.RequestUserInputName, ask)
}

// turnTools carries the policies of one turn into the tool handlers: it is
// the shell Runner, the apply_patch hooks, the exec_command preparation and
// the request_user_input Asker.
type turnTools struct {
	s        *Service
	tc       turns.ToolContext
	approval policy.ApprovalPolicy
	sandbox  policy.SandboxPolicy
	tracker  *applypatch.DiffTracker

	interceptPatch *applypatch.Handler

	mu      sync.Mutex
	patches map[string]*patchCall // by call id
}

// newTurnTools converts the turn's policies; a policy this daemon does not
// know falls back to on-request and read-only, the reference's defaults.
func (s *Service) newTurnTools(tc turns.ToolContext) *turnTools {
	tt := &turnTools{s: s, tc: tc, tracker: applypatch.NewDiffTracker(tc.Cwd), patches: map[string]*patchCall{}}
	var err error
	if tt.approval, err = policy.ApprovalFromAPI(tc.ApprovalPolicy); err != nil {
		s.log.Warn("unknown approval policy; using on-request", "policy", tc.ApprovalPolicy, "err", err)
		tt.approval = policy.ApprovalPolicy{Mode: policy.OnRequest}
	}
	if tt.sandbox, err = policy.SandboxFromAPI(tc.Sandbox); err != nil {
		s.log.Warn("unknown sandbox policy; using read-only", "policy", tc.Sandbox, "err", err)
		tt.sandbox = policy.SandboxPolicy{Kind: policy.ReadOnly}
	}
	return tt
}

func (tt *turnTools) modeName() string {
	if tt.tc.CollaborationMode == string(api.ModePlan) {
		return "Plan"
	}
	return "Default"
}

// ---- approvals ----

// askOutcome records how an approval request ended, for the item status
// and the model's text.
type askOutcome struct {
	approved    bool   // the decision lets the call run
	noClient    bool   // nobody could answer: declined
	failed      error  // the client answered with an error or an undecodable decision
	interrupted bool   // the turn ended while waiting
	release     func() // clears the waitingOnApproval flag (decline: after the item completes)
	// decision is the client's decision as it sent it, for the audit log.
	decision json.RawMessage
}

// noClientText is what the model reads when an approval was required and
// no client could answer.
func noClientText(what string) string {
	return what + " rejected: approval was required, but no client is connected to approve or decline it"
}

// ask sends an approval request and decodes the decision. Approved
// decisions clear the flag at once (the command runs next); others keep it
// until the caller completed the item, as the reference orders them.
func (tt *turnTools) ask(ctx context.Context, method string, params any, beforeSend func(), out *askOutcome) policy.ReviewDecision {
	decline := policy.ReviewDecision{Kind: policy.Decline}
	res, release, err := tt.tc.Client.Request(ctx, turns.ClientRequest{
		Method: method, Params: params, Flag: api.FlagWaitingOnApproval, BeforeSend: beforeSend,
	})
	out.release = release
	switch {
	case errors.Is(err, turns.ErrNoClient):
		out.noClient = true
		return decline
	case ctx.Err() != nil:
		out.interrupted = true
		return decline
	case err != nil:
		out.failed = err
		return decline
	}
	var answer struct {
		Decision *policy.ReviewDecision `json:"decision"`
	}
	var raw struct {
		Decision json.RawMessage `json:"decision"`
	}
	if json.Unmarshal(res, &raw) == nil {
		out.decision = raw.Decision
	}
	if err := json.Unmarshal(res, &answer); err != nil || answer.Decision == nil {
		if err == nil {
			err = errors.New("missing field `decision`")
		}
		out.failed = fmt.Errorf("undecodable approval decision: %w", err)
		return decline
	}
	if answer.Decision.Approved() {
		out.approved = true
		release()
	}
	return *answer.Decision
}

// settle clears the flag of a finished approval, if still raised.
func (o *askOutcome) settle() {
	if o != nil && o.release != nil {
		o.release()
	}
}

// rejection is the item status and the model's text of a call whose
// approval did not let it run; declined is the text of a plain decline.
func (o *askOutcome) rejection(what string, declined error) (api.ToolStatus, error) {
	switch {
	case o.noClient:
		return api.StatusDeclined, errors.New(noClientText(what))
	case o.failed != nil:
		return api.StatusFailed, fmt.Errorf("%s rejected: the approval request failed: %v", what, o.failed)
	}
	return api.StatusDeclined, declined
}

// ---- request_user_input ----

// AskUserInput implements files.Asker: item/tool/requestUserInput with the
// waitingOnUserInput flag.
func (tt *turnTools) AskUserInput(ctx context.Context, params api.ToolRequestUserInputParams) (api.ToolRequestUserInputResult, error) {
	params.ThreadID = tt.tc.ThreadID
	res, release, err := tt.tc.Client.Request(ctx, turns.ClientRequest{
		Method: "item/tool/requestUserInput", Params: params, Flag: api.FlagWaitingOnUserInput,
	})
	release()
	if err != nil {
		return api.ToolRequestUserInputResult{}, err
	}
	var out api.ToolRequestUserInputResult
	if err := json.Unmarshal(res, &out); err != nil {
		return api.ToolRequestUserInputResult{}, fmt.Errorf("undecodable answer: %w", err)
	}
	return out, nil
}
