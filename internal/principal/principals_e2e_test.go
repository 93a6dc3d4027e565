package principal_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apptest"
)

// createHTTPThread posts a thread and returns the response.
func createHTTPThread(t *testing.T, d *apptest.Daemon, token string, body map[string]any) (*http.Response, api.HTTPThread) {
	t.Helper()
	resp := d.Do(t, "POST", "/v1/threads", token, body)
	var th api.HTTPThread
	if resp.StatusCode == http.StatusCreated {
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&th))
	}
	return resp, th
}

// A principal's cwd and writable roots stay inside its workspace roots on
// every door: "/", the data directory, another principal's root and a
// symlink out of its own root are refused (403 over HTTP, -32602 over the
// websocket, an error result over /mcp: TestMCPPrincipals), naming the
// parameter and the roots; a thread started without a cwd gets the
// principal's root, created 0700 when it is the default one. The
// operator is not bounded.
func TestPrincipalWorkspaceRoots(t *testing.T) {
	p := apptest.StartPrincipals(t, `{"steps":[]}`)
	d := p.D
	require.NoError(t, os.Symlink("/etc", filepath.Join(p.CIRoot, "out")))
	sub := filepath.Join(p.CIRoot, "proj")
	require.NoError(t, os.Mkdir(sub, 0o700))

	// HTTP.
	for _, cwd := range []string{"/", p.DataDir, filepath.Join(p.DataDir, "rules"), p.BobRoot, filepath.Join(p.CIRoot, "out"), filepath.Join(sub, "..", "..")} {
		resp, _ := createHTTPThread(t, d, apptest.CIToken, map[string]any{"cwd": cwd})
		require.Equal(t, http.StatusForbidden, resp.StatusCode, cwd)
		var prob api.Problem
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&prob))
		require.Equal(t, api.ProblemForbidden, prob.Type)
		require.Contains(t, prob.Detail, `cwd "`)
		require.Contains(t, prob.Detail, "outside this principal's workspace roots ("+p.CIRoot+")")
	}
	resp, th := createHTTPThread(t, d, apptest.CIToken, nil)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Equal(t, p.CIRoot, th.Thread.Cwd, "no cwd: the principal's first root")
	resp, th = createHTTPThread(t, d, apptest.CIToken, map[string]any{"cwd": sub})
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Equal(t, sub, th.Thread.Cwd)

	// A thread whose directory was re-pointed out of the roots since is
	// refused at its next turn, not run there.
	moved := filepath.Join(p.CIRoot, "moved")
	require.NoError(t, os.Mkdir(moved, 0o700))
	resp, th = createHTTPThread(t, d, apptest.CIToken, map[string]any{"cwd": moved})
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.NoError(t, os.Remove(moved))
	require.NoError(t, os.Symlink("/etc", moved))
	resp = d.Do(t, "POST", "/v1/threads/"+th.Thread.ID+"/turns", apptest.CIToken, map[string]any{"input": []any{map[string]any{"type": "text", "text": "go"}}})
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	var prob api.Problem
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&prob))
	require.Contains(t, prob.Detail, `(resolved to "/etc") is outside this principal's workspace roots`)

	// A principal without roots gets a directory of its own, beside the
	// data directory (which sandboxed commands never see), 0700.
	resp, th = createHTTPThread(t, d, apptest.DevToken, nil)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	devRoot := p.DataDir + "-workspaces/dev"
	require.Equal(t, devRoot, th.Thread.Cwd)
	fi, err := os.Stat(devRoot)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
	resp, _ = createHTTPThread(t, d, apptest.DevToken, map[string]any{"cwd": p.CIRoot})
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "another principal's root")

	// The websocket, authenticated as the principal.
	ci := apptest.RPC(t, d.Addr, apptest.CIToken, nil)
	refused := func(method string, params map[string]any, contains string) {
		t.Helper()
		f := ci.CallRaw(method, params)
		require.NotNil(t, f.Error, "%s %v", method, params)
		require.Equal(t, -32602, f.Error.Code, f.Error.Message)
		require.Contains(t, f.Error.Message, contains)
	}
	for _, cwd := range []string{"/", p.DataDir, p.BobRoot, filepath.Join(p.CIRoot, "out", "ssl")} {
		refused("thread/start", map[string]any{"cwd": cwd}, "outside this principal's workspace roots ("+p.CIRoot+")")
	}
	var started struct {
		Cwd     string `json:"cwd"`
		Sandbox struct {
			Type string `json:"type"`
		} `json:"sandbox"`
		Thread struct {
			ID         string `json:"id"`
			Originator string `json:"originator"`
		} `json:"thread"`
	}
	require.NoError(t, json.Unmarshal(ci.Call("thread/start", map[string]any{}), &started))
	require.Equal(t, p.CIRoot, started.Cwd)
	require.Equal(t, "appserver-http/ci", started.Thread.Originator, "the principal's, not the client's name")
	id := started.Thread.ID
	input := []any{map[string]any{"type": "text", "text": "hi"}}
	refused("turn/start", map[string]any{"threadId": id, "input": input, "cwd": "/"}, `cwd "/" is outside`)
	refused("turn/start", map[string]any{"threadId": id, "input": input,
		"sandboxPolicy": map[string]any{"type": "workspaceWrite", "writableRoots": []string{"/etc"}}}, `sandboxPolicy.writableRoots[0] "/etc" is outside`)
	refused("turn/start", map[string]any{"threadId": id, "input": input, "sandboxPolicy": map[string]any{"type": "dangerFullAccess"}},
		`sandboxPolicy "danger-full-access" is beyond this principal's ceiling "workspace-write"`)
	refused("thread/resume", map[string]any{"threadId": id, "cwd": p.BobRoot}, "is outside")
	ci.Call("thread/name/set", map[string]any{"threadId": id, "name": "forkable"}) // a thread only started has nothing to fork
	refused("thread/fork", map[string]any{"threadId": id, "cwd": "/"}, "is outside")
	refused("thread/settings/update", map[string]any{"threadId": id, "cwd": p.DataDir}, "is outside")
	refused("thread/start", map[string]any{"runtimeWorkspaceRoots": []string{p.BobRoot}}, "runtimeWorkspaceRoots")
	refused("thread/start", map[string]any{"config": map[string]any{"default_permissions": ":danger-full-access"}},
		`config.default_permissions "danger-full-access" is beyond`)
	refused("skills/list", map[string]any{"cwds": []string{"/"}}, `cwds[0] "/" is outside`)
	refused("thread/shellCommand", map[string]any{"threadId": id, "command": "touch /tmp/x"}, "runs commands unsandboxed")
	for _, m := range []string{"command/exec", "mcpServer/tool/call"} {
		f := ci.CallRaw(m, map[string]any{"command": []string{"true"}, "server": "x", "tool": "y", "threadId": id})
		require.NotNil(t, f.Error, m)
		require.Contains(t, f.Error.Message, "is not available to principal \"ci\"")
	}

	// config/read shows a principal nothing of the other principals.
	var cfg struct {
		Config map[string]json.RawMessage `json:"config"`
	}
	require.NoError(t, json.Unmarshal(ci.Call("config/read", map[string]any{}), &cfg))
	require.NotContains(t, cfg.Config, "http_api")

	// The operator is not bounded.
	op := apptest.RPC(t, d.Addr, apptest.OperatorToken, nil)
	op.Call("thread/start", map[string]any{"cwd": "/"})
	require.NoError(t, json.Unmarshal(op.Call("config/read", map[string]any{}), &cfg))
	require.Contains(t, cfg.Config, "http_api")
}

