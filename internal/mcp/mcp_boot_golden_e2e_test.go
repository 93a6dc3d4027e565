package mcp_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
	"github.com/appserver/appserver/internal/mcp/mcptest"
)

// bootThreads are the capture's threads (mcp_boot_capture.js): the
// thread/start request id, its label, its config and the servers it
// leaves on.
var bootThreads = []struct {
	id      string
	label   string
	config  map[string]any
	servers []string
}{
	{"10", "A", nil, []string{"everything", "my-srv"}},
	{"20", "B", map[string]any{"mcp_servers.my-srv.enabled": false}, []string{"everything"}},
	{"30", "C", map[string]any{"mcp_servers.my-srv.enabled": false, "mcp_servers.everything.enabled": false}, nil},
}

// bootStatuses groups mcpServer/startupStatus/updated frames by thread
// label and server, in order, each as its params with the thread's id
// replaced by its label.
func bootStatuses(t *testing.T, frames []json.RawMessage, labels map[string]string) map[string]map[string][]string {
	t.Helper()
	out := map[string]map[string][]string{}
	for _, raw := range frames {
		var f struct {
			Method string         `json:"method"`
			Params map[string]any `json:"params"`
		}
		require.NoError(t, json.Unmarshal(raw, &f))
		if f.Method != "mcpServer/startupStatus/updated" {
			continue
		}
		id, _ := f.Params["threadId"].(string)
		label, ok := labels[id]
		require.True(t, ok, "a status of no thread of the run: %s", raw)
		f.Params["threadId"] = label
		b, err := json.Marshal(f.Params)
		require.NoError(t, err)
		name := f.Params["name"].(string)
		if out[label] == nil {
			out[label] = map[string][]string{}
		}
		out[label][name] = append(out[label][name], string(b))
	}
	return out
}

// bootTools is the MCP part of a request's tools, sorted (the order of
// the tools is not compared): the resource tools and each mcp__ namespace
// with its description and its functions' names.
func bootTools(t *testing.T, tools []json.RawMessage) []string {
	t.Helper()
	var out []string
	for _, raw := range tools {
		var tool struct {
			Type, Name, Description string
			Tools                   []struct{ Name string }
		}
		require.NoError(t, json.Unmarshal(raw, &tool))
		switch {
		case tool.Type == "namespace" && strings.HasPrefix(tool.Name, "mcp__"):
			var names []string
			for _, f := range tool.Tools {
				names = append(names, f.Name)
			}
			out = append(out, fmt.Sprintf("%s %q %v", tool.Name, tool.Description, names))
		case strings.Contains(tool.Name, "mcp"):
			out = append(out, tool.Name)
		}
	}
	slices.Sort(out)
	return out
}

// refBootTools is bootTools of the capture's summary of a request (a
// tool's name, or a namespace as {namespace, description, tools}).
func refBootTools(t *testing.T, tools []json.RawMessage) []string {
	t.Helper()
	var out []string
	for _, raw := range tools {
		var name string
		if json.Unmarshal(raw, &name) == nil {
			if strings.Contains(name, "mcp") {
				out = append(out, name)
			}
			continue
		}
		var ns struct {
			Namespace, Description string
			Tools                  []string
		}
		require.NoError(t, json.Unmarshal(raw, &ns))
		if strings.HasPrefix(ns.Namespace, "mcp__") {
			out = append(out, fmt.Sprintf("%s %q %v", ns.Namespace, ns.Description, ns.Tools))
		}
	}
	slices.Sort(out)
	return out
}

