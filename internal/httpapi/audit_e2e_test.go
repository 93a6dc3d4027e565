package httpapi_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apptest"
	"github.com/appserver/appserver/internal/store/pgtest"
)

// auditOf GETs the audit log with query as token and returns every entry
// of its pages.
func auditOf(t *testing.T, d *apptest.Daemon, token string, query url.Values) []api.HTTPAuditEntry {
	t.Helper()
	var all []api.HTTPAuditEntry
	for {
		page := apptest.GetJSON[api.HTTPAuditList](t, d, "/v1/audit?"+query.Encode(), token)
		all = append(all, page.Data...)
		if page.NextCursor == nil {
			return all
		}
		query.Set("cursor", *page.NextCursor)
	}
}

func kindsOf(es []api.HTTPAuditEntry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Kind
	}
	return out
}

func byKind(t *testing.T, es []api.HTTPAuditEntry, kind string) api.HTTPAuditEntry {
	t.Helper()
	i := slices.IndexFunc(es, func(e api.HTTPAuditEntry) bool { return e.Kind == kind })
	require.GreaterOrEqual(t, i, 0, "no %s entry in %v", kind, kindsOf(es))
	return es[i]
}

// Real actions leave their entries, on both stores: an approval (who
// answered it, on which connection), the command it let run with its
// decision path, a configuration write (the key, not its value) and a
// thread deletion. A principal reads its own entries only, the operator
// every one; the log pages, filters and exports as JSON Lines.
func TestAuditLog(t *testing.T) {
	for name, extra := range map[string][]string{
		"embedded": nil,
		"postgres": {"--database-url", pgtest.URL(t), "--migrate"},
	} {
		t.Run(name, func(t *testing.T) {
			p := apptest.StartPrincipals(t, apptest.RunScript, extra...)
			d := p.D
			before := time.Now().UTC()

			ci := apptest.RPC(t, d.Addr, apptest.CIToken, nil)
			thread := apptest.StartThread(t, ci, apptest.ApprovalThread(p.CIRoot))
			frames := apptest.Turn(t, ci, apptest.Input(thread, "run it"), func(apptest.Frame) any { return apptest.Accept })
			require.Equal(t, 1, apptest.Runs(t, p.CIRoot))
			var turn struct {
				Turn struct {
					ID string `json:"id"`
				} `json:"turn"`
			}
			require.NoError(t, json.Unmarshal(apptest.Find(frames, "turn/completed")[0].Params, &turn))
			ci.Call("config/value/write", map[string]any{"keyPath": "model", "value": "secret-model-name", "mergeStrategy": "replace"})
			resp := d.Do(t, http.MethodDelete, "/v1/threads/"+thread, apptest.CIToken, nil)
			require.Equal(t, http.StatusNoContent, resp.StatusCode)

			var all []api.HTTPAuditEntry
			require.Eventually(t, func() bool {
				all = auditOf(t, d, apptest.OperatorToken, url.Values{})
				return len(all) >= 4
			}, 20*time.Second, 20*time.Millisecond, "entries: %v", kindsOf(all))
			require.ElementsMatch(t, []string{"approval", "tool_call", "config_write", "thread_delete"}, kindsOf(all))
			for i, e := range all {
				require.NotNil(t, e.Principal, "%s", e.Kind)
				require.Equal(t, "ci", *e.Principal, "%s", e.Kind)
				require.NotEmpty(t, e.Node, "%s", e.Kind)
				at, err := time.Parse(time.RFC3339Nano, e.At)
				require.NoError(t, err)
				require.False(t, at.Before(before.Truncate(time.Second)), "%s at %s", e.Kind, e.At)
				if i > 0 {
					require.Greater(t, e.Seq, all[i-1].Seq)
				}
			}

			approval := byKind(t, all, "approval")
			require.Regexp(t, `^codex-tui#\d+$`, approval.Client, "the connection that answered")
			require.Equal(t, thread, *approval.ThreadID)
			require.Equal(t, turn.Turn.ID, *approval.TurnID)
			var ad struct {
				Method   string          `json:"method"`
				Decision string          `json:"decision"`
				Request  json.RawMessage `json:"request"`
			}
			require.NoError(t, json.Unmarshal(approval.Detail, &ad))
			require.Equal(t, "item/commandExecution/requestApproval", ad.Method)
			require.Equal(t, "accept", ad.Decision)
			require.Contains(t, string(ad.Request), "runs.txt")

			call := byKind(t, all, "tool_call")
			require.Equal(t, thread, *call.ThreadID)
			require.Equal(t, turn.Turn.ID, *call.TurnID)
			var cd struct {
				Tool           string          `json:"tool"`
				CallID         string          `json:"callId"`
				Command        []string        `json:"command"`
				ApprovalPolicy string          `json:"approvalPolicy"`
				SandboxPolicy  string          `json:"sandboxPolicy"`
				Action         string          `json:"action"`
				Sandboxed      bool            `json:"sandboxed"`
				Decision       json.RawMessage `json:"decision"`
				Status         string          `json:"status"`
				ExitCode       *int            `json:"exitCode"`
			}
			require.NoError(t, json.Unmarshal(call.Detail, &cd))
			require.Equal(t, "shell_command", cd.Tool)
			require.Equal(t, "call_run", cd.CallID)
			require.Contains(t, slices.Concat(cd.Command), "echo run >> runs.txt")
			require.Equal(t, "untrusted", cd.ApprovalPolicy)
			require.Equal(t, "workspaceWrite", cd.SandboxPolicy)
			require.Equal(t, "needs-approval", cd.Action)
			require.True(t, cd.Sandboxed)
			require.JSONEq(t, `"accept"`, string(cd.Decision))
			require.Equal(t, "completed", cd.Status)
			require.Equal(t, 0, *cd.ExitCode)

			write := byKind(t, all, "config_write")
			require.Regexp(t, `^codex-tui#\d+$`, write.Client)
			require.Nil(t, write.ThreadID)
			require.JSONEq(t, `{"method":"config/value/write","keys":["model"]}`, string(write.Detail))
			require.NotContains(t, string(write.Detail), "secret-model-name", "values are not recorded")

			del := byKind(t, all, "thread_delete")
			require.Regexp(t, `^http#.+$`, del.Client)
			require.Equal(t, thread, *del.ThreadID)
			require.JSONEq(t, `{"owner":"ci"}`, string(del.Detail))

			// A principal reads its own entries; another's are not shown,
			// and naming another principal is refused.
			require.Equal(t, kindsOf(all), kindsOf(auditOf(t, d, apptest.CIToken, url.Values{})))
			require.Empty(t, auditOf(t, d, apptest.BobToken, url.Values{}))
			resp = d.Do(t, http.MethodGet, "/v1/audit?principal=ci", apptest.BobToken, nil)
			require.Equal(t, http.StatusForbidden, resp.StatusCode)
			resp = d.Do(t, http.MethodGet, "/v1/audit?format=jsonl", apptest.BobToken, nil)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Empty(t, readLines(t, resp), "the export is bounded by the same rule")

			// Filters and pages.
			require.Equal(t, []string{"tool_call"}, kindsOf(auditOf(t, d, apptest.OperatorToken, url.Values{"kind": {"tool_call"}})))
			require.ElementsMatch(t, []string{"approval", "tool_call", "thread_delete"}, kindsOf(auditOf(t, d, apptest.OperatorToken, url.Values{"thread": {thread}})))
			require.Len(t, auditOf(t, d, apptest.OperatorToken, url.Values{"principal": {"ci"}}), 4)
			require.Empty(t, auditOf(t, d, apptest.OperatorToken, url.Values{"principal": {"bob"}}))
			require.Empty(t, auditOf(t, d, apptest.OperatorToken, url.Values{"until": {before.Add(-time.Minute).Format(time.RFC3339)}}))
			require.Len(t, auditOf(t, d, apptest.OperatorToken, url.Values{"since": {before.Add(-time.Minute).Format(time.RFC3339)}}), 4)
			first := apptest.GetJSON[api.HTTPAuditList](t, d, "/v1/audit?limit=3", apptest.OperatorToken)
			require.Len(t, first.Data, 3)
			require.NotNil(t, first.NextCursor)
			rest := apptest.GetJSON[api.HTTPAuditList](t, d, "/v1/audit?limit=3&cursor="+*first.NextCursor, apptest.OperatorToken)
			require.Len(t, rest.Data, 1)
			require.Nil(t, rest.NextCursor)
			require.Equal(t, all[3].Seq, rest.Data[0].Seq)
			for _, bad := range []string{"limit=0", "cursor=x", "since=yesterday", "format=csv"} {
				resp := d.Do(t, http.MethodGet, "/v1/audit?"+bad, apptest.OperatorToken, nil)
				require.Equal(t, http.StatusBadRequest, resp.StatusCode, bad)
			}

			// JSON Lines export: every entry, one object a line.
			resp = d.Do(t, http.MethodGet, "/v1/audit?format=jsonl", apptest.OperatorToken, nil)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Equal(t, "application/jsonl", resp.Header.Get("Content-Type"))
			lines := readLines(t, resp)
			require.Len(t, lines, 4)
			for i, l := range lines {
				var e api.HTTPAuditEntry
				require.NoError(t, json.Unmarshal([]byte(l), &e))
				require.Equal(t, all[i].Seq, e.Seq)
				require.Equal(t, all[i].Kind, e.Kind)
			}
		})
	}
}

