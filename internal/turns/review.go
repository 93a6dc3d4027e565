package turns

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/turns/transcript"
)

// reviewRequest is one review/start: hint is what the TUI shows
// ("current changes"), task the request the reviewer is asked and the
// thread shows as the user's message.
type reviewRequest struct {
	hint, task string
}

// reviewGuidelines are the reviewer's instructions, in place of the
// thread's: what a useful finding is and the JSON answer reviewOutput
// reads, the shape Codex models are trained to give for reviews.
const reviewGuidelines = `You are reviewing code changes on behalf of the user. Do not modify any file; read the changes with shell commands (git, cat, rg) and reason about them.

Report only defects the author would want to fix: bugs, regressions, security problems, data loss, races, broken error handling, missing tests for changed behaviour. Skip style nits and matters of taste. Each finding says what goes wrong and under which input, points at the smallest line range that shows it, and carries a priority from 0 (must fix before merging) to 3 (minor); prefix its title with that priority, like "[P1] ".

Your final answer is one JSON object and nothing else:
{"findings": [{"title": "[P1] short imperative title", "body": "why this is a bug, in a few sentences", "confidence_score": 0.0-1.0, "priority": 0-3, "code_location": {"absolute_file_path": "/abs/path", "line_range": {"start": 1, "end": 2}}}], "overall_correctness": "patch is correct" or "patch is incorrect", "overall_explanation": "one to three sentences", "overall_confidence_score": 0.0-1.0}
With nothing to report, findings is [].`

// newReviewRequest checks a review target and writes its prompt.
func newReviewRequest(t api.ReviewTarget) (reviewRequest, error) {
	var hint, task string
	switch t.Type {
	case api.ReviewUncommittedChanges:
		hint = "current changes"
		task = "Review the uncommitted changes of the repository in the working directory: staged and unstaged edits (`git diff HEAD`) and untracked files (`git status --porcelain`, then read each new file)."
	case api.ReviewBaseBranch:
		branch := strings.TrimSpace(t.Branch)
		if branch == "" {
			return reviewRequest{}, apperr.New(apperr.Invalid, "branch must not be empty")
		}
		hint = fmt.Sprintf("changes against '%s'", branch)
		task = fmt.Sprintf("Review the changes of the current branch against the base branch '%s': find where they diverge (`git merge-base HEAD %s`, preferring the upstream of '%s' if it is newer) and review the diff from that commit to the working tree.", branch, branch, branch)
	case api.ReviewCommit:
		sha := strings.TrimSpace(t.Sha)
		if sha == "" {
			return reviewRequest{}, apperr.New(apperr.Invalid, "sha must not be empty")
		}
		short := sha
		if len(short) > 7 {
			short = short[:7]
		}
		hint = "commit " + short
		task = fmt.Sprintf("Review the changes introduced by commit %s (`git show %s`).", sha, sha)
		if t.Title != nil && strings.TrimSpace(*t.Title) != "" {
			title := strings.TrimSpace(*t.Title)
			hint += ": " + title
			task = fmt.Sprintf("Review the changes introduced by commit %s (\"%s\"; `git show %s`).", sha, title, sha)
		}
	case api.ReviewCustom:
		instructions := strings.TrimSpace(t.Instructions)
		if instructions == "" {
			return reviewRequest{}, apperr.New(apperr.Invalid, "instructions must not be empty")
		}
		hint, task = instructions, instructions
	default:
		return reviewRequest{}, apperr.New(apperr.Invalid, "unknown review target type: %q", t.Type)
	}
	return reviewRequest{hint: hint, task: task}, nil
}

// reviewInterrupted is the review text of a review that did not finish.
const reviewInterrupted = "The review was interrupted before it finished; run it again to get its findings."