// A daemon with two MCP servers (one named with a '-'), against a capture
// of codex 0.171.0 configured with the same servers: each new thread is
// told the start-up of the servers its config leaves on
// (mcpServer/startupStatus/updated with its id: starting, then ready), a
// thread that turns a server off hears nothing of it and is not offered
// its tools, a thread with every server off gets no MCP tool and no
// resource tool, and the servers' tools reach the model under the
// reference's names (namespace mcp__my_srv, get_sum), described by the
// server's instructions, the URL-elicitation tool included. A fork is told
// its servers' start-up as a started thread is.
func TestMCPBootMatchesReference(t *testing.T) {
	everything := mcptest.Everything(t)
	bin, err := mcptest.Build()
	require.NoError(t, err)

	var refFrames []json.RawMessage
	refLabels := map[string]string{}
	for _, l := range apptest.ReferenceFrames(t, "mcp_boot_turns.jsonl") {
		if l.Dir != "recv" {
			continue
		}
		refFrames = append(refFrames, l.Frame)
		var resp struct {
			ID     json.RawMessage `json:"id"`
			Result struct {
				Thread struct{ ID string } `json:"thread"`
			} `json:"result"`
		}
		require.NoError(t, json.Unmarshal(l.Frame, &resp))
		for _, th := range bootThreads {
			if string(resp.ID) == th.id {
				refLabels[resp.Result.Thread.ID] = th.label
			}
		}
	}
	require.Len(t, refLabels, 3)
	want := bootStatuses(t, refFrames, refLabels)
	data, err := os.ReadFile(filepath.Join("testdata", "golden", "reference", "mcp_boot_model.json"))
	require.NoError(t, err)
	var refModel []struct {
		Thread string            `json:"thread"`
		Tools  []json.RawMessage `json:"tools"`
	}
	require.NoError(t, json.Unmarshal(data, &refModel))
	require.Len(t, refModel, 3)

	fake := apptest.StartFake(t, `{"steps":[
		{"match":{"user_text":"hello A"},"text":"ok"},
		{"match":{"user_text":"hello B"},"text":"ok"},
		{"match":{"user_text":"hello C"},"text":"ok"}]}`)
	d := apptest.Start(t, append(append([]string{"--data-dir", t.TempDir()}, apptest.FakeArgs(fake, "responses")...),
		"-c", fmt.Sprintf(`mcp_servers.my-srv={command=%q}`, bin),
		"-c", fmt.Sprintf(`mcp_servers.everything={command=%q, args=["stdio"], startup_timeout_sec=60}`, everything))...)
	r := d.RPC(t)
	waitConnected(t, r, 2)

	var frames []json.RawMessage
	labels := map[string]string{}
	read := func(done func() bool) {
		for _, f := range r.Seen {
			frames = append(frames, mustFrame(t, f))
		}
		r.Seen = nil
		deadline := time.Now().Add(30 * time.Second)
		for !done() {
			require.True(t, time.Now().Before(deadline), "waited in vain")
			f, err := r.Read(20 * time.Second)
			require.NoError(t, err)
			frames = append(frames, mustFrame(t, f))
		}
	}
	seen := func(method, threadID string, pred func(map[string]any) bool) bool {
		for _, raw := range frames {
			var f struct {
				Method string         `json:"method"`
				Params map[string]any `json:"params"`
			}
			require.NoError(t, json.Unmarshal(raw, &f))
			if f.Method == method && f.Params["threadId"] == threadID && pred(f.Params) {
				return true
			}
		}
		return false
	}
	for _, th := range bootThreads {
		r.Seen = nil
		params := map[string]any{"sandbox": "workspace-write", "approvalPolicy": "on-request"}
		if th.config != nil {
			params["config"] = th.config
		}
		id := apptest.StartThread(t, r, params)
		labels[id] = th.label
		read(func() bool {
			for _, name := range th.servers {
				if !seen("mcpServer/startupStatus/updated", id, func(p map[string]any) bool { return p["name"] == name && p["status"] != "starting" }) {
					return false
				}
			}
			return true
		})
		r.Call("turn/start", apptest.Input(id, "hello "+th.label))
		read(func() bool { return seen("turn/completed", id, func(map[string]any) bool { return true }) })
	}
	require.Equal(t, want, bootStatuses(t, frames, labels), "the start-up statuses per thread and server")

	// A fork is a new thread: it is told its servers' start-up as well.
	var a string
	for id, label := range labels {
		if label == "A" {
			a = id
		}
	}
	var forked struct {
		Thread struct{ ID string } `json:"thread"`
	}
	require.NoError(t, json.Unmarshal(r.Call("thread/fork", map[string]any{"threadId": a}), &forked))
	frames = nil
	read(func() bool {
		return seen("mcpServer/startupStatus/updated", forked.Thread.ID, func(p map[string]any) bool { return p["name"] == "everything" && p["status"] == "ready" }) &&
			seen("mcpServer/startupStatus/updated", forked.Thread.ID, func(p map[string]any) bool { return p["name"] == "my-srv" && p["status"] == "ready" })
	})

	reqs := fake.Requests()
	require.Len(t, reqs, 3)
	for i, req := range reqs {
		var body struct {
			Tools []json.RawMessage `json:"tools"`
		}
		require.NoError(t, req.Decode(&body))
		require.Equal(t, refBootTools(t, refModel[i].Tools), bootTools(t, body.Tools), "the MCP tools offered to thread %s", refModel[i].Thread)
	}
}

// waitConnected waits until mcpServerStatus/list reports n servers, all
// connected.
func waitConnected(t *testing.T, r *apptest.Client, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var st struct {
			Data []struct{ RuntimeStatus string } `json:"data"`
		}
		require.NoError(t, json.Unmarshal(r.Call("mcpServerStatus/list", map[string]any{}), &st))
		connected := 0
		for _, s := range st.Data {
			if s.RuntimeStatus == "connected" {
				connected++
			}
		}
		if len(st.Data) == n && connected == n {
			return
		}
		require.True(t, time.Now().Before(deadline), "the MCP servers did not connect")
		time.Sleep(50 * time.Millisecond)
	}
}

// mustFrame is a notification or request frame as the wire carries it.
func mustFrame(t *testing.T, f apptest.Frame) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(map[string]any{"method": f.Method, "params": f.Params})
	require.NoError(t, err)
	return b
}