func readLines(t *testing.T, resp *http.Response) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	require.NoError(t, sc.Err())
	return out
}

// Actions on the daemon's own services are admin entries: a webhook
// subscription made and deleted (where whose events go, never its
// secret) and an MCP servers reload.
func TestAuditAdmin(t *testing.T) {
	p := apptest.StartPrincipals(t, apptest.RunScript)
	d := p.D
	resp := d.Do(t, http.MethodPost, "/v1/webhooks", apptest.OperatorToken, map[string]any{"url": "https://hooks.example.com/in", "events": []string{"turn.completed"}})
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	var hook api.HTTPWebhook
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&hook))
	resp = d.Do(t, http.MethodDelete, "/v1/webhooks/"+hook.ID, apptest.OperatorToken, nil)
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	op := apptest.RPC(t, d.Addr, apptest.OperatorToken, nil)
	op.Call("config/mcpServer/reload", map[string]any{})

	var all []api.HTTPAuditEntry
	require.Eventually(t, func() bool {
		all = auditOf(t, d, apptest.OperatorToken, url.Values{"kind": {"admin"}})
		return len(all) >= 3
	}, 20*time.Second, 20*time.Millisecond, "entries: %v", kindsOf(all))
	require.Len(t, all, 3)
	for i, action := range []string{"webhook/create", "webhook/delete"} {
		e := all[i]
		require.Nil(t, e.Principal, "the operator's")
		require.Regexp(t, `^http#.+$`, e.Client)
		var det map[string]any
		require.NoError(t, json.Unmarshal(e.Detail, &det))
		require.Equal(t, action, det["action"])
		require.Equal(t, hook.ID, det["webhook"])
		require.Equal(t, "https://hooks.example.com/in", det["url"])
		require.NotContains(t, string(e.Detail), "whsec_")
	}
	reload := all[2]
	require.Nil(t, reload.Principal)
	require.Regexp(t, `^codex-tui#\d+$`, reload.Client)
	require.JSONEq(t, `{"action":"config/mcpServer/reload","servers":[]}`, string(reload.Detail))
	require.Empty(t, auditOf(t, d, apptest.CIToken, url.Values{}), "a principal sees its own entries only")
}