// A principal over the websocket sees what it sees over HTTP: its own
// threads. Another principal's thread answers every method as a thread
// that does not exist, is not listed, and its broadcasts do not reach the
// principal's connection; the operator sees everything.
func TestPrincipalWebsocketVisibility(t *testing.T) {
	p := apptest.StartPrincipals(t, `{"steps":[]}`)
	d := p.D
	ci := apptest.RPC(t, d.Addr, apptest.CIToken, nil)
	bob := apptest.RPC(t, d.Addr, apptest.BobToken, nil)

	mine := apptest.StartThread(t, ci, map[string]any{"cwd": p.CIRoot})
	_, bobHTTP := createHTTPThread(t, d, apptest.BobToken, nil)
	bobs := apptest.StartThread(t, bob, map[string]any{"cwd": p.BobRoot})
	// thread/list shows a thread once a user message has started it.
	for _, u := range []struct {
		r  *apptest.Client
		id string
	}{{ci, mine}, {bob, bobHTTP.Thread.ID}, {bob, bobs}} {
		u.r.Call("turn/start", apptest.Input(u.id, "first"))
		u.r.Until("turn/completed")
	}
	const missing = "01a2007c-e7fe-75b3-9b2c-d4ca854a9857"

	input := []any{map[string]any{"type": "text", "text": "hi"}}
	for _, tc := range []struct {
		method string
		params func(id string) map[string]any
	}{
		{"thread/read", func(id string) map[string]any { return map[string]any{"threadId": id, "includeTurns": true} }},
		{"thread/resume", func(id string) map[string]any { return map[string]any{"threadId": id} }},
		{"thread/fork", func(id string) map[string]any { return map[string]any{"threadId": id} }},
		{"turn/start", func(id string) map[string]any { return map[string]any{"threadId": id, "input": input} }},
		{"thread/archive", func(id string) map[string]any { return map[string]any{"threadId": id} }},
		{"thread/unarchive", func(id string) map[string]any { return map[string]any{"threadId": id} }},
		{"thread/delete", func(id string) map[string]any { return map[string]any{"threadId": id} }},
		{"thread/name/set", func(id string) map[string]any { return map[string]any{"threadId": id, "name": "mine now"} }},
		{"thread/turns/list", func(id string) map[string]any { return map[string]any{"threadId": id} }},
		{"thread/items/list", func(id string) map[string]any { return map[string]any{"threadId": id} }},
		{"thread/items/read", func(id string) map[string]any {
			return map[string]any{"threadId": id, "turnId": missing, "itemIds": []string{"x"}}
		}},
		{"thread/searchOccurrences", func(id string) map[string]any { return map[string]any{"threadId": id, "searchTerm": "hi"} }},
		{"thread/readState/update", func(id string) map[string]any {
			return map[string]any{"threadId": id, "expectedRevision": "r", "operation": map[string]any{"type": "read"}}
		}},
		{"turn/interrupt", func(id string) map[string]any { return map[string]any{"threadId": id, "turnId": missing} }},
		{"thread/inject_items", func(id string) map[string]any {
			return map[string]any{"threadId": id, "items": []any{map[string]any{"type": "message", "role": "user", "content": "planted"}}}
		}},
	} {
		want := ci.CallRaw(tc.method, tc.params(missing))
		require.NotNil(t, want.Error, tc.method)
		for _, id := range []string{bobs, bobHTTP.Thread.ID} {
			f := ci.CallRaw(tc.method, tc.params(id))
			require.NotNil(t, f.Error, "%s of another principal's thread", tc.method)
			require.Equal(t, want.Error.Code, f.Error.Code, tc.method)
			require.Equal(t, strings.ReplaceAll(want.Error.Message, missing, id), f.Error.Message, "%s: another principal's thread reads as a missing one", tc.method)
		}
	}
	// Nothing of bob's changed.
	var read struct {
		Thread struct {
			Name *string `json:"name"`
		} `json:"thread"`
	}
	require.NoError(t, json.Unmarshal(bob.Call("thread/read", map[string]any{"threadId": bobs}), &read))
	require.Nil(t, read.Thread.Name)

	listed := func(r *apptest.Client, method string, params map[string]any) []string {
		t.Helper()
		var l struct {
			Data []json.RawMessage `json:"data"`
		}
		require.NoError(t, json.Unmarshal(r.Call(method, params), &l))
		var ids []string
		for _, raw := range l.Data {
			var id string
			if json.Unmarshal(raw, &id) == nil {
				ids = append(ids, id)
				continue
			}
			var v struct {
				ID     string `json:"id"`
				Thread struct {
					ID string `json:"id"`
				} `json:"thread"`
			}
			require.NoError(t, json.Unmarshal(raw, &v))
			ids = append(ids, v.ID+v.Thread.ID)
		}
		return ids
	}
	require.Equal(t, []string{mine}, listed(ci, "thread/list", map[string]any{}))
	// Search terms that hit only bob's threads find nothing for ci.
	bob.Call("thread/name/set", map[string]any{"threadId": bobs, "name": "bob's secret plan"})
	for _, method := range []string{"thread/search", "thread/search/stream"} {
		require.Empty(t, listed(ci, method, map[string]any{"searchTerm": "secret plan"}), method)
		require.Equal(t, []string{bobs}, listed(bob, method, map[string]any{"searchTerm": "secret plan"}), method)
	}
	require.ElementsMatch(t, []string{bobs, bobHTTP.Thread.ID}, listed(bob, "thread/list", map[string]any{}))
	require.NotContains(t, listed(ci, "thread/loaded/list", map[string]any{}), bobs)
	op := apptest.RPC(t, d.Addr, apptest.OperatorToken, nil)
	require.Subset(t, listed(op, "thread/list", map[string]any{}), []string{mine, bobs, bobHTTP.Thread.ID})

	// bob's thread/started and status broadcasts never reach ci.
	for _, f := range ci.Seen {
		require.NotContains(t, string(f.Params), bobs, "%s about bob's thread reached ci", f.Method)
		require.NotContains(t, string(f.Params), bobHTTP.Thread.ID, "%s about bob's thread reached ci", f.Method)
	}
	later := apptest.StartThread(t, bob, map[string]any{"cwd": p.BobRoot})
	apptest.StartThread(t, ci, map[string]any{"cwd": p.CIRoot}) // its own thread/started is the last ci reads
	for _, f := range ci.Seen {
		require.NotContains(t, string(f.Params), later, "%s about bob's thread reached ci", f.Method)
	}
	// The operator's connection hears them. Broadcasts about two threads
	// started on two connections may reach it in either order: bob's
	// thread/started goes out after bob's answer, racing ci's request.
	op.UntilFunc("thread/started of "+later, func(f apptest.Frame) bool {
		return f.Method == "thread/started" && strings.Contains(string(f.Params), later)
	})
}

