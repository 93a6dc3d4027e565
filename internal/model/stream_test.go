package model_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/model/fakemodel"
)

func TestTextStreaming(t *testing.T) {
	const text = "Hello, wörld! Streaming works in pieces."
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			srv := startFake(t, fakemodel.Script{Steps: []fakemodel.Step{{Text: text, Chunks: 4}}})
			c, _ := newClient(t, srv.URL(), wire, nil)

			events, res, err := run(t, c, userRequest("hi"))
			require.NoError(t, err)

			var added, done []model.InputItem
			var deltas []string
			var itemIDs []string
			for _, ev := range events {
				switch ev := ev.(type) {
				case model.OutputItemAdded:
					added = append(added, ev.Item)
				case model.TextDelta:
					deltas = append(deltas, ev.Delta)
					itemIDs = append(itemIDs, ev.ItemID)
				case model.OutputItemDone:
					done = append(done, ev.Item)
				}
			}
			require.Len(t, deltas, 4)
			assert.Equal(t, text, strings.Join(deltas, ""))
			require.Len(t, added, 1)
			require.Len(t, done, 1)
			msg := done[0]
			assert.Equal(t, model.ItemMessage, msg.Type)
			assert.Equal(t, model.RoleAssistant, msg.Role)
			assert.Equal(t, text, msg.Text())
			assert.NotEmpty(t, msg.ID)
			assert.Equal(t, msg.ID, added[0].ID)
			for _, id := range itemIDs {
				assert.Equal(t, msg.ID, id, "deltas carry the message item id")
			}
			if wire == model.WireAPIResponses {
				assert.Equal(t, "msg_1", msg.ID, "upstream item ids are reused")
				assert.Equal(t, "resp_1", res.ResponseID)
			} else {
				assert.Equal(t, "msg_chatcmpl-1", msg.ID)
				assert.Equal(t, "chatcmpl-1", res.ResponseID)
			}
			require.IsType(t, model.Completed{}, events[len(events)-1], "Completed comes last")
			assert.Equal(t, []model.InputItem{msg}, res.Items)

			reqs := srv.Requests()
			require.Len(t, reqs, 1)
			b := body(t, reqs[0])
			assert.Equal(t, "fake-model", b["model"])
			assert.Equal(t, true, b["stream"])
			if wire == model.WireAPIResponses {
				assert.Equal(t, "/v1/responses", reqs[0].Path)
				assert.Equal(t, "Be brief.", b["instructions"])
				assert.Equal(t, false, b["store"])
			} else {
				assert.Equal(t, "/v1/chat/completions", reqs[0].Path)
				jsonEq(t, `{"include_usage":true}`, b["stream_options"])
				jsonEq(t, `[{"role":"system","content":"Be brief."},{"role":"user","content":"hi"}]`, b["messages"])
			}
		})
	}
}

func TestReasoningSummaryResponses(t *testing.T) {
	srv := startFake(t, fakemodel.Script{Steps: []fakemodel.Step{{
		Reasoning: &fakemodel.Reasoning{Summary: []string{"**Plan** first part", "second part"}, Text: "raw thoughts", Chunks: 2, EncryptedContent: "enc-1"},
		Text:      "answer",
	}}})
	c, _ := newClient(t, srv.URL(), model.WireAPIResponses, nil)
	req := userRequest("think")
	req.ReasoningEffort, req.ReasoningSummary = "high", "auto"

	events, res, err := run(t, c, req)
	require.NoError(t, err)

	var trace []string
	summaries := map[int]string{}
	var raw string
	for _, ev := range events {
		switch ev := ev.(type) {
		case model.ReasoningSummaryPartAdded:
			trace = append(trace, "part")
			assert.Equal(t, "rs_1", ev.ItemID)
			assert.Equal(t, len(summaries), ev.Index)
			summaries[ev.Index] = ""
		case model.ReasoningSummaryDelta:
			trace = append(trace, "delta")
			assert.Equal(t, "rs_1", ev.ItemID)
			summaries[ev.Index] += ev.Delta
		case model.ReasoningTextDelta:
			trace = append(trace, "text")
			raw += ev.Delta
		}
	}
	assert.Equal(t, []string{"part", "delta", "delta", "part", "delta", "delta", "text", "text"}, trace)
	assert.Equal(t, map[int]string{0: "**Plan** first part", 1: "second part"}, summaries)
	assert.Equal(t, "raw thoughts", raw)

	require.Len(t, res.Items, 2)
	rs := res.Items[0]
	assert.Equal(t, model.ItemReasoning, rs.Type)
	assert.Equal(t, "rs_1", rs.ID)
	assert.Equal(t, "enc-1", rs.EncryptedContent)
	assert.Equal(t, []model.ContentPart{{Type: "summary_text", Text: "**Plan** first part"}, {Type: "summary_text", Text: "second part"}}, rs.Summary)
	assert.Equal(t, "raw thoughts", rs.Text())

	b := body(t, srv.Requests()[0])
	jsonEq(t, `{"effort":"high","summary":"auto"}`, b["reasoning"])
	jsonEq(t, `["reasoning.encrypted_content"]`, b["include"])
}

