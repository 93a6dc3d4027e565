package mcp

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/config"
	"github.com/appserver/appserver/internal/registry"
)

// A turn started while a server is on its first start waits for it (up
// to StartupWait) and is offered its tools, as codex 0.171.0 offers those
// of a server that is ready within its wait: the first turn on a fresh
// daemon does not go without them.
func TestTurnWaitsForServerOnFirstStart(t *testing.T) {
	h := newHarness(t, map[string]config.MCPServer{"late": stdioServer(t, "-delay", "300ms")},
		func(c *Config) { c.StartupWait = 30 * time.Second })
	specs, _ := h.build(&Turn{})
	require.Contains(t, specNames(specs), "mcp__late__echo")
}

// The wait ends at StartupWait: a server that never answers initialize
// does not hold the turn back past it, and the turn gets the tools of the
// servers that are ready.
func TestTurnStopsWaitingAtStartupWait(t *testing.T) {
	h := newHarness(t, map[string]config.MCPServer{"ok": stdioServer(t), "stuck": stdioServer(t, "-hang")},
		func(c *Config) { c.StartupWait = 100 * time.Millisecond })
	h.waitState("ok", StateReady)
	specs, _ := h.build(&Turn{})
	names := specNames(specs)
	require.Contains(t, names, "mcp__ok__echo")
	for _, n := range names {
		require.NotContains(t, n, "stuck")
	}
}

// A server the thread turned off is not waited for.
func TestTurnDoesNotWaitForServerTurnedOff(t *testing.T) {
	h := newHarness(t, map[string]config.MCPServer{"stuck": stdioServer(t, "-hang")},
		func(c *Config) { c.StartupWait = time.Hour })
	built := make(chan []registry.ConfiguredToolSpec, 1)
	go func() {
		specs, _ := h.build(&Turn{Disabled: map[string]bool{"stuck": true}})
		built <- specs
	}()
	select {
	case specs := <-built:
		require.Empty(t, specs, "no server on: no resource tool either")
	case <-time.After(20 * time.Second): // guards a hang only
		t.Fatal("the turn waited for a server it turned off")
	}
}

// Server and tool names reach the model as codex 0.171.0 names them: '-'
// and other characters outside [A-Za-z0-9_] become '_' in the namespace
// and in the tool's name, and calls come back under those names.
func TestToolNamesNormalized(t *testing.T) {
	sc := stdioServer(t)
	h := newHarness(t, map[string]config.MCPServer{"my-srv": sc})
	h.waitState("my-srv", StateReady)
	specs, reg := h.build(&Turn{})
	require.Contains(t, specNames(specs), "mcp__my_srv__echo")
	out := call(t, reg, "mcp__my_srv__echo", `{"text":"hi"}`)
	require.True(t, out.Output.Succeeded(), out.Output.Text)
	require.Contains(t, body(t, out.Output), "hi")
}

// A new thread is told the start-up of each server its config leaves on,
// with its id, as codex 0.171.0 tells it: "starting", then "ready" (at
// once for a server that is up, when it is up for one still starting); a
// server the thread turns off is not reported, and a thread with every
// server off hears nothing.
func TestThreadStartedReportsServers(t *testing.T) {
	h := newHarness(t, map[string]config.MCPServer{"up": stdioServer(t), "late": stdioServer(t, "-delay", "1500ms")},
		func(c *Config) { c.StartupWait = -1 })
	h.waitState("up", StateReady)
	heard := make(chan string, 16)
	tell := func(thread string) func(api.McpServerStartupStatusUpdatedNotification) {
		return func(n api.McpServerStartupStatusUpdatedNotification) {
			require.NotNil(t, n.ThreadID)
			require.Equal(t, thread, *n.ThreadID)
			heard <- thread + " " + n.Name + " " + n.Status
		}
	}
	h.m.ThreadStarted("t1", nil, tell("t1"))
	h.m.ThreadStarted("t2", map[string]json.RawMessage{"mcp_servers.late.enabled": json.RawMessage("false")}, tell("t2"))
	h.m.ThreadStarted("t3", map[string]json.RawMessage{"mcp_servers": json.RawMessage("{}")}, tell("t3"))
	var got []string
	for len(got) < 5 {
		select {
		case s := <-heard:
			got = append(got, s)
		case <-time.After(20 * time.Second): // guards a hang only
			t.Fatalf("heard only %v", got)
		}
	}
	require.Equal(t, []string{"t1 late starting", "t1 up starting", "t1 up ready", "t2 up starting", "t2 up ready"}, got[:5],
		"each thread hears of its servers in order, a server still starting when it is up")
	h.waitState("late", StateReady)
	select {
	case s := <-heard:
		require.Equal(t, "t1 late ready", s)
	case <-time.After(20 * time.Second): // guards a hang only
		t.Fatal("t1 was not told the late server is ready")
	}
	select {
	case s := <-heard:
		t.Fatalf("unexpected %s", s)
	default:
	}
}
