package fakemodel

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// writeResponses streams step as Responses API events.
func writeResponses(sw *streamWriter, step Step, seq int, model string) {
	respID := step.ResponseID
	if respID == "" {
		respID = fmt.Sprintf("resp_%d", seq)
	}
	n := 0
	ev := func(typ string, fields map[string]any) {
		fields["type"] = typ
		fields["sequence_number"] = n
		n++
		sw.send(typ, fields)
	}
	response := func(status string, output []any) map[string]any {
		return map[string]any{"id": respID, "object": "response", "created_at": time.Now().Unix(),
			"status": status, "model": model, "output": output}
	}
	ev("response.created", map[string]any{"response": response("in_progress", []any{})})

	var output []any
	for _, raw := range step.OutputItems {
		var item map[string]any
		if json.Unmarshal(raw, &item) != nil {
			continue // Validate rejects these
		}
		idx := len(output)
		ev("response.output_item.added", map[string]any{"output_index": idx, "item": with(item, "status", "in_progress")})
		ev("response.output_item.done", map[string]any{"output_index": idx, "item": item})
		output = append(output, item)
	}
	if r := step.Reasoning; r != nil {
		idx := len(output)
		id := r.ID
		if id == "" {
			id = fmt.Sprintf("rs_%d", seq)
		}
		ev("response.output_item.added", map[string]any{"output_index": idx, "item": map[string]any{"type": "reasoning", "id": id, "summary": []any{}}})
		summary := []any{}
		for i, part := range r.Summary {
			base := map[string]any{"item_id": id, "output_index": idx, "summary_index": i}
			ev("response.reasoning_summary_part.added", with(base, "part", map[string]any{"type": "summary_text", "text": ""}))
			for _, d := range split(part, r.Chunks) {
				ev("response.reasoning_summary_text.delta", with(base, "delta", d))
			}
			ev("response.reasoning_summary_text.done", with(base, "text", part))
			ev("response.reasoning_summary_part.done", with(base, "part", map[string]any{"type": "summary_text", "text": part}))
			summary = append(summary, map[string]any{"type": "summary_text", "text": part})
		}
		item := map[string]any{"type": "reasoning", "id": id, "summary": summary}
		if r.Text != "" {
			base := map[string]any{"item_id": id, "output_index": idx, "content_index": 0}
			for _, d := range split(r.Text, r.Chunks) {
				ev("response.reasoning_text.delta", with(base, "delta", d))
			}
			ev("response.reasoning_text.done", with(base, "text", r.Text))
			item["content"] = []any{map[string]any{"type": "reasoning_text", "text": r.Text}}
		}
		if r.EncryptedContent != "" {
			item["encrypted_content"] = r.EncryptedContent
		}
		ev("response.output_item.done", map[string]any{"output_index": idx, "item": item})
		output = append(output, item)
	}

	if step.Text != "" {
		idx := len(output)
		id := step.MessageID
		if id == "" {
			id = fmt.Sprintf("msg_%d", seq)
		}
		msg := func(status string, content []any) map[string]any {
			return map[string]any{"type": "message", "id": id, "status": status, "role": "assistant", "content": content}
		}
		part := func(text string) map[string]any {
			return map[string]any{"type": "output_text", "text": text, "annotations": []any{}}
		}
		base := map[string]any{"item_id": id, "output_index": idx, "content_index": 0}
		ev("response.output_item.added", map[string]any{"output_index": idx, "item": msg("in_progress", []any{})})
		ev("response.content_part.added", with(base, "part", part("")))
		for _, d := range split(step.Text, step.Chunks) {
			ev("response.output_text.delta", with(base, "delta", d))
		}
		ev("response.output_text.done", with(base, "text", step.Text))
		ev("response.content_part.done", with(base, "part", part(step.Text)))
		item := msg("completed", []any{part(step.Text)})
		ev("response.output_item.done", map[string]any{"output_index": idx, "item": item})
		output = append(output, item)
	}

	for i, tc := range step.ToolCalls {
		idx := len(output)
		callID := tc.callID(seq, i)
		args, _ := tc.argumentText()
		var item map[string]any
		if tc.Type == "tool_search" {
			id := tc.ID
			if id == "" {
				id = fmt.Sprintf("tsc_%d_%d", seq, i)
			}
			// A client-executed search streams no argument deltas: the
			// arguments object comes whole.
			item = map[string]any{"type": "tool_search_call", "id": id, "call_id": callID, "execution": "client", "arguments": json.RawMessage(args), "status": "completed"}
			ev("response.output_item.added", map[string]any{"output_index": idx, "item": item})
		} else if tc.Type == "custom" {
			id := tc.ID
			if id == "" {
				id = fmt.Sprintf("ctc_%d_%d", seq, i)
			}
			item = map[string]any{"type": "custom_tool_call", "id": id, "call_id": callID, "name": tc.Name, "input": ""}
			ev("response.output_item.added", map[string]any{"output_index": idx, "item": item})
			base := map[string]any{"item_id": id, "output_index": idx}
			for _, d := range split(tc.Input, tc.Chunks) {
				ev("response.custom_tool_call_input.delta", with(base, "delta", d))
			}
			ev("response.custom_tool_call_input.done", with(base, "input", tc.Input))
			item = with(item, "input", tc.Input)
		} else {
			id := tc.ID
			if id == "" {
				id = fmt.Sprintf("fc_%d_%d", seq, i)
			}
			item = map[string]any{"type": "function_call", "id": id, "call_id": callID, "name": tc.Name, "arguments": "", "status": "in_progress"}
			if tc.Namespace != "" {
				item["namespace"] = tc.Namespace
			}
			ev("response.output_item.added", map[string]any{"output_index": idx, "item": item})
			base := map[string]any{"item_id": id, "output_index": idx}
			for _, d := range split(args, tc.Chunks) {
				ev("response.function_call_arguments.delta", with(base, "delta", d))
			}
			ev("response.function_call_arguments.done", with(base, "arguments", args))
			item = with(with(item, "arguments", args), "status", "completed")
		}
		ev("response.output_item.done", map[string]any{"output_index": idx, "item": item})
		output = append(output, item)
	}

	u := usageOf(step)
	done := response("completed", nonNil(output))
	done["usage"] = map[string]any{
		"input_tokens":          u.InputTokens,
		"input_tokens_details":  map[string]any{"cached_tokens": u.CachedInputTokens},
		"output_tokens":         u.OutputTokens,
		"output_tokens_details": map[string]any{"reasoning_tokens": u.ReasoningOutputTokens},
		"total_tokens":          u.TotalTokens,
	}
	ev("response.completed", map[string]any{"response": done})
}

