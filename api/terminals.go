package api

// ThreadBackgroundTerminalsListParams are the params of
// thread/backgroundTerminals/list (experimental).
type ThreadBackgroundTerminalsListParams struct {
	// ThreadID is the thread; required.
	ThreadID string `json:"threadId"`
	// Cursor continues a previous page, or null.
	Cursor *string `json:"cursor,omitempty"`
	// Limit is the page size, or null for all.
	Limit *uint32 `json:"limit,omitempty"`
}

// ThreadBackgroundTerminal is one command the model left running in a
// thread (an exec session).
type ThreadBackgroundTerminal struct {
	// ProcessID is the session id the model writes to.
	ProcessID string `json:"processId"`
	// ItemID is the commandExecution item that started it.
	ItemID string `json:"itemId"`
	// Command is the command line.
	Command string `json:"command"`
	// Cwd is its working directory.
	Cwd string `json:"cwd"`
	// OsPid is the operating system's process id, or null.
	OsPid *uint32 `json:"osPid"`
	// CPUPercent is not measured: always null.
	CPUPercent *float64 `json:"cpuPercent"`
	// RssKb is not measured: always null.
	RssKb *uint64 `json:"rssKb"`
}

// ThreadBackgroundTerminalsListResult is the result of
// thread/backgroundTerminals/list.
type ThreadBackgroundTerminalsListResult struct {
	// Data is the page, oldest session first.
	Data List[ThreadBackgroundTerminal] `json:"data"`
	// NextCursor continues the list, or null at its end.
	NextCursor *string `json:"nextCursor"`
}

// ThreadBackgroundTerminalsCleanParams are the params of
// thread/backgroundTerminals/clean (experimental): end them all.
type ThreadBackgroundTerminalsCleanParams struct {
	// ThreadID is the thread; required.
	ThreadID string `json:"threadId"`
}

// ThreadBackgroundTerminalsCleanResult is the (empty) result of
// thread/backgroundTerminals/clean.
type ThreadBackgroundTerminalsCleanResult struct{}

// ThreadBackgroundTerminalsTerminateParams are the params of
// thread/backgroundTerminals/terminate (experimental).
type ThreadBackgroundTerminalsTerminateParams struct {
	// ThreadID is the thread; required.
	ThreadID string `json:"threadId"`
	// ProcessID is the terminal to end; required.
	ProcessID string `json:"processId"`
}

// ThreadBackgroundTerminalsTerminateResult is the result of
// thread/backgroundTerminals/terminate.
type ThreadBackgroundTerminalsTerminateResult struct {
	// Terminated is false when the thread had no such terminal.
	Terminated bool `json:"terminated"`
}