// StartReview runs a code review as a turn of the thread (inline
// delivery): the response comes first, then turn/started, an
// enteredReviewMode item naming what is reviewed, the reviewer's work,
// and an exitedReviewMode item carrying the review. The reviewer works in
// a fresh context: it sees the changes, through its tools, and not the
// conversation; the thread's history gets only the review's result, which
// the thread's next turn hands to the model (reviewHandoff).
func (m *Manager) StartReview(ctx context.Context, c Caller, p api.ReviewStartParams) (api.ReviewStartResult, After, error) {
	if p.Delivery != nil && *p.Delivery != api.ReviewInline {
		return api.ReviewStartResult{}, nil, apperr.New(apperr.Invalid, "unsupported review delivery: %q", *p.Delivery)
	}
	req, err := newReviewRequest(p.Target)
	if err != nil {
		return api.ReviewStartResult{}, nil, err
	}
	res, after, err := m.startTurn(ctx, c, api.TurnStartParams{ThreadID: p.ThreadID}, &req)
	if err != nil {
		return api.ReviewStartResult{}, nil, err
	}
	// The reference answers with what is reviewed as the turn's one user
	// message (under the turn's id), and no root turn. A target with
	// nothing to review (no git repository, no changes) is no error
	// there: the review runs and says so.
	turn := res.Turn
	turn.RootTurnID = nil
	turn.Items = api.List[api.ThreadItem]{{Body: &api.UserMessageItem{ID: turn.ID, Content: api.List[api.UserInput]{{Type: api.UserInputText, Text: req.hint}}}}}
	return api.ReviewStartResult{Turn: turn, ReviewThreadID: p.ThreadID}, after, nil
}

// reviewHandoff is the user message that brings a finished review into
// the thread's model history, before the review itself as the assistant's
// message: the model of the thread's next turn reads what was reviewed
// and what the reviewer found.
const reviewHandoff = `The user had the changes (%s) reviewed by a separate reviewer, which saw the changes but not this conversation. The review follows; the user may ask you to address some of its findings.

<review>
%s
</review>`

// startReviewer gives a review's turn the reviewer's fresh context
// before its tool set is built: no earlier history, the reviewer's
// instructions in place of the thread's, commands run without asking
// (within the thread's sandbox), and no tools that reach beyond the
// review (sub-agents, goals, web search).
func (r *turnRun) startReviewer(tc *ToolContext) {
	r.prior = transcript.History{}
	r.reviewer, r.reviewing = true, true
	r.at.settings.instructions = reviewGuidelines
	tc.ApprovalPolicy = api.AskForApproval{Policy: api.ApprovalNever}
	tc.Children, tc.Goals = nil, nil
	cfg := maps.Clone(tc.Config)
	if cfg == nil {
		cfg = map[string]json.RawMessage{}
	}
	cfg["web_search"] = json.RawMessage(`"disabled"`)
	tc.Config = cfg
}

// runTurn is the goroutine of a review's turn: the request shows as a
// user message, the reviewer's messages stay hidden; its answer is shown
// as the exitedReviewMode item and an agent message, both rendered for
// reading, and becomes the turn's whole contribution to the thread's
// history.
func (req *reviewRequest) runTurn(r *turnRun, _ ToolContext) {
	defer close(r.at.done)
	t := r.t
	t.broadcastStatus()
	t.emit("turn/started", api.TurnStartedNotification{ThreadID: t.id, Turn: r.apiTurn(api.TurnInProgress, nil, nil)})
	_, err := r.reviewItem(&api.ReviewModeItem{ID: newID(), Review: req.hint})
	if err == nil {
		_, err = r.reviewItem(&api.UserMessageItem{ID: newID(), Content: api.List[api.UserInput]{{Type: api.UserInputText, Text: req.task}}})
	}
	if err == nil {
		r.hist.Add(transcript.UserInputToModel([]api.UserInput{{Type: api.UserInputText, Text: req.task + "\n\nThe working directory is " + r.at.settings.cwd + "."}}))
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
			transcript.UserInputToModel([]api.UserInput{{Type: api.UserInputText, Text: fmt.Sprintf(reviewHandoff, req.hint, review)}}),
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
func (r *turnRun) reviewItem(body api.ThreadItemBody) (api.ThreadItem, error) {
	ms := r.t.m.now().UnixMilli()
	item := api.ThreadItem{Body: body, StartedAtMs: &ms, CompletedAtMs: &ms}
	if err := r.persistHistory(&item); err != nil {
		return item, err
	}
	r.announceUserMessage(item)
	return item, nil
}