// writeChat streams step as chat.completion.chunk events.
func writeChat(sw *streamWriter, step Step, seq int, model string, includeUsage bool) {
	id := step.ResponseID
	if id == "" {
		id = fmt.Sprintf("chatcmpl-%d", seq)
	}
	created := time.Now().Unix()
	chunk := func(delta map[string]any, finish any) {
		sw.send("", map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
	}
	chunk(map[string]any{"role": "assistant", "content": "", "refusal": nil}, nil)

	if r := step.Reasoning; r != nil {
		text := r.Text
		if text == "" {
			text = strings.Join(r.Summary, "\n\n")
		}
		for _, d := range split(text, r.Chunks) {
			chunk(map[string]any{"reasoning_content": d}, nil)
		}
	}
	for _, d := range split(step.Text, step.Chunks) {
		chunk(map[string]any{"content": d}, nil)
	}

	// Every call is announced first, then the argument fragments of all
	// calls are interleaved, so that clients must accumulate by index.
	frags := make([][]string, len(step.ToolCalls))
	for i, tc := range step.ToolCalls {
		args, _ := tc.argumentText()
		if tc.Type == "custom" {
			b, _ := json.Marshal(map[string]string{"input": tc.Input})
			args = string(b)
		}
		frags[i] = split(args, tc.Chunks)
		chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": tc.callID(seq, i), "type": "function",
			"function": map[string]any{"name": tc.Name, "arguments": ""}}}}, nil)
	}
	for more := true; more; {
		more = false
		for i := range frags {
			if len(frags[i]) == 0 {
				continue
			}
			more = true
			chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": frags[i][0]}}}}, nil)
			frags[i] = frags[i][1:]
		}
	}
	finish := "stop"
	if len(step.ToolCalls) > 0 {
		finish = "tool_calls"
	}
	chunk(map[string]any{}, finish)
	if includeUsage {
		u := usageOf(step)
		sw.send("", map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": model, "choices": []any{},
			"usage": map[string]any{
				"prompt_tokens":             u.InputTokens,
				"completion_tokens":         u.OutputTokens,
				"total_tokens":              u.TotalTokens,
				"prompt_tokens_details":     map[string]any{"cached_tokens": u.CachedInputTokens},
				"completion_tokens_details": map[string]any{"reasoning_tokens": u.ReasoningOutputTokens},
			}})
	}
	sw.send("", "[DONE]")
}

func (tc ToolCall) callID(seq, i int) string {
	if tc.CallID != "" {
		return tc.CallID
	}
	return fmt.Sprintf("call_%d_%d", seq, i)
}

func usageOf(step Step) Usage {
	if step.Usage != nil {
		return *step.Usage
	}
	return Usage{}
}

// with returns a copy of m with key set to v.
func with(m map[string]any, key string, v any) map[string]any {
	out := make(map[string]any, len(m)+1)
	for k, x := range m {
		out[k] = x
	}
	out[key] = v
	return out
}

// split cuts s into n pieces of nearly equal length, never inside a UTF-8
// sequence; an empty s gives no pieces.
func split(s string, n int) []string {
	r := []rune(s)
	if len(r) == 0 {
		return nil
	}
	n = max(1, min(n, len(r)))
	out := make([]string, 0, n)
	for i := range n {
		out = append(out, string(r[i*len(r)/n:(i+1)*len(r)/n]))
	}
	return out
}

func nonNil(s []any) []any {
	if s == nil {
		return []any{}
	}
	return s
}
