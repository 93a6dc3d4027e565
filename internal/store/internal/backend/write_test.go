package backend_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/store/internal/backend"
)

// statements are both dialects' write statements, binding JSON as a string.
var statements = []*backend.Statements{
	backend.NewStatements(backend.Postgres, func(raw []byte) any { return string(raw) }),
	backend.NewStatements(backend.SQLite, func(raw []byte) any { return string(raw) }),
}

// setClause pairs the columns of an UPDATE's SET clause with the arguments
// bound to them, and returns the arguments of the WHERE clause; it checks
// that the parameters are the dialect's and in the order of the arguments.
func setClause(t *testing.T, d backend.Dialect, q string, args []any) (map[string]any, []any) {
	t.Helper()
	_, rest, ok := strings.Cut(q, " SET ")
	require.True(t, ok, q)
	set, where, ok := strings.Cut(rest, " WHERE ")
	require.True(t, ok, q)
	cols := map[string]any{}
	i := 0
	for _, s := range strings.Split(set, ", ") {
		col, v, ok := strings.Cut(s, " = ")
		require.True(t, ok, q)
		if v != col {
			require.Equal(t, d.Param(i+1), v, q)
			cols[col] = args[i]
			i++
		}
	}
	for k, s := range strings.Split(where, " AND ") {
		_, v, ok := strings.Cut(s, " = ")
		require.True(t, ok, q)
		require.Equal(t, d.Param(i+k+1), v, q)
	}
	require.Equal(t, strings.Count(where, " = "), len(args)-i, q)
	return cols, args[i:]
}

// Each patch text is looked up by the fields a patch sets; every
// combination must put each value into its own column.
func TestTurnPatchSQL(t *testing.T) {
	at := time.UnixMicro(1_700_000_000_000_001)
	later := at.Add(time.Second)
	fields := []struct {
		set  func(*store.TurnPatch)
		cols map[string]any
	}{
		{func(u *store.TurnPatch) { u.Status = store.TurnFailed }, map[string]any{"status": store.TurnFailed}},
		{func(u *store.TurnPatch) { u.Error = json.RawMessage(`{"e":1}`) }, map[string]any{"error": `{"e":1}`}},
		{func(u *store.TurnPatch) { u.StartedAt = &at }, map[string]any{"started_at": at}},
		{func(u *store.TurnPatch) { u.CompletedAt = &later }, map[string]any{"completed_at": later}},
		{func(u *store.TurnPatch) { u.Meta = json.RawMessage(`null`) }, map[string]any{"meta": nil}},
	}
	for mask := range 1 << len(fields) {
		u := store.TurnPatch{ThreadID: "th", ID: "tu"}
		want := map[string]any{}
		for i, f := range fields {
			if mask&(1<<i) != 0 {
				f.set(&u)
				for k, v := range f.cols {
					want[k] = v
				}
			}
		}
		for _, st := range statements {
			q, args := st.TurnPatch(u)
			require.True(t, strings.HasPrefix(q, "UPDATE turns SET "), q)
			got, where := setClause(t, st.Dialect(), q, args)
			require.Equal(t, timesAs(st.Dialect(), want), got, q)
			require.Equal(t, []any{"th", "tu"}, where, q)
		}
	}
}

func TestThreadPatchSQL(t *testing.T) {
	name, preview, model, archived := "Ünïcode Name", "Preview", "gpt", true
	at := time.UnixMicro(1_700_000_000_000_001)
	later := at.Add(time.Second)
	fields := []struct {
		set  func(*store.ThreadPatch)
		cols map[string]any
	}{
		{func(u *store.ThreadPatch) { u.Name = &name }, map[string]any{"name": name, "name_fold": "ünïcode name"}},
		{func(u *store.ThreadPatch) { u.Preview = &preview }, map[string]any{"preview": preview, "preview_fold": "preview"}},
		{func(u *store.ThreadPatch) { u.Archived = &archived }, map[string]any{"archived": true}},
		{func(u *store.ThreadPatch) { u.Model = &model }, map[string]any{"model": model}},
		{func(u *store.ThreadPatch) { u.UpdatedAt = &at }, map[string]any{"updated_at": at}},
		{func(u *store.ThreadPatch) { u.RecencyAt = &later }, map[string]any{"recency_at": later}},
		{func(u *store.ThreadPatch) { u.Meta = json.RawMessage(`{"m":2}`) }, map[string]any{"meta": `{"m":2}`}},
	}
	for mask := range 1 << len(fields) {
		u := store.ThreadPatch{ID: "th"}
		want := map[string]any{}
		for i, f := range fields {
			if mask&(1<<i) != 0 {
				f.set(&u)
				for k, v := range f.cols {
					want[k] = v
				}
			}
		}
		for _, st := range statements {
			q, args := st.ThreadPatch(u)
			require.True(t, strings.HasPrefix(q, "UPDATE threads SET "), q)
			got, where := setClause(t, st.Dialect(), q, args)
			require.Equal(t, timesAs(st.Dialect(), want), got, q)
			require.Equal(t, []any{"th"}, where, q)
		}
	}
}

