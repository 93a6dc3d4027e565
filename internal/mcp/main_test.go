package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/config"
	"github.com/appserver/appserver/internal/mcp/mcptest"
	"github.com/appserver/appserver/internal/registry"
)

// waitTimeout bounds waiting for a server state; it only guards against a
// hang, it measures nothing.
const waitTimeout = 20 * time.Second

// harness is a Manager under test with its status notifications.
type harness struct {
	t      *testing.T
	m      *Manager
	mu     sync.Mutex
	states map[string][]string
	signal chan struct{}
}

func stdioServer(t *testing.T, args ...string) config.MCPServer {
	bin, err := mcptest.Build()
	require.NoError(t, err)
	// approve: the tests of calls are not about approvals (the auto
	// default asks for every tool not annotated read-only).
	return config.MCPServer{Command: bin, Args: args, Enabled: true, StartupTimeoutSec: 10, ToolTimeoutSec: 10,
		DefaultToolsApprovalMode: config.MCPApprovalApprove}
}

func newHarness(t *testing.T, servers map[string]config.MCPServer, tweak ...func(*Config)) *harness {
	t.Helper()
	h := &harness{t: t, states: map[string][]string{}, signal: make(chan struct{}, 1)}
	cfg := Config{
		Servers:    servers,
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, KillGrace: 200 * time.Millisecond,
		OnStatus: func(n api.McpServerStartupStatusUpdatedNotification) {
			h.mu.Lock()
			h.states[n.Name] = append(h.states[n.Name], n.Status)
			h.mu.Unlock()
			select {
			case h.signal <- struct{}{}:
			default:
			}
		},
	}
	for _, f := range tweak {
		f(&cfg)
	}
	m, err := New(cfg)
	require.NoError(t, err)
	require.NoError(t, m.Start(context.Background()))
	t.Cleanup(m.Stop)
	h.m = m
	return h
}

// waitState waits until the server is in state st.
func (h *harness) waitState(name string, st State) {
	h.t.Helper()
	deadline := time.After(waitTimeout)
	for {
		s, ok := h.m.server(name)
		require.True(h.t, ok, "no server %s", name)
		if cur, _, _, _ := s.snapshot(); cur == st {
			return
		}
		select {
		case <-h.signal:
		case <-deadline:
			cur, errText, _, _ := s.snapshot()
			h.t.Fatalf("server %s: still %s (%s), want %s", name, cur, errText, st)
		}
	}
}

// waitHistory waits until the server was announced in status st.
func (h *harness) waitHistory(name, st string) {
	h.t.Helper()
	deadline := time.After(waitTimeout)
	for !slices.Contains(h.history(name), st) {
		select {
		case <-h.signal:
		case <-deadline:
			h.t.Fatalf("server %s: never %s (%v)", name, st, h.history(name))
		}
	}
}

func (h *harness) history(name string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.states[name]...)
}

// recorder is a turn's item sink and asker.
type recorder struct {
	mu      sync.Mutex
	started []api.ThreadItem
	done    []api.ThreadItem
	asked   []api.McpServerElicitationRequestParams
	notes   []any
	answer  func(api.McpServerElicitationRequestParams) (json.RawMessage, error)
}

func (r *recorder) ItemStarted(_ context.Context, _ string, it api.ThreadItem) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.started = append(r.started, it)
}

func (r *recorder) ItemCompleted(_ context.Context, _ string, it api.ThreadItem) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.done = append(r.done, it)
}

func (r *recorder) Ask(_ context.Context, method string, params any) (json.RawMessage, error) {
	p := params.(api.McpServerElicitationRequestParams)
	if method != api.MethodMcpServerElicitationRequest {
		return nil, fmt.Errorf("unexpected method %s", method)
	}
	r.mu.Lock()
	r.asked = append(r.asked, p)
	answer := r.answer
	r.mu.Unlock()
	if answer == nil {
		return nil, fmt.Errorf("no answer")
	}
	return answer(p)
}

func (r *recorder) progress(params api.McpToolCallProgressNotification) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notes = append(r.notes, params)
}

func (r *recorder) turn() *Turn {
	return &Turn{ThreadID: "thr", TurnID: "turn", Items: r, Asker: r, Progress: r.progress}
}

func (r *recorder) lastDone(t *testing.T) *api.McpToolCallItem {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	require.NotEmpty(t, r.done)
	return r.done[len(r.done)-1].Body.(*api.McpToolCallItem)
}

// build registers the turn's MCP tools and returns the registry.
func (h *harness) build(turn *Turn) ([]registry.ConfiguredToolSpec, *registry.Registry) {
	b := registry.NewBuilder(registry.Config{})
	require.NoError(h.t, h.m.Register(b, turn))
	return b.Build()
}

// call dispatches one model call of name with args.
func call(t *testing.T, reg *registry.Registry, name, args string) registry.ResponseItem {
	t.Helper()
	out, err := reg.NewDispatcher(registry.DispatcherConfig{}).Dispatch(context.Background(),
		registry.Call{CallID: "call_" + name, Name: name, Payload: registry.FunctionPayload{Arguments: args}})
	require.NoError(t, err)
	return out
}

func specNames(specs []registry.ConfiguredToolSpec) []string {
	var out []string
	for _, s := range specs {
		if ns, ok := s.Spec.(registry.NamespaceSpec); ok {
			// An MCP server's namespace: its functions under their
			// qualified names.
			for _, f := range ns.Tools {
				out = append(out, ns.Name+nameDelimiter+f.Name)
			}
			continue
		}
		out = append(out, s.Spec.ToolName())
	}
	return out
}

// wallTimeLineRE is the header every MCP tool output starts with.
var wallTimeLineRE = regexp.MustCompile(`^Wall time: [0-9]+\.[0-9]{4} seconds\nOutput:`)

// body checks that an MCP tool's output to the model starts with its wall
// time and returns what follows: the structured text after the header's
// line, or the texts of the content items after the header's item, one a
// line.
func body(t *testing.T, o registry.Output) string {
	t.Helper()
	if o.Content == nil {
		require.Regexp(t, wallTimeLineRE, o.Text)
		_, rest, _ := strings.Cut(o.Text, "Output:\n")
		return rest
	}
	require.NotEmpty(t, o.Content)
	require.Regexp(t, wallTimeLineRE, o.Content[0].Text)
	texts := make([]string, 0, len(o.Content)-1)
	for _, c := range o.Content[1:] {
		texts = append(texts, c.Text)
	}
	return strings.Join(texts, "\n")
}