func TestReasoningContentChat(t *testing.T) {
	srv := startFake(t, fakemodel.Script{Steps: []fakemodel.Step{{
		Reasoning: &fakemodel.Reasoning{Text: "let me think", Chunks: 3}, Text: "ok",
	}}})
	c, _ := newClient(t, srv.URL(), model.WireAPIChat, nil)
	req := userRequest("think")
	req.ReasoningEffort = "low"
	events, res, err := run(t, c, req)
	require.NoError(t, err)
	var raw string
	for _, ev := range events {
		if d, ok := ev.(model.ReasoningTextDelta); ok {
			raw += d.Delta
			assert.Equal(t, "rs_chatcmpl-1", d.ItemID)
		}
	}
	assert.Equal(t, "let me think", raw)
	require.Len(t, res.Items, 2)
	assert.Equal(t, model.ItemReasoning, res.Items[0].Type)
	assert.Equal(t, "let me think", res.Items[0].Text())
	assert.Equal(t, "ok", res.Items[1].Text())
	assert.Equal(t, "low", body(t, srv.Requests()[0])["reasoning_effort"])
}

var shellTool = json.RawMessage(`{"type":"function","name":"shell","description":"Runs a command.","strict":false,"parameters":{"type":"object","properties":{"command":{"type":"array","items":{"type":"string"}}},"required":["command"],"additionalProperties":false}}`)

var patchTool = json.RawMessage(`{"type":"custom","name":"apply_patch","description":"Applies a patch.","format":{"type":"grammar","syntax":"lark","definition":"start: operation+"}}`)

func TestParallelToolCalls(t *testing.T) {
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			srv := startFake(t, fakemodel.Script{Steps: []fakemodel.Step{{ToolCalls: []fakemodel.ToolCall{
				{CallID: "call_a", Name: "shell", Arguments: json.RawMessage(`{"command":["ls","-la"]}`), Chunks: 3},
				{CallID: "call_b", Name: "shell", Arguments: json.RawMessage(`{"command":["cat","README.md"]}`), Chunks: 4},
			}}}})
			c, _ := newClient(t, srv.URL(), wire, nil)
			req := userRequest("look around")
			req.Tools = []json.RawMessage{shellTool}
			req.ParallelToolCalls = true

			events, res, err := run(t, c, req)
			require.NoError(t, err)
			var done []model.InputItem
			for _, ev := range events {
				if d, ok := ev.(model.OutputItemDone); ok {
					done = append(done, d.Item)
				}
			}
			require.Len(t, done, 2)
			assert.Equal(t, done, res.Items)
			for i, want := range []struct{ callID, args string }{
				{"call_a", `{"command":["ls","-la"]}`},
				{"call_b", `{"command":["cat","README.md"]}`},
			} {
				it := done[i]
				assert.Equal(t, model.ItemFunctionCall, it.Type)
				assert.Equal(t, want.callID, it.CallID)
				assert.Equal(t, "shell", it.Name)
				assert.Equal(t, want.args, it.Arguments, "argument fragments are accumulated")
			}

			b := body(t, srv.Requests()[0])
			assert.Equal(t, true, b["parallel_tool_calls"])
			assert.Equal(t, "auto", b["tool_choice"])
			if wire == model.WireAPIResponses {
				jsonEq(t, "["+string(shellTool)+"]", b["tools"])
			} else {
				jsonEq(t, `[{"type":"function","function":{"name":"shell","description":"Runs a command.","strict":false,
					"parameters":{"type":"object","properties":{"command":{"type":"array","items":{"type":"string"}}},"required":["command"],"additionalProperties":false}}}]`, b["tools"])
			}
		})
	}
}

