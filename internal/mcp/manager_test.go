package mcp

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/config"
	"github.com/appserver/appserver/internal/mcp/mcptest"
	"github.com/appserver/appserver/internal/registry"
)

func TestStdioToolsAndResults(t *testing.T) {
	srv := stdioServer(t)
	srv.DisabledTools = []string{"crash"}
	h := newHarness(t, map[string]config.MCPServer{"t": srv})
	h.waitState("t", StateReady)
	require.Equal(t, []string{"starting", "ready"}, h.history("t"))

	rec := &recorder{}
	specs, reg := h.build(rec.turn())
	names := specNames(specs)
	require.Contains(t, names, "mcp__t__echo")
	require.Contains(t, names, "mcp__t__add")
	require.NotContains(t, names, "mcp__t__crash", "disabled_tools removes a tool")
	require.Contains(t, names, ListResourcesName)

	out := call(t, reg, "mcp__t__echo", `{"text":"hi"}`)
	require.Equal(t, "echo: hi", body(t, out.Output))
	require.True(t, out.Output.Succeeded())
	item := rec.lastDone(t)
	require.Equal(t, api.StatusCompleted, item.Status)
	require.Equal(t, "t", item.Server)
	require.Equal(t, "echo", item.Tool)
	require.JSONEq(t, `{"text":"hi"}`, string(item.Arguments))
	require.NotNil(t, item.DurationMs)
	require.Len(t, rec.started, 1)
	require.Equal(t, api.StatusInProgress, rec.started[0].Body.(*api.McpToolCallItem).Status)

	out = call(t, reg, "mcp__t__add", `{"a":2,"b":3}`)
	require.Equal(t, `{"sum":5}`, body(t, out.Output), "structuredContent wins")
	require.JSONEq(t, `{"sum":5}`, string(rec.lastDone(t).Result.StructuredContent))

	out = call(t, reg, "mcp__t__image", ``)
	require.Len(t, out.Output.Content, 3, "the wall time, the text, the image")
	// The server's "PNG" is four bytes: the model is told it was left out.
	require.Equal(t, "a pixel\n"+imageOmitted, body(t, out.Output))
	require.JSONEq(t, `[{"type":"text","text":"a pixel"},{"type":"image","data":"iVBORw==","mimeType":"image/png"}]`,
		string(mustJSON(t, rec.lastDone(t).Result.Content)), "the item keeps the block")
	require.Equal(t, "null", string(rec.lastDone(t).Arguments))

	out = call(t, reg, "mcp__t__fail", `{}`)
	require.False(t, out.Output.Succeeded(), "isError is a failed output")
	require.Contains(t, body(t, out.Output), "the tool failed on purpose")
	failed := rec.lastDone(t)
	require.Equal(t, api.StatusFailed, failed.Status, "isError fails the item, as the reference")
	require.Nil(t, failed.Error, "and keeps the result rather than an error")
	require.Contains(t, string(failed.Result.Content[0]), "the tool failed on purpose")

	out = call(t, reg, "mcp__t__echo", `{not json`)
	require.False(t, out.Output.Succeeded())
	require.Contains(t, out.Output.Text, "failed to parse function arguments")

	// tools/call direct (mcpServer/tool/call) refuses a disabled tool.
	_, _, err := h.m.CallTool(context.Background(), nil, "", "t", "crash", nil)
	require.ErrorContains(t, err, "tool 'crash' is disabled for MCP server 't'")
}

