package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
)

// threadItemByReference is ThreadItem.MarshalJSON as it was written before
// it encoded into a pooled buffer: the body encoded on its own, then joined
// to the tag and timestamps. The bytes must not change.
func threadItemByReference(it ThreadItem) ([]byte, error) {
	if it.Body == nil {
		return nil, errNoItemBody
	}
	if raw, ok := it.Body.(*RawThreadItem); ok {
		if len(raw.JSON) == 0 {
			return nil, errNoItemBody
		}
		return raw.JSON, nil
	}
	body, err := json.Marshal(it.Body)
	if err != nil {
		return nil, err
	}
	body = bytes.TrimSpace(body)
	if len(body) < 2 || body[0] != '{' {
		return nil, fmt.Errorf("api: ThreadItem body %T did not encode as an object", it.Body)
	}
	var buf bytes.Buffer
	buf.WriteString(`{"type":`)
	typ, _ := json.Marshal(it.Body.ItemType())
	buf.Write(typ)
	if inner := bytes.TrimSpace(body[1 : len(body)-1]); len(inner) > 0 {
		buf.WriteByte(',')
		buf.Write(inner)
	}
	opt := func(n *int64) string {
		if n == nil {
			return "null"
		}
		return strconv.FormatInt(*n, 10)
	}
	buf.WriteString(`,"startedAtMs":` + opt(it.StartedAtMs) + `,"completedAtMs":` + opt(it.CompletedAtMs) + `}`)
	return buf.Bytes(), nil
}

// emptyItem encodes as {} and has a tag that needs escaping.
type emptyItem struct{}

func (emptyItem) ItemType() ThreadItemType { return "a<b>\"é\u2028" }
func (emptyItem) ItemID() string           { return "" }

// arrayItem does not encode as an object.
type arrayItem struct{}

func (arrayItem) ItemType() ThreadItemType        { return "array" }
func (arrayItem) ItemID() string                  { return "" }
func (arrayItem) MarshalJSON() ([]byte, error)    { return []byte(` [1] `), nil }
func (*failingItem) ItemType() ThreadItemType     { return "failing" }
func (*failingItem) ItemID() string               { return "" }
func (*failingItem) MarshalJSON() ([]byte, error) { return nil, fmt.Errorf("no") }

type failingItem struct{}

func TestThreadItemEncodingUnchanged(t *testing.T) {
	ms, ms2 := int64(1_700_000_000_123), int64(-1)
	ns, ok := "geo", true
	items := []ThreadItem{
		{Body: &DynamicToolCallItem{ID: "call_1", Namespace: &ns, Tool: "t", Arguments: json.RawMessage("{ \"a\" : \"<&>\" }"),
			Status: StatusCompleted, ContentItems: []DynamicToolCallOutputContentItem{{Type: ContentInputText, Text: "x\u2028<y>"}}, Success: &ok},
			StartedAtMs: &ms, CompletedAtMs: &ms2},
		{Body: &ReasoningItem{ID: "rs_1"}},
		{Body: &ContextCompactionItem{ID: "c1"}, StartedAtMs: &ms},
		{Body: &AgentMessageItem{ID: "m", Text: "bad \xff utf8 & <tags>"}},
		{Body: emptyItem{}, CompletedAtMs: &ms},
		{Body: &RawThreadItem{JSON: json.RawMessage(`{"type":"sleep","id":"s"}`)}},
		{Body: arrayItem{}},
		{Body: &failingItem{}},
		{Body: &RawThreadItem{}},
		{},
	}
	for _, it := range items {
		want, werr := threadItemByReference(it)
		got, gerr := it.MarshalJSON()
		if (werr != nil) != (gerr != nil) || werr != nil && werr.Error() != gerr.Error() {
			t.Errorf("%T: error %v, want %v", it.Body, gerr, werr)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%T:\n got %s\nwant %s", it.Body, got, want)
		}
	}
}
