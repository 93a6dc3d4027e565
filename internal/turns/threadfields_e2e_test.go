package turns_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
)

// threadFields is what TestThreadFieldsMatchReference compares of a thread
// object.
type threadFields struct {
	GitInfo *struct {
		Sha       *string `json:"sha"`
		Branch    *string `json:"branch"`
		OriginURL *string `json:"originUrl"`
	} `json:"gitInfo"`
	ReasoningEffort *string `json:"reasoningEffort"`
	Environments    []struct {
		EnvironmentID         string   `json:"environmentId"`
		Cwd                   string   `json:"cwd"`
		RuntimeWorkspaceRoots []string `json:"runtimeWorkspaceRoots"`
	} `json:"environments"`
}

// gitRepo makes a Git repository as review_context_capture.js's project:
// branch main, one commit, origin https://example.com/demo.git, one
// uncommitted change. It returns its directory and HEAD's commit.
func gitRepo(t *testing.T) (string, string) {
	t.Helper()
	dir := t.TempDir()
	git := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=dev", "GIT_AUTHOR_EMAIL=dev@example.com",
			"GIT_COMMITTER_NAME=dev", "GIT_COMMITTER_EMAIL=dev@example.com")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
		return strings.TrimSpace(string(out))
	}
	git("init", "-q", "-b", "main")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "calc.py"), []byte("def div(a, b):\n    return a\n"), 0o644))
	git("add", ".")
	git("commit", "-qm", "init")
	git("remote", "add", "origin", "https://example.com/demo.git")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "calc.py"), []byte("def div(a, b):\n    return a / b\n"), 0o644))
	return dir, git("rev-parse", "HEAD")
}

// Thread objects against review_context.jsonl (codex 0.171.0): every
// thread has the local environment in its cwd; gitInfo is null until the
// thread's first turn, then names the cwd's repository (commit, branch,
// origin URL); a thread whose config sets model_reasoning_effort reports
// that effort, on thread/start and later.
func TestThreadFieldsMatchReference(t *testing.T) {
	const refCwd = "/home/dev/project"
	const refSha = "0123456789abcdef0123456789abcdef01234567"
	sent := map[string]string{}
	var refFields []threadFields // per thread object answered, in order
	var refMethods []string
	for _, l := range apptest.ReferenceFrames(t, "review_context.jsonl") {
		var f apptest.Frame
		require.NoError(t, json.Unmarshal(l.Frame, &f))
		if l.Dir == "send" {
			sent[string(f.ID)] = f.Method
			continue
		}
		m := sent[string(f.ID)]
		if l.Dir != "recv" || f.Method != "" || (m != "thread/start" && m != "thread/read" && m != "thread/list") {
			continue
		}
		var res struct {
			Thread *threadFields  `json:"thread"`
			Data   []threadFields `json:"data"`
		}
		require.NoError(t, json.Unmarshal(f.Result, &res))
		if res.Thread != nil {
			res.Data = []threadFields{*res.Thread}
		}
		for _, th := range res.Data {
			refFields = append(refFields, th)
			refMethods = append(refMethods, m)
		}
	}
	require.Equal(t, []string{"thread/start", "thread/list", "thread/list", "thread/read", "thread/start", "thread/read"}, refMethods, "the capture")

	fake := apptest.StartFake(t, `{"steps":[{"text":"ok 1"},{"text":"ok 2"}]}`)
	d := apptest.Start(t, append([]string{"--data-dir", t.TempDir()}, apptest.FakeArgs(fake, "responses")...)...)
	r := d.RPC(t)
	dir, sha := gitRepo(t)
	var got []threadFields
	call := func(method string, params map[string]any) json.RawMessage {
		raw := r.Call(method, params)
		var res struct {
			Thread *threadFields  `json:"thread"`
			Data   []threadFields `json:"data"`
		}
		require.NoError(t, json.Unmarshal(raw, &res))
		if res.Thread != nil {
			res.Data = []threadFields{*res.Thread}
		}
		got = append(got, res.Data...)
		return raw
	}
	first := apptest.Decode[struct {
		Thread struct {
			ID string `json:"id"`
		} `json:"thread"`
	}](t, call("thread/start", map[string]any{"cwd": dir})).Thread.ID
	r.Until("thread/started")
	apptest.RunTurn(t, r, first, "hello there")
	// Listed by cwd: the capture's daemon had no other thread.
	call("thread/list", map[string]any{"limit": 10, "cwd": dir})
	call("thread/list", map[string]any{"limit": 10, "cwd": dir, "searchTerm": "hello"})
	call("thread/read", map[string]any{"threadId": first})
	second := apptest.Decode[struct {
		Thread struct {
			ID string `json:"id"`
		} `json:"thread"`
		ReasoningEffort *string `json:"reasoningEffort"`
	}](t, call("thread/start", map[string]any{"cwd": dir, "config": map[string]any{"model_reasoning_effort": "high"}}))
	require.NotNil(t, second.ReasoningEffort)
	require.Equal(t, "high", *second.ReasoningEffort)
	r.Until("thread/started")
	apptest.RunTurn(t, r, second.Thread.ID, "hello there")
	call("thread/read", map[string]any{"threadId": second.Thread.ID})

	// The same fields, the capture's paths and commit standing for ours.
	norm := func(fs []threadFields, cwd, commit string) string {
		b, err := json.Marshal(fs)
		require.NoError(t, err)
		return strings.NewReplacer(cwd, "CWD", commit, "SHA").Replace(string(b))
	}
	require.JSONEq(t, norm(refFields, refCwd, refSha), norm(got, dir, sha))

	// The effort is the thread's: its model requests carry it.
	reqs := fake.Requests()
	require.Len(t, reqs, 2)
	var body struct {
		Reasoning *struct {
			Effort string `json:"effort"`
		} `json:"reasoning"`
	}
	require.NoError(t, reqs[1].Decode(&body))
	require.NotNil(t, body.Reasoning)
	require.Equal(t, "high", body.Reasoning.Effort)
}