// A server's tools are offered as codex 0.169.0 offers them: one namespace
// spec mcp__<server> holding the tools under their own names, sorted, and
// no plain function per tool. A call in either spelling of the namespace
// (mcp__<server> or mcp__<server>__) or by the qualified name is served.
func TestNamespacedCallForm(t *testing.T) {
	h := newHarness(t, map[string]config.MCPServer{"t": stdioServer(t)})
	h.waitState("t", StateReady)
	rec := &recorder{}
	specs, reg := h.build(rec.turn())
	var offered []registry.NamespaceSpec
	for _, s := range specs {
		if ns, ok := s.Spec.(registry.NamespaceSpec); ok {
			offered = append(offered, ns)
		}
		require.NotEqual(t, "mcp__t__echo", s.Spec.ToolName(), "no plain function per tool")
	}
	require.Len(t, offered, 1)
	require.Equal(t, "mcp__t", offered[0].Name)
	var fns []string
	for _, f := range offered[0].Tools {
		fns = append(fns, f.Name)
	}
	require.True(t, slices.IsSorted(fns), fns)
	require.Contains(t, fns, "echo")
	b, err := json.Marshal(offered[0])
	require.NoError(t, err)
	require.Contains(t, string(b), `"description":"Tools in the mcp__t namespace."`)
	// Every turn encodes the namespace's tools from the JSON written
	// once for the server's listing, the same as encoding them afresh.
	require.NotNil(t, offered[0].Cache)
	again, _ := h.build((&recorder{}).turn())
	found := 0
	for _, s := range again {
		if ns, ok := s.Spec.(registry.NamespaceSpec); ok {
			found++
			require.Same(t, offered[0].Cache, ns.Cache, "one cache for the listing")
			for _, f := range ns.Tools {
				require.True(t, ns.Cache.Has(f), "%s encoded again", f.Name)
			}
			fresh := ns
			fresh.Cache = nil
			want, err := fresh.MarshalJSON()
			require.NoError(t, err)
			got, err := registry.EncodeSpec(ns)
			require.NoError(t, err)
			require.Equal(t, string(want), string(got))
		}
	}
	require.Equal(t, 1, found)
	for i, ns := range []string{"mcp__t__", "mcp__t", ""} {
		out, err := reg.NewDispatcher(registry.DispatcherConfig{}).Dispatch(context.Background(), registry.Call{
			CallID: fmt.Sprintf("call_ns%d", i), Namespace: ns, Name: map[bool]string{true: "mcp__t__echo", false: "echo"}[ns == ""], Payload: registry.FunctionPayload{Arguments: `{"text":"hi"}`},
		})
		require.NoError(t, err)
		require.True(t, out.Output.Succeeded(), out.Output.Text)
		require.Equal(t, "echo: hi", body(t, out.Output))
		item := rec.lastDone(t)
		require.Equal(t, "t", item.Server)
		require.Equal(t, "echo", item.Tool)
		require.Equal(t, fmt.Sprintf("call_ns%d", i), item.ID)
	}
	out, err := reg.NewDispatcher(registry.DispatcherConfig{}).Dispatch(context.Background(), registry.Call{
		CallID: "call_other", Namespace: "mcp__other__", Name: "echo", Payload: registry.FunctionPayload{Arguments: `{}`},
	})
	require.NoError(t, err)
	require.False(t, out.Output.Succeeded(), "a server that does not exist serves nothing")

	// A provider without namespaces gets plain functions.
	plainTurn := rec.turn()
	plainTurn.PlainTools = true
	specs, _ = h.build(plainTurn)
	var plain []string
	for _, s := range specs {
		_, isNS := s.Spec.(registry.NamespaceSpec)
		require.False(t, isNS, "no namespace spec for a provider without namespaces")
		plain = append(plain, s.Spec.ToolName())
	}
	require.Contains(t, plain, "mcp__t__echo")
}

func TestOutputTruncated(t *testing.T) {
	h := newHarness(t, map[string]config.MCPServer{"t": stdioServer(t)}, func(c *Config) { c.MaxOutputBytes = 100 })
	h.waitState("t", StateReady)
	_, reg := h.build((&recorder{}).turn())
	out := call(t, reg, "mcp__t__big", `{"bytes":5000}`)
	require.Contains(t, body(t, out.Output), "[output truncated: 100 of ")
	require.Less(t, len(body(t, out.Output)), 200)
}

