package transcript

import (
	"context"
	"encoding/json"
	"math"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/store"
)

// Reader reads a thread's turns and items as its store holds them: the
// durable store, or the memory store of an ephemeral thread, so that the
// read side reads a loaded thread, a stored one and an ephemeral one
// alike.
type Reader struct {
	// Store holds the thread's transcript.
	Store store.Store
	// ThreadID is the thread's id.
	ThreadID string
}

// APITurns returns every turn of the thread with all its items.
func (x Reader) APITurns(ctx context.Context) (api.List[api.Turn], error) {
	turns, err := x.Turns(ctx)
	if err != nil {
		return nil, err
	}
	items, err := x.Items(ctx, "")
	if err != nil {
		return nil, err
	}
	byTurn := map[string][]store.Item{}
	for _, it := range items {
		byTurn[it.TurnID] = append(byTurn[it.TurnID], it)
	}
	// Only byTurn holds the stored items now, and each turn's are
	// forgotten once converted, so that a big thread's stored items and
	// their converted form are not both held whole.
	items = nil
	out := make(api.List[api.Turn], 0, len(turns))
	for _, tr := range turns {
		at, err := TurnToAPI(tr, byTurn[tr.ID], api.ItemsFull)
		if err != nil {
			return nil, apperr.Wrap(apperr.Internal, err, "corrupt item")
		}
		delete(byTurn, tr.ID)
		out = append(out, at)
	}
	return out, nil
}

