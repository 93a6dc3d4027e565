package fakemodel

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func start(t *testing.T, s Script) *Server {
	t.Helper()
	srv, err := Start(s)
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	return srv
}

// post sends a streaming request and returns the status and raw body.
func post(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// events parses an SSE body into its data payloads.
func events(body string) []string {
	var out []string
	for _, line := range strings.Split(body, "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}

func TestResponsesWireFormat(t *testing.T) {
	srv := start(t, Script{Steps: []Step{{Text: "hello", Chunks: 2, ToolCalls: []ToolCall{{Name: "shell", Arguments: json.RawMessage(`"{\"command\":[\"ls\"]}"`)}}}}})
	status, body := post(t, srv.URL()+"/responses", `{"model":"m","input":"hi","stream":true}`)
	require.Equal(t, http.StatusOK, status)
	assert.Contains(t, body, "event: response.created\n")

	var types []string
	for _, d := range events(body) {
		var ev struct {
			Type string `json:"type"`
		}
		require.NoError(t, json.Unmarshal([]byte(d), &ev), d)
		types = append(types, ev.Type)
	}
	assert.Equal(t, []string{
		"response.created",
		"response.output_item.added", "response.content_part.added",
		"response.output_text.delta", "response.output_text.delta",
		"response.output_text.done", "response.content_part.done", "response.output_item.done",
		"response.output_item.added", "response.function_call_arguments.delta",
		"response.function_call_arguments.done", "response.output_item.done",
		"response.completed",
	}, types)
	assert.Contains(t, body, `"call_id":"call_1_0"`)
	assert.Contains(t, body, `"arguments":"{\"command\":[\"ls\"]}"`)
}

func TestChatWireFormat(t *testing.T) {
	srv := start(t, Script{Steps: []Step{{Text: "hi", Usage: &Usage{InputTokens: 3, OutputTokens: 1, TotalTokens: 4}}, {Text: "again"}}})
	_, body := post(t, srv.URL()+"/chat/completions", `{"model":"m","messages":[],"stream":true,"stream_options":{"include_usage":true}}`)
	evs := events(body)
	require.NotEmpty(t, evs)
	assert.Equal(t, "[DONE]", evs[len(evs)-1])
	assert.Contains(t, evs[len(evs)-2], `"prompt_tokens":3`)

	_, body = post(t, srv.URL()+"/chat/completions", `{"model":"m","messages":[],"stream":true}`)
	assert.NotContains(t, body, "prompt_tokens", "usage only when asked for")
}

func TestMatchingAndExhaustion(t *testing.T) {
	srv := start(t, Script{ExhaustedText: "no more", Steps: []Step{
		{Name: "after-tool", Match: &Match{CallOutput: "call_x"}, Text: "after the tool"},
		{Name: "first", Text: "first answer"},
	}})
	url := srv.URL() + "/responses"

	_, body := post(t, url, `{"model":"m","stream":true,"input":[{"role":"user","content":"go"}]}`)
	assert.Contains(t, body, "first answer")

	// Only the matching step is pending: a request that does not match is
	// refused rather than answered out of order.
	status, body := post(t, url, `{"model":"m","stream":true,"input":[{"role":"user","content":"go"}]}`)
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Contains(t, body, "none of the 1 pending script steps matches")

	_, body = post(t, url, `{"model":"m","stream":true,"input":[{"type":"function_call","call_id":"call_x","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"call_x","output":"ok"}]}`)
	assert.Contains(t, body, "after the tool")

	_, body = post(t, url, `{"model":"m","stream":true,"input":[]}`)
	assert.Contains(t, body, "no more")

	reqs := srv.Requests()
	require.Len(t, reqs, 4)
	assert.Equal(t, []int{1, -1, 0, -1}, []int{reqs[0].Step, reqs[1].Step, reqs[2].Step, reqs[3].Step})

	srv.Reset()
	assert.Empty(t, srv.Requests())
	_, body = post(t, url, `{"model":"m","stream":true,"input":"again"}`)
	assert.Contains(t, body, "first answer", "Reset rewinds the script")
}

func TestChatMatchesToolMessage(t *testing.T) {
	srv := start(t, Script{Steps: []Step{{Match: &Match{CallOutput: "call_y", UserText: "please"}, Text: "matched"}}})
	_, body := post(t, srv.URL()+"/chat/completions", `{"model":"m","stream":true,"messages":[
		{"role":"user","content":"please run it"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"call_y","type":"function","function":{"name":"f","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"call_y","content":"done"},
		{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AA"}}]}]}`)
	assert.Contains(t, body, "matched")
}

func TestHTTPErrorStep(t *testing.T) {
	srv := start(t, Script{Steps: []Step{{Error: &HTTPError{Status: 429, Message: "slow down", Code: "rate_limit_exceeded", RetryAfter: "2"}}}})
	resp, err := http.Post(srv.URL()+"/responses", "application/json", strings.NewReader(`{"stream":true}`))
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, 429, resp.StatusCode)
	assert.Equal(t, "2", resp.Header.Get("Retry-After"))
	b, _ := io.ReadAll(resp.Body)
	assert.JSONEq(t, `{"error":{"message":"slow down","type":"","param":null,"code":"rate_limit_exceeded"}}`, string(b))
}

func TestRejectsNonStreamingAndUnknownPaths(t *testing.T) {
	srv := start(t, Script{})
	status, _ := post(t, srv.URL()+"/responses", `{"model":"m"}`)
	assert.Equal(t, http.StatusBadRequest, status)
	status, _ = post(t, srv.URL()+"/embeddings", `{}`)
	assert.Equal(t, http.StatusNotFound, status)
	status, _ = post(t, srv.URL()+"/responses", `not json`)
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Len(t, srv.Requests(), 2, "model requests are recorded even when refused")
}

func TestCloseCutsStalledStreams(t *testing.T) {
	srv, err := Start(Script{Steps: []Step{{Text: "x", Fail: &StreamFailure{Kind: FailStall, AfterEvents: 1}}}})
	require.NoError(t, err)
	resp, err := http.Post(srv.URL()+"/responses", "application/json", strings.NewReader(`{"stream":true}`))
	require.NoError(t, err)
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	require.NoError(t, err)
	assert.Contains(t, line, "response.created")
	srv.Close() // must not hang on the stalled handler
	srv.Close()
}

func TestParseScript(t *testing.T) {
	s, err := ParseScript([]byte(`{"steps":[{"text":"a","tool_calls":[{"name":"f","arguments":{"x":[1, 2]}}]}]}`))
	require.NoError(t, err)
	args, err := s.Steps[0].ToolCalls[0].argumentText()
	require.NoError(t, err)
	assert.Equal(t, `{"x":[1,2]}`, args)

	for _, bad := range []string{
		`{"steps":[{"txet":"typo"}]}`,
		`{"steps":[{"error":{"status":200}}]}`,
		`{"steps":[{"fail":{"kind":"explode"}}]}`,
		`{"steps":[{"tool_calls":[{"arguments":{}}]}]}`,
		`{"steps":[{"tool_calls":[{"name":"f","type":"mcp"}]}]}`,
		`{"steps":[{"times":-1}]}`,
	} {
		_, err := ParseScript([]byte(bad))
		assert.Error(t, err, bad)
	}
}

func TestSplit(t *testing.T) {
	assert.Nil(t, split("", 3))
	assert.Equal(t, []string{"héllo"}, split("héllo", 0))
	assert.Equal(t, []string{"h", "é", "l"}, split("hél", 10))
	assert.Equal(t, "héllo wörld", strings.Join(split("héllo wörld", 4), ""))
	assert.Len(t, split("héllo wörld", 4), 4)
}

func TestRun(t *testing.T) {
	path := filepath.Join(t.TempDir(), "script.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"steps":[{"text":"from the file"}]}`), 0o600))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := Run(ctx, []string{"--listen", "127.0.0.1:0", "--script", path, "--exhausted-text", "bye"}, pw, io.Discard)
		pw.Close()
		done <- err
	}()
	url, err := bufio.NewReader(pr).ReadString('\n')
	require.NoError(t, err)
	url = strings.TrimSpace(url)
	assert.True(t, strings.HasPrefix(url, "http://127.0.0.1:"), url)
	assert.True(t, strings.HasSuffix(url, "/v1"), url)

	_, body := post(t, url+"/responses", `{"stream":true,"input":"x"}`)
	assert.Contains(t, body, "from the file")
	_, body = post(t, url+"/responses", `{"stream":true,"input":"x"}`)
	assert.Contains(t, body, "bye")

	cancel()
	require.NoError(t, <-done)
}

func TestRunRejectsBadFlags(t *testing.T) {
	err := Run(context.Background(), []string{"--script", filepath.Join(t.TempDir(), "missing.json")}, io.Discard, io.Discard)
	assert.Error(t, err)
	err = Run(context.Background(), []string{"--nope"}, io.Discard, io.Discard)
	assert.Error(t, err)
}

// TestDocExampleParses keeps the script example in doc.go valid.
func TestDocExampleParses(t *testing.T) {
	src, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	var example []string
	in := false
	for _, line := range strings.Split(string(src), "\n") {
		switch {
		case line == "//\t{":
			in = true
		case !in:
			continue
		}
		example = append(example, strings.TrimPrefix(line, "//\t"))
		if line == "//\t}" {
			break
		}
	}
	require.NotEmpty(t, example)
	s, err := ParseScript([]byte(strings.Join(example, "\n")))
	require.NoError(t, err)
	require.Len(t, s.Steps, 4)

	// And it runs: 429 twice, then the planned response.
	srv := start(t, s)
	for range 2 {
		status, _ := post(t, srv.URL()+"/responses", `{"stream":true,"input":"go"}`)
		assert.Equal(t, http.StatusTooManyRequests, status)
	}
	_, body := post(t, srv.URL()+"/responses", `{"stream":true,"input":"go"}`)
	assert.Contains(t, body, `"call_id":"call_patch"`)
}

// TestRequestFacts pins what matching reads of a request body, with the
// inputs of unexpected shapes it tolerates.
func TestRequestFacts(t *testing.T) {
	cases := []struct {
		name, body string
		chat       bool
		want       facts
	}{
		{"string input", `{"input":"hello"}`, false, facts{lastUserText: "hello"}},
		{"null input", `{"input":null}`, false, facts{}},
		{"escaped text", `{"input":[{"role":"user","content":"a\"b\u00e9"}]}`, false, facts{lastUserText: "a\"bé"}},
		{"last user message, its text parts joined", `{"input":[
			{"type":"message","role":"user","content":[{"type":"input_text","text":"first"}]},
			{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_image","image_url":"x"},{"type":"input_text","text":"b"}]},
			{"type":"message","role":"assistant","content":[{"type":"output_text","text":"no"}]}]}`,
			false, facts{lastUserText: "ab"}},
		{"a last user message without content clears the text", `{"input":[
			{"role":"user","content":"first"},{"role":"user"}]}`, false, facts{}},
		{"a tool output last", `{"input":[{"role":"user","content":"go"},
			{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},
			{"type":"function_call_output","call_id":"c1","output":"ok"}]}`,
			false, facts{lastUserText: "go", lastCallOutput: "c1"}},
		{"a tool output not last", `{"input":[{"type":"custom_tool_call_output","call_id":"c2","output":"ok"},
			{"type":"message","role":"assistant","content":"fine"}]}`, false, facts{}},
		{"a later duplicate of another type", `{"input":[{"role":"user","content":"a"},{"role":"user","role":5,"content":"b"}]}`,
			false, facts{lastUserText: "a"}},
		{"elements and fields of other types", `{"input":[7,"x",null,{"role":5,"type":[1],"content":"z"},
			{"type":"tool_search_output","call_id":9}]}`, false, facts{}},
		{"chat: a tool message then an image-only user message", `{"messages":[
			{"role":"user","content":"please"},{"role":"tool","tool_call_id":"t1","content":"done"},
			{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`,
			true, facts{lastUserText: "please", lastCallOutput: "t1"}},
		{"chat: an assistant message hides the tool output", `{"messages":[
			{"role":"tool","tool_call_id":"t1","content":"done"},{"role":"assistant","content":"ok"}]}`,
			true, facts{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var req request
			require.NoError(t, decodeRequest([]byte(tc.body), &req))
			api := apiResponses
			if tc.chat {
				api = apiChat
			}
			assert.Equal(t, tc.want, requestFacts(api, req))
		})
	}
}

func TestDecodeRequestRefusesNonObjects(t *testing.T) {
	for _, body := range []string{`[]`, `"x"`, `7`, `{"input":[}`} {
		var req request
		assert.Error(t, decodeRequest([]byte(body), &req), body)
	}
}

// requestBodies are bodies of the shapes decodeRequest meets, for the
// fast path to be held against encoding/json on.
var requestBodies = []string{
	`{}`, `{"input":null}`, `{"input":[]}`, `{"input":"hello"}`,
	`{"stream":true,"model":"m","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}]}`,
	`{"stream":true,"input":[{"role":"user","content":"a\"b\u00e9"},{"type":"function_call_output","call_id":"c\u0031","output":"ok"}]}`,
	`{"Stream":true,"input":[]}`, `{"stream":true,"stream":false}`, `{"input":[{"ROLE":"user"}]}`,
	`{"input":[7,"x",null,{"role":5,"type":[1],"content":"z"}]}`, `{"input":[{"role":null,"content":null}]}`,
	`{"messages":[{"role":"tool","tool_call_id":"t1","content":"done"}],"stream_options":{"include_usage":true}}`,
	`{"input":[{"role":"user","role":"assistant"}]}`, `{"input":[{"r\u006fle":"user"}]}`, `{"input":[{"role":"us\xffer"}]}`,
	`{"input":[}`, `{"input":`, `{"input":[{}`, `[]`,
	// Items before the last user message are checked, not read: these
	// two are answered, where a read of the first item would have
	// sent them to the whole decode.
	`{"input":[{"role":"user","role":"assistant"},{"role":"user","content":"x"}]}`,
	`{"input":[{"ROLE":"user","content":"a"},{"type":"message","role":"user","content":"b"},{"type":"function_call_output","call_id":"c"}]}`, ` {"input" : [ {"type" : "message" , "role":"user","content":"x"} ] } `,
}

// TestScanRequestAgreesWithEncodingJSON holds decodeRequest's fast path
// to the whole decode: wherever it answers, it answers the same.
func TestScanRequestAgreesWithEncodingJSON(t *testing.T) {
	answered := 0
	for _, body := range requestBodies {
		if checkScanAgrees(t, []byte(body)) {
			answered++
		}
	}
	assert.Equal(t, 9, answered, "the fast path answers the plain shapes")
	assert.True(t, checkScanAgrees(t, longThreadRequest(50)), "the fast path answers a daemon's request")
}

func FuzzScanRequest(f *testing.F) {
	for _, body := range requestBodies {
		f.Add([]byte(body))
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkScanAgrees(t, body) })
}

// checkScanAgrees reports whether scanRequest answered for body, failing
// t when its answer differs from encoding/json's: the same fields and
// facts, and as many input items (the fast path reads only those the
// facts come from).
func checkScanAgrees(t *testing.T, body []byte) bool {
	t.Helper()
	var fast request
	if !scanRequest(body, &fast) {
		return false
	}
	var whole request
	err := json.Unmarshal(body, &whole)
	if !assert.NoError(t, err, "%s", body) {
		return true
	}
	for _, api := range []wireAPI{apiResponses, apiChat} {
		assert.Equal(t, requestFacts(api, whole), requestFacts(api, fast), "%s", body)
	}
	assert.Len(t, fast.Input, len(whole.Input), "%s", body)
	assert.Equal(t, whole.Input == nil, fast.Input == nil, "%s", body)
	fast.Input, whole.Input = nil, nil
	assert.Equal(t, whole, fast, "%s", body)
	return true
}

// longThreadRequest is a Responses request as the daemon sends it on the
// turn after turns of a shell exchange each: instructions, tool specs,
// and four items a turn.
func longThreadRequest(turns int) []byte {
	type m = map[string]any
	input := []any{}
	for i := range turns {
		id := fmt.Sprintf("call_%d", i)
		input = append(input,
			m{"type": "message", "role": "user", "content": []any{m{"type": "input_text", "text": "run echo hi please, turn " + id}}},
			m{"type": "function_call", "name": "exec_command", "call_id": id, "arguments": `{"cmd":"echo hi","workdir":"/tmp/work","yield_time_ms":10000}`},
			m{"type": "function_call_output", "call_id": id, "output": "Chunk ID: 1a2b3c\nWall time: 0.0012 seconds\nProcess exited with code 0\nOriginal token count: 1\nOutput:\nhi\n"},
			m{"type": "message", "role": "assistant", "content": []any{m{"type": "output_text", "text": "It printed hi."}}})
	}
	input = append(input, m{"type": "message", "role": "user", "content": []any{m{"type": "input_text", "text": "last"}}})
	tools := []any{}
	for i := range 12 {
		tools = append(tools, m{"type": "function", "name": fmt.Sprintf("tool_%d", i), "description": strings.Repeat("what the tool does. ", 20),
			"parameters": m{"type": "object", "properties": m{"cmd": m{"type": "string", "description": "the command"}}, "required": []string{"cmd"}}})
	}
	body, err := json.Marshal(m{"model": "fake-model", "instructions": strings.Repeat("You are a coding agent. ", 400), "input": input,
		"tools": tools, "tool_choice": "auto", "parallel_tool_calls": false, "store": false, "stream": true, "include": []string{}})
	if err != nil {
		panic(err)
	}
	return body
}

// BenchmarkDecodeRequest reads a request on a 200-turn thread, as the
// fake model does before it answers: with the fast path, and whole
// with encoding/json as it did before.
func BenchmarkDecodeRequest(b *testing.B) {
	body := longThreadRequest(200)
	b.Run("scan", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			var req request
			if err := decodeRequest(body, &req); err != nil || len(req.Input) != 801 {
				b.Fatal(err, len(req.Input))
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			var req request
			if err := json.Unmarshal(body, &req); err != nil || len(req.Input) != 801 {
				b.Fatal(err, len(req.Input))
			}
		}
	})
}

