package turns

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"slices"
	"strings"
	"unicode"
	"unicode/utf16"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/store"
)

// ReadItems answers thread/items/read: the named items of one turn, each
// once, in stored order. Ids of no item of that turn (another turn's
// items, unknown ids, an unknown turn) are left out.
func (m *Manager) ReadItems(ctx context.Context, p api.ThreadItemsReadParams) (api.ThreadItemsReadResult, error) {
	if len(p.ItemIDs) == 0 || len(p.ItemIDs) > api.ThreadItemsReadMax {
		return api.ThreadItemsReadResult{}, apperr.New(apperr.Invalid, "itemIds must contain 1 to %d IDs", api.ThreadItemsReadMax)
	}
	x, err := m.knownThread(ctx, p.ThreadID)
	if err != nil {
		return api.ThreadItemsReadResult{}, err
	}
	found := make([]store.Item, 0, len(p.ItemIDs))
	seen := make(map[string]bool, len(p.ItemIDs))
	for _, id := range p.ItemIDs {
		if seen[id] {
			continue
		}
		seen[id] = true
		it, err := x.Store.GetItem(ctx, x.ThreadID, id)
		if apperr.Is(err, apperr.NotFound) {
			continue
		}
		if err != nil {
			return api.ThreadItemsReadResult{}, err
		}
		if it.TurnID == p.TurnID {
			found = append(found, it)
		}
	}
	slices.SortFunc(found, func(a, b store.Item) int { return int(a.Seq - b.Seq) })
	res := api.ThreadItemsReadResult{Data: make(api.List[api.ThreadItemEntry], 0, len(found))}
	for _, it := range found {
		e, err := itemEntry(it)
		if err != nil {
			return api.ThreadItemsReadResult{}, err
		}
		res.Data = append(res.Data, e)
	}
	return res, nil
}

// itemEntry is a stored item as thread/items/list and thread/items/read
// give it.
func itemEntry(it store.Item) (api.ThreadItemEntry, error) {
	var ti api.ThreadItem
	if err := json.Unmarshal(it.Payload, &ti); err != nil {
		return api.ThreadItemEntry{}, apperr.Wrap(apperr.Internal, err, "corrupt item")
	}
	return api.ThreadItemEntry{TurnID: it.TurnID, Item: ti, StartedAtMs: ti.StartedAtMs, CompletedAtMs: ti.CompletedAtMs}, nil
}

// Bounds of thread/searchOccurrences.
const (
	// occurrencesDefaultLimit is the page size when the client names none.
	occurrencesDefaultLimit = 50
	// occurrencesMaxLimit caps the page size a client names.
	occurrencesMaxLimit = 200
	// snippetBefore and snippetAfter are how many characters of the
	// message a snippet keeps before and after the match.
	snippetBefore, snippetAfter = 49, 96
)

// SearchOccurrences answers thread/searchOccurrences: every match of the
// term, case-insensitive and literal, in the thread's user and agent
// messages, in message order and then by position, a page at a time.
func (m *Manager) SearchOccurrences(ctx context.Context, p api.ThreadSearchOccurrencesParams) (api.ThreadSearchOccurrencesResult, error) {
	term := strings.TrimSpace(p.SearchTerm)
	if term == "" {
		return api.ThreadSearchOccurrencesResult{}, apperr.New(apperr.Invalid, "thread/searchOccurrences requires a non-empty searchTerm")
	}
	if len(term) > api.ThreadSearchStreamTermMax {
		return api.ThreadSearchOccurrencesResult{}, apperr.New(apperr.Invalid, "thread/searchOccurrences searchTerm exceeds %d UTF-8 bytes", api.ThreadSearchStreamTermMax)
	}
	x, err := m.knownThread(ctx, p.ThreadID)
	if err != nil {
		return api.ThreadSearchOccurrencesResult{}, err
	}
	limit := occurrencesDefaultLimit
	if p.Limit != nil {
		limit = min(max(int(*p.Limit), 1), occurrencesMaxLimit)
	}
	var from occurrenceCursor
	if p.Cursor != nil {
		if from, err = decodeOccurrenceCursor(*p.Cursor, x.ThreadID, term); err != nil {
			return api.ThreadSearchOccurrencesResult{}, err
		}
	}
	needle := foldRunes(term)
	res := api.ThreadSearchOccurrencesResult{Data: api.List[api.ThreadSearchOccurrence]{}}
	turnCursors := map[string]string{}
	q := store.ItemsQuery{ThreadID: x.ThreadID, AfterSeq: max(from.Seq-1, 0), Limit: store.MaxLimit}
	for {
		page, err := x.Store.ListItems(ctx, q)
		if err != nil {
			return api.ThreadSearchOccurrencesResult{}, err
		}
		for _, it := range page.Items {
			for part, text := range store.MessageTexts(it) {
				runes := []rune(text)
				for _, at := range matches(foldRunes(text), needle) {
					pos := occurrenceCursor{Seq: it.Seq, Part: part, At: at}
					if pos.before(from) {
						continue
					}
					if len(res.Data) == limit {
						next := pos.encode(x.ThreadID, term)
						res.NextCursor = &next
						return res, nil
					}
					tc, ok := turnCursors[it.TurnID]
					if !ok {
						tr, err := x.Store.GetTurn(ctx, x.ThreadID, it.TurnID)
						if err != nil {
							return api.ThreadSearchOccurrencesResult{}, err
						}
						tc = store.TurnCursor(x.ThreadID, tr.Seq)
						turnCursors[it.TurnID] = tc
					}
					snippet, rng := snippetOf(runes, at, len(needle))
					res.Data = append(res.Data, api.ThreadSearchOccurrence{
						TurnID: it.TurnID, ItemID: it.ItemID, Snippet: snippet, SnippetMatchRange: rng, TurnCursor: tc,
					})
				}
			}
		}
		if page.NextCursor == "" {
			return res, nil
		}
		q.Cursor = page.NextCursor
	}
}

