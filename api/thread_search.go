package api

// ThreadSearchParams are the params of thread/search (experimental).
type ThreadSearchParams struct {
	// SearchTerm is the text to find; required.
	SearchTerm string `json:"searchTerm"`
	// Cursor continues a previous page, or null.
	Cursor *string `json:"cursor,omitempty"`
	// Limit is the page size, or null for the default.
	Limit *uint32 `json:"limit,omitempty"`
	// SortKey orders the results (default created_at), or null.
	SortKey *ThreadSortKey `json:"sortKey,omitempty"`
	// SortDirection orders the results (default desc), or null.
	SortDirection *SortDirection `json:"sortDirection,omitempty"`
	// Archived selects archived threads only when true.
	Archived *bool `json:"archived,omitempty"`
	// SourceKinds filters by source; empty means interactive sources.
	SourceKinds []ThreadSourceKind `json:"sourceKinds,omitempty"`
	// CurrentAccountOnly is accepted and ignored: appserver has no accounts.
	CurrentAccountOnly *bool `json:"currentAccountOnly,omitempty"`
	// IncludeAttachedThreads is accepted and ignored.
	IncludeAttachedThreads *bool `json:"includeAttachedThreads,omitempty"`
}

// ThreadSearchHit is one thread thread/search found, with the text that
// matched.
type ThreadSearchHit struct {
	// Thread is the thread (turns always []).
	Thread Thread `json:"thread"`
	// Snippet is the matching text, cut around the match.
	Snippet string `json:"snippet"`
}

// ThreadSearchResult is the result of thread/search.
type ThreadSearchResult struct {
	// Data are the hits.
	Data List[ThreadSearchHit] `json:"data"`
	// NextCursor continues the search, or null on the last page.
	NextCursor *string `json:"nextCursor"`
	// BackwardsCursor pages the other way, or null.
	BackwardsCursor *string `json:"backwardsCursor"`
}