// ModelHistory is the model history the thread's next turn starts from:
// that of its turns since the last compaction, read newest first so that
// the turns before it are never read.
func (x Reader) ModelHistory(ctx context.Context) (History, error) {
	var since [][]model.InputItem // newest first
	cursor := ""
pages:
	for {
		page, err := x.Store.ListTurns(ctx, store.TurnsQuery{ThreadID: x.ThreadID, Desc: true, Limit: store.MaxLimit, Cursor: cursor})
		if err != nil {
			return History{}, err
		}
		for _, tr := range page.Turns {
			items, compacted, err := TurnHistory(tr)
			if err != nil {
				return History{}, err
			}
			since = append(since, items)
			if compacted {
				break pages
			}
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	var h History
	for i := len(since) - 1; i >= 0; i-- {
		h.AddUnencoded(since[i]...)
	}
	return h, nil
}

// turns lists every turn of the thread in order.
func (x Reader) Turns(ctx context.Context) ([]store.Turn, error) {
	var out []store.Turn
	cursor := ""
	for {
		page, err := x.Store.ListTurns(ctx, store.TurnsQuery{ThreadID: x.ThreadID, Limit: store.MaxLimit, Cursor: cursor})
		if err != nil {
			return nil, err
		}
		out = append(out, page.Turns...)
		if page.NextCursor == "" {
			return out, nil
		}
		cursor = page.NextCursor
	}
}

// items lists every item of the thread (or of one turn) in order.
func (x Reader) Items(ctx context.Context, turnID string) ([]store.Item, error) {
	var out []store.Item
	err := x.EachItem(ctx, turnID, math.MaxInt64, func(it store.Item) error {
		out = append(out, it)
		return nil
	})
	return out, err
}

// EachItem calls f with every item of the thread (or of one turn) in
// order, up to sequence number lastSeq (math.MaxInt64: all; 0: none, as for
// a thread that had no items when a reply was made), reading them a page at a
// time, and stops at f's first error.
func (x Reader) EachItem(ctx context.Context, turnID string, lastSeq int64, f func(store.Item) error) error {
	cursor := ""
	for {
		page, err := x.Store.ListItems(ctx, store.ItemsQuery{ThreadID: x.ThreadID, TurnID: turnID, Limit: store.MaxLimit, Cursor: cursor})
		if err != nil {
			return err
		}
		for _, it := range page.Items {
			if it.Seq > lastSeq {
				return nil
			}
			if err := f(it); err != nil {
				return err
			}
		}
		if page.NextCursor == "" {
			return nil
		}
		cursor = page.NextCursor
	}
}

// ListTurns pages the thread's turns (newest first by default), as
// thread/turns/list answers.
func (x Reader) ListTurns(ctx context.Context, p api.ThreadTurnsListParams) (api.TurnsPage, error) {
	view := api.ItemsSummary
	if p.ItemsView != nil {
		view = *p.ItemsView
	}
	desc := p.SortDirection == nil || *p.SortDirection == api.SortDesc
	q := store.TurnsQuery{ThreadID: x.ThreadID, Desc: desc}
	if p.Limit != nil {
		q.Limit = int(*p.Limit)
	}
	if p.Cursor != nil {
		q.Cursor = *p.Cursor
	}
	page, err := x.Store.ListTurns(ctx, q)
	if err != nil {
		return api.TurnsPage{}, err
	}
	turns := page.Turns
	if len(turns) == 0 && (p.Cursor == nil || *p.Cursor == "") {
		if rec, err := x.Store.GetThread(ctx, x.ThreadID); err == nil {
			if meta, err := DecodeThreadMeta(rec.Meta); err == nil && meta.Reverted {
				return api.TurnsPage{Data: api.List[api.Turn]{}}, nil
			}
		}
		return api.TurnsPage{}, apperr.New(apperr.Invalid, "thread %s is not materialized yet; thread/turns/list is unavailable before first user message", x.ThreadID)
	}
	res := api.TurnsPage{Data: make(api.List[api.Turn], 0, len(turns)), NextCursor: optString(page.NextCursor), BackwardsCursor: optString(page.BackwardsCursor)}
	for _, tr := range turns {
		var items []store.Item
		if view != api.ItemsNotLoaded {
			if items, err = x.Items(ctx, tr.ID); err != nil {
				return api.TurnsPage{}, err
			}
		}
		at, err := TurnToAPI(tr, items, view)
		if err != nil {
			return api.TurnsPage{}, apperr.Wrap(apperr.Internal, err, "corrupt item")
		}
		res.Data = append(res.Data, at)
	}
	return res, nil
}

// ListItems pages the thread's stored items (oldest first by default), as
// thread/items/list answers.
func (x Reader) ListItems(ctx context.Context, p api.ThreadItemsListParams) (api.ThreadItemsListResult, error) {
	q := store.ItemsQuery{ThreadID: x.ThreadID, Desc: p.SortDirection != nil && *p.SortDirection == api.SortDesc}
	if p.TurnID != nil {
		q.TurnID = *p.TurnID
	}
	if p.Limit != nil {
		q.Limit = int(*p.Limit)
	}
	if c := p.Cursor; c != nil {
		switch {
		case c.AnchorItemID != "":
			if q.TurnID == "" {
				return api.ThreadItemsListResult{}, apperr.New(apperr.Invalid, "an item cursor requires turnId")
			}
			if q.Desc {
				return api.ThreadItemsListResult{}, apperr.New(apperr.Invalid, "an item cursor is only supported with sortDirection asc")
			}
			anchor, err := x.anchorItem(ctx, c.AnchorItemID)
			if err != nil {
				return api.ThreadItemsListResult{}, err
			}
			q.AfterSeq = anchor
		default:
			q.Cursor = c.Opaque
		}
	}
	page, err := x.Store.ListItems(ctx, q)
	if err != nil {
		return api.ThreadItemsListResult{}, err
	}
	items := page.Items
	res := api.ThreadItemsListResult{Data: make(api.List[api.ThreadItemEntry], 0, len(items)), NextCursor: optString(page.NextCursor), BackwardsCursor: optString(page.BackwardsCursor)}
	for _, it := range items {
		var ti api.ThreadItem
		if err := json.Unmarshal(it.Payload, &ti); err != nil {
			return api.ThreadItemsListResult{}, apperr.Wrap(apperr.Internal, err, "corrupt item")
		}
		res.Data = append(res.Data, api.ThreadItemEntry{TurnID: it.TurnID, Item: ti, StartedAtMs: ti.StartedAtMs, CompletedAtMs: ti.CompletedAtMs})
	}
	return res, nil
}

// anchorItem is the position of an item named by a cursor.
func (x Reader) anchorItem(ctx context.Context, itemID string) (int64, error) {
	it, err := x.Store.GetItem(ctx, x.ThreadID, itemID)
	if apperr.Is(err, apperr.NotFound) {
		return 0, apperr.New(apperr.Invalid, "invalid cursor: item %s not found", itemID)
	}
	return it.Seq, err
}

// TurnHistory is the model history a stored turn added, with tool calls
// that never got an output answered "aborted"; compacted means it is the
// whole history from that turn on.
func TurnHistory(tr store.Turn) (items []model.InputItem, compacted bool, err error) {
	var tm TurnMeta
	if len(tr.Meta) > 0 {
		if err := json.Unmarshal(tr.Meta, &tm); err != nil {
			return nil, false, apperr.Wrap(apperr.Internal, err, "corrupt turn metadata")
		}
	}
	return closeDanglingCalls(tm.History), tm.Compacted, nil
}

// optString is s as an optional string: nil when empty.
func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
