package backend

import (
	"strings"
	"time"

	"github.com/appserver/appserver/internal/store"
)

// Statements are the write statements of one dialect and the building of
// their arguments from a Plan's records.
type Statements struct {
	// InsertThread, InsertTurn and InsertItem take the arguments of
	// ThreadArgs, TurnArgs and ItemArgs.
	InsertThread, InsertTurn, InsertItem string
	// InsertEvent takes the arguments of EventArgs.
	InsertEvent string
	// BumpTurnSeq and BumpItemSeq add their first argument to the counter
	// of the thread whose id is the second, and return the counter's new
	// value.
	BumpTurnSeq, BumpItemSeq string

	d             Dialect
	jsonArg       func([]byte) any
	threadPatches patchSQL
	turnPatches   patchSQL
}

// NewStatements returns the write statements of dialect d; jsonArg binds a
// non-empty JSON value the way the backend's driver needs it.
func NewStatements(d Dialect, jsonArg func([]byte) any) *Statements {
	seq := func(column string) string {
		return "UPDATE threads SET " + column + " = " + column + " + " + d.Param(1) +
			" WHERE id = " + d.Param(2) + " RETURNING " + column
	}
	return &Statements{
		InsertThread: insertSQL(d, "threads", "id", "name", "name_fold", "preview", "preview_fold", "cwd",
			"model_provider", "model", "source", "forked_from_id", "archived", "created_at", "updated_at", "recency_at", "meta"),
		InsertTurn:  insertSQL(d, "turns", "thread_id", "id", "seq", "status", "error", "started_at", "completed_at", "meta"),
		InsertItem:  insertSQL(d, "items", "thread_id", "seq", "turn_id", "item_id", "type", "payload", "created_at"),
		InsertEvent: insertSQL(d, "events", "thread_id", "seq", "method", "data", "created_at"),
		BumpTurnSeq: seq("turn_seq"),
		BumpItemSeq: seq("item_seq"),

		d:       d,
		jsonArg: jsonArg,
		// In the order of the threadSet bits.
		threadPatches: newPatchSQL(d, "threads", [][]string{
			{"name", "name_fold"},
			{"preview", "preview_fold"},
			{"archived"},
			{"model"},
			{"updated_at"},
			{"recency_at"},
			{"meta"},
		}, "archived = archived", "id"),
		// In the order of the turnSet bits.
		turnPatches: newPatchSQL(d, "turns", [][]string{
			{"status"},
			{"error"},
			{"started_at"},
			{"completed_at"},
			{"meta"},
		}, "status = status", "thread_id", "id"),
	}
}

// DeleteThreadSQL are the statements that delete a thread, children
// first (the foreign keys have no cascade), each taking the thread id as
// its one parameter, written param; the last one's row count tells
// whether the thread existed.
func DeleteThreadSQL(param string) []string {
	return []string{
		"DELETE FROM events WHERE thread_id = " + param,
		"DELETE FROM items WHERE thread_id = " + param,
		"DELETE FROM turns WHERE thread_id = " + param,
		"DELETE FROM threads WHERE id = " + param,
	}
}

func insertSQL(d Dialect, table string, columns ...string) string {
	ps := make([]string, len(columns))
	for i := range columns {
		ps[i] = d.Param(i + 1)
	}
	return "INSERT INTO " + table + " (" + strings.Join(columns, ", ") + ") VALUES (" + strings.Join(ps, ", ") + ")"
}

// json binds stored JSON: SQL NULL when absent.
func (s *Statements) json(raw []byte) any {
	if len(raw) == 0 {
		return nil
	}
	return s.jsonArg(raw)
}

// timePtr binds an optional time: SQL NULL when absent.
func (s *Statements) timePtr(t *time.Time) any {
	if t == nil {
		return nil
	}
	return s.d.TimeArg(*t)
}

// ThreadArgs returns the arguments of InsertThread for t.
func (s *Statements) ThreadArgs(t *store.Thread) []any {
	name := ""
	if t.Name != nil {
		name = *t.Name
	}
	return []any{t.ID, t.Name, Fold(name), t.Preview, Fold(t.Preview), t.Cwd,
		t.ModelProvider, t.Model, t.Source, t.ForkedFromID, t.Archived,
		s.d.TimeArg(t.CreatedAt), s.d.TimeArg(t.UpdatedAt), s.d.TimeArg(t.RecencyAt), s.json(t.Meta)}
}

// TurnArgs returns the arguments of InsertTurn for t.
func (s *Statements) TurnArgs(t *store.Turn) []any {
	return []any{t.ThreadID, t.ID, t.Seq, t.Status, s.json(t.Error),
		s.timePtr(t.StartedAt), s.timePtr(t.CompletedAt), s.json(t.Meta)}
}