func TestHTTPServerWithBearerToken(t *testing.T) {
	hs, err := mcptest.StartHTTP(context.Background(), "s3cret")
	require.NoError(t, err)
	defer hs.Stop()
	env := map[string]string{"TEST_MCP_TOKEN": "s3cret", "TEST_TEAM": "agents"}
	servers := map[string]config.MCPServer{
		"web": {URL: hs.URL, BearerTokenEnvVar: "TEST_MCP_TOKEN", EnvHTTPHeaders: map[string]string{"X-Team": "TEST_TEAM"},
			Enabled: true, StartupTimeoutSec: 10, ToolTimeoutSec: 10, DefaultToolsApprovalMode: config.MCPApprovalApprove},
		"notoken": {URL: hs.URL, BearerTokenEnvVar: "TEST_MISSING", Enabled: true, StartupTimeoutSec: 10, ToolTimeoutSec: 10},
	}
	h := newHarness(t, servers, func(c *Config) { c.Getenv = func(k string) string { return env[k] } })
	h.waitState("web", StateReady)
	h.waitState("notoken", StateFailed)

	rec := &recorder{}
	specs, reg := h.build(rec.turn())
	require.Contains(t, specNames(specs), "mcp__web__echo")
	require.NotContains(t, specNames(specs), "mcp__notoken__echo")
	out := call(t, reg, "mcp__web__echo", `{"text":"over http"}`)
	require.Equal(t, "echo: over http", body(t, out.Output))

	st, err := h.m.StatusList(context.Background(), api.McpServerStatusListParams{})
	require.NoError(t, err)
	require.Len(t, st.Data, 2)
	require.Equal(t, "notoken", st.Data[0].Name)
	require.Equal(t, "failed", *st.Data[0].RuntimeStatus)
	require.Contains(t, *st.Data[0].ToolsError, "TEST_MISSING")
	web := st.Data[1]
	require.Equal(t, "connected", *web.RuntimeStatus)
	require.Equal(t, "bearerToken", web.AuthStatus)
	require.Contains(t, web.Tools, "echo")
	require.Len(t, web.Resources, 1)
	require.Len(t, web.ResourceTemplates, 1)
}

func TestCrashMidCallRestarts(t *testing.T) {
	h := newHarness(t, map[string]config.MCPServer{"t": stdioServer(t)})
	h.waitState("t", StateReady)
	rec := &recorder{}
	_, reg := h.build(rec.turn())
	out := call(t, reg, "mcp__t__crash", `{}`)
	require.False(t, out.Output.Succeeded())
	require.Contains(t, body(t, out.Output), "tool call failed")
	require.Equal(t, api.StatusFailed, rec.lastDone(t).Status)

	h.waitHistory("t", "failed")
	h.waitState("t", StateReady)
	// The turn's registry still routes to the restarted server.
	out = call(t, reg, "mcp__t__echo", `{"text":"back"}`)
	require.True(t, out.Output.Succeeded(), out.Output.Text)
}

func TestToolTimeout(t *testing.T) {
	srv := stdioServer(t)
	srv.ToolTimeoutSec = 0.3
	h := newHarness(t, map[string]config.MCPServer{"t": srv})
	h.waitState("t", StateReady)
	_, reg := h.build((&recorder{}).turn())
	out := call(t, reg, "mcp__t__sleep", `{"ms":20000}`)
	require.False(t, out.Output.Succeeded())
	require.Contains(t, body(t, out.Output), "tool_timeout_sec")
	// The server is still usable.
	out = call(t, reg, "mcp__t__echo", `{"text":"still here"}`)
	require.True(t, out.Output.Succeeded(), out.Output.Text)
}

