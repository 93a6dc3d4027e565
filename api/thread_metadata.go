package api

// ThreadMetadataUpdateParams are the params of thread/metadata/update.
type ThreadMetadataUpdateParams struct {
	// ThreadID is the thread; required.
	ThreadID string `json:"threadId"`
	// GitInfo patches the thread's Git metadata, or null.
	GitInfo *GitInfoPatch `json:"gitInfo,omitempty"`
	// ProjectID assigns a project ("" clears it), or null.
	ProjectID *string `json:"projectId,omitempty"`
	// DaybreakEnabled saves the client's Daybreak choice, or null.
	DaybreakEnabled *bool `json:"daybreakEnabled,omitempty"`
}

// GitInfoPatch changes a thread's Git metadata field by field: an absent
// field stays, null clears it, a string replaces it.
type GitInfoPatch struct {
	// Sha is the commit.
	Sha Nullable[string] `json:"sha,omitzero"`
	// Branch is the branch.
	Branch Nullable[string] `json:"branch,omitzero"`
	// OriginURL is the origin remote's URL.
	OriginURL Nullable[string] `json:"originUrl,omitzero"`
}

// ThreadMetadataUpdateResult is the result of thread/metadata/update: the
// thread as it now is.
type ThreadMetadataUpdateResult struct {
	// Thread is the updated thread (turns always []).
	Thread Thread `json:"thread"`
}

// ThreadDeleteParams are the params of thread/delete.
type ThreadDeleteParams struct {
	// ThreadID is the thread; required.
	ThreadID string `json:"threadId"`
}

// ThreadDeleteResult is the (empty) result of thread/delete.
type ThreadDeleteResult struct{}

// ThreadDeletedNotification is thread/deleted: a thread is gone for good.
type ThreadDeletedNotification struct {
	// ThreadID is the deleted thread.
	ThreadID string `json:"threadId"`
}