// ItemArgs returns the arguments of InsertItem for it.
func (s *Statements) ItemArgs(it *store.Item) []any {
	return []any{it.ThreadID, it.Seq, it.TurnID, it.ItemID, it.Type, s.json(it.Payload), s.d.TimeArg(it.CreatedAt)}
}

// EventArgs returns the arguments of InsertEvent for ev.
func (s *Statements) EventArgs(ev *store.Event) []any {
	return []any{ev.ThreadID, ev.Seq, ev.Method, ev.Data, s.d.TimeArg(ev.CreatedAt)}
}

// patchSQL holds the UPDATE texts of one kind of patch, one for every
// combination of the fields a patch may set, so that a write looks its text
// up instead of building it: a turn patch goes out with nearly every tool
// round, and a backend that prepares statements prepares each text once.
type patchSQL []string

// newPatchSQL builds the texts of a patch of table whose optional SET
// clauses set the column groups of sets; bit i of an index selects sets[i].
// noop is the SET clause of a patch that sets nothing, which must still find
// its row (or report it missing). The parameters of the SET clause come
// first, those of the key columns last.
func newPatchSQL(d Dialect, table string, sets [][]string, noop string, key ...string) patchSQL {
	texts := make(patchSQL, 1<<len(sets))
	for mask := range texts {
		var set, where []string
		n := 0
		param := func() string {
			n++
			return d.Param(n)
		}
		for i, cols := range sets {
			if mask&(1<<i) != 0 {
				for _, c := range cols {
					set = append(set, c+" = "+param())
				}
			}
		}
		if len(set) == 0 {
			set = append(set, noop)
		}
		for _, c := range key {
			where = append(where, c+" = "+param())
		}
		texts[mask] = "UPDATE " + table + " SET " + strings.Join(set, ", ") + " WHERE " + strings.Join(where, " AND ")
	}
	return texts
}

// The optional fields of a thread patch, as bits of a threadPatches index.
const (
	threadSetName = 1 << iota
	threadSetPreview
	threadSetArchived
	threadSetModel
	threadSetUpdatedAt
	threadSetRecencyAt
	threadSetMeta
)

// ThreadPatch returns the UPDATE that applies u and its arguments; it
// touches no row when the thread is unknown.
func (s *Statements) ThreadPatch(u store.ThreadPatch) (string, []any) {
	// Room for every field and the id, so that one allocation suffices.
	args := make([]any, 0, 10)
	mask := 0
	if u.Name != nil {
		mask |= threadSetName
		args = append(args, *u.Name, Fold(*u.Name))
	}
	if u.Preview != nil {
		mask |= threadSetPreview
		args = append(args, *u.Preview, Fold(*u.Preview))
	}
	if u.Archived != nil {
		mask |= threadSetArchived
		args = append(args, *u.Archived)
	}
	if u.Model != nil {
		mask |= threadSetModel
		args = append(args, *u.Model)
	}
	if u.UpdatedAt != nil {
		mask |= threadSetUpdatedAt
		args = append(args, s.d.TimeArg(*u.UpdatedAt))
	}
	if u.RecencyAt != nil {
		mask |= threadSetRecencyAt
		args = append(args, s.d.TimeArg(*u.RecencyAt))
	}
	if u.Meta != nil {
		mask |= threadSetMeta
		args = append(args, s.json(NullableJSON(u.Meta)))
	}
	return s.threadPatches[mask], append(args, u.ID)
}

// The optional fields of a turn patch, as bits of a turnPatches index.
const (
	turnSetStatus = 1 << iota
	turnSetError
	turnSetStartedAt
	turnSetCompletedAt
	turnSetMeta
)

// TurnPatch returns the UPDATE that applies u and its arguments; it touches
// no row when the turn is unknown.
func (s *Statements) TurnPatch(u store.TurnPatch) (string, []any) {
	args := make([]any, 0, 7)
	mask := 0
	if u.Status != "" {
		mask |= turnSetStatus
		args = append(args, u.Status)
	}
	if u.Error != nil {
		mask |= turnSetError
		args = append(args, s.json(NullableJSON(u.Error)))
	}
	if u.StartedAt != nil {
		mask |= turnSetStartedAt
		args = append(args, s.d.TimeArg(*u.StartedAt))
	}
	if u.CompletedAt != nil {
		mask |= turnSetCompletedAt
		args = append(args, s.d.TimeArg(*u.CompletedAt))
	}
	if u.Meta != nil {
		mask |= turnSetMeta
		args = append(args, s.json(NullableJSON(u.Meta)))
	}
	return s.turnPatches[mask], append(args, u.ThreadID, u.ID)
}

// Dialect returns the dialect of the statements.
func (s *Statements) Dialect() Dialect { return s.d }
