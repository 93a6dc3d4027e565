package api

import "encoding/json"

// UserInputType is the discriminator of UserInput.
type UserInputType string

// The user input variants.
const (
	UserInputText       UserInputType = "text"
	UserInputImage      UserInputType = "image"
	UserInputLocalImage UserInputType = "localImage"
	UserInputAudio      UserInputType = "audio"
	UserInputLocalAudio UserInputType = "localAudio"
	UserInputSkill      UserInputType = "skill"
	UserInputMention    UserInputType = "mention"
)

// ImageDetail is the requested image fidelity.
type ImageDetail string

// The image details.
const (
	ImageDetailAuto     ImageDetail = "auto"
	ImageDetailLow      ImageDetail = "low"
	ImageDetailHigh     ImageDetail = "high"
	ImageDetailOriginal ImageDetail = "original"
)

// UserInput is one piece of user input, tagged by type (docs/protocol.md §3.4).
// It is a flat struct holding the union of the variants' fields; MarshalJSON
// writes exactly the keys of the selected variant: text always carries
// text_elements (an array, never null); image and audio carry url or fileId
// (url wins when both are set); detail is written only when set.
type UserInput struct {
	// Type selects the variant.
	Type UserInputType
	// Text is the text of a text input.
	Text string
	// TextElements are UI spans within Text (text only; snake_case on the wire).
	TextElements []TextElement
	// URL is the remote location of an image or audio input.
	URL string
	// FileID is the uploaded file of an image or audio input.
	FileID string
	// Detail is the fidelity of an image or localImage input, if any.
	Detail *ImageDetail
	// Path is the local path of localImage/localAudio, or the skill/mention path.
	Path string
	// Name is the skill or mention name.
	Name string
}

// MarshalJSON writes the keys of the selected variant.
func (u UserInput) MarshalJSON() ([]byte, error) {
	switch u.Type {
	case UserInputText:
		return json.Marshal(struct {
			Type         UserInputType     `json:"type"`
			Text         string            `json:"text"`
			TextElements List[TextElement] `json:"text_elements"`
		}{u.Type, u.Text, u.TextElements})
	case UserInputImage, UserInputAudio:
		w := struct {
			Type   UserInputType `json:"type"`
			URL    *string       `json:"url,omitempty"`
			FileID *string       `json:"fileId,omitempty"`
			Detail *ImageDetail  `json:"detail,omitempty"`
		}{Type: u.Type}
		if u.URL != "" || u.FileID == "" {
			w.URL = &u.URL
		} else {
			w.FileID = &u.FileID
		}
		if u.Type == UserInputImage {
			w.Detail = u.Detail
		}
		return json.Marshal(w)
	case UserInputLocalImage:
		return json.Marshal(struct {
			Type   UserInputType `json:"type"`
			Path   string        `json:"path"`
			Detail *ImageDetail  `json:"detail,omitempty"`
		}{u.Type, u.Path, u.Detail})
	case UserInputLocalAudio:
		return json.Marshal(struct {
			Type UserInputType `json:"type"`
			Path string        `json:"path"`
		}{u.Type, u.Path})
	default: // skill, mention
		return json.Marshal(struct {
			Type UserInputType `json:"type"`
			Name string        `json:"name"`
			Path string        `json:"path"`
		}{u.Type, u.Name, u.Path})
	}
}

// UnmarshalJSON decodes any variant.
func (u *UserInput) UnmarshalJSON(b []byte) error {
	var w struct {
		Type         UserInputType `json:"type"`
		Text         string        `json:"text"`
		TextElements []TextElement `json:"text_elements"`
		URL          string        `json:"url"`
		FileID       string        `json:"fileId"`
		Detail       *ImageDetail  `json:"detail"`
		Path         string        `json:"path"`
		Name         string        `json:"name"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*u = UserInput(w)
	return nil
}

// TextElement marks a UI-defined span within a text input.
type TextElement struct {
	// ByteRange is the span in bytes of the text.
	ByteRange ByteRange `json:"byteRange"`
	// Placeholder is the text to show for the span, or null.
	Placeholder *string `json:"placeholder"`
}

// ByteRange is a half-open byte range.
type ByteRange struct {
	// Start is the first byte.
	Start uint64 `json:"start"`
	// End is one past the last byte.
	End uint64 `json:"end"`
}