func TestNeverStartingServerDoesNotBlock(t *testing.T) {
	slow := stdioServer(t, "-hang")
	slow.StartupTimeoutSec = 0.3
	h := newHarness(t, map[string]config.MCPServer{"good": stdioServer(t), "slow": slow})
	h.waitState("good", StateReady)

	// The turn is built while "slow" is starting or failed: only the good
	// server's tools, at once.
	specs, _ := h.build((&recorder{}).turn())
	require.Contains(t, specNames(specs), "mcp__good__echo")
	for _, n := range specNames(specs) {
		require.False(t, strings.HasPrefix(n, "mcp__slow__"), n)
	}
	h.waitState("slow", StateFailed)
	s, _ := h.m.server("slow")
	_, errText, _, _ := s.snapshot()
	require.Contains(t, errText, "startup_timeout_sec")

	_, _, err := h.m.CallTool(context.Background(), nil, "", "slow", "echo", nil)
	require.Error(t, err)
	require.Regexp(t, "MCP server 'slow' is (not running|still starting)", err.Error())
}

func TestElicitationForwarded(t *testing.T) {
	h := newHarness(t, map[string]config.MCPServer{"t": stdioServer(t)})
	h.waitState("t", StateReady)
	rec := &recorder{answer: func(api.McpServerElicitationRequestParams) (json.RawMessage, error) {
		return json.RawMessage(`{"action":"accept","content":{"name":"Ada"}}`), nil
	}}
	_, reg := h.build(rec.turn())
	out := call(t, reg, "mcp__t__ask_name", `{}`)
	require.Equal(t, "hello Ada", body(t, out.Output))
	require.Len(t, rec.asked, 1)
	p := rec.asked[0]
	require.Equal(t, "thr", p.ThreadID)
	require.Equal(t, "turn", *p.TurnID)
	require.Equal(t, "t", p.ServerName)
	require.Equal(t, "form", p.Mode)
	require.Equal(t, "What is your name?", p.Message)
	require.Contains(t, string(p.RequestedSchema), `"name"`)

	rec.answer = func(api.McpServerElicitationRequestParams) (json.RawMessage, error) {
		return json.RawMessage(`{"action":"decline"}`), nil
	}
	out = call(t, reg, "mcp__t__ask_name", `{}`)
	require.Equal(t, "elicitation decline", body(t, out.Output))

	// Under the policy never the client is not asked.
	never := rec.turn()
	never.NeverAsk = true
	_, reg = h.build(never)
	out = call(t, reg, "mcp__t__ask_name", `{}`)
	require.Equal(t, "elicitation decline", body(t, out.Output))
	require.Len(t, rec.asked, 2)
}

func TestApprovalPrompt(t *testing.T) {
	srv := stdioServer(t)
	srv.DefaultToolsApprovalMode = config.MCPApprovalPrompt
	srv.Tools = map[string]config.MCPTool{"add": {ApprovalMode: config.MCPApprovalApprove}}
	h := newHarness(t, map[string]config.MCPServer{"t": srv})
	h.waitState("t", StateReady)

	rec := &recorder{answer: func(api.McpServerElicitationRequestParams) (json.RawMessage, error) {
		return json.RawMessage(`{"action":"accept","content":{}}`), nil
	}}
	_, reg := h.build(rec.turn())
	out := call(t, reg, "mcp__t__echo", `{"text":"ok"}`)
	require.True(t, out.Output.Succeeded(), out.Output.Text)
	require.Len(t, rec.asked, 1)
	p := rec.asked[0]
	require.Equal(t, `Allow the t MCP server to run tool "echo"?`, p.Message)
	require.JSONEq(t, `{"type":"object","properties":{}}`, string(p.RequestedSchema))
	var meta map[string]any
	require.NoError(t, json.Unmarshal(p.Meta, &meta))
	require.Equal(t, "mcp_tool_call", meta["codex_approval_kind"])
	require.Equal(t, map[string]any{"text": "ok"}, meta["tool_params"])
	require.Equal(t, "echo", meta["tool_name"])
	require.Equal(t, []any{map[string]any{"name": "text", "value": "ok", "display_name": "text"}}, meta["tool_params_display"])

	out = call(t, reg, "mcp__t__add", `{"a":1,"b":1}`)
	require.True(t, out.Output.Succeeded())
	require.Len(t, rec.asked, 1, "approval_mode approve does not ask")

	rec.answer = func(api.McpServerElicitationRequestParams) (json.RawMessage, error) {
		return json.RawMessage(`{"action":"decline"}`), nil
	}
	out = call(t, reg, "mcp__t__echo", `{"text":"no"}`)
	require.Equal(t, "user rejected MCP tool call", body(t, out.Output))
	item := rec.lastDone(t)
	require.Equal(t, api.StatusFailed, item.Status)
	require.Equal(t, "user rejected MCP tool call", item.Error.Message)

	never := rec.turn()
	never.NeverAsk = true
	_, reg = h.build(never)
	out = call(t, reg, "mcp__t__echo", `{"text":"no"}`)
	require.Equal(t, "MCP tool call requires approval, but approval policy is never", body(t, out.Output))
	require.Equal(t, "MCP tool call requires approval, but approval policy is never", rec.lastDone(t).Error.Message)
	require.Len(t, rec.asked, 2, "policy never fails without asking")
}