// A thread's config sets its own auto-compaction limit and reasoning
// summary, as the reference applies those keys per thread; a value of the
// wrong kind is refused.
func TestThreadConfigModelKeys(t *testing.T) {
	fake := apptest.StartFake(t, `{"steps":[
		{"match":{"user_text":"first question"},"text":"first answer","usage":{"input_tokens":400,"output_tokens":100,"total_tokens":500}},
		{"match":{"user_text":"handoff note"},"text":"SUMMARY-1"},
		{"text":"after compaction"}]}`)
	d := apptest.Start(t, append([]string{"--data-dir", t.TempDir()}, apptest.FakeArgs(fake, "responses")...)...)
	r := d.RPC(t)
	for _, bad := range []map[string]any{
		{"model_auto_compact_token_limit": "many"},
		{"model_reasoning_effort": "extreme"},
		{"model_reasoning_summary": true},
	} {
		code, msg := r.CallError("thread/start", map[string]any{"cwd": t.TempDir(), "config": bad})
		require.Equal(t, -32600, code, "%v: %s", bad, msg)
	}
	id := apptest.StartThread(t, r, map[string]any{"config": map[string]any{
		"model_auto_compact_token_limit": 100, "model_reasoning_summary": "detailed",
	}})
	apptest.RunTurn(t, r, id, "first question")
	res := apptest.RunTurn(t, r, id, "second question")
	require.Equal(t, "completed", res.Turn.Status)
	reqs := fake.Requests()
	require.Equal(t, 3, len(reqs), "500 tokens are past the thread's limit of 100: the second turn compacts first")
	require.Contains(t, string(reqs[1].Body), "handoff note")
	var body struct {
		Reasoning *struct {
			Summary string `json:"summary"`
		} `json:"reasoning"`
	}
	require.NoError(t, reqs[0].Decode(&body))
	require.NotNil(t, body.Reasoning)
	require.Equal(t, "detailed", body.Reasoning.Summary)
}
