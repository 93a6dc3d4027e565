package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/config"
	"github.com/appserver/appserver/internal/lossy"
	"github.com/appserver/appserver/internal/policy"
	"github.com/appserver/appserver/internal/registry"
	"github.com/appserver/appserver/internal/sandbox"
	"github.com/appserver/appserver/internal/tools/applypatch"
	"github.com/appserver/appserver/internal/tools/execsession"
	"github.com/appserver/appserver/internal/tools/files"
	"github.com/appserver/appserver/internal/tools/shell"
	"github.com/appserver/appserver/internal/turns"
)

// builtinToolNames are the names the built-in tools take (offered or
// registered as aliases); a client's dynamic tools may not use them.
var builtinToolNames = []string{
	shell.ShellName, shell.ShellCommandName, shell.ContainerExecName, shell.LocalShellName,
	applypatch.Name, execsession.ExecCommandName, execsession.WriteStdinName,
	files.ReadFileName, files.ListDirName, files.GrepFilesName, files.ViewImageName, files.RequestUserInputName,
}

// builtinTools holds what the built-in tools share across turns: the
// command environment, the sandbox, the exec sessions of every thread and
// the commandExecution items of those sessions. It is safe for concurrent
// use.
type builtinTools struct {
	log       *slog.Logger
	providers map[string]config.ModelProvider
	models    map[string]config.ModelEntry
	env       shell.EnvPolicy
	sandbox   *sandbox.Sandbox // nil: sandbox.Default()
	webSearch string           // disabled, cached or live
	// rules are the exec-policy rules loaded from rulesDir (Codex's
	// *.rules files); accepted amendments are added and appended to
	// rulesFile.
	rules     *policy.RuleSet
	rulesFile string
	execs     *execsession.Supervisor

	mu        sync.Mutex
	execItems map[string]*execItem // thread + "\x00" + call id
}

func newBuiltinTools(cfg *config.Config, configFile string, log *slog.Logger) (*builtinTools, error) {
	backend, err := sandbox.ParseBackend(cfg.SandboxBackend)
	if err != nil {
		return nil, err
	}
	// The daemon's own state: sandboxed commands neither read nor write it.
	hidden := []string{cfg.DataDir, configFile, cfg.WSTokenFile, cfg.WSSharedSecretFile}
	sb, err := sandbox.New(sandbox.Options{Backend: backend, Hidden: hidden})
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	rulesDir := filepath.Join(cfg.DataDir, "rules")
	rules, err := policy.LoadRulesDirs(rulesDir)
	if err != nil {
		return nil, fmt.Errorf("exec-policy rules: %w", err)
	}
	bt := &builtinTools{
		rules:     rules,
		rulesFile: policy.DefaultRulesFile(cfg.DataDir),
		sandbox:   sb,
		webSearch: cfg.WebSearch,
		log:       log,
		providers: cfg.ModelProviders,
		models:    cfg.ModelCatalog,
		execItems: map[string]*execItem{},
	}
	for _, p := range cfg.ModelProviders {
		if p.EnvKey != "" {
			bt.env.SecretVars = append(bt.env.SecretVars, p.EnvKey)
		}
	}
	bt.execs = execsession.NewSupervisor(execsession.ManagerConfig{
		Observer: bt,
		Env:      bt.commandEnv,
		Logger:   log,
	})
	return bt, nil
}

// allowPrefix applies an accepted exec-policy amendment: every thread
// allows the prefix from now on, and it is appended to default.rules so it
// survives a restart.
func (bt *builtinTools) allowPrefix(prefix []string) {
	if err := bt.rules.AddPrefixRule(prefix, policy.Allow); err != nil {
		bt.log.Warn("exec-policy amendment not applied", "prefix", prefix, "err", err)
		return
	}
	if err := policy.AppendAllowRule(bt.rulesFile, prefix); err != nil {
		bt.log.Error("exec-policy amendment not persisted", "file", bt.rulesFile, "err", err)
	}
}

// commandEnv is the environment of the commands tools run: the daemon's,
// minus its secrets.
func (bt *builtinTools) commandEnv() []string { return bt.env.Build(os.Environ()) }