// The auto mode (the default) asks before a tool that is not annotated
// read-only and runs a read-only one unasked, as codex 0.169.0 does; under
// the policy never the first fails unasked and the second runs.
func TestApprovalAutoAsksUnlessReadOnly(t *testing.T) {
	srv := stdioServer(t)
	srv.DefaultToolsApprovalMode = ""
	h := newHarness(t, map[string]config.MCPServer{"t": srv})
	h.waitState("t", StateReady)
	rec := &recorder{answer: func(api.McpServerElicitationRequestParams) (json.RawMessage, error) {
		return json.RawMessage(`{"action":"accept","content":{}}`), nil
	}}
	_, reg := h.build(rec.turn())
	out := call(t, reg, "mcp__t__echo", `{"text":"ok"}`)
	require.Equal(t, "echo: ok", body(t, out.Output))
	require.Len(t, rec.asked, 1, "echo has no annotations: asked")
	out = call(t, reg, "mcp__t__add", `{"a":1,"b":1}`)
	require.Equal(t, `{"sum":2}`, body(t, out.Output))
	require.Len(t, rec.asked, 1, "add is read-only: not asked")

	never := rec.turn()
	never.NeverAsk = true
	_, reg = h.build(never)
	out = call(t, reg, "mcp__t__echo", `{"text":"no"}`)
	require.False(t, out.Output.Succeeded())
	require.Equal(t, "MCP tool call requires approval, but approval policy is never", body(t, out.Output))
	out = call(t, reg, "mcp__t__add", `{"a":1,"b":2}`)
	require.Equal(t, `{"sum":3}`, body(t, out.Output))
	require.Len(t, rec.asked, 1)
}

func TestResourceTools(t *testing.T) {
	h := newHarness(t, map[string]config.MCPServer{"a": stdioServer(t), "b": stdioServer(t)})
	h.waitState("a", StateReady)
	h.waitState("b", StateReady)
	rec := &recorder{}
	_, reg := h.build(rec.turn())

	out := call(t, reg, ListResourcesName, `{}`)
	require.True(t, out.Output.Succeeded(), out.Output.Text)
	require.JSONEq(t, `{"resources":[
		{"server":"a","uri":"test://greeting","name":"greeting","mimeType":"text/plain"},
		{"server":"b","uri":"test://greeting","name":"greeting","mimeType":"text/plain"}]}`, out.Output.Text)
	item := rec.lastDone(t)
	require.Equal(t, "codex", item.Server)
	require.Equal(t, ListResourcesName, item.Tool)

	out = call(t, reg, ListResourceTemplatesName, `{"server":"b"}`)
	require.JSONEq(t, `{"server":"b","resourceTemplates":[{"server":"b","uriTemplate":"test://items/{id}","name":"item"}]}`, out.Output.Text)

	out = call(t, reg, ReadResourceName, `{"server":"a","uri":"test://items/7"}`)
	require.JSONEq(t, `{"server":"a","uri":"test://items/7","contents":[{"uri":"test://items/7","text":"item 7"}]}`, out.Output.Text)

	out = call(t, reg, ListResourcesName, `{"cursor":"x"}`)
	require.Equal(t, "a cursor needs the server whose listing it continues", out.Output.Text)
	out = call(t, reg, ReadResourceName, `{"server":"nope","uri":"test://greeting"}`)
	require.Equal(t, "unknown MCP server 'nope'", out.Output.Text)
}