// permissions on thread/start, resume, fork and turn/start is applied,
// never ignored: `:read-only` gives a read-only thread whose turn cannot
// write (the TUI 0.171.0 starts threads so), answered as the reference
// answers it (testdata/golden/reference/permissions.jsonl); an unknown or
// user-defined profile, or permissions with sandbox, is refused; a
// principal's ceiling holds for profiles too.
func TestPermissionProfiles(t *testing.T) {
	ref := referencePermissions(t)
	p := apptest.StartPrincipals(t, `{"steps":[
		{"match":{"user_text":"touch it"},"tool_calls":[`+apptest.ShellCall("call_touch", "touch made.txt")+`]},
		{"match":{"call_output":"call_touch"},"text":"done"}]}`, "-c", `approval_policy="never"`, "-c", `sandbox_mode="workspace-write"`)
	d := p.D
	r := apptest.RPC(t, d.Addr, apptest.OperatorToken, nil)
	cwd := apptest.RealTempDir(t)

	// The answers the reference gives, request for request.
	for _, id := range ref.order {
		params := ref.params[id]
		method := ref.methods[id]
		if method != "permissionProfile/list" && method != "thread/start" {
			continue
		}
		if _, ok := params["cwd"]; ok {
			params["cwd"] = cwd
		}
		got := r.CallRaw(method, params)
		want := ref.answers[id]
		if want.Error != nil {
			require.NotNil(t, got.Error, "%s %v", method, params)
			require.Equal(t, want.Error.Code, got.Error.Code, "%s %v: %s", method, params, got.Error.Message)
			if params["permissions"] == "custom" {
				// The reference's words do not name the profile; ours do.
				require.Contains(t, got.Error.Message, "`custom`")
			} else {
				require.Equal(t, want.Error.Message, got.Error.Message)
			}
			continue
		}
		require.Nil(t, got.Error, "%s %v: %+v", method, params, got.Error)
		if method == "permissionProfile/list" {
			require.JSONEq(t, string(want.Result), string(got.Result))
			continue
		}
		compareSettings(t, want.Result, got.Result, cwd)
	}

	// A `:read-only` thread's turn cannot write its cwd.
	var ro struct {
		Thread struct {
			ID string `json:"id"`
		} `json:"thread"`
	}
	require.NoError(t, json.Unmarshal(r.Call("thread/start", map[string]any{"cwd": cwd, "permissions": ":read-only", "sandbox": nil}), &ro))
	frames := apptest.Turn(t, r, apptest.Input(ro.Thread.ID, "touch it"), nil)
	require.NoFileExists(t, filepath.Join(cwd, "made.txt"), "the sandbox of a :read-only thread refused the write")
	exec := apptest.Find(frames, "item/completed")
	var failed bool
	for _, f := range exec {
		var it struct {
			Item struct {
				Type     string `json:"type"`
				Status   string `json:"status"`
				ExitCode *int   `json:"exitCode"`
			} `json:"item"`
		}
		require.NoError(t, json.Unmarshal(f.Params, &it))
		if it.Item.Type == "commandExecution" {
			failed = it.Item.Status == "failed" && it.Item.ExitCode != nil && *it.Item.ExitCode != 0
		}
	}
	require.True(t, failed, "the touch ran and failed")

	// Resume and fork apply permissions too; turn/start refuses what the
	// reference refuses.
	var resumed, forked struct {
		Sandbox struct {
			Type string `json:"type"`
		} `json:"sandbox"`
		Profile *struct {
			ID string `json:"id"`
		} `json:"activePermissionProfile"`
	}
	require.NoError(t, json.Unmarshal(r.Call("thread/fork", map[string]any{"threadId": ro.Thread.ID, "permissions": ":workspace"}), &forked))
	require.Equal(t, "workspaceWrite", forked.Sandbox.Type)
	require.Equal(t, ":workspace", forked.Profile.ID)
	require.NoError(t, json.Unmarshal(r.Call("thread/resume", map[string]any{"threadId": ro.Thread.ID, "sandbox": "read-only"}), &resumed))
	require.Equal(t, "readOnly", resumed.Sandbox.Type)
	require.Nil(t, resumed.Profile, "a sandbox mode chosen without a profile")
	for _, id := range ref.order {
		if ref.methods[id] != "turn/start" || ref.answers[id].Error == nil {
			continue
		}
		params := ref.params[id]
		params["threadId"] = ro.Thread.ID
		f := r.CallRaw("turn/start", params)
		require.NotNil(t, f.Error, "%v", params)
		require.Equal(t, ref.answers[id].Error.Code, f.Error.Code)
		require.Equal(t, ref.answers[id].Error.Message, f.Error.Message)
	}

	// A principal's ceiling (workspace-write) holds for profiles.
	ci := apptest.RPC(t, d.Addr, apptest.CIToken, nil)
	f := ci.CallRaw("thread/start", map[string]any{"permissions": ":danger-full-access"})
	require.NotNil(t, f.Error)
	require.Equal(t, -32602, f.Error.Code)
	require.Contains(t, f.Error.Message, `permissions "danger-full-access" is beyond this principal's ceiling "workspace-write"`)
	var profiles api.PermissionProfileListResult
	require.NoError(t, json.Unmarshal(ci.Call("permissionProfile/list", map[string]any{}), &profiles))
	allowed := map[string]bool{}
	for _, pr := range profiles.Data {
		allowed[pr.ID] = pr.Allowed
	}
	require.Equal(t, map[string]bool{":read-only": true, ":workspace": true, ":danger-full-access": false}, allowed)
	var started struct {
		Sandbox struct {
			Type string `json:"type"`
		} `json:"sandbox"`
	}
	require.NoError(t, json.Unmarshal(ci.Call("thread/start", map[string]any{"permissions": ":read-only"}), &started))
	require.Equal(t, "readOnly", started.Sandbox.Type)
}