// A patch is a tool_call entry too: the files it changes, its plan and
// the approval's decision.
func TestAuditPatch(t *testing.T) {
	ws := apptest.Workspace(t)
	patch := `{"type":"custom","call_id":"call_p","name":"apply_patch","input":"*** Begin Patch\n*** Add File: no.txt\n+no\n*** End Patch\n"}`
	_, d, r := apptest.StartWithFake(t, apptest.CallScript(`[`+patch+`]`, "call_p", "ok"))
	thread := apptest.StartThread(t, r, map[string]any{"cwd": ws}) // read-only: a patch in the cwd asks
	apptest.Turn(t, r, apptest.Input(thread, "go"), func(apptest.Frame) any { return apptest.Decline })

	var calls []api.HTTPAuditEntry
	require.Eventually(t, func() bool {
		calls = auditOf(t, d, "", url.Values{"kind": {"tool_call"}})
		return len(calls) >= 1
	}, 20*time.Second, 20*time.Millisecond)
	require.Len(t, calls, 1)
	require.Nil(t, calls[0].Principal, "the operator's thread")
	require.Equal(t, thread, *calls[0].ThreadID)
	require.JSONEq(t, `{"tool":"apply_patch","callId":"call_p","changes":[{"kind":"add","path":"`+ws+`/no.txt"}],
		"approvalPolicy":"on-request","sandboxPolicy":"readOnly","action":"needs-approval","decision":"decline","status":"declined"}`,
		string(calls[0].Detail))
	approvals := auditOf(t, d, "", url.Values{"kind": {"approval"}})
	require.Len(t, approvals, 1)
	require.Nil(t, approvals[0].Principal, "the operator answered")
	require.Regexp(t, `^codex-tui#\d+$`, approvals[0].Client)
}
