package sqlite

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/store"
)

// setClause pairs the columns of an UPDATE's SET clause with the arguments
// bound to them, and returns the arguments of the WHERE clause.
func setClause(t *testing.T, q string, args []any) (map[string]any, []any) {
	t.Helper()
	_, rest, ok := strings.Cut(q, " SET ")
	require.True(t, ok, q)
	set, where, ok := strings.Cut(rest, " WHERE ")
	require.True(t, ok, q)
	require.Equal(t, len(args), strings.Count(q, "?"), q)
	cols := map[string]any{}
	i := 0
	for _, s := range strings.Split(set, ", ") {
		col, v, ok := strings.Cut(s, " = ")
		require.True(t, ok, q)
		if v == "?" {
			cols[col] = args[i]
			i++
		}
	}
	require.Equal(t, strings.Count(where, "?"), len(args)-i, q)
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
		{func(u *store.TurnPatch) { u.StartedAt = &at }, map[string]any{"started_at": at.UnixMicro()}},
		{func(u *store.TurnPatch) { u.CompletedAt = &later }, map[string]any{"completed_at": later.UnixMicro()}},
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
		q, args := turnPatchSQL(u)
		require.True(t, strings.HasPrefix(q, "UPDATE turns SET "), q)
		got, where := setClause(t, q, args)
		require.Equal(t, want, got, q)
		require.Equal(t, []any{"th", "tu"}, where, q)
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
		{func(u *store.ThreadPatch) { u.UpdatedAt = &at }, map[string]any{"updated_at": at.UnixMicro()}},
		{func(u *store.ThreadPatch) { u.RecencyAt = &later }, map[string]any{"recency_at": later.UnixMicro()}},
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
		q, args := threadPatchSQL(u)
		require.True(t, strings.HasPrefix(q, "UPDATE threads SET "), q)
		got, where := setClause(t, q, args)
		require.Equal(t, want, got, q)
		require.Equal(t, []any{"th"}, where, q)
	}
}
