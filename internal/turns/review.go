package turns

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/turns/loop"
)

// reviewRequest is one review/start: hint is what the TUI shows
// ("current changes"), task the request the reviewer is asked and the
// thread shows as the user's message.
type reviewRequest struct {
	hint, task string
}

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

// StartReview runs a code review as a turn of the thread (inline
// delivery): the response comes first, then turn/started, an
// enteredReviewMode item naming what is reviewed, the reviewer's work,
// and an exitedReviewMode item carrying the review. The reviewer works in
// a fresh context: it sees the changes, through its tools, and not the
// conversation; the thread's history gets only the review's result, which
// the thread's next turn hands to the model (loop.Run.RunReview).
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

// reviewerTools narrows a review's tool set to the review: commands run
// without asking (within the thread's sandbox), and no tools that reach
// beyond the review (sub-agents, goals, web search). The reviewer's
// fresh context is the loop's (loop.Run.StartReviewer).
func reviewerTools(tc *ToolContext) {
	tc.ApprovalPolicy = api.AskForApproval{Policy: api.ApprovalNever}
	tc.Children, tc.Goals = nil, nil
	cfg := maps.Clone(tc.Config)
	if cfg == nil {
		cfg = map[string]json.RawMessage{}
	}
	cfg["web_search"] = json.RawMessage(`"disabled"`)
	tc.Config = cfg
}

// runTurn is the goroutine of a review's turn (loop.Run.RunReview).
func (req *reviewRequest) runTurn(_ *Manager, r *loop.Run, _ ToolContext) {
	r.RunReview(req.hint, req.task)
}
