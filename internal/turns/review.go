package turns

import (
	"context"
	"fmt"
	"strings"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
)

// reviewRequest is one review/start: hint is what the TUI shows
// ("current changes"), prompt what the model is asked.
type reviewRequest struct {
	hint, prompt string
}

// reviewGuidelines open every review prompt: what a useful finding is
// and how the answer is laid out, so that exitedReviewMode carries a
// review a user can act on.
const reviewGuidelines = `You are reviewing code changes on behalf of the user. Do not modify any file; read the changes with shell commands (git, cat, rg) and reason about them.

Report only defects the author would want to fix: bugs, regressions, security problems, data loss, races, broken error handling, missing tests for changed behaviour. Skip style nits and matters of taste. Each finding names the file and line range, says what goes wrong and under which input, and carries a priority from P0 (must fix before merging) to P3 (minor).

Answer in plain text: one line per finding ("[P1] path:line - title" followed by a short explanation), then a final line with your verdict: "The changes look correct." or "The changes have issues that should be fixed." If you find nothing worth reporting, say so.`

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
	return reviewRequest{hint: hint, prompt: reviewGuidelines + "\n\n" + task}, nil
}

// reviewInterrupted is the review text of a review that did not finish.
const reviewInterrupted = "The review was interrupted before it finished; run it again to get its findings."

// StartReview runs a code review as a turn of the thread (inline
// delivery): the response comes first, then turn/started, an
// enteredReviewMode item naming what is reviewed, the model's work, and an
// exitedReviewMode item carrying the review; the review joins the thread's
// history, so the model can act on it in the next turn.
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
	return api.ReviewStartResult{Turn: res.Turn, ReviewThreadID: p.ThreadID}, after, nil
}

// runTurn is the goroutine of a review's turn.
func (req *reviewRequest) runTurn(r *turnRun, _ ToolContext) {
	defer close(r.at.done)
	t := r.t
	t.broadcastStatus()
	t.emit("turn/started", api.TurnStartedNotification{ThreadID: t.id, Turn: r.apiTurn(api.TurnInProgress, nil, nil)})
	err := r.reviewItem(&api.ReviewModeItem{ID: newID(), Review: req.hint})
	if err == nil {
		r.hist.add(userInputToModel([]api.UserInput{{Type: api.UserInputText, Text: req.prompt}}))
		err = r.loop()
		review := reviewInterrupted
		if err == nil && r.final != nil {
			if msg, ok := r.final.Body.(*api.AgentMessageItem); ok {
				review = msg.Text
			}
		}
		// The review closes even when the turn failed or was
		// interrupted, so that the client leaves review mode. Its item
		// has an id of its own: the store keeps one item per id.
		if ierr := r.reviewItem(&api.ReviewModeItem{Exited: true, ID: newID(), Review: review}); err == nil {
			err = ierr
		}
	}
	r.finish(err)
}

// reviewItem stores a review mode item with the turn's history so far,
// then announces it.
func (r *turnRun) reviewItem(body *api.ReviewModeItem) error {
	ms := r.t.m.now().UnixMilli()
	item := api.ThreadItem{Body: body, StartedAtMs: &ms, CompletedAtMs: &ms}
	if err := r.persistHistory(&item); err != nil {
		return err
	}
	r.announceUserMessage(item)
	return nil
}
