package skills_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
	"github.com/appserver/appserver/internal/model/fakemodel"
)

// End-to-end tests of the skills namespace (skills.list / skills.read), the
// skills/list method and the skills/changed notification, over a real
// websocket against the real daemon.
//
// The fake model is scripted up front, but a skills conversation cannot be:
// the cursors it must pass back are HMAC-signed with a per-process key and
// only exist once the daemon has answered. So the model sits behind
// skDriver, a small reverse proxy: for every model request it reads the tool
// outputs the daemon sent, decides the model's next step (e.g. skills.list
// with the next_cursor it just received), installs that one step with
// fake.SetScript and forwards the request to the fake model, which streams
// it back as usual. The daemon therefore runs a single, ordinary turn, and
// every request body is recorded for the transcript assertions.

// skToolOutput is one function_call_output item of a model request.
type skToolOutput struct {
	CallID string
	Output string
}

// skModelRequest is what the driver sees of a model request.
type skModelRequest struct {
	// Outputs are the function_call_output items of the request, in order
	// (the whole history so far, so earlier turns' outputs too).
	Outputs []skToolOutput
}

// last returns the last tool output, or nil when there is none.
func (r skModelRequest) last() *skToolOutput {
	if len(r.Outputs) == 0 {
		return nil
	}
	return &r.Outputs[len(r.Outputs)-1]
}

// output returns the output of the call id.
func (r skModelRequest) output(callID string) (string, bool) {
	for _, o := range r.Outputs {
		if o.CallID == callID {
			return o.Output, true
		}
	}
	return "", false
}

// skDriver is a reverse proxy in front of the fake model that scripts each
// model request from the tool outputs it carries.
type skDriver struct {
	fake  *fakemodel.Server
	proxy *httptest.Server
	rp    *httputil.ReverseProxy
	next  func(skModelRequest) ([]fakemodel.ToolCall, string, error)

	mu     sync.Mutex
	bodies [][]byte
	errs   []error
}

// skStartDriver starts the fake model and the proxy. next returns the tool
// calls of the model's next step, or (nil, text) to answer text and end the
// turn; an error ends the turn with a text naming it and fails the test.
func skStartDriver(t *testing.T, next func(skModelRequest) ([]fakemodel.ToolCall, string, error)) *skDriver {
	t.Helper()
	fake := apptest.StartFake(t, `{"steps":[]}`)
	target, err := url.Parse(strings.TrimSuffix(fake.URL(), "/v1"))
	require.NoError(t, err)
	d := &skDriver{fake: fake, next: next}
	// Streaming (text/event-stream) responses are flushed as they come.
	d.rp = &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(target) }}
	d.proxy = httptest.NewServer(http.HandlerFunc(d.serve))
	t.Cleanup(d.proxy.Close)
	t.Cleanup(func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		for _, err := range d.errs {
			t.Errorf("model driver: %v", err)
		}
	})
	return d
}

func (d *skDriver) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock() // one model request at a time: the turn is sequential
	d.bodies = append(d.bodies, body)
	step := fakemodel.Step{Name: fmt.Sprintf("driven-%d", len(d.bodies))}
	req, err := skParseRequest(body)
	if err == nil {
		step.ToolCalls, step.Text, err = d.next(req)
	}
	if err != nil {
		d.errs = append(d.errs, fmt.Errorf("request %d: %w", len(d.bodies), err))
		step.ToolCalls, step.Text = nil, "driver error: "+err.Error()
	}
	if err := d.fake.SetScript(fakemodel.Script{Steps: []fakemodel.Step{step}}); err != nil {
		d.errs = append(d.errs, err)
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	d.rp.ServeHTTP(w, r)
}

// Bodies returns the request bodies the model received, oldest first.
func (d *skDriver) Bodies() [][]byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.bodies)
}

