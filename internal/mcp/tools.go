package mcp

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	_ "image/gif" // MCP image blocks the model can read
	_ "image/jpeg"
	_ "image/png"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/config"
	"github.com/appserver/appserver/internal/registry"
)

// inputSchema is a tool's inputSchema after the MCP fix-up (an object
// schema without properties gets an empty one) and the registry's
// sanitize.
func inputSchema(schema any) (*registry.Schema, error) {
	m, _ := schema.(map[string]any)
	if m == nil {
		m = map[string]any{"type": "object"}
	}
	if p, ok := m["properties"]; !ok || p == nil {
		c := make(map[string]any, len(m)+1)
		for k, v := range m {
			c[k] = v
		}
		c["properties"] = map[string]any{}
		m = c
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return registry.Sanitize(raw)
}

// Register adds to b, for one turn, the tools of every server the
// thread has on (not in t.Disabled) that has listed its tools (servers
// that are restarting keep theirs, and calls to them fail until they are
// back), under their qualified names in order, and the resource tools when
// any of those servers is enabled. Servers still on their first start are
// waited for, at most StartupWait, as codex 0.171.0 does; the others are
// taken as they are.
func (m *Manager) Register(b *registry.Builder, t *Turn) error {
	servers := slices.DeleteFunc(m.list(), func(s *server) bool { return t.Disabled[s.name] })
	m.awaitFirstStart(servers)
	var refs []toolRef
	anyEnabled := false
	instructions := map[string]string{}
	for _, s := range servers {
		st, _, tools, _ := s.snapshot()
		if st == StateDisabled {
			continue
		}
		anyEnabled = true
		for _, ti := range tools {
			refs = append(refs, toolRef{Server: s.name, Tool: ti.tool.Name, info: ti})
		}
		// Trimmed, as codex 0.171.0 sends them.
		instructions[s.name] = strings.TrimSpace(s.serverInstructions())
	}
	if !anyEnabled {
		return nil
	}
	refs = assignNames(refs, func(r toolRef, reason string) {
		m.log.Warn("MCP tool skipped", "server", r.Server, "tool", r.Tool, "reason", reason)
	})
	h := &toolHandler{m: m, turn: t, tools: make(map[toolKey]toolRef, 3*len(refs))}
	var deferred []searchEntry
	// Offered, each server's tools are the functions of its namespace
	// mcp__<server>, named as the server names them, as codex 0.169.0
	// offers them (or plain functions under their qualified names, for a
	// provider without namespaces); the qualified name stays callable.
	var offered []registry.NamespaceSpec
	offeredAt := map[string]int{}
	offeredReadOnly := map[string]bool{}
	for _, r := range refs {
		bare := modelToolName(r.Tool)
		ns := namespaces(r.Server)
		fn := r.info.namespacedSpec()
		readOnly := r.info.tool.Annotations != nil && r.info.tool.Annotations.ReadOnlyHint
		var err error
		if t.PlainTools && !t.DeferTools {
			err = b.Register(registry.FunctionSpec{Name: r.Name, Description: fn.Description, Parameters: fn.Parameters}, h, readOnly)
		} else {
			err = b.AddHandler(r.Name, h)
		}
		if err != nil {
			// A built-in already has the name: the built-in wins.
			m.log.Warn("MCP tool skipped", "server", r.Server, "tool", r.Tool, "err", err)
			continue
		}
		h.tools[toolKey{name: r.Name}] = r
		addresses := ns[:]
		switch {
		case t.DeferTools:
			fn.DeferLoading = true
			deferred = append(deferred, searchEntry{server: r.Server, namespace: ns[1], fn: fn, text: searchText(r)})
		case t.PlainTools:
		default:
			at, ok := offeredAt[ns[1]]
			if !ok {
				at = len(offered)
				offeredAt[ns[1]] = at
				// The server's instructions describe its namespace, as
				// codex 0.171.0 sends them ("" is the registry's default).
				offered = append(offered, registry.NamespaceSpec{Name: ns[1], Description: instructions[r.Server], Cache: r.info.specs})
				offeredReadOnly[ns[1]] = true
			}
			spec := &offered[at]
			if slices.ContainsFunc(spec.Tools, func(f registry.FunctionSpec) bool { return f.Name == bare }) {
				m.log.Warn("MCP tool's namespaced form skipped", "server", r.Server, "tool", r.Tool, "reason", "another tool of the server has the same name once sanitized")
				continue
			}
			spec.Tools = append(spec.Tools, fn)
			offeredReadOnly[ns[1]] = offeredReadOnly[ns[1]] && readOnly
			h.tools[toolKey{ns[1], bare}] = r
			addresses = ns[:1] // the namespace spec serves the other
		}
		// A model trained on codex's catalog may call the namespaced form
		// in either spelling of the namespace.
		for _, name := range addresses {
			if err := b.AddNamespacedHandler(name, bare, h); err != nil {
				m.log.Warn("MCP tool's namespaced form skipped", "server", r.Server, "tool", r.Tool, "err", err)
				continue
			}
			h.tools[toolKey{name, bare}] = r
		}
	}
	for _, spec := range offered {
		slices.SortFunc(spec.Tools, func(a, b registry.FunctionSpec) int { return strings.Compare(a.Name, b.Name) })
		// Parallel only when every tool in it is annotated read-only:
		// the flag is the namespace's.
		if err := b.Register(spec, h, offeredReadOnly[spec.Name]); err != nil {
			m.log.Warn("MCP tools skipped", "namespace", spec.Name, "err", err)
		}
	}
	if len(deferred) > 0 {
		if err := b.Register(toolSearchSpec(), &searchHandler{ix: m.search.index(deferred)}, true); err != nil {
			return err
		}
	}
	return m.registerResourceTools(b, t)
}

// awaitFirstStart waits until every one of servers has ended its first
// start, StartupWait has passed, or the manager stops.
func (m *Manager) awaitFirstStart(servers []*server) {
	if m.cfg.StartupWait < 0 {
		return
	}
	var timer *time.Timer
	for _, s := range servers {
		select {
		case <-s.started:
			continue
		default:
		}
		if timer == nil {
			timer = time.NewTimer(m.cfg.StartupWait)
			defer timer.Stop()
		}
		select {
		case <-s.started:
		case <-timer.C:
			return
		case <-m.done():
			return
		}
	}
}

// namespaces are the namespace names of a server's tools, sanitized as
// tool names are (mcp__my-srv becomes mcp__my_srv): mcp__<server>__
// (codex's) and mcp__<server>.
func namespaces(server string) [2]string {
	ns := modelToolName(namePrefix + nameDelimiter + server)
	return [2]string{ns + nameDelimiter, ns}
}

// toolKey is the address of a call: its namespace ("" for a plain
// function) and name.
type toolKey struct{ namespace, name string }

// toolHandler serves the MCP tools of one turn.
type toolHandler struct {
	m     *Manager
	turn  *Turn
	tools map[toolKey]toolRef // by the addresses a model may call
}

// Kind is function: the model calls MCP tools as plain functions.
func (*toolHandler) Kind() registry.PayloadKind { return registry.PayloadFunction }

// MatchesKind accepts function and MCP payloads.
func (*toolHandler) MatchesKind(p registry.Payload) bool {
	k := p.Kind()
	return k == registry.PayloadFunction || k == registry.PayloadMCP
}

// IsMutating is false, as in the reference: approvals, not the gate,
// guard MCP tools.
func (*toolHandler) IsMutating(context.Context, registry.Invocation) bool { return false }

// Handle runs one call: the mcpToolCall item, the approval when the tool's
// mode asks for one, then tools/call.
func (h *toolHandler) Handle(ctx context.Context, inv registry.Invocation) (registry.Output, error) {
	ref, ok := h.tools[toolKey{inv.Namespace, inv.Name}]
	if !ok {
		return registry.Output{}, fmt.Errorf("unsupported call: %s", inv.DisplayName())
	}
	var rawArgs string
	switch p := inv.Payload.(type) {
	case registry.FunctionPayload:
		rawArgs = p.Arguments
	case registry.MCPPayload:
		rawArgs = p.RawArguments
	}
	args := json.RawMessage(bytes.TrimSpace([]byte(rawArgs)))
	if len(args) > 0 && !json.Valid(args) {
		var v any
		err := json.Unmarshal(args, &v)
		return registry.Output{}, fmt.Errorf("failed to parse function arguments: %v", err)
	}
	return h.m.runCall(ctx, h.turn, inv.CallID, ref.Server, ref.Tool, ref.info, args)
}

// runCall is one model call of an MCP tool, with its item and approval.
// Whatever the call ends in goes back to the model shaped as the
// reference shapes it, after the call's wall time; only the item carries
// the error.
func (m *Manager) runCall(ctx context.Context, t *Turn, callID, server, tool string, info *toolInfo, args json.RawMessage) (registry.Output, error) {
	start := m.now()
	var readOnly *bool
	if info.tool.Annotations != nil {
		ro := info.tool.Annotations.ReadOnlyHint
		readOnly = &ro
	}
	finish := m.startItem(ctx, t, callID, server, tool, args, readOnly)
	if needsApproval(m.serverConfig(server), tool, info) {
		if err := m.approve(ctx, t, server, info, args); err != nil {
			m.metrics.observeCall(server, OutcomeRejected, 0)
			finish(nil, err)
			return errorOutput(err, m.now().Sub(start)), nil
		}
	}
	res, _, err := m.CallTool(ctx, t, callID, server, tool, args)
	if err != nil {
		finish(nil, err)
		return errorOutput(err, m.now().Sub(start)), nil
	}
	finish(&res, nil)
	return m.modelOutput(res, m.now().Sub(start)), nil
}

// startItem announces the mcpToolCall item of a call and returns what
// completes it: with the result, or failed with the error's text.
func (m *Manager) startItem(ctx context.Context, t *Turn, callID, server, tool string, args json.RawMessage, readOnly *bool) func(*api.McpServerToolCallResult, error) {
	start := m.now()
	item := &api.McpToolCallItem{ID: callID, Server: server, Tool: tool, Status: api.StatusInProgress, Arguments: args, ReadOnlyHint: readOnly}
	if len(args) == 0 {
		item.Arguments = json.RawMessage("null")
	}
	startedAt := start.UnixMilli()
	if t.Items != nil {
		t.Items.ItemStarted(ctx, t.TurnID, api.ThreadItem{Body: item, StartedAtMs: &startedAt})
	}
	return func(res *api.McpServerToolCallResult, callErr error) {
		done := *item
		done.DurationMs = durationMs(m.now().Sub(start))
		if callErr != nil {
			done.Status = api.StatusFailed
			done.Error = &api.McpToolCallError{Message: errorMessage(callErr)}
		} else {
			// A tool error (isError) fails the item but keeps its result,
			// with no error, as the reference shows it.
			done.Status = api.StatusCompleted
			if res.IsError != nil && *res.IsError {
				done.Status = api.StatusFailed
			}
			done.Result = &api.McpToolCallResult{Content: res.Content, StructuredContent: res.StructuredContent, Meta: res.Meta}
		}
		if t.Items != nil {
			completedAt := m.now().UnixMilli()
			t.Items.ItemCompleted(context.WithoutCancel(ctx), t.TurnID, api.ThreadItem{Body: &done, StartedAtMs: &startedAt, CompletedAtMs: &completedAt})
		}
	}
}

// errorMessage is the client-safe text of an error.
func errorMessage(err error) string {
	if e, ok := err.(*apperr.Error); ok {
		return e.Message
	}
	return err.Error()
}

// serverConfig is the current table of a server.
func (m *Manager) serverConfig(name string) config.MCPServer {
	if s, ok := m.server(name); ok {
		return s.cfg
	}
	return config.MCPServer{}
}

// needsApproval applies the tool's approval mode: its own
// tools.<tool>.approval_mode, else the server's
// default_tools_approval_mode, else auto. Auto (and writes) asks unless the
// tool is annotated read-only, as codex 0.169.0 does; approve never asks,
// prompt always does.
func needsApproval(cfg config.MCPServer, tool string, info *toolInfo) bool {
	mode := cfg.DefaultToolsApprovalMode
	if tc, ok := cfg.Tools[tool]; ok && tc.ApprovalMode != "" {
		mode = tc.ApprovalMode
	}
	switch mode {
	case config.MCPApprovalPrompt:
		return true
	case config.MCPApprovalApprove:
		return false
	}
	return info == nil || info.tool.Annotations == nil || !info.tool.Annotations.ReadOnlyHint
}

// approve asks the thread's clients whether the call may run, as an
// elicitation in form mode marked as a tool-call approval, and returns nil
// when it may. Under the policy never the call fails unasked; with nobody
// to ask, or no accept, it is rejected.
func (m *Manager) approve(ctx context.Context, t *Turn, server string, info *toolInfo, args json.RawMessage) error {
	if t.NeverAsk {
		return errApprovalNever
	}
	if t.Asker == nil {
		return errRejected
	}
	meta := map[string]any{"codex_approval_kind": "mcp_tool_call", "tool_name": info.tool.Name}
	if len(args) > 0 {
		meta["tool_params"] = args
	}
	meta["tool_params_display"] = paramsDisplay(args)
	if info.tool.Description != "" {
		meta["tool_description"] = info.tool.Description
	}
	if info.tool.Title != "" {
		meta["tool_title"] = info.tool.Title
	}
	rawMeta, err := json.Marshal(meta)
	if err != nil {
		return errRejected
	}
	params := api.McpServerElicitationRequestParams{
		ThreadID: t.ThreadID, ServerName: server, Mode: "form",
		Message:         fmt.Sprintf("Allow the %s MCP server to run tool %q?", server, info.tool.Name),
		RequestedSchema: json.RawMessage(`{"type":"object","properties":{}}`),
		Meta:            rawMeta,
	}
	if t.TurnID != "" {
		params.TurnID = &t.TurnID
	}
	ans, err := askElicitation(ctx, t.Asker, params)
	if err != nil {
		m.log.Info("MCP tool approval not answered; rejecting", "server", server, "tool", info.tool.Name, "err", err)
		return errRejected
	}
	if ans.Action != api.ElicitationAccept {
		return errRejected
	}
	return nil
}

// paramDisplay is one argument as an approval prompt shows it.
type paramDisplay struct {
	Name        string `json:"name"`
	Value       any    `json:"value"`
	DisplayName string `json:"display_name"`
}

// paramsDisplay lists the top-level arguments of a call, by name, for the
// approval prompt; arguments that are not an object list nothing.
func paramsDisplay(args json.RawMessage) []paramDisplay {
	var obj map[string]any
	_ = json.Unmarshal(args, &obj)
	names := make([]string, 0, len(obj))
	for k := range obj {
		names = append(names, k)
	}
	slices.Sort(names)
	out := make([]paramDisplay, 0, len(names))
	for _, k := range names {
		out = append(out, paramDisplay{Name: k, Value: obj[k], DisplayName: k})
	}
	return out
}

// modelOutput is the result as codex 0.169.0 hands it to the model
// (docs/tools.md §1.9): the wall time header, then structuredContent's
// JSON on the next line of the same text when there is one, else one
// content item per block after the header's. A text longer than
// MaxOutputBytes is replaced by a preview.
func (m *Manager) modelOutput(res api.McpServerToolCallResult, wall time.Duration) registry.Output {
	success := res.IsError == nil || !*res.IsError
	if sc := bytes.TrimSpace(res.StructuredContent); len(sc) > 0 && !bytes.Equal(sc, []byte("null")) {
		var compact bytes.Buffer
		if err := json.Compact(&compact, sc); err != nil {
			compact.Reset()
			compact.Write(sc)
		}
		return registry.TextOutput(wallTimeHeader(wall)+"\n"+m.truncate(compact.String()), success)
	}
	items := append([]registry.ContentItem{registry.InputText(wallTimeHeader(wall))}, registry.MCPContentItems(res.Content)...)
	for i := 1; i < len(items); i++ {
		switch items[i].Type {
		case registry.ContentInputText:
			items[i].Text = m.truncate(items[i].Text)
		case registry.ContentInputImage:
			if !decodableImage(items[i].ImageURL) {
				items[i] = registry.InputText(imageOmitted)
			}
		}
	}
	return registry.ContentOutput(items, success)
}

// imageOmitted replaces, as in the reference, an image block the model
// could not read.
const imageOmitted = "image content omitted because it could not be processed"

// decodableImage reports whether a data URL holds a PNG, JPEG or GIF image
// whose header decodes. Only the header is decoded (streamed from the
// base64), not the whole image.
func decodableImage(url string) bool {
	_, data, ok := strings.Cut(url, ";base64,")
	if !ok {
		return false
	}
	_, _, err := image.DecodeConfig(base64.NewDecoder(base64.StdEncoding, strings.NewReader(data)))
	return err == nil
}

// errorOutput is a call that did not get a result (rejected, server down,
// timed out) as the model reads it: the wall time header and the error.
func errorOutput(err error, wall time.Duration) registry.Output {
	return registry.ContentOutput([]registry.ContentItem{registry.InputText(wallTimeHeader(wall)), registry.InputText(errorMessage(err))}, false)
}

// wallTimeHeader is the line the reference puts before an MCP tool's
// output.
func wallTimeHeader(wall time.Duration) string {
	return fmt.Sprintf("Wall time: %.4f seconds\nOutput:", wall.Seconds())
}

// truncate replaces a text longer than MaxOutputBytes by its preview.
func (m *Manager) truncate(text string) string {
	if len(text) <= m.cfg.MaxOutputBytes {
		return text
	}
	return truncateUTF8(text, m.cfg.MaxOutputBytes) +
		fmt.Sprintf("\n[output truncated: %d of %d bytes shown]", m.cfg.MaxOutputBytes, len(text))
}

// truncateUTF8 cuts s to at most n bytes without splitting a character.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