// compareSettings holds a thread/start (or fork) answer to the
// reference's: the same sandbox, permission profile, approval policy and
// workspace roots (the reference's cwd is /home/dev/project).
func compareSettings(t *testing.T, want, got json.RawMessage, cwd string) {
	t.Helper()
	var w, g map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(want, &w))
	require.NoError(t, json.Unmarshal(got, &g))
	for _, k := range []string{"sandbox", "activePermissionProfile", "approvalPolicy", "approvalsReviewer"} {
		require.Contains(t, g, k)
		require.JSONEq(t, string(w[k]), string(g[k]), k)
	}
	for _, k := range []string{"cwd", "runtimeWorkspaceRoots"} {
		require.JSONEq(t, strings.ReplaceAll(string(w[k]), "/home/dev/project", cwd), string(g[k]), k)
	}
}

// permissionsCapture is testdata/golden/reference/permissions.jsonl by
// request id: what was sent and what was answered.
type permissionsCapture struct {
	order   []string
	methods map[string]string
	params  map[string]map[string]any
	answers map[string]apptest.Frame
}

func referencePermissions(t *testing.T) permissionsCapture {
	t.Helper()
	c := permissionsCapture{methods: map[string]string{}, params: map[string]map[string]any{}, answers: map[string]apptest.Frame{}}
	for _, l := range apptest.ReferenceFrames(t, "permissions.jsonl") {
		var f apptest.Frame
		require.NoError(t, json.Unmarshal(l.Frame, &f))
		id := string(f.ID)
		if id == "" {
			continue
		}
		if l.Dir == "send" {
			var p map[string]any
			require.NoError(t, json.Unmarshal(f.Params, &p))
			c.order = append(c.order, id)
			c.methods[id], c.params[id] = f.Method, p
			continue
		}
		if f.Method == "" {
			c.answers[id] = f
		}
	}
	require.NotEmpty(t, c.order)
	return c
}