func TestReload(t *testing.T) {
	a := stdioServer(t)
	h := newHarness(t, map[string]config.MCPServer{"a": a, "b": stdioServer(t)})
	h.waitState("a", StateReady)
	h.waitState("b", StateReady)
	bServer, _ := h.m.server("b")
	_, _, _, bConn := bServer.snapshot()
	bPid := bConn.proc.cmd.Process.Pid

	a2 := a
	a2.EnabledTools = []string{"echo"}
	require.NoError(t, h.m.Reload(map[string]config.MCPServer{"a": a2, "c": stdioServer(t)}))
	h.waitState("a", StateReady)
	h.waitState("c", StateReady)
	require.Eventually(t, func() bool { return !alive(bPid) }, waitTimeout, 5*time.Millisecond,
		"a removed server's process is gone after reload")

	specs, _ := h.build((&recorder{}).turn())
	var mcpNames []string
	for _, n := range specNames(specs) {
		if strings.HasPrefix(n, "mcp__") {
			mcpNames = append(mcpNames, n)
		}
	}
	require.Contains(t, mcpNames, "mcp__a__echo")
	require.NotContains(t, mcpNames, "mcp__a__add", "enabled_tools applies after reload")
	require.Contains(t, mcpNames, "mcp__c__add")
	for _, n := range mcpNames {
		require.False(t, strings.HasPrefix(n, "mcp__b__"), n)
	}
}

func TestStopKillsProcessGroup(t *testing.T) {
	h := newHarness(t, map[string]config.MCPServer{"t": stdioServer(t)})
	h.waitState("t", StateReady)
	_, reg := h.build((&recorder{}).turn())
	out := call(t, reg, "mcp__t__spawn", `{}`)
	require.True(t, out.Output.Succeeded(), out.Output.Text)
	var blocks []struct{ Text string }
	require.NoError(t, json.Unmarshal([]byte(`[{"text":"`+body(t, out.Output)+`"}]`), &blocks))
	pid, err := strconv.Atoi(blocks[0].Text)
	require.NoError(t, err)
	require.True(t, alive(pid))
	h.m.Stop()
	require.Eventually(t, func() bool { return !alive(pid) }, waitTimeout, 5*time.Millisecond,
		"the server's grandchild is killed with its group")
}

func TestProgressForwarded(t *testing.T) {
	h := newHarness(t, map[string]config.MCPServer{"t": stdioServer(t)})
	h.waitState("t", StateReady)
	rec := &recorder{}
	_, reg := h.build(rec.turn())
	out := call(t, reg, "mcp__t__progress", `{}`)
	require.True(t, out.Output.Succeeded())
	deadline := time.Now().Add(waitTimeout)
	for {
		rec.mu.Lock()
		n := len(rec.notes)
		rec.mu.Unlock()
		if n > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.Equal(t, []any{api.McpToolCallProgressNotification{ThreadID: "thr", TurnID: "turn", ItemID: "call_mcp__t__progress", Message: "half way"}}, rec.notes)
}

// alive reports whether pid is a live (not zombie) process.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(stat), ") ")
	return !strings.HasPrefix(rest, "Z")
}

