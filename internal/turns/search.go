package turns

import (
	"context"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/principal"
	"github.com/appserver/appserver/internal/store"
)

// snippetContext is how many bytes of text a search snippet keeps on each
// side of the match.
const snippetContext = 60

// SearchThreads finds the threads whose name, first message (the preview)
// or any user or agent message holds the term, case-insensitively,
// paginated and sorted as thread/list (the store filters); each hit carries
// the matching text around the match.
func (m *Manager) SearchThreads(ctx context.Context, who principal.Principal, p api.ThreadSearchParams) (api.ThreadSearchResult, error) {
	return m.StreamSearchThreads(ctx, who, p, nil)
}

// searchPartialBatch is how many hits a partial batch of
// StreamSearchThreads carries.
const searchPartialBatch = 10

// StreamSearchThreads is SearchThreads that also hands partial, while it
// works, each batch of searchPartialBatch hits it has verified (the hits
// of a last incomplete batch come only with the result). partial runs on
// the caller's goroutine; nil hands nothing.
func (m *Manager) StreamSearchThreads(ctx context.Context, who principal.Principal, p api.ThreadSearchParams, partial func(api.List[api.ThreadSearchHit])) (api.ThreadSearchResult, error) {
	term := p.SearchTerm
	list, err := m.listVisible(ctx, who, api.ThreadListParams{
		Cursor: p.Cursor, Limit: p.Limit, SortKey: p.SortKey, SortDirection: p.SortDirection,
		Archived: p.Archived, SourceKinds: p.SourceKinds, SearchTerm: &term,
	}, false)
	if err != nil {
		return api.ThreadSearchResult{}, err
	}
	res := api.ThreadSearchResult{Data: make(api.List[api.ThreadSearchHit], 0, len(list.Data)), NextCursor: list.NextCursor, BackwardsCursor: list.BackwardsCursor}
	for _, th := range list.Data {
		var snippet string
		if th.Name != nil && strings.Contains(strings.ToLower(*th.Name), strings.ToLower(term)) {
			snippet = *th.Name
		} else if strings.Contains(strings.ToLower(th.Preview), strings.ToLower(term)) {
			snippet = snippetAround(th.Preview, term)
		} else if snippet, err = m.messageSnippet(ctx, th.ID, term); err != nil {
			return api.ThreadSearchResult{}, err
		}
		res.Data = append(res.Data, api.ThreadSearchHit{Thread: th, Snippet: snippet})
		if partial != nil && len(res.Data)%searchPartialBatch == 0 {
			partial(slices.Clone(res.Data[len(res.Data)-searchPartialBatch:]))
		}
	}
	return res, nil
}

// messageSnippet is the snippet of the thread's first user or agent
// message that holds term; "" when none does as Go folds case (the store
// matched it with the database's folding).
func (m *Manager) messageSnippet(ctx context.Context, threadID, term string) (string, error) {
	x, err := m.knownThread(ctx, threadID)
	if err != nil {
		return "", err
	}
	lower := strings.ToLower(term)
	q := store.ItemsQuery{ThreadID: x.ThreadID, Limit: store.MaxLimit}
	for {
		page, err := x.Store.ListItems(ctx, q)
		if err != nil {
			return "", err
		}
		for _, it := range page.Items {
			for _, text := range store.MessageTexts(it) {
				if strings.Contains(strings.ToLower(text), lower) {
					return snippetAround(text, term), nil
				}
			}
		}
		if page.NextCursor == "" {
			return "", nil
		}
		q.Cursor = page.NextCursor
	}
}

// snippetAround cuts text to the match of term and snippetContext bytes on
// each side (at rune boundaries), marking a cut with "…".
func snippetAround(text, term string) string {
	i := strings.Index(strings.ToLower(text), strings.ToLower(term))
	if i < 0 || term == "" {
		i = 0
	}
	// Lower-casing can change a text's length: the index is then a guess,
	// kept inside the original.
	i = min(i, len(text))
	start, end := max(i-snippetContext, 0), min(i+len(term)+snippetContext, len(text))
	for start > 0 && !utf8.RuneStart(text[start]) {
		start--
	}
	for end < len(text) && !utf8.RuneStart(text[end]) {
		end++
	}
	out := text[start:end]
	if start > 0 {
		out = "…" + out
	}
	if end < len(text) {
		out += "…"
	}
	return out
}
