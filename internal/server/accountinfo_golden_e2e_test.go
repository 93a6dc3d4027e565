package server_test

import (
	"archive/zip"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
)

// accountStep is one step of testdata/golden/reference/accountinfo_script.json
// (see accountinfo_capture.js there).
type accountStep struct {
	Name        string          `json:"name"`
	Connect     json.RawMessage `json:"connect"`
	Call        string          `json:"call"`
	Params      json.RawMessage `json:"params"`
	Zip         string          `json:"zip"`
	StartThread json.RawMessage `json:"startThread"`
	Turn        string          `json:"turn"`
}

// accountLine is one line of accountinfo.jsonl.
type accountLine struct {
	Name  string            `json:"name"`
	Res   json.RawMessage   `json:"res,omitzero"`
	Err   json.RawMessage   `json:"err,omitzero"`
	Notes []json.RawMessage `json:"notes,omitzero"`
	Zip   []string          `json:"zip,omitzero"`
}

// runAccountScript runs the capture's steps against d, with cwd for $CWD
// and home (the daemon's data directory, where the user config is
// written) for $HOME, and returns the lines the capture would have
// printed, rewritten as the capture rewrote its own.
func runAccountScript(t *testing.T, d *apptest.Daemon, cwd, home, modelURL string) []accountLine {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "golden", "reference", "accountinfo_script.json"))
	require.NoError(t, err)
	b = []byte(strings.NewReplacer("$CWD", cwd, "$HOME", home).Replace(string(b)))
	var steps []accountStep
	require.NoError(t, json.Unmarshal(b, &steps))
	serverCwd, err := os.Getwd()
	require.NoError(t, err)

	var threadID string
	rewrite := func(v any) json.RawMessage {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		s := strings.NewReplacer(modelURL, "$MODEL", home, "$HOME", cwd, "$CWD", serverCwd, "$SERVERCWD").Replace(string(b))
		if threadID != "" {
			s = strings.ReplaceAll(s, threadID, "$THREAD")
		}
		return json.RawMessage(s)
	}
	account := func(fs []apptest.Frame) []json.RawMessage {
		out := []json.RawMessage{}
		for _, f := range fs {
			if strings.HasPrefix(f.Method, "account/") {
				out = append(out, rewrite(map[string]any{"method": f.Method, "params": f.Params}))
			}
		}
		return out
	}
	var r *apptest.Client
	var lines []accountLine
	for _, s := range steps {
		switch {
		case s.Connect != nil:
			if r != nil {
				_ = r.WS.CloseNow()
			}
			r = apptest.MustDial(t, d.Addr, nil)
			r.Call("initialize", map[string]any{
				"clientInfo":   map[string]any{"name": "probe", "title": nil, "version": "0"},
				"capabilities": s.Connect,
			})
		case s.Call != "":
			var params any
			if s.Params != nil {
				params = json.RawMessage(strings.ReplaceAll(string(s.Params), "$THREAD", threadID))
			}
			r.Seen = nil
			f := r.CallRaw(s.Call, params)
			// What the call sends after its answer (the capture waited
			// 300 ms for it) is read with the answer of a later request.
			time.Sleep(200 * time.Millisecond)
			r.CallRaw("account/read", map[string]any{})
			line := accountLine{Name: s.Name, Res: json.RawMessage("null"), Err: json.RawMessage("null"), Notes: account(r.Seen)}
			if f.Error != nil {
				e := map[string]any{"code": f.Error.Code, "message": f.Error.Message}
				if f.Error.Data != nil {
					e["data"] = f.Error.Data
				}
				line.Err = rewrite(e)
			} else {
				line.Res = rewrite(f.Result)
				if s.Zip != "" {
					for _, n := range zipNames(t, s.Zip) {
						if threadID != "" {
							n = strings.ReplaceAll(n, threadID, "$THREAD")
						}
						line.Zip = append(line.Zip, n)
					}
				}
			}
			lines = append(lines, line)
		case s.StartThread != nil:
			var res struct {
				Thread struct {
					ID string `json:"id"`
				} `json:"thread"`
			}
			require.NoError(t, json.Unmarshal(r.Call("thread/start", s.StartThread), &res))
			threadID = res.Thread.ID
			lines = append(lines, accountLine{Name: s.Name, Res: rewrite(map[string]any{"threadId": threadID}), Err: json.RawMessage("null")})
		case s.Turn != "":
			r.Seen = nil
			r.Call("turn/start", map[string]any{"threadId": threadID, "input": []any{map[string]any{"type": "text", "text": s.Turn, "text_elements": []any{}}}})
			r.Until("turn/completed")
			notes := []json.RawMessage{}
			for _, f := range r.Seen {
				switch {
				case strings.HasPrefix(f.Method, "account/"):
					notes = append(notes, account([]apptest.Frame{f})...)
				case f.Method == "thread/tokenUsage/updated":
					notes = append(notes, rewrite(map[string]any{"method": f.Method}))
				}
			}
			lines = append(lines, accountLine{Name: s.Name, Notes: notes})
		}
	}
	return lines
}