// timesAs maps the times of cols to their binding in d.
func timesAs(d backend.Dialect, cols map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range cols {
		if tv, ok := v.(time.Time); ok {
			v = d.TimeArg(tv)
		}
		out[k] = v
	}
	return out
}

// The inserts and counter bumps of each dialect, and the arguments that go
// with them: optional times and JSON bind as NULL when absent, times as the
// dialect stores them.
func TestInsertStatements(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 6000, time.UTC)
	name, model := "Nämé", "m"
	for _, st := range statements {
		d := st.Dialect()
		p := func(n int) string {
			ps := make([]string, n)
			for i := range ps {
				ps[i] = d.Param(i + 1)
			}
			return strings.Join(ps, ", ")
		}
		require.Equal(t, "INSERT INTO threads (id, name, name_fold, preview, preview_fold, cwd, model_provider, model, source,"+
			" forked_from_id, archived, created_at, updated_at, recency_at, meta) VALUES ("+p(15)+")", st.InsertThread)
		require.Equal(t, "INSERT INTO turns (thread_id, id, seq, status, error, started_at, completed_at, meta) VALUES ("+p(8)+")", st.InsertTurn)
		require.Equal(t, "INSERT INTO items (thread_id, seq, turn_id, item_id, type, payload, created_at) VALUES ("+p(7)+")", st.InsertItem)
		bumpTurns, _ := st.ThreadUpdate("th", nil, 1, 0)
		require.Equal(t, "UPDATE threads SET turn_seq = turn_seq + "+d.Param(1)+" WHERE id = "+d.Param(2)+" RETURNING turn_seq, item_seq", bumpTurns)
		bumpItems, _ := st.ThreadUpdate("th", nil, 0, 1)
		require.Equal(t, "UPDATE threads SET item_seq = item_seq + "+d.Param(1)+" WHERE id = "+d.Param(2)+" RETURNING turn_seq, item_seq", bumpItems)

		th := &store.Thread{ID: "th", Name: &name, Preview: "PRE", Cwd: "/w", ModelProvider: "p", Model: &model, Source: "cli",
			Archived: true, CreatedAt: at, UpdatedAt: at.Add(1), RecencyAt: at.Add(2)}
		require.Equal(t, []any{"th", &name, "nämé", "PRE", "pre", "/w", "p", &model, "cli", (*string)(nil), true,
			d.TimeArg(at), d.TimeArg(at.Add(1)), d.TimeArg(at.Add(2)), nil}, st.ThreadArgs(th), d.Name)

		tu := &store.Turn{ThreadID: "th", ID: "tu", Seq: 3, Status: store.TurnCompleted, Error: json.RawMessage(`{"e":1}`), CompletedAt: &at}
		require.Equal(t, []any{"th", "tu", int64(3), store.TurnCompleted, `{"e":1}`, nil, d.TimeArg(at), nil}, st.TurnArgs(tu), d.Name)

		it := &store.Item{ThreadID: "th", Seq: 4, TurnID: "tu", ItemID: "i", Type: "x", Payload: json.RawMessage(`{}`), CreatedAt: at}
		require.Equal(t, []any{"th", int64(4), "tu", "i", "x", `{}`, d.TimeArg(at)}, st.ItemArgs(it), d.Name)
	}
}

// ThreadUpdate patches a thread and bumps its counters in one statement,
// with its parameters in the order of its arguments in every dialect.
func TestThreadUpdateSQL(t *testing.T) {
	name := "Name"
	for _, st := range statements {
		d := st.Dialect()
		q, args := st.ThreadUpdate("th", &store.ThreadPatch{ID: "th", Name: &name, Meta: json.RawMessage(`{"m":1}`)}, 2, 3)
		require.Equal(t, "UPDATE threads SET name = "+d.Param(1)+", name_fold = "+d.Param(2)+", meta = "+d.Param(3)+
			", turn_seq = turn_seq + "+d.Param(4)+", item_seq = item_seq + "+d.Param(5)+" WHERE id = "+d.Param(6)+
			" RETURNING turn_seq, item_seq", q)
		require.Len(t, args, 6)
		require.Equal(t, []any{"Name", "name", int64(2), int64(3), "th"}, []any{args[0], args[1], args[3], args[4], args[5]})

		q, args = st.ThreadUpdate("th", nil, 0, 4)
		require.Equal(t, "UPDATE threads SET item_seq = item_seq + "+d.Param(1)+" WHERE id = "+d.Param(2)+" RETURNING turn_seq, item_seq", q)
		require.Equal(t, []any{int64(4), "th"}, args)

		q, args = st.ThreadUpdate("th", &store.ThreadPatch{ID: "th"}, 0, 0)
		require.Equal(t, "UPDATE threads SET archived = archived WHERE id = "+d.Param(1)+" RETURNING turn_seq, item_seq", q)
		require.Equal(t, []any{"th"}, args)
	}
}
