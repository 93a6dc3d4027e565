package dynamic

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/registry"
)

func TestDecodeResult(t *testing.T) {
	ok := []string{
		`{"contentItems":[],"success":true}`,
		`{"contentItems":[{"type":"inputText","text":""}],"success":false,"extra":1}`,
		`{"contentItems":[{"type":"inputImage","imageUrl":"data:image/png;base64,AA"},{"type":"inputAudio","audioUrl":"u"}],"success":true}`,
	}
	for _, s := range ok {
		_, err := DecodeResult(json.RawMessage(s))
		assert.NoError(t, err, s)
	}
	bad := []string{
		``, `null`, `[]`, `"x"`,
		`{"success":true}`,
		`{"contentItems":[]}`,
		`{"contentItems":null,"success":true}`,
		`{"contentItems":[],"success":"yes"}`,
		`{"contentItems":[{"type":"text","text":"x"}],"success":true}`,
		`{"contentItems":[{"text":"x"}],"success":true}`,
		`{"contentItems":[{"type":"inputText"}],"success":true}`,
		`{"contentItems":[{"type":"inputImage","image_url":"x"}],"success":true}`,
		`{"contentItems":["x"],"success":true}`,
		`{"output":"legacy","success":true}`,
	}
	for _, s := range bad {
		_, err := DecodeResult(json.RawMessage(s))
		assert.Error(t, err, s)
	}
}

func TestResultFromResponse(t *testing.T) {
	res, o := ResultFromResponse(nil, errors.New("rpc error"))
	assert.Equal(t, OutcomeClientError, o)
	assert.JSONEq(t, `{"contentItems":[{"type":"inputText","text":"dynamic tool request failed"}],"success":false}`, mustJSON(t, res))

	res, o = ResultFromResponse(json.RawMessage(`{"nope":1}`), nil)
	assert.Equal(t, OutcomeInvalidResponse, o)
	assert.JSONEq(t, `{"contentItems":[{"type":"inputText","text":"dynamic tool response was invalid"}],"success":false}`, mustJSON(t, res))

	_, o = ResultFromResponse(json.RawMessage(`{"contentItems":[],"success":false}`), nil)
	assert.Equal(t, OutcomeFailure, o)
	assert.True(t, OutcomeFailure.Answered())
	assert.False(t, OutcomeTimeout.Answered())
}

func TestOutputOf(t *testing.T) {
	text := func(s string) api.DynamicToolCallOutputContentItem {
		return api.DynamicToolCallOutputContentItem{Type: api.ContentInputText, Text: s}
	}
	img := api.DynamicToolCallOutputContentItem{Type: api.ContentInputImage, ImageURL: "data:image/png;base64,AA"}
	audio := api.DynamicToolCallOutputContentItem{Type: api.ContentInputAudio, AudioURL: "data:audio/wav;base64,AA"}

	out := OutputOf(api.DynamicToolCallResult{ContentItems: api.List[api.DynamicToolCallOutputContentItem]{text("a"), text("b")}, Success: true})
	assert.Equal(t, registry.TextOutput("a\nb", true), out)

	out = OutputOf(api.DynamicToolCallResult{Success: false})
	assert.Equal(t, registry.TextOutput("", false), out)

	out = OutputOf(api.DynamicToolCallResult{ContentItems: api.List[api.DynamicToolCallOutputContentItem]{text("see"), img, audio}, Success: true})
	assert.Equal(t, registry.ContentOutput([]registry.ContentItem{
		registry.InputText("see"), registry.InputImage("data:image/png;base64,AA"), registry.InputText(AudioPlaceholder),
	}, true), out)
	item := registry.ResponseItem{Type: registry.FunctionCallOutput, CallID: "c", Output: out}
	assert.JSONEq(t, `{"type":"function_call_output","call_id":"c","output":[
		{"type":"input_text","text":"see"},{"type":"input_image","image_url":"data:image/png;base64,AA"},{"type":"input_text","text":"<audio content>"}]}`,
		mustJSON(t, item))

	out = OutputOf(api.DynamicToolCallResult{ContentItems: api.List[api.DynamicToolCallOutputContentItem]{audio}, Success: true})
	require.Equal(t, AudioPlaceholder, out.Text)
}

