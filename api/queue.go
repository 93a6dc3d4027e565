package api

// QueuedSubmission is a user message queued on a thread (thread/queue/*),
// waiting to become a turn.
type QueuedSubmission struct {
	// ID names the entry (the daemon gives it).
	ID string `json:"id"`
	// Input is the user input the turn will start from.
	Input List[UserInput] `json:"input"`
	// ClientUserMessageID is the client's id of the message; it becomes
	// the userMessage's clientId, and one entry per thread has it.
	ClientUserMessageID string `json:"clientUserMessageId"`
	// ResponsesapiClientMetadata is kept with the entry, or null.
	ResponsesapiClientMetadata map[string]string `json:"responsesapiClientMetadata"`
}

// ThreadQueueAddParams is the params of thread/queue/add.
type ThreadQueueAddParams struct {
	// ThreadID is the thread; required.
	ThreadID string `json:"threadId"`
	// ClientUserMessageID is the client's id of the message; required. A
	// second add with the same id adds nothing and answers the entry.
	ClientUserMessageID string `json:"clientUserMessageId"`
	// Input is the user input; required, not empty.
	Input List[UserInput] `json:"input"`
	// ResponsesapiClientMetadata is kept with the entry, or null.
	ResponsesapiClientMetadata map[string]string `json:"responsesapiClientMetadata,omitempty"`
}

// ThreadQueueAddResult is the result of thread/queue/add.
type ThreadQueueAddResult struct {
	// QueuedSubmission is the entry.
	QueuedSubmission QueuedSubmission `json:"queuedSubmission"`
}

// ThreadQueueListParams is the params of thread/queue/list.
type ThreadQueueListParams struct {
	// ThreadID is the thread; required.
	ThreadID string `json:"threadId"`
	// Cursor is a nextCursor of an earlier page, or null.
	Cursor *string `json:"cursor,omitempty"`
	// Limit is the page size, or null for the thread list's default.
	Limit *uint32 `json:"limit,omitempty"`
}

// ThreadQueueListResult is the result of thread/queue/list.
type ThreadQueueListResult struct {
	// Data are the entries of the page, in the order they will start.
	Data List[QueuedSubmission] `json:"data"`
	// NextCursor continues the list, null on its last page.
	NextCursor *string `json:"nextCursor"`
}

// ThreadQueueUpdateParams is the params of thread/queue/update.
type ThreadQueueUpdateParams struct {
	// ThreadID is the thread; required.
	ThreadID string `json:"threadId"`
	// QueuedSubmissionID is the entry; required.
	QueuedSubmissionID string `json:"queuedSubmissionId"`
	// Input replaces the entry's input; required, not empty.
	Input List[UserInput] `json:"input"`
	// ResponsesapiClientMetadata, when not empty, replaces the entry's.
	ResponsesapiClientMetadata map[string]string `json:"responsesapiClientMetadata,omitempty"`
}

// ThreadQueueUpdateResult is the result of thread/queue/update.
type ThreadQueueUpdateResult = ThreadQueueAddResult

// ThreadQueueDeleteParams is the params of thread/queue/delete.
type ThreadQueueDeleteParams struct {
	// ThreadID is the thread; required.
	ThreadID string `json:"threadId"`
	// QueuedSubmissionID is the entry; required.
	QueuedSubmissionID string `json:"queuedSubmissionId"`
}

// ThreadQueueDeleteResult is the result of thread/queue/delete.
type ThreadQueueDeleteResult struct {
	// Deleted is false when the entry was not queued.
	Deleted bool `json:"deleted"`
}

// ThreadQueueReorderParams is the params of thread/queue/reorder.
type ThreadQueueReorderParams struct {
	// ThreadID is the thread; required.
	ThreadID string `json:"threadId"`
	// QueuedSubmissionIDs are every entry of the thread, once each, in
	// their new order; required.
	QueuedSubmissionIDs []string `json:"queuedSubmissionIds"`
}

// ThreadQueueReorderResult is the (empty) result of thread/queue/reorder.
type ThreadQueueReorderResult struct{}

// ThreadQueueStartParams is the params of thread/queue/start.
type ThreadQueueStartParams struct {
	// ThreadID is the thread; required.
	ThreadID string `json:"threadId"`
	// QueuedSubmissionID is the entry to start, or null for the first.
	QueuedSubmissionID *string `json:"queuedSubmissionId,omitempty"`
}

// ThreadQueueStartResult is the result of thread/queue/start.
type ThreadQueueStartResult = TurnStartResult

// ThreadQueueChangedNotification is the params of thread/queue/changed:
// the thread's queue changed (an entry added, changed, moved, deleted or
// started); clients list it again.
type ThreadQueueChangedNotification = ThreadIDNotification