// foldRunes lower-cases s rune by rune, so that an index into the result
// is an index into s's runes.
func foldRunes(s string) []rune {
	r := []rune(s)
	for i, c := range r {
		r[i] = unicode.ToLower(c)
	}
	return r
}

// matches returns where needle starts in hay, without overlaps.
func matches(hay, needle []rune) []int {
	var out []int
	for i := 0; i+len(needle) <= len(hay); {
		if slices.Equal(hay[i:i+len(needle)], needle) {
			out = append(out, i)
			i += len(needle)
			continue
		}
		i++
	}
	return out
}

// snippetOf cuts text around the match of n runes at at, marking cuts
// with "... " and " ...", and gives the match's range in the snippet in
// UTF-16 code units.
func snippetOf(text []rune, at, n int) (string, api.ThreadSearchTextRange) {
	start, end := max(at-snippetBefore, 0), min(at+n+snippetAfter, len(text))
	var b strings.Builder
	if start > 0 {
		b.WriteString("... ")
	}
	b.WriteString(string(text[start:at]))
	lo := utf16Len(b.String())
	b.WriteString(string(text[at : at+n]))
	hi := utf16Len(b.String())
	b.WriteString(string(text[at+n : end]))
	if end < len(text) {
		b.WriteString(" ...")
	}
	return b.String(), api.ThreadSearchTextRange{Start: uint32(lo), End: uint32(hi)}
}

func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// occurrenceCursor is a position in a thread's messages: an item, one of
// its texts and a rune offset in it.
type occurrenceCursor struct {
	Seq  int64
	Part int
	At   int
}

func (c occurrenceCursor) before(o occurrenceCursor) bool {
	if c.Seq != o.Seq {
		return c.Seq < o.Seq
	}
	if c.Part != o.Part {
		return c.Part < o.Part
	}
	return c.At < o.At
}

// occurrenceBinding ties a cursor to its thread and term, so that a cursor
// of another search is refused rather than misread.
func occurrenceBinding(threadID, term string) uint32 {
	return crc32.ChecksumIEEE([]byte("appserver/occurrences/v1\x00" + threadID + "\x00" + term))
}

func (c occurrenceCursor) encode(threadID, term string) string {
	return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%d.%d.%d.%d", c.Seq, c.Part, c.At, occurrenceBinding(threadID, term)))
}

func decodeOccurrenceCursor(s, threadID, term string) (occurrenceCursor, error) {
	bad := apperr.New(apperr.Invalid, "invalid cursor: %s", s)
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return occurrenceCursor{}, bad
	}
	var c occurrenceCursor
	var sum uint32
	if n, err := fmt.Sscanf(string(raw), "%d.%d.%d.%d", &c.Seq, &c.Part, &c.At, &sum); err != nil || n != 4 ||
		c.Seq < 1 || c.Part < 0 || c.At < 0 || sum != occurrenceBinding(threadID, term) || c.encode(threadID, term) != s {
		return occurrenceCursor{}, bad
	}
	return c, nil
}