func TestCustomToolCall(t *testing.T) {
	const patch = "*** Begin Patch\n*** Add File: a.txt\n+hello \"quoted\"\n*** End Patch\n"
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			srv := startFake(t, fakemodel.Script{Steps: []fakemodel.Step{{ToolCalls: []fakemodel.ToolCall{
				{Type: "custom", CallID: "call_p", Name: "apply_patch", Input: patch, Chunks: 5},
			}}}})
			c, _ := newClient(t, srv.URL(), wire, nil)
			req := userRequest("patch it")
			req.Tools = []json.RawMessage{patchTool, json.RawMessage(`{"type":"web_search"}`)}

			_, res, err := run(t, c, req)
			require.NoError(t, err)
			require.Len(t, res.Items, 1)
			it := res.Items[0]
			assert.Equal(t, model.ItemCustomToolCall, it.Type)
			assert.Equal(t, "call_p", it.CallID)
			assert.Equal(t, "apply_patch", it.Name)
			assert.Equal(t, patch, it.Input)

			b := body(t, srv.Requests()[0])
			if wire == model.WireAPIResponses {
				jsonEq(t, `[`+string(patchTool)+`,{"type":"web_search"}]`, b["tools"])
				return
			}
			// Chat: the custom tool becomes a one-string-parameter
			// function; the hosted web_search tool is dropped.
			tools := b["tools"].([]any)
			require.Len(t, tools, 1)
			fn := tools[0].(map[string]any)["function"].(map[string]any)
			assert.Equal(t, "apply_patch", fn["name"])
			assert.Contains(t, fn["description"], "Applies a patch.")
			assert.Contains(t, fn["description"], "start: operation+")
			jsonEq(t, `{"type":"object","properties":{"input":{"type":"string","description":"The raw input for the tool."}},"required":["input"],"additionalProperties":false}`, fn["parameters"])
		})
	}
}

func TestHistoryReplay(t *testing.T) {
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			srv := startFake(t, fakemodel.Script{Steps: []fakemodel.Step{
				{Name: "answer", Match: &fakemodel.Match{CallOutput: "call_p"}, Text: "All done."},
				{
					Name:      "calls",
					Reasoning: &fakemodel.Reasoning{Summary: []string{"Thinking"}, EncryptedContent: "enc-xyz"},
					Text:      "Running <two> tools & more.",
					ToolCalls: []fakemodel.ToolCall{
						{CallID: "call_s", Name: "shell", Arguments: json.RawMessage(`{"command":["ls"]}`), Chunks: 2},
						{Type: "custom", CallID: "call_p", Name: "apply_patch", Input: "*** Begin Patch\n*** End Patch\n"},
					},
				},
			}})
			c, _ := newClient(t, srv.URL(), wire, nil)
			req := userRequest("do things")
			req.Tools = []json.RawMessage{shellTool, patchTool}

			_, first, err := run(t, c, req)
			require.NoError(t, err)

			// The turns layer appends the output items and the tool outputs.
			req.Input = append(req.Input, first.Items...)
			req.Input = append(req.Input,
				model.InputItem{Type: model.ItemFunctionCallOutput, CallID: "call_s", Output: model.ToolOutput{Content: []model.ContentPart{
					{Type: model.PartInputText, Text: "README.md"},
					{Type: model.PartInputImage, ImageURL: "data:image/png;base64,AAAA"},
				}}},
				model.CustomToolCallOutput("call_p", "Success. Updated the following files:\nA a.txt\n"),
			)
			_, second, err := run(t, c, req)
			require.NoError(t, err)
			require.Len(t, second.Items, 1)
			assert.Equal(t, "All done.", second.Items[0].Text())

			reqs := srv.Requests()
			require.Len(t, reqs, 2)
			assert.Equal(t, 1, reqs[0].Step)
			assert.Equal(t, 0, reqs[1].Step, "the matching step answered the replay")
			b := body(t, reqs[1])
			if wire == model.WireAPIResponses {
				jsonEq(t, `[
					{"type":"message","role":"user","content":[{"type":"input_text","text":"do things"}]},
					{"type":"reasoning","summary":[{"type":"summary_text","text":"Thinking"}],"encrypted_content":"enc-xyz"},
					{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Running <two> tools & more."}]},
					{"type":"function_call","call_id":"call_s","name":"shell","arguments":"{\"command\":[\"ls\"]}"},
					{"type":"custom_tool_call","call_id":"call_p","name":"apply_patch","input":"*** Begin Patch\n*** End Patch\n"},
					{"type":"function_call_output","call_id":"call_s","output":[{"type":"input_text","text":"README.md"},{"type":"input_image","image_url":"data:image/png;base64,AAAA"}]},
					{"type":"custom_tool_call_output","call_id":"call_p","output":"Success. Updated the following files:\nA a.txt\n"}
				]`, b["input"])
				assert.Contains(t, string(reqs[1].Body), "Running <two> tools & more.", "no HTML escaping")
				return
			}
			jsonEq(t, `[
				{"role":"system","content":"Be brief."},
				{"role":"user","content":"do things"},
				{"role":"assistant","content":"Running <two> tools & more.","tool_calls":[
					{"id":"call_s","type":"function","function":{"name":"shell","arguments":"{\"command\":[\"ls\"]}"}},
					{"id":"call_p","type":"function","function":{"name":"apply_patch","arguments":"{\"input\":\"*** Begin Patch\\n*** End Patch\\n\"}"}}]},
				{"role":"tool","tool_call_id":"call_s","content":"README.md"},
				{"role":"tool","tool_call_id":"call_p","content":"Success. Updated the following files:\nA a.txt\n"},
				{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}
			]`, b["messages"])
		})
	}
}

