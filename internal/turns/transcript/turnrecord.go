package transcript

import (
	"context"
	"encoding/json"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/store"
)

// The read side of single turns and stored items, for the HTTP API: what
// it answers comes from the transcript (the store, or memory for an
// ephemeral thread), never from the notifications a client saw.

// Page bounds of ItemRecords.
const (
	// MaxItemsPage is the most items one page holds.
	MaxItemsPage = store.MaxLimit
	// DefaultItemsPage is a page's size when the query names none.
	DefaultItemsPage = store.DefaultLimit
)

// TurnRecord is one turn as stored: its end, its items and its token
// usage.
type TurnRecord struct {
	ID     string
	Status api.TurnStatus
	// Error is the error of a failed turn.
	Error *api.TurnError
	// StartedAt and CompletedAt are Unix seconds.
	StartedAt, CompletedAt *int64
	// Items are the turn's items as stored (ThreadItem JSON), in order.
	Items []json.RawMessage
	// Usage is the sum of the token usage of the turn's model responses,
	// nil for a turn that recorded none.
	Usage *api.TokenUsageBreakdown
}

// TurnRecord returns stored turn tr of the thread with its items; the
// thread table gives tr the end its clients were told when the store
// missed it.
func (x Reader) TurnRecord(ctx context.Context, tr store.Turn) (TurnRecord, error) {
	out := TurnRecord{ID: tr.ID, Status: api.TurnStatus(tr.Status), Items: []json.RawMessage{}}
	if len(tr.Error) > 0 && string(tr.Error) != "null" {
		var te api.TurnError
		if json.Unmarshal(tr.Error, &te) == nil {
			out.Error = &te
		}
	}
	if tr.StartedAt != nil {
		s := tr.StartedAt.Unix()
		out.StartedAt = &s
	}
	if tr.CompletedAt != nil {
		c := tr.CompletedAt.Unix()
		out.CompletedAt = &c
	}
	var meta struct {
		Usage *api.TokenUsageBreakdown `json:"usage"`
	}
	if json.Unmarshal(tr.Meta, &meta) == nil {
		out.Usage = meta.Usage
	}
	cursor := ""
	for {
		page, err := x.Store.ListItems(ctx, store.ItemsQuery{ThreadID: x.ThreadID, TurnID: tr.ID, Limit: store.MaxLimit, Cursor: cursor})
		if err != nil {
			return TurnRecord{}, err
		}
		for _, it := range page.Items {
			out.Items = append(out.Items, it.Payload)
		}
		if page.NextCursor == "" {
			return out, nil
		}
		cursor = page.NextCursor
	}
}

// ItemRecord is one stored item of a thread.
type ItemRecord struct {
	// Seq is the item's position in its thread, from 1.
	Seq    int64
	TurnID string
	// Payload is the ThreadItem JSON as stored.
	Payload json.RawMessage
}

// ItemsQuery selects a page of a thread's stored items, in order.
type ItemsQuery struct {
	// ThreadID is the thread whose items are read.
	ThreadID string
	// TurnID keeps only the items of one turn when set.
	TurnID string
	// AfterSeq keeps only the items after that position.
	AfterSeq int64
	// Limit is the page size: 1 to MaxItemsPage, 0 for DefaultItemsPage.
	Limit int
	// Cursor is the NextCursor of the previous page.
	Cursor string
}

// ItemRecords returns a page of the thread's stored items and the cursor
// of the next page ("" after the last). A cursor that is not one is
// Invalid.
func (x Reader) ItemRecords(ctx context.Context, q ItemsQuery) ([]ItemRecord, string, error) {
	page, err := x.Store.ListItems(ctx, store.ItemsQuery{
		ThreadID: x.ThreadID, TurnID: q.TurnID, AfterSeq: q.AfterSeq, Limit: q.Limit, Cursor: q.Cursor,
	})
	if err != nil {
		if apperr.Is(err, apperr.Invalid) {
			return nil, "", apperr.Wrap(apperr.Invalid, err, "invalid cursor")
		}
		return nil, "", err
	}
	out := make([]ItemRecord, len(page.Items))
	for i, it := range page.Items {
		out[i] = ItemRecord{Seq: it.Seq, TurnID: it.TurnID, Payload: it.Payload}
	}
	return out, page.NextCursor, nil
}