// checkFastResult requires decodeResultFast to accept only what
// decodeResultStrict accepts, with the same result.
func checkFastResult(t *testing.T, raw []byte) {
	fast, ok := decodeResultFast(raw)
	if !ok {
		return
	}
	strict, err := decodeResultStrict(raw)
	require.NoError(t, err, "fast path accepted %s", raw)
	require.Equal(t, strict, fast, "%s", raw)
}

func TestDecodeResultFastPathAgrees(t *testing.T) {
	for _, s := range []string{
		`{"contentItems":[],"success":true}`,
		`{"contentItems":[{"type":"inputText","text":"a \u00e9 \ud800"},{"type":"inputImage","imageUrl":"u","text":"ignored"}],"success":false}`,
		`{"contentItems":[{"type":"inputText","text":"x","imageUrl":5}],"success":true}`,
		`{"contentItems":[null],"success":true}`,
		`{"contentItems":[{"type":"inputAudio","audioUrl":null}],"success":true}`,
		`{"CONTENTITEMS":[{"TYPE":"inputText","Text":"x"}],"Success":true}`,
		`{"contentItems":[{"type":"inputText","text":"1"}],"success":true,"contentItems":[]}`,
		// A repeated key replaces the array whole: the second item lacks its text.
		`{"contentItems":[{"type":"inputText","text":"a"}],"contentItems":[{"type":"inputText"}],"success":true}`,
		`{"contentItems":[{"type":"inputText","text":"a"}],"ContentItems":[{"type":"inputText"}],"success":true}`,
	} {
		checkFastResult(t, []byte(s))
	}
	_, err := DecodeResult([]byte(`{"contentItems":[{"type":"inputText","text":"a"}],"contentItems":[{"type":"inputText"}],"success":true}`))
	require.ErrorContains(t, err, "missing field `text`")
	for _, s := range []string{
		`{"contentItems":[{"type":"inputText","text":"sunny"}],"success":true}`,
		` { "success" : false , "contentItems" : [ ] , "extra" : {"k":[1]} } `,
		`{"contentItems":[{"type":"inputText","text":"12 °C\n\"dry\""},{"type":"inputImage","imageUrl":"data:image/png;base64,AA=="}],"success":true}`,
		`{"contentItems":[{"type":"inputAudio","audioUrl":"a","text":"unused"}],"success":true}`,
	} {
		checkFastResult(t, []byte(s))
		_, ok := decodeResultFast([]byte(s))
		require.True(t, ok, "a valid answer takes the fast path: %s", s)
	}
}

func BenchmarkDecodeResult(b *testing.B) {
	raw := []byte(`{"contentItems":[{"type":"inputText","text":"Sunny, 21 °C, wind 3 m/s from the \"north\"."}],"success":true}`)
	for _, c := range []struct {
		name   string
		decode func([]byte) bool
	}{
		{"fast", func(raw []byte) bool { _, ok := decodeResultFast(raw); return ok }},
		{"strict", func(raw []byte) bool { _, err := decodeResultStrict(raw); return err == nil }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if !c.decode(raw) {
					b.Fatal("not decoded")
				}
			}
		})
	}
}

func FuzzDecodeResult(f *testing.F) {
	f.Add([]byte(`{"contentItems":[{"type":"inputText","text":"x"}],"success":true}`))
	f.Add([]byte(`{"contentItems":[{"type":"inputImage","imageUrl":"u"},null,"s"],"success":1}`))
	f.Add([]byte(`{"contentItems":[{"type":"inputText","text":"a"}],"contentItems":[{"type":"inputText"}],"success":true}`))
	f.Add([]byte(`{"contentItems":[{"type":"inputT\u0065xt","text":"12 °C\n\"x\" \ud83d\ude00 \ud800"}],"success":false}`))
	f.Add([]byte(`{"ContentItems":[{"Type":"inputImage","imageURL":"u","imageUrl":null}],"SUCCESS":true}`))
	f.Add([]byte(`{"contentItems":[{"type":"inputAudio","audioUrl":null,"text":5}],"success":null,"ſuccess":true}`))
	f.Add([]byte("{\"contentItems\":[{\"type\":\"inputText\",\"text\":\"\xff\"}],\"success\":true}"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkFastResult(t, raw)
		// DecodeResult never panics and agrees with the strict decoder on
		// whether the answer is valid.
		_, err := DecodeResult(raw)
		trimmed := bytes.TrimSpace(raw)
		if len(trimmed) > 0 && trimmed[0] == '{' {
			_, serr := decodeResultStrict(trimmed)
			require.Equal(t, serr == nil, err == nil)
		}
	})
}