func TestUsage(t *testing.T) {
	u := fakemodel.Usage{InputTokens: 120, CachedInputTokens: 100, OutputTokens: 30, ReasoningOutputTokens: 10, TotalTokens: 150}
	want := model.Usage{InputTokens: 120, CachedInputTokens: 100, OutputTokens: 30, ReasoningOutputTokens: 10, TotalTokens: 150}
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			srv := startFake(t, fakemodel.Script{Steps: []fakemodel.Step{{Text: "x", Usage: &u}}})
			c, _ := newClient(t, srv.URL(), wire, nil)
			events, res, err := run(t, c, userRequest("count"))
			require.NoError(t, err)
			assert.Equal(t, want, res.Usage)
			assert.Equal(t, 1, res.Attempts)
			last := events[len(events)-1].(model.Completed)
			assert.Equal(t, want, last.Usage)
			assert.Equal(t, res.ResponseID, last.ResponseID)
		})
	}
}

func TestUnauthorizedIsNotRetried(t *testing.T) {
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			srv := startFake(t, fakemodel.Script{Steps: []fakemodel.Step{
				{Error: &fakemodel.HTTPError{Status: 401, Message: "Incorrect API key provided.", Type: "invalid_request_error", Code: "invalid_api_key"}},
				{Text: "never"},
			}})
			c, sl := newClient(t, srv.URL(), wire, nil)
			_, _, err := run(t, c, userRequest("hi"))
			me := modelError(t, err, model.KindUnauthorized)
			assert.Equal(t, 401, me.HTTPStatus)
			assert.Equal(t, "invalid_api_key", me.Code)
			assert.Equal(t, 1, me.Attempts)
			assert.Equal(t, "unexpected status 401 Unauthorized: Incorrect API key provided.", me.TurnErrorMessage())
			assert.JSONEq(t, `"unauthorized"`, string(me.CodexErrorInfo()))
			assert.Len(t, srv.Requests(), 1)
			assert.Empty(t, sl.got())
		})
	}
}

func TestRateLimitRetriedThenSucceeds(t *testing.T) {
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			srv := startFake(t, fakemodel.Script{Steps: []fakemodel.Step{
				{Error: &fakemodel.HTTPError{Status: 429, Message: "Rate limit reached", Code: "rate_limit_exceeded"}, Times: 2},
				{Text: "finally"},
			}})
			c, sl := newClient(t, srv.URL(), wire, nil)
			_, res, err := run(t, c, userRequest("hi"))
			require.NoError(t, err)
			assert.Equal(t, "finally", res.Items[0].Text())
			assert.Len(t, srv.Requests(), 3)
			assert.Equal(t, 3, res.Attempts, "the retries are counted in the result")
			// Exponential backoff from 200ms; jitter is pinned to 1.
			assert.Equal(t, []time.Duration{200 * time.Millisecond, 400 * time.Millisecond}, sl.got())
		})
	}
}

func TestRetryAfterIsHonoured(t *testing.T) {
	srv := startFake(t, fakemodel.Script{Steps: []fakemodel.Step{
		{Error: &fakemodel.HTTPError{Status: 429, Message: "slow down", RetryAfter: "7"}},
		{Error: &fakemodel.HTTPError{Status: 503, Message: "busy", RetryAfter: "0"}},
		{Text: "ok"},
	}})
	c, sl := newClient(t, srv.URL(), model.WireAPIResponses, nil)
	_, _, err := run(t, c, userRequest("hi"))
	require.NoError(t, err)
	assert.Equal(t, []time.Duration{7 * time.Second, 0}, sl.got())
}

func TestRetryAfterTooLongGivesUp(t *testing.T) {
	srv := startFake(t, fakemodel.Script{Steps: []fakemodel.Step{
		{Error: &fakemodel.HTTPError{Status: 429, Message: "come back tomorrow", RetryAfter: "86400"}},
		{Text: "never"},
	}})
	c, sl := newClient(t, srv.URL(), model.WireAPIResponses, nil)
	_, _, err := run(t, c, userRequest("hi"))
	me := modelError(t, err, model.KindRateLimited)
	assert.Equal(t, 24*time.Hour, me.RetryAfter)
	assert.Empty(t, sl.got())
	assert.Len(t, srv.Requests(), 1)
}

