package dynamic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/jsonscan"
	"github.com/appserver/appserver/internal/registry"
)

// The texts the reference substitutes for an unusable client answer, and the
// one it gives the model when a call ends without an answer
// (docs/protocol.md §7.4, docs/tools.md §5).
const (
	// RequestFailedText replaces the result when the client answered
	// item/tool/call with a JSON-RPC error.
	RequestFailedText = "dynamic tool request failed"
	// InvalidResponseText replaces the result when the client's answer does
	// not decode as a DynamicToolCallResult.
	InvalidResponseText = "dynamic tool response was invalid"
	// CancelledText is the model-visible error of a call that ended without
	// an answer because it was cancelled (turn interrupted, call id reused,
	// broker closed).
	CancelledText = "dynamic tool call was cancelled before receiving a response"
)

// AudioPlaceholder is the text given to the model for an inputAudio content
// item: the registry's function outputs carry only text and images.
const AudioPlaceholder = "<audio content>"

// FailedResult is the result the reference substitutes for an unusable
// answer: {contentItems:[{type:"inputText", text}], success:false}.
func FailedResult(text string) api.DynamicToolCallResult {
	return api.DynamicToolCallResult{
		ContentItems: api.List[api.DynamicToolCallOutputContentItem]{{Type: api.ContentInputText, Text: text}},
		Success:      false,
	}
}

// DecodeResult decodes a client's item/tool/call result strictly, as the
// reference's serde decoding does: an object with "contentItems" (an array
// of inputText {text}, inputImage {imageUrl} or inputAudio {audioUrl}
// items, each field present and a string) and "success" (a boolean), both
// required. Unknown keys are ignored.
func DecodeResult(raw json.RawMessage) (api.DynamicToolCallResult, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return api.DynamicToolCallResult{}, errors.New("result must be a JSON object")
	}
	if res, ok := decodeResultFast(raw); ok {
		return res, nil
	}
	return decodeResultStrict(raw)
}

// resultFields are the keys of a result, itemFields those of a content
// item.
var (
	resultFields = [...]string{"contentItems", "success"}
	itemFields   = [...]string{"type", "text", "imageUrl", "audioUrl"}
)

// decodeResultFast decodes a valid result with jsonscan, without
// encoding/json (but for strings with escapes), since every answer is
// decoded on the hot path. It reports false for anything
// decodeResultStrict would reject or might decode otherwise: keys
// encoding/json could match otherwise than by their bytes (jsonscan.Pick),
// null members, a known member of the wrong JSON type, invalid JSON; the
// caller then decodes strictly, for the exact error.
func decodeResultFast(raw []byte) (api.DynamicToolCallResult, bool) {
	var v [len(resultFields)][]byte
	if !jsonscan.PickObject(raw, resultFields[:], v[:]) || v[0] == nil || v[1] == nil {
		return api.DynamicToolCallResult{}, false
	}
	var res api.DynamicToolCallResult
	switch string(v[1]) {
	case "true":
		res.Success = true
	case "false":
	default:
		return api.DynamicToolCallResult{}, false
	}
	var ebuf [4]jsonscan.Member
	elems, ok := jsonscan.Array(v[0], ebuf[:0])
	if !ok {
		return api.DynamicToolCallResult{}, false
	}
	res.ContentItems = make(api.List[api.DynamicToolCallOutputContentItem], len(elems))
	for i, el := range elems {
		if !decodeItemFast(el.Value, &res.ContentItems[i]) {
			return api.DynamicToolCallResult{}, false
		}
	}
	return res, true
}

// decodeItemFast decodes one content item for decodeResultFast: every
// known field present must be a string, and the variant's own one set.
func decodeItemFast(raw []byte, item *api.DynamicToolCallOutputContentItem) bool {
	var f [len(itemFields)]string
	var v [len(itemFields)][]byte
	if !jsonscan.PickObject(raw, itemFields[:], v[:]) || v[0] == nil {
		return false
	}
	for i, b := range v {
		if b == nil {
			continue
		}
		if b[0] != '"' {
			return false
		}
		var ok bool
		if f[i], ok = jsonscan.Text(b); !ok {
			return false
		}
	}
	item.Type = api.DynamicToolCallOutputContentItemType(f[0])
	switch {
	case item.Type == api.ContentInputText && v[1] != nil:
		item.Text = f[1]
	case item.Type == api.ContentInputImage && v[2] != nil:
		item.ImageURL = f[2]
	case item.Type == api.ContentInputAudio && v[3] != nil:
		item.AudioURL = f[3]
	default:
		return false
	}
	return true
}

