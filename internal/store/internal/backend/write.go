package backend

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"time"

	"github.com/appserver/appserver/internal/apperr"

	"github.com/appserver/appserver/internal/store"
)

// Statements are the write statements of one dialect and the building of
// their arguments from a Plan's records.
type Statements struct {
	// InsertThread, InsertTurn and InsertItem take the arguments of
	// ThreadArgs, TurnArgs and ItemArgs.
	InsertThread, InsertTurn, InsertItem string
	// InsertAudit takes the arguments of AuditArgs and returns the seq
	// the store assigned.
	InsertAudit string

	d             Dialect
	jsonArg       func([]byte) any
	threadPatches patchSQL
	turnPatches   patchSQL
	// threadUpdates holds the texts of ThreadUpdate, built on first use:
	// index mask<<2 | bumps, for a patch mask and which counters it bumps.
	threadUpdates sync.Map
}

// threadPatchSets are the column groups of a thread patch, in the order
// of the threadSet bits.
var threadPatchSets = [][]string{
	{"name", "name_fold"},
	{"preview", "preview_fold"},
	{"archived"},
	{"model"},
	{"updated_at"},
	{"recency_at"},
	{"meta"},
	{"read_state"},
}

// NewStatements returns the write statements of dialect d; jsonArg binds a
// non-empty JSON value the way the backend's driver needs it.
func NewStatements(d Dialect, jsonArg func([]byte) any) *Statements {
	return &Statements{
		InsertThread: insertSQL(d, "threads", "id", "name", "name_fold", "preview", "preview_fold", "cwd",
			"model_provider", "model", "source", "forked_from_id", "archived", "created_at", "updated_at", "recency_at", "meta"),
		InsertTurn: insertSQL(d, "turns", "thread_id", "id", "seq", "status", "error", "started_at", "completed_at", "meta"),
		InsertItem: insertSQL(d, "items", "thread_id", "seq", "turn_id", "item_id", "type", "payload", "created_at"),
		InsertAudit: insertSQL(d, "audit_log", "at", "kind", "principal", "client", "node", "trace_id", "thread_id", "turn_id", "detail") +
			" RETURNING seq",

		d:             d,
		jsonArg:       jsonArg,
		threadPatches: newPatchSQL(d, "threads", threadPatchSets, "archived = archived", "id"),
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

// DropTurnsSQL are the statements of a store.TurnDrop in dialect d, in
// order: the items of the dropped turns, the turns (no row deleted: the
// turn is not the thread's), then the thread's Seq counters set back to
// what is kept. Each takes DropTurnsArgs' arguments for its index.
func DropTurnsSQL(d Dialect) [3]string {
	from := func(threadParam, turnParam int) string {
		return "(SELECT seq FROM turns WHERE thread_id = " + d.Param(threadParam) + " AND id = " + d.Param(turnParam) + ")"
	}
	return [3]string{
		"DELETE FROM items WHERE thread_id = " + d.Param(1) + " AND turn_id IN (SELECT id FROM turns WHERE thread_id = " +
			d.Param(2) + " AND seq >= " + from(3, 4) + ")",
		"DELETE FROM turns WHERE thread_id = " + d.Param(1) + " AND seq >= " + from(2, 3),
		"UPDATE threads SET turn_seq = (SELECT COALESCE(MAX(seq), 0) FROM turns WHERE thread_id = " + d.Param(1) +
			"), item_seq = (SELECT COALESCE(MAX(seq), 0) FROM items WHERE thread_id = " + d.Param(2) + ") WHERE id = " + d.Param(3),
	}
}

// DropTurnsArgs returns the arguments of DropTurnsSQL's i-th statement.
func DropTurnsArgs(i int, drop store.TurnDrop) []any {
	switch i {
	case 0:
		return []any{drop.ThreadID, drop.ThreadID, drop.ThreadID, drop.TurnID}
	case 1:
		return []any{drop.ThreadID, drop.ThreadID, drop.TurnID}
	}
	return []any{drop.ThreadID, drop.ThreadID, drop.ThreadID}
}

// DeleteThreadSQL are the statements that delete a thread, children
// first (the foreign keys have no cascade), each taking the thread id as
// its one parameter, written param; the last one's row count tells
// whether the thread existed.
func DeleteThreadSQL(param string) []string {
	return []string{
		"DELETE FROM queued_submissions WHERE thread_id = " + param,
		"DELETE FROM events WHERE thread_id = " + param,
		"DELETE FROM event_seq_reservations WHERE thread_id = " + param,
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

// json binds stored JSON: SQL NULL when absent, an object holding U+0000
// escaped (store.EscapeNUL).
func (s *Statements) json(raw []byte) any {
	if len(raw) == 0 {
		return nil
	}
	if escaped, err := store.EscapeNUL(raw); err == nil {
		// Batch.Validate refused what cannot be escaped.
		raw = escaped
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

// AuditArgs returns the arguments of InsertAudit for a.
func (s *Statements) AuditArgs(a *store.AuditEntry) []any {
	return []any{s.d.TimeArg(a.At), a.Kind, a.Principal, a.Client, a.Node, a.TraceID, a.ThreadID, a.TurnID, s.json(a.Detail)}
}

// IdempotencySQL are the statements of the idempotency keys in one
// dialect.
type IdempotencySQL struct {
	// DeleteExpired(scope, key, now); Insert(scope, key, hash, expires)
	// inserts unless the key exists; Get(scope, key) returns hash, turn_id;
	// Complete(turn_id, scope, key); Release(scope, key) deletes an
	// unfinished claim; Prune(now).
	DeleteExpired, Insert, Get, Complete, Release, Prune string
}

// NewIdempotencySQL returns the idempotency statements of dialect d.
func NewIdempotencySQL(d Dialect) IdempotencySQL {
	p := d.Param
	return IdempotencySQL{
		DeleteExpired: "DELETE FROM idempotency_keys WHERE scope = " + p(1) + " AND key = " + p(2) + " AND expires_at <= " + p(3),
		Insert: "INSERT INTO idempotency_keys (scope, key, hash, expires_at) VALUES (" + p(1) + ", " + p(2) + ", " + p(3) + ", " + p(4) +
			") ON CONFLICT (scope, key) DO NOTHING",
		Get:      "SELECT hash, turn_id FROM idempotency_keys WHERE scope = " + p(1) + " AND key = " + p(2),
		Complete: "UPDATE idempotency_keys SET turn_id = " + p(1) + " WHERE scope = " + p(2) + " AND key = " + p(3),
		Release:  "DELETE FROM idempotency_keys WHERE scope = " + p(1) + " AND key = " + p(2) + " AND turn_id = ''",
		Prune:    "DELETE FROM idempotency_keys WHERE expires_at <= " + p(1),
	}
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
		set = appendSetClauses(set, sets, mask, param)
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

// appendSetClauses appends "column = parameter" for each column of the
// groups of sets that mask selects (bit i for sets[i]), param numbering
// them.
func appendSetClauses(set []string, sets [][]string, mask int, param func() string) []string {
	for i, cols := range sets {
		if mask&(1<<i) != 0 {
			for _, c := range cols {
				set = append(set, c+" = "+param())
			}
		}
	}
	return set
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
	threadSetReadState
)

// ThreadPatch returns the UPDATE that applies u and its arguments; it
// touches no row when the thread is unknown.
func (s *Statements) ThreadPatch(u store.ThreadPatch) (string, []any) {
	mask, args := s.threadPatchArgs(u, 0)
	return s.threadPatches[mask], append(args, u.ID)
}

// ThreadUpdate returns one UPDATE of thread id that applies u (when not
// nil) and adds turns and items to the thread's turn and item counters,
// returning both counters (turn_seq, item_seq) after it; none when the
// thread is unknown. It does in one statement what ThreadPatch and the
// two counters' bumps do in three, each rewriting the thread's row.
func (s *Statements) ThreadUpdate(id string, u *store.ThreadPatch, turns, items int64) (string, []any) {
	var mask int
	var args []any
	if u != nil {
		mask, args = s.threadPatchArgs(*u, 2)
	} else {
		args = make([]any, 0, 3)
	}
	bumps := 0
	if turns != 0 {
		bumps |= 1
		args = append(args, turns)
	}
	if items != 0 {
		bumps |= 2
		args = append(args, items)
	}
	key := mask<<2 | bumps
	q, ok := s.threadUpdates.Load(key)
	if !ok {
		q, _ = s.threadUpdates.LoadOrStore(key, threadUpdateSQL(s.d, mask, bumps))
	}
	return q.(string), append(args, id)
}

// threadUpdateSQL is the text of ThreadUpdate for a patch mask and bumps
// (1: the turn counter, 2: the item counter).
func threadUpdateSQL(d Dialect, mask, bumps int) string {
	var set []string
	n := 0
	param := func() string {
		n++
		return d.Param(n)
	}
	set = appendSetClauses(set, threadPatchSets, mask, param)
	for i, c := range []string{"turn_seq", "item_seq"} {
		if bumps&(1<<i) != 0 {
			set = append(set, c+" = "+c+" + "+param())
		}
	}
	if len(set) == 0 {
		set = append(set, "archived = archived")
	}
	return "UPDATE threads SET " + strings.Join(set, ", ") + " WHERE id = " + param() + " RETURNING turn_seq, item_seq"
}

// threadPatchArgs returns the patch mask of u and the arguments of its
// SET clause, with room for extra more.
func (s *Statements) threadPatchArgs(u store.ThreadPatch, extra int) (int, []any) {
	// Room for every field and the id, so that one allocation suffices.
	args := make([]any, 0, 10+extra)
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
	if u.ReadState != nil {
		mask |= threadSetReadState
		args = append(args, s.json(NullableJSON(u.ReadState)))
	}
	return mask, args
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

// Execer is a backend's writer as the idempotency keys need it.
type Execer interface {
	// Exec runs a statement and returns the rows it affected.
	Exec(ctx context.Context, sql string, args ...any) (int64, error)
	// QueryRow runs a statement that returns at most one row.
	QueryRow(ctx context.Context, sql string, args ...any) Row
	// NoRows reports whether err says QueryRow found no row.
	NoRows(err error) bool
	// StorageErr classifies an error of the database or the driver.
	StorageErr(err error) error
}

// ClaimIdempotencyKey implements store.Store.ClaimIdempotencyKey with the
// statements q of dialect d over x. Each statement commits on its own: the
// insert is the claim, and a concurrent claimer sees either no row (and
// tries to insert, in vain) or the row.
func ClaimIdempotencyKey(ctx context.Context, x Execer, q IdempotencySQL, d Dialect, scope, key string, hash []byte, now, expires time.Time) (bool, string, error) {
	for range 3 {
		if _, err := x.Exec(ctx, q.DeleteExpired, scope, key, d.TimeArg(Time(now))); err != nil {
			return false, "", x.StorageErr(err)
		}
		n, err := x.Exec(ctx, q.Insert, scope, key, hash, d.TimeArg(Time(expires)))
		if err != nil {
			return false, "", x.StorageErr(err)
		}
		if n == 1 {
			return true, "", nil
		}
		var stored []byte
		var turnID string
		err = x.QueryRow(ctx, q.Get, scope, key).Scan(&stored, &turnID)
		if x.NoRows(err) {
			continue // released meanwhile: claim again
		}
		if err != nil {
			return false, "", x.StorageErr(err)
		}
		if !bytes.Equal(stored, hash) {
			return false, "", apperr.New(apperr.Conflict, "idempotency key %q was used with another request", key)
		}
		return false, turnID, nil
	}
	return false, "", apperr.New(apperr.Unavailable, "idempotency key %q is contended", key)
}