func TestRateLimitBeyondMaxRetries(t *testing.T) {
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			srv := startFake(t, fakemodel.Script{Steps: []fakemodel.Step{
				{Error: &fakemodel.HTTPError{Status: 429, Message: "Rate limit reached", Type: "rate_limit_error"}, Times: 10},
			}})
			c, sl := newClient(t, srv.URL(), wire, func(cfg *model.ProviderConfig) { cfg.MaxRetries = 2 })
			_, _, err := run(t, c, userRequest("hi"))
			me := modelError(t, err, model.KindRateLimited)
			assert.Equal(t, 429, me.HTTPStatus)
			assert.Equal(t, 3, me.Attempts)
			assert.Len(t, srv.Requests(), 3)
			assert.Len(t, sl.got(), 2)
			assert.JSONEq(t, `{"responseTooManyFailedAttempts":{"httpStatusCode":429}}`, string(me.CodexErrorInfo()))
			assert.Equal(t, "exceeded retry limit, last status: 429 Too Many Requests: Rate limit reached", me.TurnErrorMessage())
		})
	}
}

func TestRetriesCanBeDisabled(t *testing.T) {
	srv := startFake(t, fakemodel.Script{Steps: []fakemodel.Step{{Error: &fakemodel.HTTPError{Status: 500, Message: "boom"}, Times: 3}}})
	c, sl := newClient(t, srv.URL(), model.WireAPIResponses, func(cfg *model.ProviderConfig) { cfg.MaxRetries = -1 })
	_, _, err := run(t, c, userRequest("hi"))
	me := modelError(t, err, model.KindServerError)
	assert.Equal(t, 1, me.Attempts)
	assert.Empty(t, sl.got())
}

func TestServerErrorRetried(t *testing.T) {
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			srv := startFake(t, fakemodel.Script{Steps: []fakemodel.Step{
				{Error: &fakemodel.HTTPError{Status: 500, Body: "<html>upstream exploded</html>"}},
				{Error: &fakemodel.HTTPError{Status: 502, Message: "bad gateway"}},
				{Text: "recovered"},
			}})
			c, sl := newClient(t, srv.URL(), wire, nil)
			_, res, err := run(t, c, userRequest("hi"))
			require.NoError(t, err)
			assert.Equal(t, "recovered", res.Items[0].Text())
			assert.Len(t, srv.Requests(), 3)
			assert.Len(t, sl.got(), 2)
		})
	}
}

func TestServerErrorMessageFromNonJSONBody(t *testing.T) {
	srv := startFake(t, fakemodel.Script{Steps: []fakemodel.Step{{Error: &fakemodel.HTTPError{Status: 500, Body: "<html>upstream exploded</html>"}, Times: 5}}})
	c, _ := newClient(t, srv.URL(), model.WireAPIChat, func(cfg *model.ProviderConfig) { cfg.MaxRetries = 1 })
	_, _, err := run(t, c, userRequest("hi"))
	me := modelError(t, err, model.KindServerError)
	assert.Equal(t, "<html>upstream exploded</html>", me.Message)
	assert.Equal(t, 2, me.Attempts)
}

func TestContextWindowExceededStatus(t *testing.T) {
	srv := startFake(t, fakemodel.Script{Steps: []fakemodel.Step{{Error: &fakemodel.HTTPError{
		Status: 400, Message: "Your input exceeds the context window of this model.", Type: "invalid_request_error", Code: "context_length_exceeded"}}}})
	c, sl := newClient(t, srv.URL(), model.WireAPIResponses, nil)
	_, _, err := run(t, c, userRequest("hi"))
	me := modelError(t, err, model.KindContextWindowExceeded)
	assert.JSONEq(t, `"contextWindowExceeded"`, string(me.CodexErrorInfo()))
	assert.Empty(t, sl.got())
}

func TestMalformedEvent(t *testing.T) {
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			srv := startFake(t, fakemodel.Script{Steps: []fakemodel.Step{
				{Text: "some text", Chunks: 3, Fail: &fakemodel.StreamFailure{Kind: fakemodel.FailMalformed, AfterEvents: 2}},
				{Text: "not reached"},
			}})
			c, sl := newClient(t, srv.URL(), wire, nil)
			_, _, err := run(t, c, userRequest("hi"))
			me := modelError(t, err, model.KindMalformed)
			assert.Contains(t, me.Message, "cannot decode stream event")
			assert.JSONEq(t, `"other"`, string(me.CodexErrorInfo()))
			assert.Len(t, srv.Requests(), 1, "a broken stream is not retried")
			assert.Empty(t, sl.got())
		})
	}
}

