// Package fakemodel is a scripted fake model server for tests and for
// `appserver mockmodel`. It listens on loopback and speaks real HTTP with
// real server-sent events, in both wire formats the model package uses:
//
//	POST /v1/responses         (OpenAI Responses API, stream=true)
//	POST /v1/chat/completions  (Chat Completions, stream=true)
//
// (the /v1 prefix is optional). Every request is recorded with its headers
// and body (Server.Requests), so tests can assert on exactly what a client
// sent, e.g. that a replayed history carries the same call ids and outputs.
//
// # Script format
//
// A script is a JSON object. Each step answers one request (or "times"
// requests), in order; a step with "match" waits for a request it matches,
// and requests that do not match it are answered by the next pending step.
// When a request matches no pending step it gets HTTP 400; once every step
// is used, requests get a plain text answer, exhausted_text (default
// "(fake model: script exhausted)").
//
//	{
//	  "exhausted_text": "(fake model: script exhausted)",
//	  "steps": [
//	    {"name": "busy", "error": {"status": 429, "message": "Rate limit reached",
//	      "type": "rate_limit_error", "code": "rate_limit_exceeded", "retry_after": "0"},
//	     "times": 2},
//	    {"name": "plan",
//	     "reasoning": {"summary": ["**Looking around**", "Listing files."], "chunks": 2,
//	                   "encrypted_content": "gAAAA…"},
//	     "text": "Let me look.", "chunks": 3,
//	     "tool_calls": [
//	       {"call_id": "call_ls", "name": "shell", "arguments": {"command": ["ls"]}, "chunks": 4},
//	       {"type": "custom", "call_id": "call_patch", "name": "apply_patch",
//	        "input": "*** Begin Patch\n*** End Patch\n"}],
//	     "usage": {"input_tokens": 120, "cached_input_tokens": 100, "output_tokens": 30,
//	               "reasoning_output_tokens": 10, "total_tokens": 150}},
//	    {"name": "answer", "match": {"call_output": "call_patch"},
//	     "text": "Done.", "event_delay_ms": 5},
//	    {"name": "broken", "text": "partial answer", "chunks": 5,
//	     "fail": {"kind": "cut", "after_events": 4}}
//	  ]
//	}
//
// Step fields (all optional):
//
//   - name: a label for logs and RecordedRequest.Step lookups.
//   - match: {"call_output": ID} matches a request whose last input item is
//     the output of tool call ID (function_call_output /
//     custom_tool_call_output; for chat, a "tool" message followed by
//     nothing but image-only user messages); {"user_text": S} matches when
//     the last user message contains S. Both must hold when both are given.
//   - times: how many requests the step answers (default 1).
//   - delay_ms: delay before the response headers; event_delay_ms: delay
//     before every event.
//   - response_id, message_id: override generated ids (resp_<n> /
//     chatcmpl-<n>, msg_<n>; <n> counts requests from 1).
//   - reasoning: {"id", "summary": [one string per part], "text": raw
//     reasoning, "chunks", "encrypted_content"}; Responses streams
//     reasoning_summary_part.added / reasoning_summary_text.delta /
//     reasoning_text.delta, chat streams delta.reasoning_content.
//   - text and chunks: the assistant message, split into that many deltas.
//   - tool_calls: [{"type": "function"|"custom", "id", "call_id", "name",
//     "arguments": object or raw string, "input": custom tool input,
//     "chunks"}]. Generated ids are fc_<n>_<i> / ctc_<n>_<i> and
//     call_<n>_<i>. Chat streams custom calls as a function call with
//     arguments {"input": …}, and interleaves the argument fragments of
//     parallel calls.
//   - usage: {"input_tokens", "cached_input_tokens", "output_tokens",
//     "reasoning_output_tokens", "total_tokens"}; zeros when absent. Chat
//     sends it only when the request asks for stream_options.include_usage.
//   - error: answer with HTTP {"status", "message", "type", "code",
//     "retry_after" (Retry-After header), "body" (raw body instead of
//     {"error":{…}})}.
//   - fail: break the stream after "after_events" events; "kind" is "cut"
//     (end the body without completing), "reset" (drop the connection),
//     "malformed" (send an event whose data is not JSON), "failed" (send
//     response.failed, or an {"error":{…}} chunk for chat, with "message"
//     and "code") or "stall" (send nothing more until the client leaves).
//
// Responses streams follow the OpenAI event sequence (response.created,
// output_item.added, content_part.added, output_text.delta, …,
// response.completed); chat streams send chat.completion.chunk objects and
// end with data: [DONE].
//
// It must not import any package of the module, internal/model included: it
// stands for a provider's server, so it shares no code with the client it
// tests. Only test files and the composition root (for mockmodel) import it.
package fakemodel
