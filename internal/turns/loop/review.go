package loop

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/turns/transcript"
)

// reviewGuidelines are the reviewer's instructions, in place of the
// thread's: what a useful finding is and the JSON answer reviewOutput
// reads, the shape Codex models are trained to give for reviews.
const reviewGuidelines = `You are reviewing code changes on behalf of the user. Do not modify any file; read the changes with shell commands (git, cat, rg) and reason about them.

Report only defects the author would want to fix: bugs, regressions, security problems, data loss, races, broken error handling, missing tests for changed behaviour. Skip style nits and matters of taste. Each finding says what goes wrong and under which input, points at the smallest line range that shows it, and carries a priority from 0 (must fix before merging) to 3 (minor); prefix its title with that priority, like "[P1] ".

Your final answer is one JSON object and nothing else:
{"findings": [{"title": "[P1] short imperative title", "body": "why this is a bug, in a few sentences", "confidence_score": 0.0-1.0, "priority": 0-3, "code_location": {"absolute_file_path": "/abs/path", "line_range": {"start": 1, "end": 2}}}], "overall_correctness": "patch is correct" or "patch is incorrect", "overall_explanation": "one to three sentences", "overall_confidence_score": 0.0-1.0}
With nothing to report, findings is [].`

// reviewInterrupted is the review text of a review that did not finish.
const reviewInterrupted = "The review was interrupted before it finished; run it again to get its findings."

// reviewHandoff is the user message that brings a finished review into
// the thread's model history, before the review itself as the assistant's
// message: the model of the thread's next turn reads what was reviewed
// and what the reviewer found.
const reviewHandoff = `The user had the changes (%s) reviewed by a separate reviewer, which saw the changes but not this conversation. The review follows; the user may ask you to address some of its findings.

<review>
%s
</review>`

// StartReviewer gives a review's turn the reviewer's fresh context
// before its tool set is built: no earlier history, and the reviewer's
// instructions in place of the thread's (the table narrows its tools).
func (r *Run) StartReviewer() {
	r.prior = transcript.History{}
	r.reviewer, r.reviewing = true, true
	r.at.Settings.Instructions = reviewGuidelines
}

// RunReview is the goroutine of a review's turn (hint names what is
// reviewed, task is the request the reviewer is asked): the request shows as a
// user message, the reviewer's messages stay hidden; its answer is shown
// as the exitedReviewMode item and an agent message, both rendered for
// reading, and becomes the turn's whole contribution to the thread's
// history.
func (r *Run) RunReview(hint, task string) {
	defer close(r.at.Done)
	t := r.t
	t.BroadcastStatus()
	t.Emit("turn/started", api.TurnStartedNotification{ThreadID: r.threadID, Turn: r.apiTurn(api.TurnInProgress, nil, nil)})
	_, err := r.reviewItem(&api.ReviewModeItem{ID: newID(), Review: hint})
	if err == nil {
		_, err = r.reviewItem(&api.UserMessageItem{ID: newID(), Content: api.List[api.UserInput]{{Type: api.UserInputText, Text: task}}})
	}
	if err == nil {
		r.hist.Add(transcript.UserInputToModel([]api.UserInput{{Type: api.UserInputText, Text: task + "\n\nThe working directory is " + r.at.Settings.Cwd + "."}}))
		err = r.loop()
		review := reviewInterrupted
		if err == nil && r.final != nil {
			if msg, ok := r.final.Body.(*api.AgentMessageItem); ok {
				review = renderReview(parseReview(msg.Text))
			}
		}
		// The reviewer's context ends here: the thread keeps the review.
		r.hist = transcript.History{Root: r.hist.Root, Usage: r.hist.Usage}
		r.reviewing = false
		r.hist.Add(
			transcript.UserInputToModel([]api.UserInput{{Type: api.UserInputText, Text: fmt.Sprintf(reviewHandoff, hint, review)}}),
			model.InputItem{Type: model.ItemMessage, Role: model.RoleAssistant, Content: []model.ContentPart{{Type: model.PartOutputText, Text: review}}},
		)
		// The review closes even when the turn failed or was
		// interrupted, so that the client leaves review mode. Its item
		// has an id of its own: the store keeps one item per id.
		if _, ierr := r.reviewItem(&api.ReviewModeItem{Exited: true, ID: newID(), Review: review}); err == nil {
			err = ierr
		}
		if err == nil {
			// The review as the turn's answer: the thread's items and
			// turn/completed show it as the last agent message.
			var msg api.ThreadItem
			if msg, err = r.reviewItem(&api.AgentMessageItem{ID: newID(), Text: review}); err == nil {
				r.final = &msg
			}
		}
	}
	r.finish(err)
}

// reviewOutput is the JSON answer reviewGuidelines asks for.
type reviewOutput struct {
	Findings []struct {
		Title        string `json:"title"`
		Body         string `json:"body"`
		CodeLocation struct {
			AbsoluteFilePath string `json:"absolute_file_path"`
			LineRange        struct {
				Start int `json:"start"`
				End   int `json:"end"`
			} `json:"line_range"`
		} `json:"code_location"`
	} `json:"findings"`
	OverallExplanation string `json:"overall_explanation"`
}

// parseReview reads the reviewer's answer: the JSON object, alone or
// within other text; anything else is taken as a plain-text review.
func parseReview(text string) reviewOutput {
	var out reviewOutput
	if json.Unmarshal([]byte(text), &out) == nil {
		return out
	}
	if i, j := strings.IndexByte(text, '{'), strings.LastIndexByte(text, '}'); i >= 0 && i < j {
		out = reviewOutput{}
		if json.Unmarshal([]byte(text[i:j+1]), &out) == nil {
			return out
		}
	}
	return reviewOutput{OverallExplanation: text}
}

// renderReview writes a review for reading: the explanation, then one
// entry per finding with its location and its body indented.
func renderReview(out reviewOutput) string {
	var b strings.Builder
	b.WriteString(strings.TrimSpace(out.OverallExplanation))
	if len(out.Findings) > 0 {
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		if len(out.Findings) == 1 {
			b.WriteString("Review comment:\n")
		} else {
			b.WriteString("Review comments:\n")
		}
		for _, f := range out.Findings {
			loc := f.CodeLocation
			fmt.Fprintf(&b, "\n- %s — %s:%d-%d", strings.TrimSpace(f.Title), loc.AbsoluteFilePath, loc.LineRange.Start, loc.LineRange.End)
			for _, line := range strings.Split(strings.TrimSpace(f.Body), "\n") {
				b.WriteString("\n  " + line)
			}
		}
	}
	if b.Len() == 0 {
		return "The reviewer gave no findings and no explanation."
	}
	return b.String()
}

// reviewItem stores an item of the review with the turn's history so far,
// then announces it.
func (r *Run) reviewItem(body api.ThreadItemBody) (api.ThreadItem, error) {
	ms := r.d.Now().UnixMilli()
	item := api.ThreadItem{Body: body, StartedAtMs: &ms, CompletedAtMs: &ms}
	if err := r.persistHistory(&item); err != nil {
		return item, err
	}
	r.announceUserMessage(item)
	return item, nil
}