func TestStreamCut(t *testing.T) {
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			srv := startFake(t, fakemodel.Script{Steps: []fakemodel.Step{
				{Text: "partial answer", Chunks: 5, Fail: &fakemodel.StreamFailure{Kind: fakemodel.FailCut, AfterEvents: 4}},
			}})
			c, _ := newClient(t, srv.URL(), wire, nil)
			events, _, err := run(t, c, userRequest("hi"))
			me := modelError(t, err, model.KindStreamDisconnected)
			assert.NotEmpty(t, events, "events before the cut were delivered")
			want := "stream disconnected before completion: stream closed before response.completed"
			if wire == model.WireAPIChat {
				want = "stream disconnected before completion: stream closed before finish_reason"
			}
			assert.Equal(t, want, me.TurnErrorMessage())
			msg, info := model.TurnError(err)
			assert.Equal(t, want, msg)
			assert.JSONEq(t, `"other"`, string(info))
		})
	}
}

func TestConnectionReset(t *testing.T) {
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			srv := startFake(t, fakemodel.Script{Steps: []fakemodel.Step{
				{Text: "partial answer", Chunks: 5, Fail: &fakemodel.StreamFailure{Kind: fakemodel.FailReset, AfterEvents: 3}},
			}})
			c, _ := newClient(t, srv.URL(), wire, nil)
			_, _, err := run(t, c, userRequest("hi"))
			me := modelError(t, err, model.KindStreamDisconnected)
			assert.True(t, strings.HasPrefix(me.TurnErrorMessage(), "stream disconnected before completion: "), me.TurnErrorMessage())
		})
	}
}

func TestFailureInsideStream(t *testing.T) {
	cases := []struct {
		code, message string
		kind          model.ErrorKind
		turnMessage   string
		info          string
	}{
		{"server_error", "The server had an error while processing your request.", model.KindStreamDisconnected,
			"stream disconnected before completion: The server had an error while processing your request.", `"other"`},
		{"context_length_exceeded", "too long", model.KindContextWindowExceeded,
			"The model's context window is exhausted. Start a new thread or clear earlier history before retrying.", `"contextWindowExceeded"`},
		{"rate_limit_exceeded", "Rate limit reached for tokens", model.KindRateLimited,
			"rate limit exceeded: Rate limit reached for tokens", `"rateLimitExceeded"`},
	}
	for _, wire := range wires {
		for _, tc := range cases {
			t.Run(wire+"/"+tc.code, func(t *testing.T) {
				srv := startFake(t, fakemodel.Script{Steps: []fakemodel.Step{
					{Text: "x", Fail: &fakemodel.StreamFailure{Kind: fakemodel.FailFailed, AfterEvents: 1, Code: tc.code, Message: tc.message}},
				}})
				c, sl := newClient(t, srv.URL(), wire, nil)
				_, _, err := run(t, c, userRequest("hi"))
				me := modelError(t, err, tc.kind)
				assert.Equal(t, tc.turnMessage, me.TurnErrorMessage())
				assert.JSONEq(t, tc.info, string(me.CodexErrorInfo()))
				assert.Empty(t, sl.got(), "failures inside a stream are not retried")
			})
		}
	}
}

func TestIdleTimeout(t *testing.T) {
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			srv := startFake(t, fakemodel.Script{Steps: []fakemodel.Step{
				{Text: "slow", Fail: &fakemodel.StreamFailure{Kind: fakemodel.FailStall, AfterEvents: 2}},
			}})
			c, _ := newClient(t, srv.URL(), wire, func(cfg *model.ProviderConfig) { cfg.StreamIdleTimeout = 100 * time.Millisecond })
			_, _, err := run(t, c, userRequest("hi"))
			me := modelError(t, err, model.KindStreamDisconnected)
			assert.Equal(t, "stream disconnected before completion: idle timeout waiting for SSE", me.TurnErrorMessage())
		})
	}
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

