package api

// ReviewTargetType is the discriminator of ReviewTarget.
type ReviewTargetType string

// The review targets of review/start.
const (
	// ReviewUncommittedChanges reviews the working tree: staged, unstaged
	// and untracked files.
	ReviewUncommittedChanges ReviewTargetType = "uncommittedChanges"
	// ReviewBaseBranch reviews the current branch against a base branch.
	ReviewBaseBranch ReviewTargetType = "baseBranch"
	// ReviewCommit reviews the changes one commit introduced.
	ReviewCommit ReviewTargetType = "commit"
	// ReviewCustom reviews what free-form instructions ask for.
	ReviewCustom ReviewTargetType = "custom"
)

// ReviewTarget is what review/start reviews, a tagged union on "type".
type ReviewTarget struct {
	// Type selects the target; required.
	Type ReviewTargetType `json:"type"`
	// Branch is the base branch (baseBranch).
	Branch string `json:"branch,omitempty"`
	// Sha is the commit (commit).
	Sha string `json:"sha,omitempty"`
	// Title is the commit's label for UIs (commit), or null.
	Title *string `json:"title,omitempty"`
	// Instructions are the free-form review instructions (custom).
	Instructions string `json:"instructions,omitempty"`
}

// ReviewDelivery is where a review runs.
type ReviewDelivery string

// ReviewInline runs the review as a turn of the supplied thread, the only
// delivery 0.169.0 offers.
const ReviewInline ReviewDelivery = "inline"

// ReviewStartParams are the params of review/start.
type ReviewStartParams struct {
	// ThreadID is the thread the review runs in; required.
	ThreadID string `json:"threadId"`
	// Target is what to review; required.
	Target ReviewTarget `json:"target"`
	// Delivery is inline or null.
	Delivery *ReviewDelivery `json:"delivery,omitempty"`
}

// ReviewStartResult is the result of review/start: the review's turn,
// announced after it.
type ReviewStartResult struct {
	// Turn is the review's turn (in progress, items not loaded).
	Turn Turn `json:"turn"`
	// ReviewThreadID is the thread the review runs in.
	ReviewThreadID string `json:"reviewThreadId"`
}

// ReviewModeItem opens (enteredReviewMode) or closes (exitedReviewMode) a
// review in a turn.
type ReviewModeItem struct {
	// Exited tells exitedReviewMode from enteredReviewMode.
	Exited bool `json:"-"`
	// ID identifies the item.
	ID string `json:"id"`
	// Review is, on entry, what is reviewed ("current changes"); on exit,
	// the review's text.
	Review string `json:"review"`
}

// ItemType implements ThreadItemBody.
func (i *ReviewModeItem) ItemType() ThreadItemType {
	if i.Exited {
		return ItemExitedReviewMode
	}
	return ItemEnteredReviewMode
}

// ItemID implements ThreadItemBody.
func (i *ReviewModeItem) ItemID() string { return i.ID }