func TestReadBody(t *testing.T) {
	const body = `{"input":"hi"}`
	declared, err := http.NewRequest(http.MethodPost, "/v1/responses", strings.NewReader(body))
	require.NoError(t, err)
	require.EqualValues(t, len(body), declared.ContentLength)
	got, err := readBody(declared)
	require.NoError(t, err)
	require.Equal(t, body, string(got))

	undeclared, err := http.NewRequest(http.MethodPost, "/v1/responses", io.MultiReader(strings.NewReader(body)))
	require.NoError(t, err)
	require.EqualValues(t, 0, undeclared.ContentLength)
	got, err = readBody(undeclared)
	require.NoError(t, err)
	require.Equal(t, body, string(got))

	short, err := http.NewRequest(http.MethodPost, "/v1/responses", strings.NewReader(body))
	require.NoError(t, err)
	short.ContentLength = int64(len(body)) + 10
	_, err = readBody(short)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)

	// A length past maxPreallocated is not allocated up front: the body
	// is read as it comes (here, a client-side request whose reader does
	// not hold it to its length).
	huge, err := http.NewRequest(http.MethodPost, "/v1/responses", strings.NewReader(body))
	require.NoError(t, err)
	huge.ContentLength = maxPreallocated + 1
	got, err = readBody(huge)
	require.NoError(t, err)
	require.Equal(t, body, string(got))
}