func TestConnectionRefused(t *testing.T) {
	addr := closedPort(t)
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			c, sl := newClient(t, "http://"+addr+"/v1", wire, func(cfg *model.ProviderConfig) {
				cfg.MaxRetries = 2
				cfg.QueryParams = map[string]string{"sig": "s3cret"}
			})
			_, _, err := run(t, c, userRequest("hi"))
			me := modelError(t, err, model.KindConnectionFailed)
			assert.Equal(t, 0, me.HTTPStatus)
			assert.Equal(t, 3, me.Attempts)
			assert.Len(t, sl.got(), 2, "connection failures are retried")
			assert.Contains(t, me.TurnErrorMessage(), "connection refused")
			assert.NotContains(t, me.TurnErrorMessage(), "s3cret", "the URL's query is not shown")
			assert.JSONEq(t, `{"httpConnectionFailed":{"httpStatusCode":null}}`, string(me.CodexErrorInfo()))
		})
	}
}

func TestCancelMidStream(t *testing.T) {
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			srv := startFake(t, fakemodel.Script{Steps: []fakemodel.Step{
				{Text: "first words and then silence", Chunks: 3, Fail: &fakemodel.StreamFailure{Kind: fakemodel.FailStall, AfterEvents: 4}},
			}})
			c, _ := newClient(t, srv.URL(), wire, nil) // default idle timeout: minutes

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			firstDelta := make(chan struct{})
			var once sync.Once
			result := make(chan error, 1)
			go func() {
				_, err := c.Stream(ctx, userRequest("hi"), func(ev model.Event) error {
					if _, ok := ev.(model.TextDelta); ok {
						once.Do(func() { close(firstDelta) })
					}
					return nil
				})
				result <- err
			}()
			<-firstDelta
			cancel()
			select {
			case err := <-result:
				modelError(t, err, model.KindCanceled)
				assert.ErrorIs(t, err, context.Canceled)
			case <-time.After(10 * time.Second):
				t.Fatal("Stream did not return after its context was canceled")
			}
		})
	}
}

func TestCancelDuringRetryWait(t *testing.T) {
	srv := startFake(t, fakemodel.Script{Steps: []fakemodel.Step{{Error: &fakemodel.HTTPError{Status: 503, Message: "busy"}, Times: 5}}})
	ctx, cancel := context.WithCancel(context.Background())
	c, err := model.New(model.ProviderConfig{ID: "fake", BaseURL: srv.URL()}, nil, model.WithSleep(func(context.Context, time.Duration) error {
		cancel()
		return context.Canceled
	}))
	require.NoError(t, err)
	_, err = c.Stream(ctx, userRequest("hi"), nil)
	modelError(t, err, model.KindCanceled)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Len(t, srv.Requests(), 1)
}

func TestCallbackErrorStopsStream(t *testing.T) {
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			srv := startFake(t, fakemodel.Script{Steps: []fakemodel.Step{{Text: "abcdef", Chunks: 3}}})
			c, sl := newClient(t, srv.URL(), wire, nil)
			stop := errors.New("subscriber gone")
			deltas := 0
			_, err := c.Stream(context.Background(), userRequest("hi"), func(ev model.Event) error {
				if _, ok := ev.(model.TextDelta); ok {
					deltas++
					return stop
				}
				return nil
			})
			assert.Same(t, stop, err, "the callback's error is returned unchanged")
			assert.Equal(t, 1, deltas)
			assert.Empty(t, sl.got())
		})
	}
}

func TestOutputSchema(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"],"additionalProperties":false}`)
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			srv := startFake(t, fakemodel.Script{Steps: []fakemodel.Step{{Text: `{"ok":true}`}}})
			c, _ := newClient(t, srv.URL(), wire, nil)
			req := userRequest("hi")
			req.OutputSchema = schema
			_, _, err := run(t, c, req)
			require.NoError(t, err)
			b := body(t, srv.Requests()[0])
			if wire == model.WireAPIResponses {
				jsonEq(t, `{"format":{"type":"json_schema","name":"codex_output_schema","schema":`+string(schema)+`,"strict":true}}`, b["text"])
			} else {
				jsonEq(t, `{"type":"json_schema","json_schema":{"name":"codex_output_schema","schema":`+string(schema)+`,"strict":true}}`, b["response_format"])
			}
		})
	}
}

