package mcp_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
	"github.com/appserver/appserver/internal/mcp/mcptest"
)

// resumeStatuses are the statuses (server and status) of the
// mcpServer/startupStatus/updated frames for threadID among frames.
func resumeStatuses(t *testing.T, frames []json.RawMessage, threadID string) []string {
	t.Helper()
	out := []string{}
	for _, raw := range frames {
		var f struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		require.NoError(t, json.Unmarshal(raw, &f))
		if f.Method != "mcpServer/startupStatus/updated" {
			continue
		}
		var p struct {
			ThreadID string `json:"threadId"`
			Name     string `json:"name"`
			Status   string `json:"status"`
		}
		require.NoError(t, json.Unmarshal(f.Params, &p))
		require.Equal(t, threadID, p.ThreadID)
		out = append(out, p.Name+" "+p.Status)
	}
	return out
}

// refResumeStatuses are resumeStatuses of what a client of the capture
// (dir "recv1" or "recv2") got before the answer to its thread/resume.
func refResumeStatuses(t *testing.T, name, dir string) []string {
	t.Helper()
	var frames []json.RawMessage
	threadID := ""
	for _, l := range apptest.ReferenceFrames(t, name) {
		if l.Dir == "send"+dir[len("recv"):] {
			var f struct {
				Method string `json:"method"`
				Params struct {
					ThreadID string `json:"threadId"`
				} `json:"params"`
			}
			require.NoError(t, json.Unmarshal(l.Frame, &f))
			if f.Method == "thread/resume" {
				threadID, frames = f.Params.ThreadID, nil
			}
			continue
		}
		if l.Dir != dir || threadID == "" {
			continue
		}
		var resp struct {
			Result struct {
				Thread struct{ ID string } `json:"thread"`
			} `json:"result"`
		}
		require.NoError(t, json.Unmarshal(l.Frame, &resp))
		if resp.Result.Thread.ID == threadID {
			return resumeStatuses(t, frames, threadID)
		}
		frames = append(frames, l.Frame)
	}
	t.Fatalf("no thread/resume answer for %s in %s", dir, name)
	return nil
}

// As codex 0.171.0 (mcp_status.jsonl, mcp_status_resume.jsonl): a
// thread/resume that loads a thread from the store tells the resuming
// client the start-up of the thread's MCP servers, before its answer; a
// resume of a thread already loaded tells nothing.
func TestMCPStatusOnResumeMatchesReference(t *testing.T) {
	require.Equal(t, []string{}, refResumeStatuses(t, "mcp_status.jsonl", "recv2"), "a loaded thread, another client")
	require.Equal(t, []string{}, refResumeStatuses(t, "mcp_status.jsonl", "recv1"), "a loaded thread, its own client")
	require.Equal(t, []string{"my-srv starting", "my-srv ready"}, refResumeStatuses(t, "mcp_status_resume.jsonl", "recv1"), "a thread loaded by the resume")
	require.Equal(t, []string{}, refResumeStatuses(t, "mcp_status_resume.jsonl", "recv2"), "the same thread resumed again")

	bin, err := mcptest.Build()
	require.NoError(t, err)
	fake := apptest.StartFake(t, `{"steps":[],"exhausted_text":"ok"}`)
	args := append(append([]string{"--data-dir", t.TempDir()}, apptest.FakeArgs(fake, "responses")...),
		"-c", fmt.Sprintf(`mcp_servers.my-srv={command=%q}`, bin))
	start := func() (*apptest.Daemon, *apptest.Client) {
		d := apptest.Start(t, args...)
		r := d.RPC(t)
		waitConnected(t, r, 1)
		return d, r
	}
	// resume resumes the thread with a client of its own and returns the
	// statuses it got up to the answer.
	resume := func(d *apptest.Daemon, threadID string) []string {
		c := d.RPC(t)
		c.Seen = nil
		c.Call("thread/resume", map[string]any{"threadId": threadID})
		var frames []json.RawMessage
		for _, f := range c.Seen {
			frames = append(frames, mustFrame(t, f))
		}
		return resumeStatuses(t, frames, threadID)
	}

	d, r := start()
	threadID := apptest.StartThread(t, r, nil)
	apptest.RunTurn(t, r, threadID, "hello")
	require.Equal(t, []string{}, resume(d, threadID), "a loaded thread")
	d.Stop(t)

	d, _ = start()
	require.Equal(t, []string{"my-srv starting", "my-srv ready"}, resume(d, threadID), "a thread loaded by the resume")
	require.Equal(t, []string{}, resume(d, threadID), "the same thread resumed again")
}
