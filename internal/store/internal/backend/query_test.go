package backend_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/store/internal/backend"
)

// The statements of each listing, in both dialects, with their arguments:
// a change to the builder that changes what a backend runs shows up here
// before it shows up as a wrong page.
func TestQueryPage(t *testing.T) {
	const id = "0190a5b2-0000-7000-8000-00000000abcd"
	at := time.Date(2030, 1, 2, 3, 4, 5, 6000, time.UTC)
	threadCursor := &backend.Cursor{Scope: "threads/updated_at", Value: at.UnixMicro(), ID: strings.ToUpper(id)}
	seqCursor := &backend.Cursor{Scope: "items/x", Value: 41}

	type want struct {
		sql  string
		args []any
	}
	tests := []struct {
		name     string
		build    func(q *backend.Query) *backend.Query
		keyset   backend.Keyset
		limit    int
		postgres want
		sqlite   want
	}{
		{
			name:   "threads first page ascending",
			build:  func(q *backend.Query) *backend.Query { return q.Eq("archived", false) },
			keyset: backend.Keyset{Column: "created_at", Time: true, ID: "id"},
			limit:  26,
			postgres: want{
				"SELECT c FROM threads WHERE archived = $1 ORDER BY created_at ASC, id ASC LIMIT 26",
				[]any{false},
			},
			sqlite: want{
				"SELECT c FROM threads WHERE archived = ? ORDER BY created_at ASC, id ASC LIMIT 26",
				[]any{false},
			},
		},
		{
			name: "threads filtered descending after a cursor",
			build: func(q *backend.Query) *backend.Query {
				return q.Eq("archived", true).
					In("cwd", []string{"/a", "/b"}).
					In("model_provider", []string{"p"}).
					Contains([]string{"name_fold", "preview_fold"}, "term")
			},
			keyset: backend.Keyset{Column: "updated_at", Time: true, ID: "id", Desc: true, After: threadCursor},
			limit:  11,
			postgres: want{
				"SELECT c FROM threads WHERE archived = $1 AND cwd = ANY($2::text[]) AND model_provider = ANY($3::text[])" +
					" AND (strpos(name_fold, $4) > 0 OR strpos(preview_fold, $4) > 0)" +
					" AND (updated_at, id) < ($5::timestamptz, $6::uuid) ORDER BY updated_at DESC, id DESC LIMIT 11",
				[]any{true, []string{"/a", "/b"}, []string{"p"}, "term", at, id},
			},
			sqlite: want{
				"SELECT c FROM threads WHERE archived = ? AND cwd IN (?, ?) AND model_provider IN (?)" +
					" AND (instr(name_fold, ?) > 0 OR instr(preview_fold, ?) > 0)" +
					" AND (updated_at, id) < (?, ?) ORDER BY updated_at DESC, id DESC LIMIT 11",
				[]any{true, "/a", "/b", "p", "term", "term", at.UnixMicro(), id},
			},
		},
		{
			name: "threads ascending after a cursor, empty filters left out",
			build: func(q *backend.Query) *backend.Query {
				return q.Eq("archived", false).In("cwd", nil).In("model_provider", []string{}).Contains([]string{"name_fold"}, "")
			},
			keyset: backend.Keyset{Column: "updated_at", Time: true, ID: "id", After: threadCursor},
			limit:  2,
			postgres: want{
				"SELECT c FROM threads WHERE archived = $1 AND (updated_at, id) > ($2::timestamptz, $3::uuid) ORDER BY updated_at ASC, id ASC LIMIT 2",
				[]any{false, at, id},
			},
			sqlite: want{
				"SELECT c FROM threads WHERE archived = ? AND (updated_at, id) > (?, ?) ORDER BY updated_at ASC, id ASC LIMIT 2",
				[]any{false, at.UnixMicro(), id},
			},
		},
		{
			name:   "turns first page descending",
			build:  func(q *backend.Query) *backend.Query { return q.Eq("thread_id", id) },
			keyset: backend.Keyset{Column: "seq", Desc: true},
			limit:  51,
			postgres: want{
				"SELECT c FROM turns WHERE thread_id = $1 ORDER BY seq DESC LIMIT 51",
				[]any{id},
			},
			sqlite: want{
				"SELECT c FROM turns WHERE thread_id = ? ORDER BY seq DESC LIMIT 51",
				[]any{id},
			},
		},
		{
			name:   "turns descending after a cursor",
			build:  func(q *backend.Query) *backend.Query { return q.Eq("thread_id", id) },
			keyset: backend.Keyset{Column: "seq", Desc: true, After: seqCursor},
			limit:  3,
			postgres: want{
				"SELECT c FROM turns WHERE thread_id = $1 AND seq < $2 ORDER BY seq DESC LIMIT 3",
				[]any{id, int64(41)},
			},
			sqlite: want{
				"SELECT c FROM turns WHERE thread_id = ? AND seq < ? ORDER BY seq DESC LIMIT 3",
				[]any{id, int64(41)},
			},
		},
		{
			name: "items of a turn after a seq and a cursor",
			build: func(q *backend.Query) *backend.Query {
				return q.Eq("thread_id", id).Eq("turn_id", "t1").Greater("seq", int64(7))
			},
			keyset: backend.Keyset{Column: "seq", After: seqCursor},
			limit:  5,
			postgres: want{
				"SELECT c FROM items WHERE thread_id = $1 AND turn_id = $2 AND seq > $3 AND seq > $4 ORDER BY seq ASC LIMIT 5",
				[]any{id, "t1", int64(7), int64(41)},
			},
			sqlite: want{
				"SELECT c FROM items WHERE thread_id = ? AND turn_id = ? AND seq > ? AND seq > ? ORDER BY seq ASC LIMIT 5",
				[]any{id, "t1", int64(7), int64(41)},
			},
		},
		{
			name:   "integer key with a tie break",
			build:  func(q *backend.Query) *backend.Query { return q },
			keyset: backend.Keyset{Column: "n", ID: "id", After: &backend.Cursor{Value: -3, ID: id}},
			limit:  1,
			postgres: want{
				"SELECT c FROM items WHERE (n, id) > ($1::bigint, $2::uuid) ORDER BY n ASC, id ASC LIMIT 1",
				[]any{int64(-3), id},
			},
			sqlite: want{
				"SELECT c FROM items WHERE (n, id) > (?, ?) ORDER BY n ASC, id ASC LIMIT 1",
				[]any{int64(-3), id},
			},
		},
	}
	for _, tc := range tests {
		for _, d := range []struct {
			dialect backend.Dialect
			want    want
		}{{backend.Postgres, tc.postgres}, {backend.SQLite, tc.sqlite}} {
			t.Run(tc.name+"/"+d.dialect.Name, func(t *testing.T) {
				table := strings.Fields(d.want.sql)[3]
				sql, args := tc.build(backend.NewQuery(d.dialect)).Page("c", table, tc.keyset, tc.limit)
				require.Equal(t, d.want.sql, sql)
				require.Equal(t, d.want.args, args)
				if !d.dialect.Numbered {
					require.Equal(t, len(args), strings.Count(sql, "?"), "one ? per argument")
				}
			})
		}
	}
}

// A cursor's time binds as each dialect stores times, and comes back as the
// same instant whatever zone the caller's clock used.
func TestDialectTimeArg(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 6000, time.FixedZone("x", 3600))
	require.Equal(t, at.UnixMicro(), backend.SQLite.TimeArg(at))
	require.Equal(t, at, backend.Postgres.TimeArg(at))
	require.Equal(t, "$3", backend.Postgres.Param(3))
	require.Equal(t, "?", backend.SQLite.Param(3))
}

func TestQuerySelect(t *testing.T) {
	q := backend.NewQuery(backend.Postgres)
	require.Equal(t, "SELECT a, b FROM t", q.Select("a, b", "t"))
	q.Eq("a", 1).Greater("b", 2)
	require.Equal(t, "SELECT a, b FROM t WHERE a = $1 AND b > $2", q.Select("a, b", "t"))
	require.Equal(t, []any{1, 2}, q.Args())
}