// args configures the daemon to use the fake model through the driver.
func (d *skDriver) args() []string {
	return []string{
		"-c", `model="fake-model"`,
		"-c", `model_provider="fake"`,
		"-c", `model_providers.fake={name="Fake", base_url="` + d.proxy.URL + `/v1", wire_api="responses", request_max_retries=0}`,
	}
}

// skParseRequest extracts the function_call_output items of a Responses
// request body.
func skParseRequest(body []byte) (skModelRequest, error) {
	var req struct {
		Input []struct {
			Type   string          `json:"type"`
			CallID string          `json:"call_id"`
			Output json.RawMessage `json:"output"`
		} `json:"input"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return skModelRequest{}, fmt.Errorf("request body: %w", err)
	}
	var out skModelRequest
	for _, it := range req.Input {
		if it.Type != "function_call_output" {
			continue
		}
		var text string
		if err := json.Unmarshal(it.Output, &text); err != nil {
			// Content-item outputs: join their texts.
			var parts []struct {
				Text string `json:"text"`
			}
			if err := json.Unmarshal(it.Output, &parts); err != nil {
				return skModelRequest{}, fmt.Errorf("output of %s: %w", it.CallID, err)
			}
			for _, p := range parts {
				text += p.Text
			}
		}
		out.Outputs = append(out.Outputs, skToolOutput{CallID: it.CallID, Output: text})
	}
	return out, nil
}

// skCall is one scripted tool call of the model.
func skCall(callID, name string, args any) fakemodel.ToolCall {
	raw, err := json.Marshal(args)
	if err != nil {
		panic(err)
	}
	return fakemodel.ToolCall{CallID: callID, Name: name, Arguments: raw}
}

// The wire shapes of the skills tools (docs/tools.md §6.1).
type (
	skAuthority struct {
		Kind string `json:"kind"`
		ID   string `json:"id"`
	}
	skListed struct {
		Authority    skAuthority `json:"authority"`
		Package      string      `json:"package"`
		Name         string      `json:"name"`
		Description  string      `json:"description"`
		MainResource string      `json:"main_resource"`
	}
	skListResult struct {
		Skills     []skListed `json:"skills"`
		NextCursor *string    `json:"next_cursor"`
		Warnings   []string   `json:"warnings"`
		Truncated  bool       `json:"truncated"`
	}
	skReadResult struct {
		Resource   string  `json:"resource"`
		Contents   string  `json:"contents"`
		NextCursor *string `json:"next_cursor"`
		Truncated  bool    `json:"truncated"`
	}
)

// skDecode decodes a successful tool result strictly.
func skDecode(text string, v any) error {
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("tool result is not the success shape: %w: %.300s", err, text)
	}
	return nil
}

// skWriteSkill writes dir/SKILL.md with front matter and returns its path.
func skWriteSkill(t *testing.T, dir, name, description, body string) string {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	file := filepath.Join(dir, "SKILL.md")
	text := fmt.Sprintf("---\nname: %s\ndescription: %q\n---\n\n%s\n", name, description, body)
	require.NoError(t, os.WriteFile(file, []byte(text), 0o644))
	return file
}

// skRootsArg is the -c argument configuring [skills] roots.
func skRootsArg(t *testing.T, roots ...string) []string {
	raw, err := json.Marshal(roots)
	require.NoError(t, err)
	return []string{"-c", "skills.roots=" + string(raw)}
}

// skBigResource returns a text of at least 50 KB mixing ASCII, CJK, emoji
// (including ZWJ sequences), characters JSON must escape, and U+2028, so
// pieces are cut next to multi-byte runes and escapes.
func skBigResource() string {
	lines := []string{
		"## 部署手順 (deployment) 🚀 — step %d\n",
		"日本語のテキストと中文文本混合，還有한국어도 조금 🌏🧑‍💻👩🏽‍🚀 %d\n",
		"\t\"quoted\" back\\slash <html> & ampersand %d\u2028line-separator\n",
		"Emoji run: 😀😃😄😁😆😅😂🤣🥲☺️😊😇🙂🙃😉😌😍🥰😘 %d\n",
		"漢字かな交じり文：東京都千代田区丸の内一丁目 番号%d。\n",
	}
	var b strings.Builder
	for i := 0; b.Len() < 50*1024; i++ {
		fmt.Fprintf(&b, lines[i%len(lines)], i)
	}
	b.WriteString("THE END 🏁\n")
	return b.String()
}

// skRequireBoundedOutputs checks that every tool result in every request
// body is at most 8,192 bytes and returns how many there were.
func skRequireBoundedOutputs(t *testing.T, bodies [][]byte) int {
	t.Helper()
	n := 0
	for i, body := range bodies {
		req, err := skParseRequest(body)
		require.NoError(t, err)
		for _, o := range req.Outputs {
			require.LessOrEqual(t, len(o.Output), 8192, "request %d: output of %s is %d bytes", i+1, o.CallID, len(o.Output))
			n++
		}
	}
	return n
}

// TestSkillsTurnPagesListAndReadsBigResource is the "done when": one
// turn over a real websocket in which the model lists the skills across two
// pages and reads a 50 KB resource in pieces, each continuation using the
// next_cursor of the previous result.
func TestSkillsTurnPagesListAndReadsBigResource(t *testing.T) {
	root := t.TempDir()
	var names []string
	for i := range 29 {
		name := fmt.Sprintf("skill-%02d", i)
		names = append(names, name)
		desc := fmt.Sprintf("Skill %02d: use it when the task touches area %d. ", i, i%7) +
			strings.Repeat("It explains setup, configuration, troubleshooting and rollback in depth. ", 3)
		skWriteSkill(t, filepath.Join(root, "group-"+fmt.Sprint(i%3), name), name, desc, "# "+name+"\n\nFollow the steps.")
	}
	bigDir := filepath.Join(root, "big-reference")
	skWriteSkill(t, bigDir, "big-reference", "The complete deployment reference; read reference.md in pieces.",
		"# Big reference\n\nThe whole guide is in reference.md next to this file.")
	names = append(names, "big-reference")
	big := skBigResource()
	require.GreaterOrEqual(t, len(big), 50*1024)
	require.NoError(t, os.WriteFile(filepath.Join(bigDir, "reference.md"), []byte(big), 0o644))

	// The model: list page 1, list page 2 with page 1's next_cursor, read
	// the big skill's main resource, then read reference.md piece by piece
	// with each piece's next_cursor, then answer.
	var bigSkill *skListed // driver state; next runs one request at a time
	next := func(req skModelRequest) ([]fakemodel.ToolCall, string, error) {
		last := req.last()
		if last == nil {
			return []fakemodel.ToolCall{skCall("list-1", "skills.list", map[string]any{})}, "", nil
		}
		switch {
		case last.CallID == "list-1":
			var page skListResult
			if err := skDecode(last.Output, &page); err != nil {
				return nil, "", err
			}
			if page.NextCursor == nil {
				return nil, "", fmt.Errorf("page 1 has no next_cursor: %s", last.Output)
			}
			return []fakemodel.ToolCall{skCall("list-2", "skills.list", map[string]any{"cursor": *page.NextCursor})}, "", nil
		case last.CallID == "list-2":
			for _, id := range []string{"list-1", "list-2"} {
				out, _ := req.output(id)
				var page skListResult
				if err := skDecode(out, &page); err != nil {
					return nil, "", err
				}
				for _, s := range page.Skills {
					if s.Name == "big-reference" {
						bigSkill = &s
					}
				}
			}
			if bigSkill == nil {
				return nil, "", fmt.Errorf("big-reference is not listed")
			}
			return []fakemodel.ToolCall{skCall("read-main", "skills.read", map[string]any{
				"authority": bigSkill.Authority, "package": bigSkill.Package, "resource": bigSkill.MainResource,
			})}, "", nil
		case last.CallID == "read-main" || strings.HasPrefix(last.CallID, "read-piece-"):
			var res skReadResult
			if err := skDecode(last.Output, &res); err != nil {
				return nil, "", err
			}
			args := map[string]any{"authority": bigSkill.Authority, "package": bigSkill.Package, "resource": bigSkill.Package + "/reference.md"}
			n := 1
			if last.CallID != "read-main" {
				if res.NextCursor == nil {
					return nil, "I have read the whole reference.", nil
				}
				prev, err := strconv.Atoi(strings.TrimPrefix(last.CallID, "read-piece-"))
				if err != nil {
					return nil, "", err
				}
				n = prev + 1
				args["cursor"] = *res.NextCursor
			} else if !strings.Contains(res.Contents, "reference.md") {
				return nil, "", fmt.Errorf("main resource does not mention reference.md: %q", res.Contents)
			}
			if n > 30 {
				return nil, "", fmt.Errorf("too many pieces")
			}
			return []fakemodel.ToolCall{skCall(fmt.Sprintf("read-piece-%d", n), "skills.read", args)}, "", nil
		}
		return nil, "", fmt.Errorf("unexpected last tool output %s", last.CallID)
	}
	drv := skStartDriver(t, next)
	d := apptest.Start(t, slices.Concat([]string{"--data-dir", t.TempDir()}, drv.args(), skRootsArg(t, root))...)
	r := d.RPC(t)
	threadID := apptest.StartThread(t, r, nil)
	tr := apptest.RunTurn(t, r, threadID, "Find the deployment reference skill and read all of it.")
	require.Equal(t, "completed", tr.Turn.Status, "%+v", tr.Turn.Error)
	require.NotEmpty(t, tr.Turn.Items)
	require.Equal(t, "I have read the whole reference.", tr.Turn.Items[len(tr.Turn.Items)-1].Text)

	bodies := drv.Bodies()
	// The namespace was offered to the model.
	require.Contains(t, string(bodies[0]), `"type":"namespace","name":"skills"`)

	// Every tool result the model received in the whole transcript is at
	// most 8,192 bytes (every output in every request body).
	count := skRequireBoundedOutputs(t, bodies)
	require.Greater(t, count, 5)

	// The final request carries the whole transcript, in call order.
	final, err := skParseRequest(bodies[len(bodies)-1])
	require.NoError(t, err)
	require.Len(t, bodies, len(final.Outputs)+1, "one model request per tool result, plus the first")

	// Page 1 and page 2 together list every skill exactly once.
	var page1, page2 skListResult
	out1, ok := final.output("list-1")
	require.True(t, ok)
	require.NoError(t, skDecode(out1, &page1))
	out2, ok := final.output("list-2")
	require.True(t, ok)
	require.NoError(t, skDecode(out2, &page2))
	require.NotNil(t, page1.NextCursor)
	require.True(t, page1.Truncated)
	require.Nil(t, page2.NextCursor, "two pages hold the whole catalog")
	require.False(t, page2.Truncated)
	require.NotEmpty(t, page1.Skills)
	require.NotEmpty(t, page2.Skills)
	var listed []string
	bigPackage := ""
	for _, s := range slices.Concat(page1.Skills, page2.Skills) {
		if s.Name == "big-reference" {
			bigPackage = s.Package
		}
		require.Equal(t, skAuthority{Kind: "local", ID: "local"}, s.Authority)
		require.True(t, strings.HasPrefix(s.Package, "skill://local/"), s.Package)
		require.Equal(t, s.Package+"/SKILL.md", s.MainResource)
		listed = append(listed, s.Name)
	}
	slices.Sort(listed)
	slices.Sort(names)
	require.Equal(t, names, listed)
	t.Logf("skills.list: %d + %d skills in pages of %d and %d bytes", len(page1.Skills), len(page2.Skills), len(out1), len(out2))

	// The pieces, read with each returned next_cursor, concatenate to the
	// file byte for byte; none splits a UTF-8 sequence.
	var got strings.Builder
	pieces := 0
	for _, o := range final.Outputs {
		if !strings.HasPrefix(o.CallID, "read-piece-") {
			continue
		}
		var res skReadResult
		require.NoError(t, skDecode(o.Output, &res))
		require.Equal(t, bigPackage+"/reference.md", res.Resource)
		require.True(t, utf8.ValidString(res.Contents))
		require.Equal(t, res.NextCursor != nil, res.Truncated)
		got.WriteString(res.Contents)
		pieces++
		t.Logf("%s: %d content bytes in a %d-byte result", o.CallID, len(res.Contents), len(o.Output))
	}
	require.Greater(t, pieces, 5, "a 50 KB resource takes several 8 KB pieces")
	require.Equal(t, big, got.String())
}

// skSkillsListResult is the skills/list result.
type skSkillsListResult struct {
	Data []struct {
		Cwd    string `json:"cwd"`
		Skills []struct {
			Name        string `json:"name"`
			Description string `json:"description"`
			Path        string `json:"path"`
			Scope       string `json:"scope"`
			Enabled     bool   `json:"enabled"`
		} `json:"skills"`
		Errors []struct {
			Path    string `json:"path"`
			Message string `json:"message"`
		} `json:"errors"`
	} `json:"data"`
}

// skSkillsList calls skills/list and decodes the result.
func skSkillsList(t *testing.T, r *apptest.Client, params map[string]any) skSkillsListResult {
	t.Helper()
	var res skSkillsListResult
	require.NoError(t, json.Unmarshal(r.Call("skills/list", params), &res))
	return res
}

// TestSkillsListMethod covers skills/list: workspace skills found from a
// cwd (and from a directory below it, up to the git root), skills of a
// configured root, a malformed SKILL.md reported in errors, and a relative
// cwd rejected.
func TestSkillsListMethod(t *testing.T) {
	root := t.TempDir()
	userFile := skWriteSkill(t, filepath.Join(root, "configured-one"), "configured-one", "A skill from the configured root.", "Body.")
	broken := filepath.Join(root, "broken", "SKILL.md")
	require.NoError(t, os.MkdirAll(filepath.Dir(broken), 0o755))
	require.NoError(t, os.WriteFile(broken, []byte("# No front matter at all\n"), 0o644))

	ws := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(ws, ".git"), 0o755))
	alphaFile := skWriteSkill(t, filepath.Join(ws, ".agents", "skills", "ws-alpha"), "ws-alpha", "A workspace skill (.agents/skills).", "Body.")
	classicFile := skWriteSkill(t, filepath.Join(ws, ".codex", "skills", "ws-classic"), "ws-classic", "A workspace skill (.codex/skills).", "Body.")
	sub := filepath.Join(ws, "pkg", "sub")
	require.NoError(t, os.MkdirAll(sub, 0o755))

	d := apptest.Start(t, slices.Concat([]string{"--data-dir", t.TempDir()}, skRootsArg(t, root))...)
	r := d.RPC(t)

	res := skSkillsList(t, r, map[string]any{"cwds": []string{ws, sub}, "forceReload": true})
	require.Len(t, res.Data, 2)
	for i, cwd := range []string{ws, sub} {
		e := res.Data[i]
		require.Equal(t, cwd, e.Cwd)
		got := map[string][2]string{}
		for _, s := range e.Skills {
			require.True(t, s.Enabled)
			got[s.Name] = [2]string{s.Path, s.Scope}
		}
		require.Equal(t, map[string][2]string{
			"ws-alpha":       {alphaFile, "repo"},
			"ws-classic":     {classicFile, "repo"},
			"configured-one": {userFile, "user"},
		}, got, "cwd %s", cwd)
		// The malformed SKILL.md is an entry in errors, not a failure.
		require.Len(t, e.Errors, 1)
		require.Equal(t, broken, e.Errors[0].Path)
		require.NotEmpty(t, e.Errors[0].Message)
	}

	// A directory without workspace skills still gets the configured root.
	plain := t.TempDir()
	res = skSkillsList(t, r, map[string]any{"cwds": []string{plain}})
	require.Len(t, res.Data, 1)
	require.Len(t, res.Data[0].Skills, 1)
	require.Equal(t, "configured-one", res.Data[0].Skills[0].Name)

	// Without cwds, the daemon's own directory is listed.
	res = skSkillsList(t, r, map[string]any{})
	require.Len(t, res.Data, 1)
	require.True(t, filepath.IsAbs(res.Data[0].Cwd), res.Data[0].Cwd)

	// A relative cwd is an error.
	f := r.CallRaw("skills/list", map[string]any{"cwds": []string{"relative/dir"}})
	require.NotNil(t, f.Error)
	require.Contains(t, f.Error.Message, "absolute")
}

// skWaitNotification reads frames until a notification with method
// arrives, within timeout.
func skWaitNotification(t *testing.T, r *apptest.Client, method string, timeout time.Duration) apptest.Frame {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		left := time.Until(deadline)
		require.Positive(t, left, "no %s within %s", method, timeout)
		f, err := r.Read(left)
		require.NoError(t, err, "waiting for %s", method)
		if f.Method == method {
			return f
		}
	}
}

// TestSkillsChangedNotification checks that a SKILL.md appearing in a
// configured root is noticed by the watcher (which polls) and broadcast as
// skills/changed, after which skills/list shows it without a forced
// reload.
func TestSkillsChangedNotification(t *testing.T) {
	root := t.TempDir()
	skWriteSkill(t, filepath.Join(root, "first"), "first", "The first skill.", "Body.")
	d := apptest.Start(t, slices.Concat([]string{"--data-dir", t.TempDir()}, skRootsArg(t, root))...)
	r := d.RPC(t)
	cwd := t.TempDir()
	res := skSkillsList(t, r, map[string]any{"cwds": []string{cwd}})
	require.Len(t, res.Data[0].Skills, 1)

	// Build the new skill elsewhere and move it in, so the root changes
	// once, with a complete SKILL.md.
	staging := filepath.Join(t.TempDir(), "second")
	skWriteSkill(t, staging, "second", "The second skill.", "Body.")
	require.NoError(t, os.Rename(staging, filepath.Join(root, "second")))

	skWaitNotification(t, r, "skills/changed", 60*time.Second)
	res = skSkillsList(t, r, map[string]any{"cwds": []string{cwd}})
	var got []string
	for _, s := range res.Data[0].Skills {
		got = append(got, s.Name)
	}
	require.Equal(t, []string{"first", "second"}, got)
}

// skMCPServer is a minimal MCP (Streamable HTTP, JSON responses) skill
// provider with one skill, requiring a bearer token.
func skMCPServer(t *testing.T, token string) *httptest.Server {
	const pkg = "skill://partner/catalog/remote-guide"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				URI string `json:"uri"`
			} `json:"params"`
		}
		if err := json.NewDecoder(r.Body).Decode(&msg); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if msg.ID == nil {
			w.WriteHeader(http.StatusAccepted) // a notification
			return
		}
		reply := map[string]any{"jsonrpc": "2.0", "id": msg.ID}
		switch msg.Method {
		case "initialize":
			reply["result"] = map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{"resources": map[string]any{}},
				"serverInfo": map[string]any{"name": "partner", "version": "1"}}
		case "resources/list":
			reply["result"] = map[string]any{"resources": []any{map[string]any{
				"uri": pkg, "name": "remote-guide", "description": "A remote skill.", "mimeType": "mcp/skill",
				"_meta": map[string]any{"skill_name": "remote-guide", "source": "user"},
			}}}
		case "resources/read":
			if msg.Params.URI != pkg+"/SKILL.md" {
				reply["error"] = map[string]any{"code": -32002, "message": "resource not found"}
				break
			}
			reply["result"] = map[string]any{"contents": []any{map[string]any{
				"uri": msg.Params.URI, "mimeType": "text/markdown", "text": "---\nname: remote-guide\n---\nRemote guide body.\n",
			}}}
		default:
			reply["error"] = map[string]any{"code": -32601, "message": "method not found"}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(reply)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestSkillsReadRejectionsOverToolPath sends, in one turn, skills.read
// calls with bad arguments through the real tool path: each answer the
// model gets is a short, model-readable error text (not a result object),
// and the turn completes.
func TestSkillsReadRejectionsOverToolPath(t *testing.T) {
	const tokenEnv = "APPSERVER_SKILLS_E2E_PARTNER_TOKEN"
	t.Setenv(tokenEnv, "partner-secret")
	mcp := skMCPServer(t, "partner-secret")

	root := t.TempDir()
	for _, name := range []string{"alpha", "beta", "gamma"} {
		skWriteSkill(t, filepath.Join(root, name), name, "The "+name+" skill.", "Body of "+name+".")
	}

	// A forged read cursor: the right length and layout, a zero MAC.
	forged := make([]byte, 42)
	forged[0], forged[1] = 1, 'R'
	forgedCursor := base64.RawURLEncoding.EncodeToString(forged)

	want := map[string]string{} // call id → expected text fragment
	next := func(req skModelRequest) ([]fakemodel.ToolCall, string, error) {
		last := req.last()
		if last == nil {
			return []fakemodel.ToolCall{skCall("list", "skills.list", map[string]any{})}, "", nil
		}
		if last.CallID != "list" {
			return nil, "Those handles were rejected.", nil
		}
		var page skListResult
		if err := skDecode(last.Output, &page); err != nil {
			return nil, "", err
		}
		byName := map[string]skListed{}
		for _, s := range page.Skills {
			byName[s.Name] = s
		}
		alpha, beta, gamma, remote := byName["alpha"], byName["beta"], byName["gamma"], byName["remote-guide"]
		if alpha.Package == "" || beta.Package == "" || gamma.Package == "" || remote.Package == "" {
			return nil, "", fmt.Errorf("listing lacks a skill: %s", last.Output)
		}
		// gamma is removed between the listing and the read.
		if err := os.RemoveAll(filepath.Join(root, "gamma")); err != nil {
			return nil, "", err
		}
		local := alpha.Authority
		read := func(auth skAuthority, pkg, resource string, extra ...string) map[string]any {
			args := map[string]any{"authority": auth, "package": pkg, "resource": resource}
			for i := 0; i+1 < len(extra); i += 2 {
				args[extra[i]] = extra[i+1]
			}
			return args
		}
		calls := []struct {
			id, want string
			args     map[string]any
		}{
			{"ok-local", "", read(local, alpha.Package, alpha.MainResource)},
			{"ok-remote", "", read(remote.Authority, remote.Package, remote.MainResource)},
			{"dot-dot", "dot segments", read(local, alpha.Package, alpha.Package+"/../beta/SKILL.md")},
			{"encoded-dots", "encoded dots or path separators", read(local, alpha.Package, alpha.Package+"/%2e%2e/beta/SKILL.md")},
			{"encoded-slash", "encoded dots or path separators", read(local, alpha.Package, alpha.Package+"/..%2Fbeta%2FSKILL.md")},
			{"cross-package", "not inside the requested package", read(local, alpha.Package, beta.MainResource)},
			{"remote-pkg-via-local", "not available from the requested authority", read(local, remote.Package, remote.MainResource)},
			{"local-pkg-via-remote", "not available from the requested authority", read(remote.Authority, alpha.Package, alpha.MainResource)},
			{"unknown-authority", "unknown skill authority", read(skAuthority{Kind: "remote", ID: "nobody"}, alpha.Package, alpha.MainResource)},
			{"forged-cursor", "invalid skills.read cursor", read(local, alpha.Package, alpha.MainResource, "cursor", forgedCursor)},
			{"query", "query strings are not allowed", read(local, alpha.Package, alpha.MainResource+"?raw=1")},
			{"fragment", "fragments are not allowed", read(local, alpha.Package, alpha.MainResource+"#top")},
			{"absolute-path", "absolute filesystem paths", read(local, alpha.Package, "/etc/passwd")},
			{"non-canonical", "non-canonical", read(local, alpha.Package, strings.Replace(alpha.MainResource, "skill://", "SKILL://", 1))},
			{"removed-package", "not available from the requested authority", read(local, gamma.Package, gamma.MainResource)},
			{"unknown-field", "unknown field", read(local, alpha.Package, alpha.MainResource, "path", "/etc/passwd")},
		}
		var tcs []fakemodel.ToolCall
		for _, c := range calls {
			want[c.id] = c.want
			tcs = append(tcs, skCall(c.id, "skills.read", c.args))
		}
		want["forged-list-cursor"] = "invalid skills.list cursor"
		tcs = append(tcs, skCall("forged-list-cursor", "skills.list", map[string]any{"cursor": "not-a-cursor"}))
		return tcs, "", nil
	}
	drv := skStartDriver(t, next)
	remoteArg := fmt.Sprintf(`skills.remote.partner={url=%q, bearer_token_env=%q}`, mcp.URL, tokenEnv)
	d := apptest.Start(t, slices.Concat([]string{"--data-dir", t.TempDir()}, drv.args(), skRootsArg(t, root), []string{"-c", remoteArg})...)
	r := d.RPC(t)
	threadID := apptest.StartThread(t, r, nil)
	tr := apptest.RunTurn(t, r, threadID, "Read some skills.")
	require.Equal(t, "completed", tr.Turn.Status, "%+v", tr.Turn.Error)
	require.Equal(t, "Those handles were rejected.", tr.Turn.Items[len(tr.Turn.Items)-1].Text)

	bodies := drv.Bodies()
	require.Len(t, bodies, 3)
	skRequireBoundedOutputs(t, bodies)
	final, err := skParseRequest(bodies[2])
	require.NoError(t, err)
	require.Len(t, final.Outputs, 1+len(want))
	for id, fragment := range want {
		out, ok := final.output(id)
		require.True(t, ok, "no output for %s", id)
		if fragment == "" {
			var res skReadResult
			require.NoError(t, skDecode(out, &res), id)
			require.NotEmpty(t, res.Contents, id)
			continue
		}
		// A rejection is the error text itself, not a result object.
		require.False(t, strings.HasPrefix(strings.TrimSpace(out), "{"), "%s: %s", id, out)
		require.Contains(t, out, fragment, id)
		require.NotContains(t, out, "Body of", id)
		require.LessOrEqual(t, len(out), 1024, id)
		t.Logf("%s → %s", id, out)
	}
}

// TestSkillsToolsOfferedOnlyWhenConfigured checks that without a [skills]
// root or remote the model is not offered the skills namespace, while
// skills/list still serves the workspace skills.
func TestSkillsToolsOfferedOnlyWhenConfigured(t *testing.T) {
	fake := apptest.StartFake(t, `{"steps":[{"text":"ok"}]}`)
	d := apptest.Start(t, append([]string{"--data-dir", t.TempDir()}, apptest.FakeArgs(fake, "responses")...)...)
	r := d.RPC(t)
	threadID := apptest.StartThread(t, r, nil)
	tr := apptest.RunTurn(t, r, threadID, "hi")
	require.Equal(t, "completed", tr.Turn.Status)
	reqs := fake.Requests()
	require.Len(t, reqs, 1)
	require.NotContains(t, string(reqs[0].Body), `"name":"skills"`)

	ws := t.TempDir()
	skWriteSkill(t, filepath.Join(ws, ".agents", "skills", "local-only"), "local-only", "A workspace skill.", "Body.")
	res := skSkillsList(t, r, map[string]any{"cwds": []string{ws}})
	require.Len(t, res.Data, 1)
	require.Len(t, res.Data[0].Skills, 1)
	require.Equal(t, "local-only", res.Data[0].Skills[0].Name)
}
