package execclient

import (
	"encoding/json"
	"io"

	"github.com/appserver/appserver/api"
)

// textOutput streams the agent's text to stdout as it is written, and
// nothing else.
type textOutput struct {
	w io.Writer
	// printed are the agent messages whose text was (partly) printed.
	printed  map[string]bool
	lastByte byte
}

func newTextOutput(w io.Writer) *textOutput {
	return &textOutput{w: w, printed: map[string]bool{}}
}

func (o *textOutput) print(s string) {
	if s == "" {
		return
	}
	_, _ = io.WriteString(o.w, s)
	o.lastByte = s[len(s)-1]
}

func (o *textOutput) threadStarted(string)              {}
func (o *textOutput) turnStarted(string)                {}
func (o *textOutput) requested(*request)                {}
func (o *textOutput) answered(*request, string, string) {}
func (o *textOutput) notification(method string, params json.RawMessage) {
	switch method {
	case api.MethodAgentMessageDelta:
		var p struct {
			ItemID string `json:"itemId"`
			Delta  string `json:"delta"`
		}
		if json.Unmarshal(params, &p) == nil {
			o.print(p.Delta)
			o.printed[p.ItemID] = true
		}
	case api.MethodItemCompleted:
		var p struct {
			Item struct {
				Type string `json:"type"`
				ID   string `json:"id"`
				Text string `json:"text"`
			} `json:"item"`
		}
		if json.Unmarshal(params, &p) != nil || p.Item.Type != string(api.ItemAgentMessage) {
			return
		}
		if !o.printed[p.Item.ID] {
			o.print(p.Item.Text)
			o.printed[p.Item.ID] = true
		}
		if o.lastByte != '\n' && o.lastByte != 0 {
			o.print("\n")
		}
	}
}

// turnEnded prints the final message when the stream was lost before any
// text of it arrived.
func (o *textOutput) turnEnded(t api.HTTPTurn) {
	if t.FinalMessage != nil && len(o.printed) == 0 && o.lastByte == 0 {
		o.print(*t.FinalMessage)
		if o.lastByte != '\n' {
			o.print("\n")
		}
	}
}