// An HTTP server that goes away fails the next call with a text the model
// reads, is marked failed and is reconnected once it is back at its
// address, and the turn's tools reach it again; the metrics count each
// outcome and follow the up state.
func TestHTTPServerRestartAfterFailedCall(t *testing.T) {
	hs, err := mcptest.StartHTTP(context.Background(), "")
	require.NoError(t, err)
	u, err := url.Parse(hs.URL)
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	h := newHarness(t, map[string]config.MCPServer{"web": {URL: hs.URL, Enabled: true, StartupTimeoutSec: 10, ToolTimeoutSec: 10, DefaultToolsApprovalMode: config.MCPApprovalApprove}},
		func(c *Config) { c.Metrics = NewMetrics(reg) })
	h.waitState("web", StateReady)
	require.Equal(t, 1.0, testutil.ToFloat64(h.m.metrics.up.WithLabelValues("web")))

	rec := &recorder{}
	_, tools := h.build(rec.turn())
	out := call(t, tools, "mcp__web__echo", `{"text":"one"}`)
	require.True(t, out.Output.Succeeded(), out.Output.Text)
	out = call(t, tools, "mcp__web__fail", `{}`)
	require.False(t, out.Output.Succeeded())

	hs.Stop()
	out = call(t, tools, "mcp__web__echo", `{"text":"two"}`)
	require.False(t, out.Output.Succeeded(), "the server is gone")
	require.Equal(t, api.StatusFailed, rec.lastDone(t).Status)
	h.waitHistory("web", "failed")
	require.Equal(t, 0.0, testutil.ToFloat64(h.m.metrics.up.WithLabelValues("web")))

	back, err := mcptest.StartHTTPOn(context.Background(), u.Host, "")
	require.NoError(t, err)
	defer back.Stop()
	h.waitState("web", StateReady)
	out = call(t, tools, "mcp__web__echo", `{"text":"three"}`)
	require.True(t, out.Output.Succeeded(), out.Output.Text)
	require.Equal(t, "echo: three", body(t, out.Output))

	require.Equal(t, 1.0, testutil.ToFloat64(h.m.metrics.up.WithLabelValues("web")))
	require.Equal(t, 2.0, testutil.ToFloat64(h.m.metrics.calls.WithLabelValues("web", OutcomeOK)))
	require.Equal(t, 1.0, testutil.ToFloat64(h.m.metrics.calls.WithLabelValues("web", OutcomeToolError)))
	require.Equal(t, 1.0, testutil.ToFloat64(h.m.metrics.calls.WithLabelValues("web", OutcomeFailed)))
	require.Equal(t, 4, testutil.CollectAndCount(reg, "appserver_mcp_calls_total")+testutil.CollectAndCount(reg, "appserver_mcp_call_duration_seconds"),
		"three outcome series and one latency series")
	count, err := testutil.GatherAndCount(reg, "appserver_mcp_server_up")
	require.NoError(t, err)
	require.Equal(t, 1, count)
}

// A readable image goes to the model as a data URL after the wall time.
func TestModelOutputImage(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, png.Encode(&buf, image.NewGray(image.Rect(0, 0, 1, 1))))
	data := base64.StdEncoding.EncodeToString(buf.Bytes())
	m := &Manager{cfg: Config{MaxOutputBytes: 1 << 10}}
	out := m.modelOutput(api.McpServerToolCallResult{Content: []json.RawMessage{
		json.RawMessage(`{"type":"image","data":"` + data + `","mimeType":"image/png"}`),
		json.RawMessage(`{"type":"image","data":"bm90IGFuIGltYWdl","mimeType":"image/png"}`),
	}}, 1500*time.Millisecond)
	require.Len(t, out.Content, 3)
	require.Equal(t, "Wall time: 1.5000 seconds\nOutput:", out.Content[0].Text)
	require.Equal(t, registry.InputImage("data:image/png;base64,"+data), out.Content[1])
	require.Equal(t, registry.InputText(imageOmitted), out.Content[2])
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}