// threadUnloaded reaps the exec sessions of a thread that left memory.
func (bt *builtinTools) threadUnloaded(threadID string) {
	if err := bt.execs.Release(threadID); err != nil {
		bt.log.Warn("closing exec sessions", "thread", threadID, "err", err)
	}
}

// close reaps every exec session (daemon shutdown).
func (bt *builtinTools) close() {
	_ = bt.execs.Close()
	bt.sandbox.Close()
}

// register adds the built-in tools of one turn to b (tools.md §2):
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
func (bt *builtinTools) register(b *registry.Builder, tc turns.ToolContext) error {
	if bt.webSearch != "" && bt.webSearch != "disabled" {
		// Hosted: the provider runs it and its web_search_call items
		// become webSearch items; Chat Completions models do not get it.
		live := bt.webSearch == "live"
		if err := b.AddSpec(registry.WebSearchSpec{ExternalWebAccess: &live}, false); err != nil {
			return err
		}
	}
	ct := bt.newCallTools(tc)
	entry := bt.models[tc.Model]
	shellType := entry.ShellType
	if shellType == "" {
		shellType = "shell_command"
	}
	tt, err := shell.ParseToolType(shellType)
	if err != nil {
		return err
	}
	patchH := &applypatch.Handler{Roots: ct.patchRoots, Planned: ct.patchPlanned, Finished: ct.patchFinished}
	ct.interceptPatch = &applypatch.Handler{Roots: ct.patchRoots, Planned: ct.patchPlanned, Finished: ct.patchFinished, Format: applypatch.OutputStructured}
	shellCfg := shell.Config{
		Runner:              ct,
		Env:                 bt.env,
		OnOutputDelta:       ct.outputDelta,
		InterceptApplyPatch: ct.interceptApplyPatch,
	}
	if err := shell.Register(b, tt, shellCfg, shell.SpecOptions{}); err != nil {
		return err
	}
	freeform := bt.providers[tc.Provider].WireAPI != config.WireAPIChat
	switch entry.ApplyPatchToolType {
	case "freeform":
		freeform = true
	case "function":
		freeform = false
	}
	if err := applypatch.Register(b, patchH, freeform); err != nil {
		return err
	}
	if tt != shell.ToolDisabled {
		mgr, err := bt.execs.Manager(tc.ThreadID)
		if err != nil {
			return err
		}
		h, err := execsession.NewHandler(execsession.HandlerConfig{Manager: mgr, Prepare: ct.execPrepare})
		if err != nil {
			return err
		}
		et := &execTool{Handler: h, ct: ct}
		if err := b.Register(execsession.ExecCommandSpec(true), et, true); err != nil {
			return err
		}
		if err := b.Register(execsession.WriteStdinSpec(), et, false); err != nil {
			return err
		}
	}
	for _, reg := range []func(*registry.Builder) error{
		(&files.ReadFile{}).Register,
		(&files.ListDir{}).Register,
		(&files.GrepFiles{}).Register,
		(&files.ViewImage{Items: tc.Items}).Register,
	} {
		if err := reg(b); err != nil {
			return err
		}
	}
	ask := &files.RequestUserInput{Asker: ct, Mode: func(registry.Invocation) string { return ct.modeName() }}
	if ct.modeName() == "Plan" {
		return ask.Register(b)
	}
	return b.AddHandler(files.RequestUserInputName, ask)
}

// callTools carries the policies of one turn into the tool handlers: it is
// the shell Runner, the apply_patch hooks, the exec_command preparation and
// the request_user_input Asker.
type callTools struct {
	bt       *builtinTools
	tc       turns.ToolContext
	approval policy.ApprovalPolicy
	sandbox  policy.SandboxPolicy
	tracker  *applypatch.DiffTracker

	interceptPatch *applypatch.Handler

	mu      sync.Mutex
	patches map[string]*patchCall // by call id
}