// TestEnvironmentIsIgnored proves that OPENAI_* environment variables (the
// defaults of OpenAI's SDKs) do not leak into a configured client, and that
// the configured key, headers and query parameters are sent.
func TestEnvironmentIsIgnored(t *testing.T) {
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/bogus/v1")
	t.Setenv("OPENAI_API_KEY", "sk-from-env")
	t.Setenv("OPENAI_ADMIN_KEY", "sk-admin-from-env")
	t.Setenv("OPENAI_ORG_ID", "org-from-env")
	t.Setenv("OPENAI_PROJECT_ID", "proj-from-env")
	t.Setenv("OPENAI_WEBHOOK_SECRET", "whsec-from-env")
	t.Setenv("OPENAI_CUSTOM_HEADERS", "X-From-Env: leaked")

	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			srv := startFake(t, fakemodel.Script{Steps: []fakemodel.Step{{Text: "one"}, {Text: "two"}}})
			c, _ := newClient(t, srv.URL(), wire, func(cfg *model.ProviderConfig) {
				cfg.APIKey = "sk-configured"
				cfg.Headers = map[string]string{"X-Custom": "yes"}
				cfg.QueryParams = map[string]string{"api-version": "2025-04-01"}
			})
			_, res, err := run(t, c, userRequest("hi"))
			require.NoError(t, err, "the request must reach the configured URL, not OPENAI_BASE_URL")
			assert.Equal(t, "one", res.Items[0].Text())

			keyless, _ := newClient(t, srv.URL(), wire, func(cfg *model.ProviderConfig) { cfg.APIKey = "" })
			_, _, err = run(t, keyless, userRequest("hi"))
			require.NoError(t, err)

			reqs := srv.Requests()
			require.Len(t, reqs, 2)
			h := reqs[0].Header
			assert.Equal(t, "Bearer sk-configured", h.Get("Authorization"))
			assert.Equal(t, "yes", h.Get("X-Custom"))
			assert.Equal(t, "api-version=2025-04-01", reqs[0].Query)
			for _, r := range reqs {
				for name, values := range r.Header {
					for _, v := range values {
						assert.NotContains(t, v, "from-env", "header %s leaked from the environment", name)
						assert.NotContains(t, v, "leaked", "header %s leaked from the environment", name)
					}
				}
				assert.Empty(t, r.Header.Get("OpenAI-Organization"))
				assert.Empty(t, r.Header.Get("OpenAI-Project"))
			}
			assert.Empty(t, reqs[1].Header.Get("Authorization"), "no API key configured, none sent")
		})
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	for _, cfg := range []model.ProviderConfig{
		{ID: "none"},
		{ID: "scheme", BaseURL: "ftp://example.com/v1"},
		{ID: "wire", BaseURL: "http://127.0.0.1/v1", WireAPI: "grpc"},
	} {
		_, err := model.New(cfg, nil)
		assert.Equal(t, apperr.Invalid, apperr.CodeOf(err), "%s: %v", cfg.ID, err)
	}
}

func TestScriptExhausted(t *testing.T) {
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			srv := startFake(t, fakemodel.Script{})
			c, _ := newClient(t, srv.URL(), wire, nil)
			_, res, err := run(t, c, userRequest("hi"))
			require.NoError(t, err)
			assert.Equal(t, fakemodel.DefaultExhaustedText, res.Items[0].Text())
		})
	}
}

// Request.Sent runs once the request is written, once per Stream however
// many attempts it takes, before any event.
func TestSentCalledOnceWhenWritten(t *testing.T) {
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			srv := startFake(t, fakemodel.Script{Steps: []fakemodel.Step{
				{Error: &fakemodel.HTTPError{Status: 500, Message: "boom"}, Times: 2},
				{Text: "third time"},
			}})
			c, _ := newClient(t, srv.URL(), wire, nil)
			var sent atomic.Int32
			req := userRequest("hi")
			req.Sent = func() { sent.Add(1) }
			_, err := c.Stream(context.Background(), req, func(model.Event) error {
				require.Equal(t, int32(1), sent.Load(), "an event before Sent")
				return nil
			})
			require.NoError(t, err)
			assert.Len(t, srv.Requests(), 3)
			assert.Equal(t, int32(1), sent.Load())
		})
	}
}

// When the first attempt cannot write the request, Sent runs as it ends,
// before the retry's wait.
func TestSentCalledWhenFirstAttemptFailsToConnect(t *testing.T) {
	addr := closedPort(t)
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			var sent atomic.Int32
			var sentBeforeWait []bool
			sleep := func(ctx context.Context, d time.Duration) error {
				sentBeforeWait = append(sentBeforeWait, sent.Load() == 1)
				return nil
			}
			cfg := model.ProviderConfig{ID: "fake", BaseURL: "http://" + addr + "/v1", WireAPI: wire, MaxRetries: 2}
			c, err := model.New(cfg, nil, model.WithSleep(sleep))
			require.NoError(t, err)
			req := userRequest("hi")
			req.Sent = func() { sent.Add(1) }
			_, _, err = run(t, c, req)
			modelError(t, err, model.KindConnectionFailed)
			assert.Equal(t, int32(1), sent.Load())
			assert.Equal(t, []bool{true, true}, sentBeforeWait)
		})
	}
}