// decodeResultStrict is DecodeResult decoding each content item on its own,
// which names the first offending item in its error.
func decodeResultStrict(raw []byte) (api.DynamicToolCallResult, error) {
	var res api.DynamicToolCallResult
	var w struct {
		ContentItems *[]json.RawMessage `json:"contentItems"`
		Success      *bool              `json:"success"`
	}
	if err := json.Unmarshal(raw, &w); err != nil {
		return res, err
	}
	if w.ContentItems == nil {
		return res, errors.New("missing field `contentItems`")
	}
	if w.Success == nil {
		return res, errors.New("missing field `success`")
	}
	items := make(api.List[api.DynamicToolCallOutputContentItem], 0, len(*w.ContentItems))
	for i, itemRaw := range *w.ContentItems {
		item, err := decodeContentItem(itemRaw)
		if err != nil {
			return res, fmt.Errorf("contentItems[%d]: %w", i, err)
		}
		items = append(items, item)
	}
	res.ContentItems = items
	res.Success = *w.Success
	return res, nil
}

func decodeContentItem(raw json.RawMessage) (api.DynamicToolCallOutputContentItem, error) {
	var item api.DynamicToolCallOutputContentItem
	var w struct {
		Type     *string `json:"type"`
		Text     *string `json:"text"`
		ImageURL *string `json:"imageUrl"`
		AudioURL *string `json:"audioUrl"`
	}
	if b := bytes.TrimSpace(raw); len(b) == 0 || b[0] != '{' {
		return item, errors.New("content item must be an object")
	}
	if err := json.Unmarshal(raw, &w); err != nil {
		return item, err
	}
	if w.Type == nil {
		return item, errors.New("missing field `type`")
	}
	item.Type = api.DynamicToolCallOutputContentItemType(*w.Type)
	switch item.Type {
	case api.ContentInputText:
		if w.Text == nil {
			return item, errors.New("missing field `text`")
		}
		item.Text = *w.Text
	case api.ContentInputImage:
		if w.ImageURL == nil {
			return item, errors.New("missing field `imageUrl`")
		}
		item.ImageURL = *w.ImageURL
	case api.ContentInputAudio:
		if w.AudioURL == nil {
			return item, errors.New("missing field `audioUrl`")
		}
		item.AudioURL = *w.AudioURL
	default:
		return item, fmt.Errorf("unknown variant `%s`, expected one of `inputText`, `inputImage`, `inputAudio`", *w.Type)
	}
	return item, nil
}

// ResultFromResponse turns the client's reply to item/tool/call into the
// result used for the call, applying the reference's substitutions: a
// JSON-RPC error reply (clientErr non-nil) gives FailedResult(RequestFailedText),
// a result that does not decode gives FailedResult(InvalidResponseText). The
// outcome says which case applied.
func ResultFromResponse(result json.RawMessage, clientErr error) (api.DynamicToolCallResult, Outcome) {
	if clientErr != nil {
		return FailedResult(RequestFailedText), OutcomeClientError
	}
	res, err := DecodeResult(result)
	if err != nil {
		return FailedResult(InvalidResponseText), OutcomeInvalidResponse
	}
	return res, answeredOutcome(res)
}

func answeredOutcome(res api.DynamicToolCallResult) Outcome {
	if res.Success {
		return OutcomeSuccess
	}
	return OutcomeFailure
}

// OutputOf converts a client result into the model output. Without images
// the text items, joined by newlines, are the function output; with at
// least one image the output is the list of content items in order (text →
// input_text, image → input_image). inputAudio items become the text
// AudioPlaceholder. Success is copied.
func OutputOf(res api.DynamicToolCallResult) registry.Output {
	hasImage := false
	for _, it := range res.ContentItems {
		if it.Type == api.ContentInputImage {
			hasImage = true
			break
		}
	}
	if !hasImage {
		switch len(res.ContentItems) {
		case 0:
			return registry.TextOutput("", res.Success)
		case 1:
			return registry.TextOutput(itemText(res.ContentItems[0]), res.Success)
		}
		parts := make([]string, len(res.ContentItems))
		for i, it := range res.ContentItems {
			parts[i] = itemText(it)
		}
		return registry.TextOutput(strings.Join(parts, "\n"), res.Success)
	}
	items := make([]registry.ContentItem, len(res.ContentItems))
	for i, it := range res.ContentItems {
		if it.Type == api.ContentInputImage {
			items[i] = registry.InputImage(it.ImageURL)
		} else {
			items[i] = registry.InputText(itemText(it))
		}
	}
	return registry.ContentOutput(items, res.Success)
}

func itemText(it api.DynamicToolCallOutputContentItem) string {
	if it.Type == api.ContentInputAudio {
		return AudioPlaceholder
	}
	return it.Text
}