// zipNames lists the entries of the zip file at path.
func zipNames(t *testing.T, path string) []string {
	t.Helper()
	zr, err := zip.OpenReader(path)
	require.NoError(t, err)
	defer zr.Close()
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
	}
	return names
}

// accountNormal makes a line comparable: what two runs cannot share (a
// process id and its memory, a config file's hash, a made-up thread id, a
// temporary file's name) is replaced by a placeholder.
func accountNormal(t *testing.T, l accountLine) string {
	t.Helper()
	b, err := json.Marshal(l)
	require.NoError(t, err)
	s := string(b)
	for _, r := range []struct{ re, with string }{
		{`"id":\d+,"residentMemoryBytes":\d+`, `"id":1,"residentMemoryBytes":1`},
		{`sha256:[0-9a-f]{64}`, `sha256:HASH`},
		{`no-active-thread-[0-9a-f-]{36}`, `no-active-thread-ID`},
		{`at path \\"[^"\\]*\\"`, `at path \"PATH\"`},
		{`"app.requests.in_flight","value":[1-9]\d*`, `"app.requests.in_flight","value":1`},
	} {
		s = regexp.MustCompile(r.re).ReplaceAllString(s, r.with)
	}
	return s
}

// accountDifferences are the lines of accountinfo.jsonl appserver answers
// otherwise, by design, with the reason; each is checked as written here.
var accountDifferences = map[string]struct {
	why  string
	want string
}{
	"capabilities": {"appserver never offers the hosted image_generation tool",
		`{"name":"capabilities","res":{"imageGeneration":false,"webSearch":true},"err":null,"notes":[]}`},
	"hooks, bad thread id": {"Go's UUID parser words a bad id otherwise",
		`{"name":"hooks, bad thread id","res":null,"err":{"code":-32600,"message":"invalid thread id: invalid UUID length: 1"},"notes":[]}`},
	"feedback, bad thread id": {"as above",
		`{"name":"feedback, bad thread id","res":null,"err":{"code":-32600,"message":"invalid thread id: invalid UUID length: 1"},"notes":[]}`},
	"diagnostics": {"appserver adds gauges of its own: open connections, loaded threads, running turns",
		`{"name":"diagnostics","res":{"process":{"id":1,"residentMemoryBytes":1,"physicalFootprintBytes":null},"gauges":[{"name":"app.requests.in_flight","value":1},{"name":"app.requests.queued","value":0},{"name":"app.connections.open","value":1},{"name":"core.threads.live","value":0},{"name":"core.turns.active","value":0}]},"err":null,"notes":[]}`},
	"providers": {"a provider is the operator's: no client edits it (canEdit false)",
		`{"name":"providers","res":{"data":[{"id":"fake","name":"fake","canEdit":false,"baseUrl":"$MODEL","settings":{"type":"customGateway","auth":{"mode":"environmentVariable","envKey":"FAKE_KEY"}}},{"id":"openai","name":"OpenAI","canEdit":false,"baseUrl":null,"settings":{"type":"openai"}}],"defaultProviderId":"fake","canChangeDefault":true},"err":null,"notes":[]}`},
	"default set": {"clients write the daemon's user config, user-config.toml",
		`{"name":"default set","res":{"status":"ok","version":"sha256:HASH","filePath":"$HOME/user-config.toml","overriddenMetadata":null},"err":null,"notes":[]}`},
	"provider write, new gateway": {"a provider's table is the operator's (its URL and key variable decide where prompts and which key go): the config writer refuses it to every client",
		`{"name":"provider write, new gateway","res":null,"err":{"code":-32600,"data":{"config_write_error_code":"configLayerReadonly"},"message":"Invalid request: config key \"model_providers.gw.name\": set by the server's operator; clients may not write it"},"notes":[]}`},
	"provider write, rename": {"as above",
		`{"name":"provider write, rename","res":null,"err":{"code":-32600,"data":{"config_write_error_code":"configLayerReadonly"},"message":"Invalid request: config key \"model_providers.fake.name\": set by the server's operator; clients may not write it"},"notes":[]}`},
	"provider write, bedrock": {"appserver runs no Bedrock or Vertex AI provider",
		`{"name":"provider write, bedrock","res":null,"err":{"code":-32600,"data":{"config_write_error_code":"configValidationError"},"message":"appserver runs no bedrock provider: its model providers are OpenAI-compatible endpoints"},"notes":[]}`},
	"providers after writes": {"nothing was written",
		`{"name":"providers after writes","res":{"data":[{"id":"fake","name":"fake","canEdit":false,"baseUrl":"$MODEL","settings":{"type":"customGateway","auth":{"mode":"environmentVariable","envKey":"FAKE_KEY"}}},{"id":"openai","name":"OpenAI","canEdit":false,"baseUrl":null,"settings":{"type":"openai"}}],"defaultProviderId":"fake","canChangeDefault":true},"err":null,"notes":[]}`},
	"feedback, in the server's home": {"the daemon's data directory is a protected path: the path rule refuses it to every client",
		"{\"name\":\"feedback, in the server's home\",\"res\":null,\"err\":{\"code\":-32602,\"message\":\"access denied: `$HOME/fb.zip` is a protected path of the daemon (its own data, configuration, credentials or process); no tool may read or change it\"},\"notes\":[]}"},
	"feedback, thread with logs": {"appserver's own logs and the thread as thread/read answers it are attached; no prompt hash",
		`{"name":"feedback, thread with logs","res":{"savedPath":"$CWD/fb7.zip","threadId":"$THREAD","promptHash":null},"err":null,"notes":[],"zip":["report.json","attachments/0000/appserver-logs.log","attachments/0001/thread-$THREAD.json","manifest.json"]}`},
	"rate limits before any turn": {"served from the providers' rate-limit headers where the reference needs a ChatGPT login; none known yet",
		`{"name":"rate limits before any turn","res":{"accountId":null,"ordinaryUsageAllowed":null,"rateLimitResetCredits":null,"rateLimits":{"limitId":"fake","limitName":null,"normalModelSlug":null,"primary":null,"secondary":null,"credits":null,"individualLimit":null,"spendControlReached":null,"planType":null,"rateLimitReachedType":null},"rateLimitsByLimitId":null},"err":null,"notes":[]}`},
	"rate limits, params": {"as above",
		`{"name":"rate limits, params","res":{"accountId":null,"ordinaryUsageAllowed":null,"rateLimitResetCredits":null,"rateLimits":{"limitId":"fake","limitName":null,"normalModelSlug":null,"primary":null,"secondary":null,"credits":null,"individualLimit":null,"spendControlReached":null,"planType":null,"rateLimitReachedType":null},"rateLimitsByLimitId":null},"err":null,"notes":[]}`},
	"rate limits after turns": {"the limits of the last response that reported any, by provider id",
		`{"name":"rate limits after turns","res":{"accountId":null,"ordinaryUsageAllowed":null,"rateLimitResetCredits":null,"rateLimits":{"limitId":"fake","limitName":null,"normalModelSlug":null,"primary":{"usedPercent":25,"windowDurationMins":null,"resetsAt":1},"secondary":{"usedPercent":0,"windowDurationMins":null,"resetsAt":1},"credits":null,"individualLimit":null,"spendControlReached":null,"planType":null,"rateLimitReachedType":null},"rateLimitsByLimitId":{"fake":{"limitId":"fake","limitName":null,"normalModelSlug":null,"primary":{"usedPercent":25,"windowDurationMins":null,"resetsAt":1},"secondary":{"usedPercent":0,"windowDurationMins":null,"resetsAt":1},"credits":null,"individualLimit":null,"spendControlReached":null,"planType":null,"rateLimitReachedType":null}}},"err":null,"notes":[]}`},
	"turn, Codex rate-limit headers": {"the limit id is the provider's",
		`{"name":"turn, Codex rate-limit headers","notes":[{"method":"thread/tokenUsage/updated"},{"method":"account/rateLimits/updated","params":{"rateLimits":{"limitId":"fake","limitName":null,"normalModelSlug":null,"primary":{"usedPercent":13,"windowDurationMins":300,"resetsAt":1900000000},"secondary":{"usedPercent":3,"windowDurationMins":10080,"resetsAt":null},"credits":null,"individualLimit":null,"spendControlReached":null,"planType":null,"rateLimitReachedType":null}}}]}`},
	"turn, OpenAI rate-limit headers": {"OpenAI's x-ratelimit-* headers are read (requests as primary, tokens as secondary), where the reference reads none",
		`{"name":"turn, OpenAI rate-limit headers","notes":[{"method":"thread/tokenUsage/updated"},{"method":"account/rateLimits/updated","params":{"rateLimits":{"limitId":"fake","limitName":null,"normalModelSlug":null,"primary":{"usedPercent":25,"windowDurationMins":null,"resetsAt":1},"secondary":{"usedPercent":0,"windowDurationMins":null,"resetsAt":1},"credits":null,"individualLimit":null,"spendControlReached":null,"planType":null,"rateLimitReachedType":null}}}]}`},
}

