package fakemodel

import (
	"encoding/json"

	"github.com/appserver/appserver/internal/jsonscan"
)

var (
	requestKeys = []string{"stream", "model", "stream_options", "input", "messages"}
	itemKeys    = []string{"type", "role", "call_id", "tool_call_id", "content"}
)

// scanRequest is decodeRequest's fast path: one pass of the strict
// scanner over body that reads the fields matching looks at and leaves
// the items' contents, the instructions and the tool specs undecoded. It
// reports false, with req partly filled, for any body where its reading
// could differ from encoding/json's (a key in another letter case or
// repeated, an input that is not an array, an item that is not an
// object, a field of an unexpected type): decodeRequest then decodes
// body whole.
//
// BenchmarkDecodeRequest (this package), a request on a 200-turn shell
// thread (801 input items, 123 KB), on the 2-core machine: 0.42–0.65 ms
// here against 1.37–2.1 ms with encoding/json (3.1–3.3×, the spread is
// the machine's phases), when every item was read; 158–197 µs since
// only the items matching looks at are (scanInput). The bench process
// decodes two such requests a shell turn, on the cores the daemon under
// test shares, before the fake model answers.
func scanRequest(body []byte, req *request) bool {
	var lists [2][]inputItem // input, messages, when read as arrays
	var buf [32]jsonscan.Member
	members, ok := jsonscan.ObjectFunc(body, buf[:0], func(key, b []byte, i int) (int, bool) {
		switch string(key) {
		case "input":
			return scanInput(b, i, &lists[0])
		case "messages":
			return scanItems(b, i, &lists[1])
		}
		return jsonscan.Value(b, i)
	})
	var vals [5][]byte
	if !ok || !jsonscan.Pick(members, requestKeys, vals[:]) {
		return false
	}
	for i, dst := range []*any{&req.Stream, &req.Model, &req.StreamOptions} {
		if vals[i] != nil && json.Unmarshal(vals[i], dst) != nil {
			return false
		}
	}
	for i, dst := range []*[]inputItem{&req.Input, &req.Messages} {
		switch v := vals[3+i]; {
		case v == nil || string(v) == "null":
		case v[0] == '[':
			*dst = lists[i]
		default:
			return false
		}
	}
	return true
}

// scanItems reads the value starting at b[i]: into out when it is an
// array of objects, which it returns the end of. Another value is left
// to the scanner, for Pick's caller to send to the whole decode.
func scanItems(b []byte, i int, out *[]inputItem) (int, bool) {
	if i >= len(b) || b[i] != '[' {
		return jsonscan.Value(b, i)
	}
	items := []inputItem{} // an empty array decodes as empty, not nil
	var buf [16]jsonscan.Member
	end, ok := jsonscan.ArrayAt(b, i, func(_, b []byte, i int) (int, bool) {
		item, end, ok := scanItem(b, i, buf[:0])
		items = append(items, item)
		return end, ok
	})
	*out = items
	return end, ok
}

// scanInput is scanItems for the Responses API's input, where matching
// reads only the last item and the last user message: every item is
// checked to be a valid object, but only those from the end back to the
// last user message are read; the others stay zero in out, which
// requestFacts then reads as it would the whole list. On a long thread
// reading every item was most of the fake model's time before it
// answered: BenchmarkDecodeRequest (801 items, 123 KB) 158–197 µs
// against 330–390 µs reading them all.
func scanInput(b []byte, i int, out *[]inputItem) (int, bool) {
	if i >= len(b) || b[i] != '[' {
		return jsonscan.Value(b, i)
	}
	var starts []int
	end, ok := jsonscan.ArrayAt(b, i, func(_, b []byte, i int) (int, bool) {
		if i >= len(b) || b[i] != '{' {
			return i, false
		}
		starts = append(starts, i)
		return jsonscan.Value(b, i)
	})
	if !ok {
		return end, false
	}
	items := make([]inputItem, len(starts))
	var buf [16]jsonscan.Member
	for k := len(starts) - 1; k >= 0; k-- {
		item, _, ok := scanItem(b, starts[k], buf[:0])
		if !ok {
			return end, false
		}
		items[k] = item
		if item.isUserMessage() {
			break
		}
	}
	*out = items
	return end, true
}

// scanItem reads the object starting at b[i] as an input item, and
// returns its end.
func scanItem(b []byte, i int, buf []jsonscan.Member) (inputItem, int, bool) {
	var item inputItem
	end, members, ok := jsonscan.ObjectAt(b, i, buf)
	var vals [5][]byte
	if !ok || !jsonscan.Pick(members, itemKeys, vals[:]) {
		return item, i, false
	}
	for j, dst := range []*lenientString{&item.Type, &item.Role, &item.CallID, &item.ToolCallID} {
		if vals[j] != nil {
			s, ok := jsonscan.Text(vals[j])
			if !ok {
				return item, i, false
			}
			*dst = lenientString(s)
		}
	}
	item.Content = vals[4]
	return item, end, true
}