func (bt *builtinTools) newCallTools(tc turns.ToolContext) *callTools {
	ct := &callTools{bt: bt, tc: tc, tracker: applypatch.NewDiffTracker(tc.Cwd), patches: map[string]*patchCall{}}
	ct.approval = policy.ApprovalPolicy{Mode: policy.OnRequest}
	if raw, err := json.Marshal(tc.ApprovalPolicy); err == nil {
		if err := json.Unmarshal(raw, &ct.approval); err != nil {
			bt.log.Warn("unknown approval policy; using on-request", "policy", string(raw), "err", err)
		}
	}
	ct.sandbox = policy.SandboxPolicy{Kind: policy.ReadOnly}
	if raw, err := json.Marshal(tc.Sandbox); err == nil {
		if err := json.Unmarshal(raw, &ct.sandbox); err != nil {
			bt.log.Warn("unknown sandbox policy; using read-only", "policy", string(raw), "err", err)
			ct.sandbox = policy.SandboxPolicy{Kind: policy.ReadOnly}
		}
	}
	return ct
}

func (ct *callTools) modeName() string {
	if ct.tc.CollaborationMode == string(api.ModePlan) {
		return "Plan"
	}
	return "Default"
}

func nowMs() int64 { return time.Now().UnixMilli() }

// ---- approvals ----

// askOutcome records how an approval request ended, for the item status
// and the model's text.
type askOutcome struct {
	approved    bool   // the decision lets the call run
	noClient    bool   // nobody could answer: declined
	failed      error  // the client answered with an error or an undecodable decision
	interrupted bool   // the turn ended while waiting
	release     func() // clears the waitingOnApproval flag (decline: after the item completes)
}

// noClientText is what the model reads when an approval was required and
// no client could answer.
func noClientText(what string) string {
	return what + " rejected: approval was required, but no client is connected to approve or decline it"
}