// Every request of testdata/golden/reference/accountinfo.jsonl (see
// accountinfo_capture.js) gets the reference's answer, with the same
// account/* notifications, but for accountDifferences.
func TestAccountInfoMatchesReference(t *testing.T) {
	t.Setenv("FAKE_KEY", "k")
	fake := apptest.StartFake(t, readReference(t, "accountinfo_model.json"))
	home, cwd := apptest.RealTempDir(t), apptest.RealTempDir(t)
	require.NoError(t, os.WriteFile(filepath.Join(cwd, "notes.log"), []byte("note\n"), 0o644))
	conf := filepath.Join(apptest.RealTempDir(t), "config.toml")
	require.NoError(t, os.WriteFile(conf, []byte(`model = "fake-model"
model_provider = "fake"
[model_providers.fake]
name = "fake"
base_url = "`+fake.URL()+`"
env_key = "FAKE_KEY"
wire_api = "responses"
request_max_retries = 0
`), 0o600))
	d := apptest.Start(t, "--data-dir", home, "--config", conf)
	got := runAccountScript(t, d, cwd, home, fake.URL())

	raw := strings.Split(strings.TrimSpace(readReference(t, "accountinfo.jsonl")), "\n")
	require.Len(t, got, len(raw))
	for i, l := range raw {
		var want accountLine
		require.NoError(t, json.Unmarshal([]byte(l), &want))
		require.Equal(t, want.Name, got[i].Name)
		w := accountNormal(t, want)
		if diff, ok := accountDifferences[want.Name]; ok {
			w = diff.want
		}
		g := accountNormal(t, got[i])
		g = regexp.MustCompile(`"resetsAt":1[0-9]{9}\b`).ReplaceAllStringFunc(g, func(s string) string {
			if s == `"resetsAt":1900000000` {
				return s
			}
			return `"resetsAt":1`
		})
		assert.JSONEq(t, w, g, want.Name)
	}
}

func readReference(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "golden", "reference", name))
	require.NoError(t, err)
	return string(b)
}
