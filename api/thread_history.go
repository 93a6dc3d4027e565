package api

// ThreadItemsReadParams are the params of thread/items/read
// (experimental): up to ThreadItemsReadMax items of one turn, by id.
type ThreadItemsReadParams struct {
	// ThreadID is the thread.
	ThreadID string `json:"threadId"`
	// TurnID is the turn the items must belong to.
	TurnID string `json:"turnId"`
	// ItemIDs are the ids to read, 1 to ThreadItemsReadMax of them.
	ItemIDs []string `json:"itemIds"`
}

// ThreadItemsReadMax is how many item ids one thread/items/read names at
// most.
const ThreadItemsReadMax = 100

// ThreadItemsReadResult is the result of thread/items/read: the items
// found, in stored order.
type ThreadItemsReadResult struct {
	// Data are the items.
	Data List[ThreadItemEntry] `json:"data"`
}

// ThreadSearchOccurrencesParams are the params of thread/searchOccurrences
// (experimental).
type ThreadSearchOccurrencesParams struct {
	// ThreadID is the thread searched.
	ThreadID string `json:"threadId"`
	// SearchTerm is the literal text found case-insensitively in user and
	// agent messages.
	SearchTerm string `json:"searchTerm"`
	// Cursor continues a previous page of the same search, or null.
	Cursor *string `json:"cursor,omitempty"`
	// Limit is the page size, or null for the default.
	Limit *uint32 `json:"limit,omitempty"`
}

// ThreadSearchTextRange is a range of a snippet in UTF-16 code units.
type ThreadSearchTextRange struct {
	// Start is the first code unit of the match.
	Start uint32 `json:"start"`
	// End is the code unit after the match.
	End uint32 `json:"end"`
}

// ThreadSearchOccurrence is one match of thread/searchOccurrences.
type ThreadSearchOccurrence struct {
	// TurnID is the turn of the message.
	TurnID string `json:"turnId"`
	// ItemID is the message item.
	ItemID string `json:"itemId"`
	// Snippet is the text around the match, "... " and " ..." marking cuts.
	Snippet string `json:"snippet"`
	// SnippetMatchRange is where the match is in Snippet.
	SnippetMatchRange ThreadSearchTextRange `json:"snippetMatchRange"`
	// TurnCursor is a thread/turns/list cursor whose page starts at the
	// turn, whichever the direction.
	TurnCursor string `json:"turnCursor"`
}

// ThreadSearchOccurrencesResult is the result of thread/searchOccurrences.
type ThreadSearchOccurrencesResult struct {
	// Data are the matches in message order.
	Data List[ThreadSearchOccurrence] `json:"data"`
	// NextCursor continues after the last match, or null.
	NextCursor *string `json:"nextCursor"`
}

// ThreadSearchCancelParams are the params of thread/search/cancel and
// thread/search/stream/cancel.
type ThreadSearchCancelParams struct {
	// RequestID is the id of the search request to cancel, on the same
	// connection.
	RequestID RequestID `json:"requestId"`
}

// ThreadSearchCancelResult is the (empty) result of the search cancels.
type ThreadSearchCancelResult struct{}

// ThreadSearchPartialNotification is thread/search/partial: a batch of
// hits of a running thread/search/stream, before its final result.
type ThreadSearchPartialNotification struct {
	// RequestID is the id of the stream request.
	RequestID RequestID `json:"requestId"`
	// Data are the hits found since the previous batch.
	Data List[ThreadSearchHit] `json:"data"`
}

// ThreadSearchStreamTermMax is how many UTF-8 bytes a
// thread/search/stream term may hold once trimmed.
const ThreadSearchStreamTermMax = 65536

// ThreadReadStateOperation is what thread/readState/update does:
// {"type":"read"} or {"type":"unread"}.
type ThreadReadStateOperation struct {
	// Type is "read" or "unread".
	Type string `json:"type"`
}

// ThreadReadStateUpdateParams are the params of thread/readState/update
// (experimental).
type ThreadReadStateUpdateParams struct {
	// ThreadID is the thread.
	ThreadID string `json:"threadId"`
	// ExpectedRevision is the revision of the read state the client saw.
	ExpectedRevision string `json:"expectedRevision"`
	// Operation marks the thread read or unread.
	Operation ThreadReadStateOperation `json:"operation"`
}

// ThreadReadStateUpdateResult is the result of thread/readState/update.
type ThreadReadStateUpdateResult struct {
	// ReadState is the thread's read state after the update.
	ReadState ThreadReadState `json:"readState"`
}

// ThreadReadStateChangedNotification is thread/readState/changed.
type ThreadReadStateChangedNotification struct {
	// ThreadID is the thread.
	ThreadID string `json:"threadId"`
	// ReadState is its new read state.
	ReadState ThreadReadState `json:"readState"`
}

// ThreadRevertParams are the params of thread/revert: the thread's
// history becomes the prefix before BeforeTurnID (files are not touched).
type ThreadRevertParams struct {
	// ThreadID is the thread.
	ThreadID string `json:"threadId"`
	// BeforeTurnID is the first turn dropped, with every later one.
	BeforeTurnID string `json:"beforeTurnId"`
}

// ThreadRevertResult is the result of thread/revert.
type ThreadRevertResult struct {
	// Thread is the thread after the revert, its turns empty.
	Thread Thread `json:"thread"`
	// TurnsBackwardsCursor is the thread/turns/list cursor (descending)
	// whose first page starts at the last turn kept; nil when none is.
	TurnsBackwardsCursor *string `json:"turnsBackwardsCursor"`
	// ItemsBackwardsCursor is the thread/items/list cursor (descending)
	// whose first page starts at the last item kept; nil when none is.
	ItemsBackwardsCursor *string `json:"itemsBackwardsCursor"`
}

// ThreadRevertedNotification is thread/reverted: a thread's history was
// reverted; clients read it again.
type ThreadRevertedNotification struct {
	// ThreadID is the thread.
	ThreadID string `json:"threadId"`
}