// ask sends an approval request and decodes the decision. Approved
// decisions clear the flag at once (the command runs next); others keep it
// until the caller completed the item, as the reference orders them.
func (ct *callTools) ask(ctx context.Context, method string, params any, beforeSend func(), out *askOutcome) policy.ReviewDecision {
	decline := policy.ReviewDecision{Kind: policy.Decline}
	res, release, err := ct.tc.Client.Request(ctx, turns.ClientRequest{
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

func apiDecisions(ds []policy.ReviewDecision) []api.CommandExecutionApprovalDecision {
	if len(ds) == 0 {
		return nil
	}
	raw, err := json.Marshal(ds)
	if err != nil {
		return nil
	}
	var out []api.CommandExecutionApprovalDecision
	if json.Unmarshal(raw, &out) != nil {
		return nil
	}
	return out
}

// ---- commandExecution items ----

// commandItem builds the inProgress commandExecution item of a call.
func commandItem(callID string, argv []string, cwd string, source api.CommandExecutionSource) *api.CommandExecutionItem {
	return &api.CommandExecutionItem{
		ID: callID, Command: policy.ShellJoin(argv), Cwd: cwd, Source: source,
		Status: api.StatusInProgress, CommandActions: commandActions(argv),
	}
}

// commandActions classifies a command for the client (read / listFiles /
// search / unknown) from its plain shell script, as Codex's parse_command
// does for the common cases; anything else is one unknown action carrying
// the script.
func commandActions(argv []string) api.List[api.CommandAction] {
	text := policy.ShellJoin(argv)
	cmds := [][]string{argv}
	if script, ok := policy.ShellScript(argv); ok {
		text = script
		cmds, ok = policy.ParsePlainScript(script)
		if !ok {
			cmds = nil
		}
	}
	unknown := api.List[api.CommandAction]{{Type: api.ActionUnknown, Command: text}}
	if len(cmds) != 1 || len(cmds[0]) == 0 {
		return unknown
	}
	cmd := cmds[0]
	var operands []string
	for _, a := range cmd[1:] {
		if !strings.HasPrefix(a, "-") {
			operands = append(operands, a)
		}
	}
	str := func(s string) *string { return &s }
	switch filepath.Base(cmd[0]) {
	case "cat", "head", "tail", "nl", "less", "more", "bat":
		if len(operands) == 1 {
			return api.List[api.CommandAction]{{Type: api.ActionRead, Command: text, Name: filepath.Base(operands[0]), Path: str(operands[0])}}
		}
	case "ls", "tree":
		a := api.CommandAction{Type: api.ActionListFiles, Command: text}
		if len(operands) == 1 {
			a.Path = str(operands[0])
		}
		if len(operands) <= 1 {
			return api.List[api.CommandAction]{a}
		}
	case "rg", "grep", "ag":
		a := api.CommandAction{Type: api.ActionSearch, Command: text}
		if len(operands) >= 1 {
			a.Query = str(operands[0])
		}
		if len(operands) == 2 {
			a.Path = str(operands[1])
		}
		if len(operands) <= 2 {
			return api.List[api.CommandAction]{a}
		}
	}
	return unknown
}

func (ct *callTools) startItem(it *api.CommandExecutionItem, startedMs int64) {
	ct.tc.Items.ItemStarted(context.Background(), ct.tc.TurnID, api.ThreadItem{Body: it, StartedAtMs: &startedMs})
}

func completeItem(items turns.ItemSink, turnID string, it *api.CommandExecutionItem, startedMs int64) {
	done := nowMs()
	items.ItemCompleted(context.Background(), turnID, api.ThreadItem{Body: it, StartedAtMs: &startedMs, CompletedAtMs: &done})
}

// outputDelta streams a shell command's output as
// item/commandExecution/outputDelta (plain text).
func (ct *callTools) outputDelta(_ context.Context, inv registry.Invocation, d shell.OutputDelta) {
	ct.tc.Notify("item/commandExecution/outputDelta", api.ItemDeltaNotification{
		ThreadID: ct.tc.ThreadID, TurnID: ct.tc.TurnID, ItemID: inv.CallID, Delta: string(d.Data),
	})
}

// Run implements shell.Runner: the policy flow of shell.PolicyRunner
// (tools.md §4.3), with the commandExecution item around it. Without an
// approval the item starts before the command runs; with one the
// waitingOnApproval flag goes up first, then the item starts and the
// request goes out (protocol.md §8.1). A forbidden command gets no item.
func (ct *callTools) Run(ctx context.Context, req shell.RunRequest) (shell.ExecResult, error) {
	callID := req.Invocation.CallID
	it := commandItem(callID, req.Argv, req.Cwd, api.CommandSourceAgent)
	startedMs := nowMs()
	started := false
	start := func() {
		if !started {
			started = true
			startedMs = nowMs()
			ct.startItem(it, startedMs)
		}
	}
	plan := policy.PlanExec(policy.ExecRequest{
		Command: req.Argv, Cwd: req.Cwd, Approval: ct.approval, Sandbox: ct.sandbox,
		Escalation: req.Escalation, Rules: ct.bt.rules, Session: ct.tc.Approvals,
	})
	if plan.Action != policy.ActionNeedsApproval && plan.Action != policy.ActionForbidden {
		start()
	}
	var outcome *askOutcome
	runner := &shell.PolicyRunner{
		Approval: ct.approval, SandboxPolicy: ct.sandbox, Session: ct.tc.Approvals, Sandbox: ct.bt.sandbox,
		Rules: ct.bt.rules, OnAllowPrefix: ct.bt.allowPrefix,
		Ask: func(ctx context.Context, a shell.ApprovalRequest) (policy.ReviewDecision, error) {
			outcome.settle() // a retry prompt follows an earlier one
			outcome = &askOutcome{}
			var reason *string
			if a.Reason != "" {
				reason = &a.Reason
			}
			cmd, cwd, env := it.Command, it.Cwd, "local"
			params := api.CommandExecutionRequestApprovalParams{
				Kind: api.ApprovalKindCommand, ThreadID: ct.tc.ThreadID, TurnID: ct.tc.TurnID, ItemID: callID,
				EnvironmentID: &env, Reason: reason, Command: &cmd, Cwd: &cwd, CommandActions: it.CommandActions,
				ProposedExecpolicyAmendment: a.ProposedAmendment, AvailableDecisions: apiDecisions(a.AvailableDecisions),
			}
			d := ct.ask(ctx, "item/commandExecution/requestApproval", &params, func() {
				start()
				params.StartedAtMs = startedMs
			}, outcome)
			return d, nil
		},
	}
	res, err := runner.Run(ctx, req)
	if !started {
		// Forbidden (or refused before any prompt): the model reads why.
		outcome.settle()
		return res, err
	}
	switch {
	case err == nil:
		code := int32(res.ExitCode)
		out := lossy.String(res.Aggregated)
		dur := res.Duration.Milliseconds()
		it.ExitCode, it.AggregatedOutput, it.DurationMs = &code, &out, &dur
		it.Status = api.StatusCompleted
		if res.ExitCode != 0 {
			it.Status = api.StatusFailed
		}
	case outcome != nil && !outcome.approved:
		// The last prompt did not let the command run.
		switch {
		case outcome.noClient:
			it.Status = api.StatusDeclined
			err = errors.New(noClientText("exec command"))
		case outcome.failed != nil:
			it.Status = api.StatusFailed
			err = fmt.Errorf("exec command rejected: the approval request failed: %v", outcome.failed)
		default:
			it.Status = api.StatusDeclined
		}
	default:
		// Interrupted while running, or the command could not start.
		it.Status = api.StatusFailed
		if res.Duration > 0 {
			out := lossy.String(res.Aggregated)
			dur := res.Duration.Milliseconds()
			it.AggregatedOutput, it.DurationMs = &out, &dur
		}
	}
	completeItem(ct.tc.Items, ct.tc.TurnID, it, startedMs)
	if errors.Is(err, shell.ErrInterruptTurn) {
		// Interrupted first: the turn's end announces the status.
		ct.tc.Interrupt()
	}
	outcome.settle()
	return res, err
}

// ---- apply_patch ----

// patchCall is the fileChange item of one apply_patch call.
type patchCall struct {
	item      *api.FileChangeItem
	startedMs int64
}

// patchRoots confines patches to where the sandbox lets them write: the
// writable roots of workspace-write, the cwd under read-only (such patches
// ask first), everything under full access; plus roots granted for the
// session.
func (ct *callTools) patchRoots(inv registry.Invocation) []string {
	cwd := inv.Turn.Cwd
	var roots []string
	switch ct.sandbox.Kind {
	case policy.DangerFullAccess, policy.ExternalSandbox:
		return []string{"/"}
	case policy.WorkspaceWrite:
		for _, r := range ct.sandbox.WritableRootsWithCwd(cwd) {
			roots = append(roots, r.Root)
		}
	default:
		roots = []string{cwd}
	}
	return append(roots, ct.tc.Approvals.GrantedRoots()...)
}

func fileChanges(plan *applypatch.Plan) api.List[api.FileUpdateChange] {
	out := api.List[api.FileUpdateChange]{}
	for _, c := range plan.Changes() {
		fc := api.FileUpdateChange{Path: c.Path, Diff: c.Diff, Kind: api.PatchChangeKind{Type: api.PatchChangeKindType(c.Kind.Type), MovePath: c.Kind.MovePath}}
		out = append(out, fc)
	}
	return out
}

func policyPatch(plan *applypatch.Plan) policy.Patch {
	p := policy.Patch{Cwd: plan.Cwd()}
	for _, h := range plan.Patch().Hunks {
		fc := policy.FileChange{Path: h.Path, MovePath: h.MovePath}
		switch h.Kind {
		case applypatch.AddFile:
			fc.Kind = policy.ChangeAdd
		case applypatch.DeleteFile:
			fc.Kind = policy.ChangeDelete
		default:
			fc.Kind = policy.ChangeUpdate
		}
		p.Changes = append(p.Changes, fc)
	}
	return p
}

// patchPlanned runs once a patch is verified and before it is written:
// policy.PlanPatch decides; a rejected patch answers the model without an
// item; otherwise the fileChange item starts, and when an approval is
// needed the flag goes up and item/fileChange/requestApproval goes out
// (protocol.md §7.2, §8.1).
func (ct *callTools) patchPlanned(ctx context.Context, inv registry.Invocation, plan *applypatch.Plan) error {
	pl := policy.PlanPatch(policyPatch(plan), ct.approval, ct.sandbox, ct.tc.Approvals)
	if pl.Action == policy.ActionForbidden {
		return errors.New(pl.Reason)
	}
	pc := &patchCall{item: &api.FileChangeItem{ID: inv.CallID, Changes: fileChanges(plan), Status: api.StatusInProgress}, startedMs: nowMs()}
	ct.mu.Lock()
	ct.patches[inv.CallID] = pc
	ct.mu.Unlock()
	ct.tc.Items.ItemStarted(ctx, ct.tc.TurnID, api.ThreadItem{Body: pc.item, StartedAtMs: &pc.startedMs})
	if pl.Action != policy.ActionNeedsApproval {
		return nil
	}
	out := &askOutcome{}
	d := ct.ask(ctx, "item/fileChange/requestApproval", api.FileChangeRequestApprovalParams{
		ThreadID: ct.tc.ThreadID, TurnID: ct.tc.TurnID, ItemID: inv.CallID, StartedAtMs: nowMs(),
	}, nil, out)
	res := policy.Resolve(pl, d, ct.tc.Approvals)
	if res.Run {
		out.settle()
		return nil
	}
	var err error
	switch {
	case out.noClient:
		pc.item.Status = api.StatusDeclined
		err = errors.New(noClientText("patch"))
	case out.failed != nil:
		pc.item.Status = api.StatusFailed
		err = fmt.Errorf("patch rejected: the approval request failed: %v", out.failed)
	default:
		pc.item.Status = api.StatusDeclined
		err = errors.New(res.Message)
	}
	ct.completePatch(inv.CallID)
	if res.InterruptTurn {
		ct.tc.Interrupt()
	}
	out.settle()
	return err
}

func (ct *callTools) completePatch(callID string) {
	ct.mu.Lock()
	pc := ct.patches[callID]
	delete(ct.patches, callID)
	ct.mu.Unlock()
	if pc == nil {
		return
	}
	done := nowMs()
	ct.tc.Items.ItemCompleted(context.Background(), ct.tc.TurnID, api.ThreadItem{Body: pc.item, StartedAtMs: &pc.startedMs, CompletedAtMs: &done})
}

// patchFinished completes the fileChange item and, for an applied patch,
// announces the turn's aggregate diff (after item/completed, as the
// reference does).
func (ct *callTools) patchFinished(_ context.Context, inv registry.Invocation, plan *applypatch.Plan, _ applypatch.Result, err error) {
	ct.mu.Lock()
	pc := ct.patches[inv.CallID]
	ct.mu.Unlock()
	if pc != nil {
		pc.item.Status = api.StatusCompleted
		if err != nil {
			pc.item.Status = api.StatusFailed
		}
	}
	ct.completePatch(inv.CallID)
	if err == nil {
		ct.tracker.Track(plan)
		ct.tc.TurnDiff(ct.tracker.Diff())
	}
}

// interceptApplyPatch runs `apply_patch <patch>` argv calls, and bash -lc
// scripts that are only an apply_patch heredoc (optionally after
// `cd <dir> &&`), through the patch engine, as tools.md §2.2 asks.
func (ct *callTools) interceptApplyPatch(ctx context.Context, inv registry.Invocation, argv []string, cwd string) (registry.Output, bool, error) {
	var patch string
	switch {
	case len(argv) == 2 && (argv[0] == "apply_patch" || argv[0] == "applypatch"):
		patch = argv[1]
	default:
		script, ok := policy.ShellScript(argv)
		if !ok {
			return registry.Output{}, false, nil
		}
		script = strings.TrimSpace(script)
		if dir, rest, found := strings.Cut(script, "&&"); found && strings.HasPrefix(strings.TrimSpace(dir), "cd ") {
			d := strings.Trim(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(dir), "cd ")), `'"`)
			cwd = shell.ResolveWorkdir(cwd, d)
			script = strings.TrimSpace(rest)
		}
		rest, ok := strings.CutPrefix(script, "apply_patch ")
		if !ok || !strings.HasPrefix(strings.TrimSpace(rest), "<<") {
			return registry.Output{}, false, nil
		}
		patch = strings.TrimSpace(rest)
	}
	call := inv
	call.Payload = registry.CustomPayload{Input: patch}
	call.Turn.Cwd = cwd
	out, err := ct.interceptPatch.Handle(ctx, call)
	return out, true, err
}

// ---- request_user_input ----

// AskUserInput implements files.Asker: item/tool/requestUserInput with the
// waitingOnUserInput flag.
func (ct *callTools) AskUserInput(ctx context.Context, params api.ToolRequestUserInputParams) (api.ToolRequestUserInputResult, error) {
	params.ThreadID = ct.tc.ThreadID
	res, release, err := ct.tc.Client.Request(ctx, turns.ClientRequest{
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

// ---- exec_command sessions ----

// execItem is the commandExecution item of an exec_command session: it
// starts at the approval request or when the process is spawned, and
// completes when the process ends (possibly after the call returned).
type execItem struct {
	items     turns.ItemSink
	notify    func(method string, params any)
	threadID  string
	turnID    string
	item      *api.CommandExecutionItem
	startedMs int64
	started   bool
	spawned   bool
}

func execKey(threadID, callID string) string { return threadID + "\x00" + callID }

// execTool wraps the exec session handler to settle the item of a call
// whose process never started.
type execTool struct {
	*execsession.Handler
	ct *callTools
}

// Handle runs the call, then completes an item left without a process.
func (e *execTool) Handle(ctx context.Context, inv registry.Invocation) (registry.Output, error) {
	out, err := e.Handler.Handle(ctx, inv)
	if inv.Name == execsession.ExecCommandName {
		bt := e.ct.bt
		key := execKey(e.ct.tc.ThreadID, inv.CallID)
		bt.mu.Lock()
		ei := bt.execItems[key]
		if ei != nil && !ei.spawned {
			delete(bt.execItems, key)
		} else {
			ei = nil
		}
		bt.mu.Unlock()
		if ei != nil && ei.started {
			ei.item.Status = api.StatusFailed
			completeItem(ei.items, ei.turnID, ei.item, ei.startedMs)
		}
	}
	return out, err
}

// execPrepare applies the approval and sandbox policies to an
// exec_command call before its process is spawned.
func (ct *callTools) execPrepare(ctx context.Context, inv registry.Invocation, args execsession.ExecArgs, req *execsession.ExecRequest) (*registry.Output, error) {
	esc, err := policy.EscalationFromArgs(args.SandboxPermissions, nil, args.Justification, args.PrefixRule)
	if err != nil {
		return nil, registry.ArgumentsError(err)
	}
	plan := policy.PlanExec(policy.ExecRequest{
		Command: req.Argv, Cwd: req.Cwd, Approval: ct.approval, Sandbox: ct.sandbox,
		Escalation: esc, Rules: ct.bt.rules, Session: ct.tc.Approvals,
	})
	if plan.Action == policy.ActionForbidden {
		return nil, errors.New(plan.Reason)
	}
	ei := &execItem{
		items: ct.tc.Items, notify: ct.tc.Notify, threadID: ct.tc.ThreadID, turnID: ct.tc.TurnID,
		item: commandItem(inv.CallID, req.Argv, req.Cwd, api.CommandSourceAgent), startedMs: nowMs(),
	}
	sandboxed := plan.Action == policy.ActionSkip
	if plan.Action == policy.ActionNeedsApproval {
		out := &askOutcome{}
		cmd, cwd, env := ei.item.Command, ei.item.Cwd, "local"
		var reason *string
		if plan.Reason != "" {
			reason = &plan.Reason
		}
		params := api.CommandExecutionRequestApprovalParams{
			Kind: api.ApprovalKindCommand, ThreadID: ct.tc.ThreadID, TurnID: ct.tc.TurnID, ItemID: inv.CallID,
			EnvironmentID: &env, Reason: reason, Command: &cmd, Cwd: &cwd, CommandActions: ei.item.CommandActions,
			ProposedExecpolicyAmendment: plan.ProposedAmendment, AvailableDecisions: apiDecisions(plan.AvailableDecisions),
		}
		d := ct.ask(ctx, "item/commandExecution/requestApproval", &params, func() {
			ei.started, ei.startedMs = true, nowMs()
			params.StartedAtMs = ei.startedMs
			ct.tc.Items.ItemStarted(ctx, ct.tc.TurnID, api.ThreadItem{Body: ei.item, StartedAtMs: &ei.startedMs})
		}, out)
		res := policy.Resolve(plan, d, ct.tc.Approvals)
		if len(res.PersistAllowPrefix) > 0 {
			ct.bt.allowPrefix(res.PersistAllowPrefix)
		}
		if !res.Run {
			var err error
			switch {
			case out.noClient:
				ei.item.Status, err = api.StatusDeclined, errors.New(noClientText("exec command"))
			case out.failed != nil:
				ei.item.Status, err = api.StatusFailed, fmt.Errorf("exec command rejected: the approval request failed: %v", out.failed)
			default:
				ei.item.Status, err = api.StatusDeclined, errors.New(res.Message)
			}
			completeItem(ei.items, ei.turnID, ei.item, ei.startedMs)
			if res.InterruptTurn {
				ct.tc.Interrupt()
			}
			out.settle()
			return nil, err
		}
		out.settle()
		sandboxed = res.Sandboxed
	}
	pol := ct.sandbox
	if !sandboxed || !sandbox.Sandboxed(pol) {
		pol = policy.SandboxPolicy{Kind: policy.DangerFullAccess}
	}
	sb := ct.bt.sandbox
	if sb == nil {
		sb = sandbox.Default()
	}
	env := ct.bt.commandEnv()
	turnCwd, cwd := ct.tc.Cwd, req.Cwd
	req.Env = env
	req.Command = func(argv []string) (*sandbox.Cmd, error) {
		// The session outlives this call: the Manager, not a context,
		// ends the process.
		return sb.CommandFor(context.Background(), sandbox.Request{Policy: pol, PolicyCwd: turnCwd, Cwd: cwd, Argv: argv, Env: env})
	}
	ct.bt.mu.Lock()
	ct.bt.execItems[execKey(ct.tc.ThreadID, inv.CallID)] = ei
	ct.bt.mu.Unlock()
	return nil, nil
}

func (bt *builtinTools) execItem(info execsession.SessionInfo) *execItem {
	bt.mu.Lock()
	defer bt.mu.Unlock()
	return bt.execItems[execKey(info.ThreadID, info.CallID)]
}

// SessionStarted implements execsession.Observer: the item starts now,
// unless an approval request started it already.
func (bt *builtinTools) SessionStarted(info execsession.SessionInfo) {
	bt.mu.Lock()
	ei := bt.execItems[execKey(info.ThreadID, info.CallID)]
	if ei == nil {
		bt.mu.Unlock()
		return
	}
	ei.spawned = true
	pid := strconv.Itoa(info.ID)
	ei.item.ProcessID, ei.item.Source = &pid, api.CommandSourceUnifiedExecStartup
	start := !ei.started
	ei.started = true
	if start {
		ei.startedMs = info.StartedAt.UnixMilli()
	}
	item := *ei.item
	startedMs := ei.startedMs
	bt.mu.Unlock()
	if start {
		ei.items.ItemStarted(context.Background(), ei.turnID, api.ThreadItem{Body: &item, StartedAtMs: &startedMs})
	}
}

// SessionOutput implements execsession.Observer:
// item/commandExecution/outputDelta.
func (bt *builtinTools) SessionOutput(info execsession.SessionInfo, chunk []byte) {
	ei := bt.execItem(info)
	if ei == nil {
		return
	}
	ei.notify("item/commandExecution/outputDelta", api.ItemDeltaNotification{
		ThreadID: ei.threadID, TurnID: ei.turnID, ItemID: info.CallID, Delta: string(chunk),
	})
}

// SessionEnded implements execsession.Observer: the item completes with
// the process's exit code and transcript.
func (bt *builtinTools) SessionEnded(info execsession.SessionInfo, end execsession.SessionEnd) {
	key := execKey(info.ThreadID, info.CallID)
	bt.mu.Lock()
	ei := bt.execItems[key]
	delete(bt.execItems, key)
	bt.mu.Unlock()
	if ei == nil {
		return
	}
	code := int32(end.ExitCode)
	dur := end.Duration.Milliseconds()
	out := end.Transcript
	ei.item.ExitCode, ei.item.DurationMs, ei.item.AggregatedOutput = &code, &dur, &out
	ei.item.Status = api.StatusCompleted
	if end.ExitCode != 0 {
		ei.item.Status = api.StatusFailed
	}
	completeItem(ei.items, ei.turnID, ei.item, ei.startedMs)
}
