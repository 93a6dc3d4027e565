package storetest

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/store"
)

// Migrator is what a backend's Store offers `appserver migrate`.
type Migrator interface {
	Migrate(ctx context.Context) error
}

// Run runs the contract suite. open must return a new, empty, migrated store
// that is closed when t ends (Close must tolerate being called again).
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"Migrate", testMigrate},
		{"ThreadCreateGet", testThreadCreateGet},
		{"ThreadNotFoundConflict", testThreadNotFoundConflict},
		{"ThreadUpdatePatch", testThreadUpdatePatch},
		{"ListArchivedFilter", testListArchivedFilter},
		{"ListFilters", testListFilters},
		{"SearchMessages", testSearchMessages},
		{"ListPagination", testListPagination},
		{"ListLimits", testListLimits},
		{"BadCursor", testBadCursor},
		{"Turns", testTurns},
		{"ThreadsPatchedAndCounted", testThreadsPatchedAndCounted},
		{"Items", testItems},
		{"ConcurrentAppends", testConcurrentAppends},
		{"BatchAtomic", testBatchAtomic},
		{"GroupCommitter", testGroupCommitter},
		{"GroupCommitterBadBatch", testGroupCommitterBadBatch},
		{"GroupCommitterClose", testGroupCommitterClose},
		{"GroupCommitterDropTurns", testGroupCommitterDropTurns},
		{"GroupCommitterCancel", testGroupCommitterCancel},
		{"ListInProgressTurns", testListInProgressTurns},
		{"DeleteThread", testDeleteThread},
		{"DropTurns", testDropTurns},
		{"PingClose", testPingClose},
		{"JSONRoundTrip", testJSONRoundTrip},
		{"NULRoundTrip", testNULRoundTrip},
		{"NULInQueries", testNULInQueries},
		{"Validation", testValidation},
		{"Events", testEvents},
		{"PruneThreadEvents", testPruneThreadEvents},
		{"EventsOfOneCommit", testEventsOfOneCommit},
		{"EventsSkippingNumbers", testEventsSkippingNumbers},
		{"EventSeqReservations", testEventSeqReservations},
		{"GroupCommitterCarriesEvents", testGroupCommitterCarriesEvents},
		{"IdempotencyKeys", testIdempotencyKeys},
		{"Credentials", testCredentials},
		{"EventConsumers", testEventConsumers},
		{"Webhooks", testWebhooks},
		{"WebhookDeliveries", testWebhookDeliveries},
		{"Audit", testAudit},
		{"AuditPrune", testAuditPrune},
		{"GroupCommitterCarriesAudit", testGroupCommitterCarriesAudit},
		{"Queue", testQueue},
		{"QueueTakenOnce", testQueueTakenOnce},
		{"BudgetSpend", testBudgetSpend},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, open(t))
		})
	}
}

// base is a fixed instant with sub-microsecond digits the store must drop.
var base = time.Date(2025, 3, 4, 5, 6, 7, 891_234_567, time.UTC)

func newID() string { return uuid.Must(uuid.NewV7()).String() }

func newThread() *store.Thread {
	return &store.Thread{
		ID:            newID(),
		Preview:       "",
		Cwd:           "/work",
		ModelProvider: "openai",
		Source:        "vscode",
		CreatedAt:     base,
	}
}

func newTurn(threadID string) *store.Turn {
	return &store.Turn{ThreadID: threadID, ID: newID(), Status: store.TurnInProgress}
}

func newItem(threadID, turnID string) *store.Item {
	id := "msg_" + newID()
	return &store.Item{
		ThreadID: threadID,
		TurnID:   turnID,
		ItemID:   id,
		Type:     "agentMessage",
		Payload:  json.RawMessage(fmt.Sprintf(`{"type":"agentMessage","id":%q,"text":"hi"}`, id)),
	}
}

func write(t *testing.T, s store.Store, b *store.Batch) {
	t.Helper()
	require.NoError(t, s.Write(t.Context(), b))
}

// createThread stores a thread with one in-progress turn.
func createThread(t *testing.T, s store.Store) (*store.Thread, *store.Turn) {
	t.Helper()
	th := newThread()
	tu := newTurn(th.ID)
	write(t, s, &store.Batch{CreateThreads: []*store.Thread{th}, CreateTurns: []*store.Turn{tu}})
	return th, tu
}

func requireCode(t *testing.T, err error, code apperr.Code) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, code, apperr.CodeOf(err), "error: %v", err)
}

func requireJSONEq(t *testing.T, want, got json.RawMessage) {
	t.Helper()
	if want == nil {
		require.Nil(t, got)
		return
	}
	require.JSONEq(t, string(want), string(got))
}

func requireThread(t *testing.T, want, got store.Thread) {
	t.Helper()
	requireJSONEq(t, want.Meta, got.Meta)
	requireJSONEq(t, want.ReadState, got.ReadState)
	want.Meta, got.Meta, want.ReadState, got.ReadState = nil, nil, nil, nil
	require.Equal(t, want, got)
}

func requireTurn(t *testing.T, want, got store.Turn) {
	t.Helper()
	requireJSONEq(t, want.Error, got.Error)
	requireJSONEq(t, want.Meta, got.Meta)
	want.Error, want.Meta, got.Error, got.Meta = nil, nil, nil, nil
	require.Equal(t, want, got)
}

func ptr[T any](v T) *T { return &v }

func testMigrate(t *testing.T, s store.Store) {
	m, ok := s.(Migrator)
	require.True(t, ok, "%T must offer Migrate", s)
	// open already migrated the empty database; running again changes nothing.
	require.NoError(t, m.Migrate(t.Context()))
	require.NoError(t, m.Migrate(t.Context()))
	th, _ := createThread(t, s)
	_, err := s.GetThread(t.Context(), th.ID)
	require.NoError(t, err)
}

func testThreadCreateGet(t *testing.T, s store.Store) {
	ctx := t.Context()
	id := newID()
	fork := newID()
	created := time.Date(2025, 1, 2, 3, 4, 5, 123_456_789, time.FixedZone("CET", 3600))
	th := &store.Thread{
		ID:            strings.ToUpper(id),
		Name:          ptr("My thread"),
		Preview:       "hello there",
		Cwd:           "/home/me/project",
		ModelProvider: "openai",
		Model:         ptr("gpt-5"),
		Source:        "vscode",
		ForkedFromID:  ptr(strings.ToUpper(fork)),
		CreatedAt:     created,
		UpdatedAt:     created.Add(time.Second),
		RecencyAt:     created.Add(2 * time.Second),
		Meta:          json.RawMessage(`{"settings": {"sandbox": "read-only"}, "dynamicTools": []}`),
	}
	write(t, s, &store.Batch{CreateThreads: []*store.Thread{th}})

	// Write filled back what the store keeps.
	require.Equal(t, id, th.ID)
	require.Equal(t, fork, *th.ForkedFromID)
	require.Equal(t, time.Date(2025, 1, 2, 2, 4, 5, 123_456_000, time.UTC), th.CreatedAt)

	got, err := s.GetThread(ctx, id)
	require.NoError(t, err)
	requireThread(t, *th, got)
	got, err = s.GetThread(ctx, strings.ToUpper(id))
	require.NoError(t, err)
	require.Equal(t, id, got.ID)

	// Zero timestamps default to now, then to each other.
	bare := &store.Thread{ID: newID(), Cwd: "/", ModelProvider: "openai", Source: "cli"}
	before := time.Now().Add(-time.Second)
	write(t, s, &store.Batch{CreateThreads: []*store.Thread{bare}})
	require.True(t, bare.CreatedAt.After(before), "CreatedAt %v defaulted to now", bare.CreatedAt)
	require.Equal(t, bare.CreatedAt, bare.UpdatedAt)
	require.Equal(t, bare.CreatedAt, bare.RecencyAt)
	got, err = s.GetThread(ctx, bare.ID)
	require.NoError(t, err)
	requireThread(t, *bare, got)
	require.Nil(t, got.Name)
	require.Nil(t, got.Model)
	require.Nil(t, got.ForkedFromID)
	require.Nil(t, got.Meta)
}

func testThreadNotFoundConflict(t *testing.T, s store.Store) {
	ctx := t.Context()
	_, err := s.GetThread(ctx, newID())
	requireCode(t, err, apperr.NotFound)
	_, err = s.GetThread(ctx, "not-a-uuid")
	requireCode(t, err, apperr.NotFound)

	th := newThread()
	write(t, s, &store.Batch{CreateThreads: []*store.Thread{th}})
	dup := newThread()
	dup.ID = th.ID
	dup.Preview = "second"
	err = s.Write(ctx, &store.Batch{CreateThreads: []*store.Thread{dup}})
	requireCode(t, err, apperr.Conflict)
	got, err := s.GetThread(ctx, th.ID)
	require.NoError(t, err)
	require.Empty(t, got.Preview, "the conflicting create changed nothing")

	bad := newThread()
	bad.ID = "thread-1"
	requireCode(t, s.Write(ctx, &store.Batch{CreateThreads: []*store.Thread{bad}}), apperr.Invalid)

	err = s.Write(ctx, &store.Batch{UpdateThreads: []store.ThreadPatch{{ID: newID(), Name: ptr("x")}}})
	requireCode(t, err, apperr.NotFound)
	err = s.Write(ctx, &store.Batch{UpdateThreads: []store.ThreadPatch{{ID: "nope", Name: ptr("x")}}})
	requireCode(t, err, apperr.NotFound)
}

func testThreadUpdatePatch(t *testing.T, s store.Store) {
	ctx := t.Context()
	th := newThread()
	th.Model = ptr("gpt-5")
	th.Meta = json.RawMessage(`{"a":1}`)
	write(t, s, &store.Batch{CreateThreads: []*store.Thread{th}})
	want := *th

	patch := func(p store.ThreadPatch) {
		t.Helper()
		p.ID = th.ID
		write(t, s, &store.Batch{UpdateThreads: []store.ThreadPatch{p}})
		got, err := s.GetThread(ctx, th.ID)
		require.NoError(t, err)
		requireThread(t, want, got)
	}

	want.Name = ptr("renamed")
	patch(store.ThreadPatch{Name: ptr("renamed")})

	want.Preview = "first message"
	want.Archived = true
	want.Model = ptr("o3")
	want.UpdatedAt = base.Add(time.Hour).Truncate(time.Microsecond)
	want.RecencyAt = base.Add(2 * time.Hour).Truncate(time.Microsecond)
	want.Meta = json.RawMessage(`{"b":[2]}`)
	patch(store.ThreadPatch{
		Preview:   ptr("first message"),
		Archived:  ptr(true),
		Model:     ptr("o3"),
		UpdatedAt: ptr(base.Add(time.Hour)),
		RecencyAt: ptr(base.Add(2 * time.Hour)),
		Meta:      json.RawMessage(`{"b":[2]}`),
	})

	want.Archived = false
	patch(store.ThreadPatch{Archived: ptr(false)})

	want.Meta = nil
	patch(store.ThreadPatch{Meta: json.RawMessage(`null`)})

	want.ReadState = json.RawMessage(`{"mark":"read","throughSeq":3}`)
	patch(store.ThreadPatch{ReadState: json.RawMessage(`{"mark":"read","throughSeq":3}`)})
	want.ReadState = nil
	patch(store.ThreadPatch{ReadState: json.RawMessage(`null`)})

	// An empty patch of an existing thread is fine and changes nothing.
	patch(store.ThreadPatch{})
}

func listAll(t *testing.T, s store.Store, q store.ListThreadsQuery) []store.Thread {
	t.Helper()
	var all []store.Thread
	for {
		page, err := s.ListThreads(t.Context(), q)
		require.NoError(t, err)
		all = append(all, page.Threads...)
		if page.NextCursor == "" {
			return all
		}
		q.Cursor = page.NextCursor
	}
}

func threadIDs(threads []store.Thread) []string {
	ids := make([]string, len(threads))
	for i, th := range threads {
		ids[i] = th.ID
	}
	return ids
}

func testListArchivedFilter(t *testing.T, s store.Store) {
	ctx := t.Context()
	a, b, c := newThread(), newThread(), newThread()
	c.Archived = true
	write(t, s, &store.Batch{CreateThreads: []*store.Thread{a, b, c}})

	live := listAll(t, s, store.ListThreadsQuery{})
	require.ElementsMatch(t, []string{a.ID, b.ID}, threadIDs(live))
	archived := listAll(t, s, store.ListThreadsQuery{Archived: true})
	require.Equal(t, []string{c.ID}, threadIDs(archived))

	write(t, s, &store.Batch{UpdateThreads: []store.ThreadPatch{
		{ID: a.ID, Archived: ptr(true)},
		{ID: c.ID, Archived: ptr(false)},
	}})
	live = listAll(t, s, store.ListThreadsQuery{})
	require.ElementsMatch(t, []string{b.ID, c.ID}, threadIDs(live))
	archived = listAll(t, s, store.ListThreadsQuery{Archived: true})
	require.Equal(t, []string{a.ID}, threadIDs(archived))
	got, err := s.GetThread(ctx, a.ID)
	require.NoError(t, err)
	require.True(t, got.Archived)
}

func testListFilters(t *testing.T, s store.Store) {
	mk := func(cwd, provider string, name *string, preview string) *store.Thread {
		th := newThread()
		th.Cwd, th.ModelProvider, th.Name, th.Preview = cwd, provider, name, preview
		return th
	}
	bug := mk("/a", "openai", ptr("Fix the BUG"), "please look")
	uber := mk("/b", "openai", nil, "Über cool ÄNDERUNG")
	pct := mk("/a", "ollama", ptr("percent"), "100% done_ok")
	plain := mk("/c", "ollama", nil, "plain")
	unused := mk("/c", "ollama", ptr("named, no message"), "")
	write(t, s, &store.Batch{CreateThreads: []*store.Thread{bug, uber, pct, plain, unused}})

	ids := func(q store.ListThreadsQuery) []string { return threadIDs(listAll(t, s, q)) }
	require.ElementsMatch(t, []string{bug.ID, uber.ID, pct.ID, plain.ID, unused.ID}, ids(store.ListThreadsQuery{}))
	require.ElementsMatch(t, []string{bug.ID, uber.ID, pct.ID, plain.ID}, ids(store.ListThreadsQuery{HasPreview: true}))
	require.ElementsMatch(t, []string{plain.ID}, ids(store.ListThreadsQuery{HasPreview: true, Cwds: []string{"/c"}}))
	require.ElementsMatch(t, []string{bug.ID, unused.ID}, ids(store.ListThreadsQuery{IDs: []string{bug.ID, unused.ID}}))
	require.ElementsMatch(t, []string{bug.ID}, ids(store.ListThreadsQuery{IDs: []string{bug.ID, unused.ID}, HasPreview: true}))
	require.ElementsMatch(t, []string{bug.ID, pct.ID}, ids(store.ListThreadsQuery{Cwds: []string{"/a"}}))
	require.ElementsMatch(t, []string{bug.ID, uber.ID, pct.ID}, ids(store.ListThreadsQuery{Cwds: []string{"/a", "/b"}}))
	require.Empty(t, ids(store.ListThreadsQuery{Cwds: []string{"/a/"}}), "cwd matches exactly")
	require.ElementsMatch(t, []string{pct.ID, plain.ID, unused.ID}, ids(store.ListThreadsQuery{ModelProviders: []string{"ollama"}}))
	require.ElementsMatch(t, []string{pct.ID}, ids(store.ListThreadsQuery{ModelProviders: []string{"ollama"}, Cwds: []string{"/a"}}))

	search := func(term string) []string { return ids(store.ListThreadsQuery{SearchTerm: term}) }
	require.Equal(t, []string{bug.ID}, search("bug"), "name, ignoring case")
	require.Equal(t, []string{bug.ID}, search("LOOK"), "preview, ignoring case")
	require.Equal(t, []string{uber.ID}, search("über"), "case folding beyond ASCII")
	require.Equal(t, []string{uber.ID}, search("änderung"))
	require.Equal(t, []string{pct.ID}, search("%"), "% is literal")
	require.Equal(t, []string{pct.ID}, search("e_o"), "_ is literal")
	require.Equal(t, []string{pct.ID}, search("percent"))
	require.Empty(t, search("nothing like it"))
	require.ElementsMatch(t, []string{bug.ID, pct.ID}, ids(store.ListThreadsQuery{SearchTerm: "e", Cwds: []string{"/a"}}))
}

// A search also finds the threads one of whose user or agent messages
// contains the term, ignoring ASCII case; other items, JSON keys and item
// types do not match. Terms shorter than a trigram, and characters that are
// syntax to an index's query language, match as the substrings they are.
// Pages of one thread keep every match once; a deleted thread's messages
// no longer match.
func testSearchMessages(t *testing.T, s store.Store) {
	cwd := "/search/" + newID()
	msg := func(typ, payload string) (*store.Thread, *store.Batch) {
		th := newThread()
		th.Cwd = cwd
		tu := newTurn(th.ID)
		it := newItem(th.ID, tu.ID)
		it.Type, it.Payload = typ, json.RawMessage(payload)
		return th, &store.Batch{CreateThreads: []*store.Thread{th}, CreateTurns: []*store.Turn{tu}, AppendItems: []*store.Item{it}}
	}
	agent, b1 := msg("agentMessage", `{"type":"agentMessage","id":"a","text":"the Quokka answer: \"yes\" at 50% off"}`)
	user, b2 := msg("userMessage", `{"type":"userMessage","id":"u","content":[{"type":"image","url":"x"},{"type":"text","text":"where is the QUOKKA hiding"},{"type":"text","text":"second part"}]}`)
	tool, b3 := msg("commandExecution", `{"type":"commandExecution","id":"c","command":"echo quokka","aggregatedOutput":"quokka"}`)
	gone, b4 := msg("agentMessage", `{"type":"agentMessage","id":"g","text":"a quokka wombat"}`)
	for _, b := range []*store.Batch{b1, b2, b3, b4} {
		write(t, s, b)
	}
	search := func(term string, limit int) []string {
		return threadIDs(listAll(t, s, store.ListThreadsQuery{SearchTerm: term, Cwds: []string{cwd}, Limit: limit}))
	}
	require.ElementsMatch(t, []string{agent.ID, user.ID, gone.ID}, search("quokka", 0))
	require.ElementsMatch(t, []string{agent.ID, user.ID, gone.ID}, search("quokka", 1), "one thread a page")
	require.Equal(t, []string{user.ID}, search("hiding", 0))
	require.Equal(t, []string{user.ID}, search("second part", 0), "every text input")
	require.Equal(t, []string{user.ID}, search("hi", 0), "a term shorter than a trigram")
	require.Equal(t, []string{agent.ID}, search(`"yes"`, 0), "quotes are literal")
	require.Equal(t, []string{agent.ID}, search("0%", 0), "% is literal")
	require.Equal(t, []string{agent.ID}, search("50% o", 0))
	require.Empty(t, search("5%f", 0))
	require.Empty(t, search("the_q", 0), "_ is literal")
	require.Empty(t, search("content", 0), "JSON keys are not text")
	require.Empty(t, search("aggregated", 0))
	require.Empty(t, search("echo", 0), "tool items are not messages")
	require.NotContains(t, search("quokka", 0), tool.ID)

	require.NoError(t, s.DeleteThread(t.Context(), gone.ID))
	require.Empty(t, search("wombat", 0))
	require.ElementsMatch(t, []string{agent.ID, user.ID}, search("quokka", 0))
}

// SearchBenchmark measures thread search over 2,000 threads of 50 messages
// each (a long history), written to s first: a term found nowhere, a word
// found in one thread, and a two-letter term found in every thread. settle,
// when given, runs after the writes and before the measures (a backend
// that indexes after its commits catches up there).
func SearchBenchmark(b *testing.B, s store.Store, settle func(context.Context) error) {
	const threads, messages = 2000, 50
	ctx := context.Background()
	var batch store.Batch
	flush := func() {
		if err := s.Write(ctx, &batch); err != nil {
			b.Fatal(err)
		}
		batch = store.Batch{}
	}
	for i := range threads {
		th := newThread()
		th.Cwd = "/bench"
		th.Preview = fmt.Sprintf("thread %d", i)
		tu := newTurn(th.ID)
		batch.CreateThreads = append(batch.CreateThreads, th)
		batch.CreateTurns = append(batch.CreateTurns, tu)
		for m := range messages {
			it := newItem(th.ID, tu.ID)
			text := fmt.Sprintf("message %d of thread %d: the build failed in step %d, retry with verbose logging and check the cache key", m, i, m)
			if m%2 == 0 {
				it.Type = "userMessage"
				it.Payload = json.RawMessage(fmt.Sprintf(`{"type":"userMessage","id":%q,"content":[{"type":"text","text":%q}]}`, it.ItemID, text))
			} else {
				it.Payload = json.RawMessage(fmt.Sprintf(`{"type":"agentMessage","id":%q,"text":%q}`, it.ItemID, text))
			}
			batch.AppendItems = append(batch.AppendItems, it)
		}
		if i%50 == 49 {
			flush()
		}
	}
	flush()
	if settle != nil {
		if err := settle(ctx); err != nil {
			b.Fatal(err)
		}
	}
	for _, bc := range []struct{ name, term string }{
		{"miss", "kangaroo"},
		{"one", "of thread 1234:"},
		{"short", "st"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := s.ListThreads(ctx, store.ListThreadsQuery{SearchTerm: bc.term}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func testListPagination(t *testing.T, s store.Store) {
	const n, limit = 23, 5
	for _, key := range []store.SortKey{store.SortCreatedAt, store.SortUpdatedAt, store.SortRecencyAt} {
		for _, desc := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/desc=%v", key, desc), func(t *testing.T) {
				// A cwd of its own isolates this listing from the others.
				cwd := "/pagination/" + newID()
				sec := func(k int) time.Time { return base.Add(time.Duration(k) * time.Second) }
				var originals []*store.Thread
				for i := range n {
					th := newThread()
					th.Cwd = cwd
					// Ties on every key exercise the id tie-break.
					th.CreatedAt, th.UpdatedAt, th.RecencyAt = sec(i/2), sec((n-i)/3), sec((i*7)%n/2)
					originals = append(originals, th)
				}
				write(t, s, &store.Batch{CreateThreads: originals})

				// Rows inserted between pages: those before the current
				// position must not show up, those after it must, once.
				behind, ahead := map[string]bool{}, map[string]bool{}
				insert := func(k int) {
					early, late := newThread(), newThread()
					for _, th := range []*store.Thread{early, late} {
						th.Cwd = cwd
					}
					e, l := sec(-3600-k), sec(3600+k)
					early.CreatedAt, early.UpdatedAt, early.RecencyAt = e, e, e
					late.CreatedAt, late.UpdatedAt, late.RecencyAt = l, l, l
					write(t, s, &store.Batch{CreateThreads: []*store.Thread{early, late}})
					if desc {
						behind[late.ID], ahead[early.ID] = true, true
					} else {
						behind[early.ID], ahead[late.ID] = true, true
					}
				}

				q := store.ListThreadsQuery{SortKey: key, Desc: desc, Limit: limit, Cwds: []string{cwd}}
				var seen []store.Thread
				for pages := 0; ; pages++ {
					require.Less(t, pages, 20, "pagination does not end")
					page, err := s.ListThreads(t.Context(), q)
					require.NoError(t, err)
					require.LessOrEqual(t, len(page.Threads), limit)
					seen = append(seen, page.Threads...)
					if page.NextCursor == "" {
						break
					}
					require.Len(t, page.Threads, limit, "only the last page is short")
					insert(pages)
					q.Cursor = page.NextCursor
				}

				counts := map[string]int{}
				for _, th := range seen {
					counts[th.ID]++
					require.False(t, behind[th.ID], "row inserted behind the cursor was listed")
				}
				for id, c := range counts {
					require.Equal(t, 1, c, "thread %s listed %d times", id, c)
				}
				for _, th := range originals {
					require.Contains(t, counts, th.ID, "original row skipped")
				}
				for id := range ahead {
					require.Contains(t, counts, id, "row inserted ahead of the cursor skipped")
				}
				require.Len(t, seen, n+len(ahead))
				require.True(t, slices.IsSortedFunc(seen, func(a, b store.Thread) int {
					c := sortValue(a, key).Compare(sortValue(b, key))
					if c == 0 {
						c = strings.Compare(a.ID, b.ID)
					}
					if desc {
						c = -c
					}
					return c
				}), "rows are in (%s, id) order", key)
			})
		}
	}
}

func sortValue(th store.Thread, key store.SortKey) time.Time {
	switch key {
	case store.SortUpdatedAt:
		return th.UpdatedAt
	case store.SortRecencyAt:
		return th.RecencyAt
	}
	return th.CreatedAt
}

func testListLimits(t *testing.T, s store.Store) {
	ctx := t.Context()
	var threads []*store.Thread
	for i := range store.MaxLimit + 1 {
		th := newThread()
		th.CreatedAt = base.Add(time.Duration(i) * time.Millisecond)
		threads = append(threads, th)
	}
	write(t, s, &store.Batch{CreateThreads: threads})

	page, err := s.ListThreads(ctx, store.ListThreadsQuery{})
	require.NoError(t, err)
	require.Len(t, page.Threads, store.DefaultLimit)
	require.NotEmpty(t, page.NextCursor)
	require.Equal(t, threads[0].ID, page.Threads[0].ID, "ascending by created_at")

	page, err = s.ListThreads(ctx, store.ListThreadsQuery{Limit: 1000, Desc: true})
	require.NoError(t, err)
	require.Len(t, page.Threads, store.MaxLimit)
	require.Equal(t, threads[store.MaxLimit].ID, page.Threads[0].ID)
	require.NotEmpty(t, page.NextCursor)

	page, err = s.ListThreads(ctx, store.ListThreadsQuery{Limit: 1000, Desc: true, Cursor: page.NextCursor})
	require.NoError(t, err)
	require.Equal(t, []string{threads[0].ID}, threadIDs(page.Threads))
	require.Empty(t, page.NextCursor)

	// The backwards cursor of a page lists, in the other direction, what
	// precedes it.
	page, err = s.ListThreads(ctx, store.ListThreadsQuery{Limit: 3, Cursor: mustNext(t, s, store.ListThreadsQuery{Limit: 3})})
	require.NoError(t, err)
	require.Equal(t, threadIDs(derefThreads(threads[3:6])), threadIDs(page.Threads))
	back, err := s.ListThreads(ctx, store.ListThreadsQuery{Limit: 10, Desc: true, Cursor: page.BackwardsCursor})
	require.NoError(t, err)
	require.Equal(t, []string{threads[2].ID, threads[1].ID, threads[0].ID}, threadIDs(back.Threads))

	_, err = s.ListThreads(ctx, store.ListThreadsQuery{SortKey: "name"})
	requireCode(t, err, apperr.Invalid)
}

func mustNext(t *testing.T, s store.Store, q store.ListThreadsQuery) string {
	t.Helper()
	page, err := s.ListThreads(t.Context(), q)
	require.NoError(t, err)
	require.NotEmpty(t, page.NextCursor)
	return page.NextCursor
}

func derefThreads(ts []*store.Thread) []store.Thread {
	out := make([]store.Thread, len(ts))
	for i, th := range ts {
		out[i] = *th
	}
	return out
}

func testBadCursor(t *testing.T, s store.Store) {
	ctx := t.Context()
	th, tu := createThread(t, s)
	other, _ := createThread(t, s)
	write(t, s, &store.Batch{
		CreateTurns: []*store.Turn{newTurn(th.ID)},
		AppendItems: []*store.Item{newItem(th.ID, tu.ID), newItem(th.ID, tu.ID)},
	})
	threadCursor := mustNext(t, s, store.ListThreadsQuery{Limit: 1})
	turnPage, err := s.ListTurns(ctx, store.TurnsQuery{ThreadID: th.ID, Limit: 1})
	require.NoError(t, err)
	require.NotEmpty(t, turnPage.NextCursor)
	itemPage, err := s.ListItems(ctx, store.ItemsQuery{ThreadID: th.ID, Limit: 1})
	require.NoError(t, err)
	require.NotEmpty(t, itemPage.NextCursor)

	tampered := func(c string) string {
		b := []byte(c)
		if b[0] == 'A' {
			b[0] = 'B'
		} else {
			b[0] = 'A'
		}
		return string(b)
	}
	requireInvalid := func(cursor string, err error) {
		t.Helper()
		requireCode(t, err, apperr.Invalid)
		require.Equal(t, "invalid cursor: "+cursor, apperr.MessageOf(err))
	}
	for _, c := range []string{"garbage", "!!!", "eyJzIjoidGhyZWFkcy9jcmVhdGVkX2F0IiwidiI6MX0", tampered(threadCursor),
		turnPage.NextCursor, itemPage.NextCursor} {
		_, err := s.ListThreads(ctx, store.ListThreadsQuery{Cursor: c})
		requireInvalid(c, err)
	}
	// A cursor is bound to its sort key.
	_, err = s.ListThreads(ctx, store.ListThreadsQuery{Cursor: threadCursor, SortKey: store.SortUpdatedAt})
	requireInvalid(threadCursor, err)

	for _, c := range []string{"garbage", tampered(turnPage.NextCursor), threadCursor, itemPage.NextCursor} {
		_, err := s.ListTurns(ctx, store.TurnsQuery{ThreadID: th.ID, Cursor: c})
		requireInvalid(c, err)
	}
	// ... and to its thread.
	_, err = s.ListTurns(ctx, store.TurnsQuery{ThreadID: other.ID, Cursor: turnPage.NextCursor})
	requireInvalid(turnPage.NextCursor, err)

	for _, c := range []string{"garbage", tampered(itemPage.NextCursor), turnPage.NextCursor} {
		_, err := s.ListItems(ctx, store.ItemsQuery{ThreadID: th.ID, Cursor: c})
		requireInvalid(c, err)
	}
	_, err = s.ListItems(ctx, store.ItemsQuery{ThreadID: other.ID, Cursor: itemPage.NextCursor})
	requireInvalid(itemPage.NextCursor, err)
}

func testTurns(t *testing.T, s store.Store) {
	ctx := t.Context()
	th := newThread()
	t1, t2, t3 := newTurn(th.ID), newTurn(th.ID), newTurn(th.ID)
	t1.StartedAt = ptr(base)
	t2.Meta = json.RawMessage(`{"model":"gpt-5","effort":"high"}`)
	write(t, s, &store.Batch{CreateThreads: []*store.Thread{th}, CreateTurns: []*store.Turn{t1, t2, t3}})
	require.Equal(t, []int64{1, 2, 3}, []int64{t1.Seq, t2.Seq, t3.Seq})
	require.Equal(t, base.Truncate(time.Microsecond), *t1.StartedAt)

	// Nothing follows the last turn.
	last, err := s.ListTurns(ctx, store.TurnsQuery{ThreadID: th.ID, Desc: true, Limit: 1})
	require.NoError(t, err)
	require.Equal(t, t3.ID, last.Turns[0].ID)
	empty, err := s.ListTurns(ctx, store.TurnsQuery{ThreadID: th.ID, Cursor: last.BackwardsCursor})
	require.NoError(t, err)
	require.Empty(t, empty.Turns)
	require.Empty(t, empty.NextCursor)

	t4 := newTurn(th.ID)
	t4.Seq = 99 // ignored: the store assigns Seq
	write(t, s, &store.Batch{CreateTurns: []*store.Turn{t4}})
	require.Equal(t, int64(4), t4.Seq)

	got, err := s.GetTurn(ctx, th.ID, t2.ID)
	require.NoError(t, err)
	requireTurn(t, *t2, got)

	done := base.Add(time.Minute)
	write(t, s, &store.Batch{UpdateTurns: []store.TurnPatch{{
		ThreadID:    th.ID,
		ID:          t1.ID,
		Status:      store.TurnFailed,
		Error:       json.RawMessage(`{"message":"boom","codexErrorInfo":"other","additionalDetails":null}`),
		CompletedAt: &done,
		Meta:        json.RawMessage(`{"usage":{"input":10}}`),
	}}})
	want := *t1
	want.Status = store.TurnFailed
	want.Error = json.RawMessage(`{"message":"boom","codexErrorInfo":"other","additionalDetails":null}`)
	want.CompletedAt = ptr(done.Truncate(time.Microsecond))
	want.Meta = json.RawMessage(`{"usage":{"input":10}}`)
	got, err = s.GetTurn(ctx, th.ID, t1.ID)
	require.NoError(t, err)
	requireTurn(t, want, got)

	write(t, s, &store.Batch{UpdateTurns: []store.TurnPatch{{ThreadID: th.ID, ID: t1.ID, Status: store.TurnCompleted, Error: json.RawMessage(`null`)}}})
	want.Status, want.Error = store.TurnCompleted, nil
	got, err = s.GetTurn(ctx, th.ID, t1.ID)
	require.NoError(t, err)
	requireTurn(t, want, got)

	seqs := func(turns []store.Turn) []int64 {
		out := make([]int64, len(turns))
		for i, tu := range turns {
			out[i] = tu.Seq
		}
		return out
	}
	page, err := s.ListTurns(ctx, store.TurnsQuery{ThreadID: th.ID, Limit: 3})
	require.NoError(t, err)
	require.Equal(t, []int64{1, 2, 3}, seqs(page.Turns))
	require.Equal(t, t1.ID, page.Turns[0].ID)
	page, err = s.ListTurns(ctx, store.TurnsQuery{ThreadID: th.ID, Limit: 3, Cursor: page.NextCursor})
	require.NoError(t, err)
	require.Equal(t, []int64{4}, seqs(page.Turns))
	require.Empty(t, page.NextCursor)

	page, err = s.ListTurns(ctx, store.TurnsQuery{ThreadID: th.ID, Desc: true, Limit: 2})
	require.NoError(t, err)
	require.Equal(t, []int64{4, 3}, seqs(page.Turns))
	back := page.BackwardsCursor
	page, err = s.ListTurns(ctx, store.TurnsQuery{ThreadID: th.ID, Desc: true, Limit: 2, Cursor: page.NextCursor})
	require.NoError(t, err)
	require.Equal(t, []int64{2, 1}, seqs(page.Turns))
	require.Empty(t, page.NextCursor)
	page, err = s.ListTurns(ctx, store.TurnsQuery{ThreadID: th.ID, Cursor: back})
	require.NoError(t, err)
	require.Empty(t, page.Turns, "nothing follows the newest turn")

	// A turn's own cursor starts the page at it, in either direction.
	at := store.TurnCursor(th.ID, 2)
	page, err = s.ListTurns(ctx, store.TurnsQuery{ThreadID: th.ID, Limit: 2, Cursor: at})
	require.NoError(t, err)
	require.Equal(t, []int64{2, 3}, seqs(page.Turns))
	page, err = s.ListTurns(ctx, store.TurnsQuery{ThreadID: th.ID, Desc: true, Cursor: at})
	require.NoError(t, err)
	require.Equal(t, []int64{2, 1}, seqs(page.Turns))
	_, err = s.ListTurns(ctx, store.TurnsQuery{ThreadID: th.ID, Cursor: store.TurnCursor(newID(), 2)})
	requireCode(t, err, apperr.Invalid)

	// Errors.
	requireCode(t, s.Write(ctx, &store.Batch{CreateTurns: []*store.Turn{newTurn(newID())}}), apperr.NotFound)
	dup := newTurn(th.ID)
	dup.ID = t2.ID
	requireCode(t, s.Write(ctx, &store.Batch{CreateTurns: []*store.Turn{dup}}), apperr.Conflict)
	requireCode(t, s.Write(ctx, &store.Batch{UpdateTurns: []store.TurnPatch{{ThreadID: th.ID, ID: "nope", Status: store.TurnCompleted}}}), apperr.NotFound)
	requireCode(t, s.Write(ctx, &store.Batch{UpdateTurns: []store.TurnPatch{{ThreadID: th.ID, ID: t1.ID, Status: "done"}}}), apperr.Invalid)
	bad := newTurn(th.ID)
	bad.Status = ""
	requireCode(t, s.Write(ctx, &store.Batch{CreateTurns: []*store.Turn{bad}}), apperr.Invalid)
	_, err = s.GetTurn(ctx, th.ID, "nope")
	requireCode(t, err, apperr.NotFound)
	_, err = s.GetTurn(ctx, newID(), t1.ID)
	requireCode(t, err, apperr.NotFound)
	_, err = s.ListTurns(ctx, store.TurnsQuery{ThreadID: newID()})
	requireCode(t, err, apperr.NotFound)

	// A failed turn create used no Seq.
	t5 := newTurn(th.ID)
	write(t, s, &store.Batch{CreateTurns: []*store.Turn{t5}})
	require.Equal(t, int64(5), t5.Seq)

	// A thread without turns lists none.
	lone := newThread()
	write(t, s, &store.Batch{CreateThreads: []*store.Thread{lone}})
	page, err = s.ListTurns(ctx, store.TurnsQuery{ThreadID: lone.ID})
	require.NoError(t, err)
	require.Empty(t, page.Turns)
	require.Empty(t, page.NextCursor)
	require.Empty(t, page.BackwardsCursor)
}

func itemSeqs(items []store.Item) []int64 {
	out := make([]int64, len(items))
	for i, it := range items {
		out[i] = it.Seq
	}
	return out
}

func listItems(t *testing.T, s store.Store, q store.ItemsQuery) []store.Item {
	t.Helper()
	var all []store.Item
	for {
		page, err := s.ListItems(t.Context(), q)
		require.NoError(t, err)
		all = append(all, page.Items...)
		if page.NextCursor == "" {
			return all
		}
		q.Cursor = page.NextCursor
	}
}

func testItems(t *testing.T, s store.Store) {
	ctx := t.Context()
	th, a := createThread(t, s)
	b := newTurn(th.ID)
	write(t, s, &store.Batch{CreateTurns: []*store.Turn{b}})

	a1, a2, a3 := newItem(th.ID, a.ID), newItem(th.ID, a.ID), newItem(th.ID, a.ID)
	a1.CreatedAt = base
	write(t, s, &store.Batch{AppendItems: []*store.Item{a1, a2, a3}})
	b1, b2 := newItem(th.ID, b.ID), newItem(th.ID, b.ID)
	write(t, s, &store.Batch{AppendItems: []*store.Item{b1, b2}})
	a4, a5 := newItem(th.ID, a.ID), newItem(th.ID, a.ID)
	write(t, s, &store.Batch{AppendItems: []*store.Item{a4, a5}})
	all := []*store.Item{a1, a2, a3, b1, b2, a4, a5}
	for i, it := range all {
		require.Equal(t, int64(i+1), it.Seq, "item %d", i)
	}
	require.Equal(t, base.Truncate(time.Microsecond), a1.CreatedAt)
	require.False(t, a2.CreatedAt.IsZero(), "CreatedAt defaults to now")

	got := listItems(t, s, store.ItemsQuery{ThreadID: th.ID})
	require.Len(t, got, len(all))
	for i, it := range got {
		requireJSONEq(t, all[i].Payload, it.Payload)
		it.Payload = all[i].Payload
		require.Equal(t, *all[i], it)
	}

	page, err := s.ListItems(ctx, store.ItemsQuery{ThreadID: th.ID, Limit: 3})
	require.NoError(t, err)
	require.Equal(t, []int64{1, 2, 3}, itemSeqs(page.Items))
	page, err = s.ListItems(ctx, store.ItemsQuery{ThreadID: th.ID, Limit: 3, Cursor: page.NextCursor})
	require.NoError(t, err)
	require.Equal(t, []int64{4, 5, 6}, itemSeqs(page.Items))
	page, err = s.ListItems(ctx, store.ItemsQuery{ThreadID: th.ID, Limit: 3, Cursor: page.NextCursor})
	require.NoError(t, err)
	require.Equal(t, []int64{7}, itemSeqs(page.Items))
	require.Empty(t, page.NextCursor)

	require.Equal(t, []int64{7, 6, 5, 4, 3, 2, 1}, itemSeqs(listItems(t, s, store.ItemsQuery{ThreadID: th.ID, Desc: true, Limit: 2})))
	require.Equal(t, []int64{1, 2, 3, 6, 7}, itemSeqs(listItems(t, s, store.ItemsQuery{ThreadID: th.ID, TurnID: a.ID, Limit: 2})))
	require.Equal(t, []int64{5, 6, 7}, itemSeqs(listItems(t, s, store.ItemsQuery{ThreadID: th.ID, AfterSeq: 4})))
	require.Equal(t, []int64{7, 6}, itemSeqs(listItems(t, s, store.ItemsQuery{ThreadID: th.ID, TurnID: a.ID, AfterSeq: 4, Desc: true})))
	require.Empty(t, listItems(t, s, store.ItemsQuery{ThreadID: th.ID, AfterSeq: 7}))

	it, err := s.GetItem(ctx, th.ID, b2.ItemID)
	require.NoError(t, err)
	require.Equal(t, int64(5), it.Seq)
	require.Equal(t, b.ID, it.TurnID)
	_, err = s.GetItem(ctx, th.ID, "msg_nope")
	requireCode(t, err, apperr.NotFound)

	// Errors write nothing and use no Seq.
	dup := newItem(th.ID, b.ID)
	dup.ItemID = a2.ItemID
	requireCode(t, s.Write(ctx, &store.Batch{AppendItems: []*store.Item{newItem(th.ID, b.ID), dup}}), apperr.Conflict)
	requireCode(t, s.Write(ctx, &store.Batch{AppendItems: []*store.Item{newItem(th.ID, "no-such-turn")}}), apperr.NotFound)
	requireCode(t, s.Write(ctx, &store.Batch{AppendItems: []*store.Item{newItem(newID(), a.ID)}}), apperr.NotFound)
	next := newItem(th.ID, b.ID)
	write(t, s, &store.Batch{AppendItems: []*store.Item{next}})
	require.Equal(t, int64(8), next.Seq)

	_, err = s.ListItems(ctx, store.ItemsQuery{ThreadID: newID()})
	requireCode(t, err, apperr.NotFound)
	_, err = s.ListItems(ctx, store.ItemsQuery{ThreadID: th.ID, TurnID: "no-such-turn"})
	requireCode(t, err, apperr.NotFound)
	empty := newTurn(th.ID)
	write(t, s, &store.Batch{CreateTurns: []*store.Turn{empty}})
	require.Empty(t, listItems(t, s, store.ItemsQuery{ThreadID: th.ID, TurnID: empty.ID}))
}

func testConcurrentAppends(t *testing.T, s store.Store) {
	const writers, writes = 16, 12
	th := newThread()
	turns := make([]*store.Turn, writers)
	for i := range turns {
		turns[i] = newTurn(th.ID)
	}
	write(t, s, &store.Batch{CreateThreads: []*store.Thread{th}, CreateTurns: turns})

	var wg sync.WaitGroup
	errs := make(chan error, writers*writes)
	perWriter := make([][]*store.Item, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range writes {
				// Batches of one and of two items.
				b := &store.Batch{AppendItems: []*store.Item{newItem(th.ID, turns[w].ID)}}
				if i%2 == 1 {
					b.AppendItems = append(b.AppendItems, newItem(th.ID, turns[w].ID))
				}
				if err := s.Write(t.Context(), b); err != nil {
					errs <- err
					return
				}
				perWriter[w] = append(perWriter[w], b.AppendItems...)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	stored := listItems(t, s, store.ItemsQuery{ThreadID: th.ID, Limit: store.MaxLimit})
	total := writers * (writes + writes/2)
	require.Len(t, stored, total)
	for i, it := range stored {
		require.Equal(t, int64(i+1), it.Seq, "sequence has a gap or a duplicate")
	}
	bySeq := map[int64]string{}
	for _, it := range stored {
		bySeq[it.Seq] = it.ItemID
	}
	for w, items := range perWriter {
		for i, it := range items {
			require.Equal(t, it.ItemID, bySeq[it.Seq], "filled-back Seq matches the stored one")
			if i > 0 {
				require.Greater(t, it.Seq, items[i-1].Seq, "writer %d's items keep their order", w)
			}
		}
	}
}

func testBatchAtomic(t *testing.T, s store.Store) {
	ctx := t.Context()
	th, tu := createThread(t, s)
	fresh := newThread()
	freshTurn := newTurn(fresh.ID)
	good := newItem(th.ID, tu.ID)
	freshItem := newItem(fresh.ID, freshTurn.ID)
	b := &store.Batch{
		CreateThreads: []*store.Thread{fresh},
		UpdateThreads: []store.ThreadPatch{{ID: th.ID, Name: ptr("renamed")}},
		CreateTurns:   []*store.Turn{freshTurn},
		UpdateTurns:   []store.TurnPatch{{ThreadID: th.ID, ID: tu.ID, Status: store.TurnCompleted}},
		AppendItems:   []*store.Item{good, freshItem, newItem(newID(), tu.ID)},
	}
	requireCode(t, s.Write(ctx, b), apperr.NotFound)

	_, err := s.GetThread(ctx, fresh.ID)
	requireCode(t, err, apperr.NotFound)
	got, err := s.GetThread(ctx, th.ID)
	require.NoError(t, err)
	require.Nil(t, got.Name, "the thread update was rolled back")
	turn, err := s.GetTurn(ctx, th.ID, tu.ID)
	require.NoError(t, err)
	require.Equal(t, store.TurnInProgress, turn.Status, "the turn update was rolled back")
	require.Empty(t, listItems(t, s, store.ItemsQuery{ThreadID: th.ID}))
	require.Zero(t, good.Seq, "records of a failed batch are left untouched")
	require.Zero(t, freshTurn.Seq)

	// The rolled-back batch used no Seq; writing its good part now works.
	b.AppendItems = b.AppendItems[:2]
	write(t, s, b)
	require.Equal(t, int64(1), good.Seq)
	require.Equal(t, int64(1), freshItem.Seq)
	require.Equal(t, int64(1), freshTurn.Seq)
}

// nopCloser keeps the suite's store open when a GroupCommitter closes it.
type nopCloser struct{ store.Store }

// Close leaves the wrapped store open.
func (nopCloser) Close() error { return nil }

// gatedStore holds the first Write until release is closed, so that the
// test can queue batches behind it.
type gatedStore struct {
	store.Store
	entered chan struct{}
	release chan struct{}
	once    sync.Once
	mu      sync.Mutex
	writes  int
	closed  int
}

func newGatedStore(s store.Store) *gatedStore {
	return &gatedStore{Store: s, entered: make(chan struct{}), release: make(chan struct{})}
}

// Write holds the first call until release is closed.
func (g *gatedStore) Write(ctx context.Context, b *store.Batch) error {
	g.mu.Lock()
	g.writes++
	g.mu.Unlock()
	g.once.Do(func() {
		close(g.entered)
		<-g.release
	})
	return g.Store.Write(ctx, b)
}

// Close counts the calls and leaves the wrapped store open.
func (g *gatedStore) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed++
	return nil
}

func testGroupCommitter(t *testing.T, s store.Store) {
	const threads, writes = 8, 15
	var mu sync.Mutex
	var committed int
	g := store.NewGroupCommitter(nopCloser{s}, store.GroupCommitConfig{OnCommit: func(n int, d time.Duration) {
		mu.Lock()
		committed += n
		mu.Unlock()
	}})
	defer g.Close()

	var wg sync.WaitGroup
	errs := make(chan error, threads)
	ids := make([]string, threads)
	for i := range threads {
		wg.Go(func() {
			// Like a thread's owner goroutine: create, then append in order.
			th := newThread()
			tu := newTurn(th.ID)
			ids[i] = th.ID
			if err := g.Write(t.Context(), &store.Batch{CreateThreads: []*store.Thread{th}, CreateTurns: []*store.Turn{tu}}); err != nil {
				errs <- err
				return
			}
			for range writes {
				if err := g.Write(t.Context(), &store.Batch{AppendItems: []*store.Item{newItem(th.ID, tu.ID)}}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	for _, id := range ids {
		require.Len(t, listItems(t, s, store.ItemsQuery{ThreadID: id, Limit: store.MaxLimit}), writes)
		// Reads pass through.
		_, err := g.GetThread(t.Context(), id)
		require.NoError(t, err)
	}
	// OnCommit runs after a round's callers are answered, so the last
	// round may still be counting; the lock is never held across a
	// require (a failed one would leave the committer blocked in
	// OnCommit and the deferred Close waiting forever).
	counted := func() int {
		mu.Lock()
		defer mu.Unlock()
		return committed
	}
	require.Eventually(t, func() bool { return counted() >= threads*(writes+1) }, 10*time.Second, time.Millisecond)
	require.Equal(t, threads*(writes+1), counted(), "OnCommit counted every batch once")
	require.NoError(t, g.Ping(t.Context()))
}

// testGroupCommitterDropTurns: a drop queued between other writes of its
// thread applies in its place, after the turn queued before it and
// before the one queued after it.
func testGroupCommitterDropTurns(t *testing.T, s store.Store) {
	gate := newGatedStore(s)
	g := store.NewGroupCommitter(gate, store.GroupCommitConfig{})
	defer g.Close()

	th, tu := createThread(t, s)
	first := make(chan error, 1)
	go func() { first <- g.Write(t.Context(), &store.Batch{AppendItems: []*store.Item{newItem(th.ID, tu.ID)}}) }()
	<-gate.entered
	second, third := newTurn(th.ID), newTurn(th.ID)
	batches := []*store.Batch{
		{CreateTurns: []*store.Turn{second}, AppendItems: []*store.Item{newItem(th.ID, second.ID)}},
		{DropTurns: []store.TurnDrop{{ThreadID: th.ID, TurnID: second.ID}}},
		{CreateTurns: []*store.Turn{third}, AppendItems: []*store.Item{newItem(th.ID, third.ID)}},
	}
	results := make([]chan error, len(batches))
	for i, b := range batches {
		results[i] = make(chan error, 1)
		go func() { results[i] <- g.Write(t.Context(), b) }()
		require.Eventually(t, func() bool { return g.Queued() == i+1 }, 10*time.Second, time.Millisecond)
	}
	close(gate.release)
	require.NoError(t, <-first)
	for i, ch := range results {
		require.NoError(t, <-ch, "batch %d", i)
	}
	page, err := s.ListTurns(t.Context(), store.TurnsQuery{ThreadID: th.ID})
	require.NoError(t, err)
	var ids []string
	for _, tr := range page.Turns {
		ids = append(ids, tr.ID)
	}
	require.Equal(t, []string{tu.ID, third.ID}, ids)
	require.Equal(t, int64(2), third.Seq)
	require.Equal(t, []int64{1, 2}, itemSeqs(listItems(t, s, store.ItemsQuery{ThreadID: th.ID})))
}

func testGroupCommitterBadBatch(t *testing.T, s store.Store) {
	gate := newGatedStore(s)
	rounds := make(chan int, 16)
	g := store.NewGroupCommitter(gate, store.GroupCommitConfig{OnCommit: func(n int, _ time.Duration) { rounds <- n }})
	defer g.Close()

	th, tu := createThread(t, s)
	first := make(chan error, 1)
	go func() { first <- g.Write(t.Context(), &store.Batch{AppendItems: []*store.Item{newItem(th.ID, tu.ID)}}) }()
	<-gate.entered

	// Queue good batches around a bad one while the committer is held, so
	// that they share the next transaction.
	const good = 5
	results := make([]chan error, good+1)
	items := make([]*store.Item, good+1)
	for i := range results {
		results[i] = make(chan error, 1)
		items[i] = newItem(th.ID, tu.ID)
		if i == 2 {
			items[i] = newItem(newID(), tu.ID) // unknown thread
		}
		go func() { results[i] <- g.Write(t.Context(), &store.Batch{AppendItems: []*store.Item{items[i]}}) }()
	}
	require.Eventually(t, func() bool { return g.Queued() == good+1 }, 10*time.Second, time.Millisecond)
	close(gate.release)

	require.NoError(t, <-first)
	for i, ch := range results {
		err := <-ch
		if i == 2 {
			requireCode(t, err, apperr.NotFound)
			continue
		}
		require.NoError(t, err, "batch %d", i)
	}
	require.Equal(t, 1, <-rounds)
	require.Equal(t, good+1, <-rounds, "the queued batches were merged")
	stored := listItems(t, s, store.ItemsQuery{ThreadID: th.ID})
	require.Len(t, stored, 1+good)
	for i, it := range stored {
		require.Equal(t, int64(i+1), it.Seq)
	}
}

func testGroupCommitterClose(t *testing.T, s store.Store) {
	const queued = 10
	gate := newGatedStore(s)
	g := store.NewGroupCommitter(gate, store.GroupCommitConfig{QueueSize: queued})
	th, tu := createThread(t, s)

	results := make(chan error, queued+1)
	go func() {
		results <- g.Write(t.Context(), &store.Batch{AppendItems: []*store.Item{newItem(th.ID, tu.ID)}})
	}()
	<-gate.entered
	for range queued {
		go func() {
			results <- g.Write(t.Context(), &store.Batch{AppendItems: []*store.Item{newItem(th.ID, tu.ID)}})
		}()
	}
	require.Eventually(t, func() bool { return g.Queued() == queued }, 10*time.Second, time.Millisecond)

	closed := make(chan error, 1)
	go func() { closed <- g.Close() }()
	// The queue is full, so a probe with an ended context is refused
	// without being queued: for being canceled until Close has begun, for
	// the store being closed after.
	canceled, cancel := context.WithCancel(t.Context())
	cancel()
	probe := &store.Batch{AppendItems: []*store.Item{newItem(th.ID, tu.ID)}}
	require.Eventually(t, func() bool {
		err := g.Write(canceled, probe)
		return apperr.Is(err, apperr.Unavailable) && !errors.Is(err, context.Canceled)
	}, 10*time.Second, time.Millisecond)
	select {
	case err := <-closed:
		t.Fatalf("Close returned %v before the queued batches were committed", err)
	default:
	}
	close(gate.release)

	require.NoError(t, <-closed)
	for range queued + 1 {
		require.NoError(t, <-results)
	}
	require.Len(t, listItems(t, s, store.ItemsQuery{ThreadID: th.ID}), queued+1, "Close drained the queue")
	require.NoError(t, g.Close(), "Close tolerates a second call")
	require.Equal(t, 1, gate.closed, "the wrapped store was closed once")
	requireCode(t, g.Write(t.Context(), probe), apperr.Unavailable)
}

func testGroupCommitterCancel(t *testing.T, s store.Store) {
	gate := newGatedStore(s)
	g := store.NewGroupCommitter(gate, store.GroupCommitConfig{})
	defer g.Close()
	th, tu := createThread(t, s)

	first := make(chan error, 1)
	go func() { first <- g.Write(t.Context(), &store.Batch{AppendItems: []*store.Item{newItem(th.ID, tu.ID)}}) }()
	<-gate.entered

	ctx, cancel := context.WithCancel(t.Context())
	withdrawn := newThread()
	done := make(chan error, 1)
	go func() { done <- g.Write(ctx, &store.Batch{CreateThreads: []*store.Thread{withdrawn}}) }()
	require.Eventually(t, func() bool { return g.Queued() == 1 }, 10*time.Second, time.Millisecond)
	cancel()
	err := <-done
	requireCode(t, err, apperr.Unavailable)
	require.True(t, errors.Is(err, context.Canceled))
	close(gate.release)
	require.NoError(t, <-first)

	// An invalid batch fails on its own, before reaching the queue.
	requireCode(t, g.Write(t.Context(), &store.Batch{AppendItems: []*store.Item{{ThreadID: th.ID}}}), apperr.Invalid)
	// A write after the withdrawn one has been through the committer.
	write(t, g, &store.Batch{AppendItems: []*store.Item{newItem(th.ID, tu.ID)}})
	_, err = s.GetThread(t.Context(), withdrawn.ID)
	requireCode(t, err, apperr.NotFound)
}

func testListInProgressTurns(t *testing.T, s store.Store) {
	ctx := t.Context()
	none, err := s.ListInProgressTurns(ctx)
	require.NoError(t, err)
	require.Empty(t, none)

	a, aRunning := createThread(t, s)
	b, bRunning := createThread(t, s)
	aDone, bFailed := newTurn(a.ID), newTurn(b.ID)
	write(t, s, &store.Batch{
		CreateTurns: []*store.Turn{aDone, bFailed},
		UpdateTurns: []store.TurnPatch{
			{ThreadID: a.ID, ID: aDone.ID, Status: store.TurnCompleted},
			{ThreadID: b.ID, ID: bFailed.ID, Status: store.TurnFailed},
		},
	})
	got, err := s.ListInProgressTurns(ctx)
	require.NoError(t, err)
	var ids []string
	for _, tu := range got {
		require.Equal(t, store.TurnInProgress, tu.Status)
		ids = append(ids, tu.ThreadID+"/"+tu.ID)
	}
	require.ElementsMatch(t, []string{a.ID + "/" + aRunning.ID, b.ID + "/" + bRunning.ID}, ids)

	write(t, s, &store.Batch{UpdateTurns: []store.TurnPatch{{ThreadID: a.ID, ID: aRunning.ID, Status: store.TurnInterrupted}}})
	got, err = s.ListInProgressTurns(ctx)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, bRunning.ID, got[0].ID)
}

func testPingClose(t *testing.T, s store.Store) {
	ctx := t.Context()
	require.NoError(t, s.Ping(ctx))
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "Close tolerates a second call")
	requireCode(t, s.Ping(ctx), apperr.Unavailable)
	_, err := s.GetThread(ctx, newID())
	requireCode(t, err, apperr.Unavailable)
	requireCode(t, s.Write(ctx, &store.Batch{CreateThreads: []*store.Thread{newThread()}}), apperr.Unavailable)
}

func testJSONRoundTrip(t *testing.T, s store.Store) {
	ctx := t.Context()
	th, tu := createThread(t, s)
	payloads := []string{
		`{"type":"agentMessage","id":"msg_1","text":"héllo \"quoted\" \\ back\\slash \n newline \t tab 😀 \u00e9 \u2028 <&>",
		  "n":12345678901234567890,"f":1.5e300,"neg":-0.0001,"zero":0,
		  "nested":{"a":[1,2,{"b":null}],"empty":{},"arr":[]},"bool":true,"null":null}`,
		`{"type":"commandExecution","aggregatedOutput":"literal \\u0000 is text, not NUL"}`,
		`[1,"two",{"three":3}]`,
		`"just a string"`,
		`{"z":1,"a":2,"m":{"y":[],"b":{}}}`,
	}
	var items []*store.Item
	for _, p := range payloads {
		it := newItem(th.ID, tu.ID)
		it.Payload = json.RawMessage(p)
		items = append(items, it)
	}
	write(t, s, &store.Batch{AppendItems: items})
	got := listItems(t, s, store.ItemsQuery{ThreadID: th.ID})
	require.Len(t, got, len(payloads))
	for i, it := range got {
		requireJSONEq(t, json.RawMessage(payloads[i]), it.Payload)
	}
	require.Contains(t, string(got[0].Payload), "12345678901234567890", "big integers keep their digits")

	meta := json.RawMessage(`{"dynamicTools":[{"name":"x","inputSchema":{"type":"object","properties":{}}}],"n":1e-7}`)
	write(t, s, &store.Batch{UpdateThreads: []store.ThreadPatch{{ID: th.ID, Meta: meta}}})
	gotThread, err := s.GetThread(ctx, th.ID)
	require.NoError(t, err)
	requireJSONEq(t, meta, gotThread.Meta)
}

// testNULRoundTrip: JSON objects holding U+0000 (a command's output, a
// model's call arguments) are stored and read back as written, in items,
// turns (error and meta, on create and on patch) and thread meta; text that
// only looks like the escape is kept as it is; a message holding NUL is
// found by the text around it.
func testNULRoundTrip(t *testing.T, s store.Store) {
	ctx := t.Context()
	th := newThread()
	th.Meta = json.RawMessage(`{"gitInfo":{"branch":"a\u0000b"},"list":["\u0000","␀"]}`)
	tu := newTurn(th.ID)
	tu.Error = json.RawMessage(`{"message":"model said \u0000"}`)
	tu.Meta = json.RawMessage(`{"history":[{"type":"function_call","arguments":"{\"cmd\":\"printf a\\u0000b\"}"},{"type":"function_call_output","output":"a\u0000b"}]}`)
	write(t, s, &store.Batch{CreateThreads: []*store.Thread{th}, CreateTurns: []*store.Turn{tu}})
	payloads := []string{
		`{"type":"commandExecution","id":"c1","aggregatedOutput":"a\u0000b","k\u0000ey":1}`,
		`{"type":"agentMessage","id":"m1","text":"before\u0000after ␀ ␀0 ␀␀"}`,
		`{"type":"agentMessage","id":"m2","text":"no NUL here: ␀0 stays ␀0, ␀␀ stays ␀␀"}`,
		`{"type":"agentMessage","id":"m3","text":"\u0000\u0000","nested":{"appserver:nul":1}}`,
	}
	var items []*store.Item
	for i, p := range payloads {
		it := newItem(th.ID, tu.ID)
		it.Type = "agentMessage"
		if i == 0 {
			it.Type = "commandExecution"
		}
		it.Payload = json.RawMessage(p)
		items = append(items, it)
	}
	write(t, s, &store.Batch{AppendItems: items})
	for i, it := range listItems(t, s, store.ItemsQuery{ThreadID: th.ID}) {
		require.JSONEq(t, payloads[i], string(it.Payload))
	}
	one, err := s.GetItem(ctx, th.ID, items[0].ItemID)
	require.NoError(t, err)
	require.JSONEq(t, payloads[0], string(one.Payload))
	require.JSONEq(t, payloads[0], string(items[0].Payload), "the writer's record is left as written")
	gotTurn, err := s.GetTurn(ctx, th.ID, tu.ID)
	require.NoError(t, err)
	requireTurn(t, *tu, gotTurn)
	gotThread, err := s.GetThread(ctx, th.ID)
	require.NoError(t, err)
	requireJSONEq(t, th.Meta, gotThread.Meta)

	// Patches: a turn's end and a thread's meta.
	end := json.RawMessage(`{"message":"failed: \u0000"}`)
	meta := json.RawMessage(`{"history":[{"type":"message","content":[{"type":"output_text","text":"x\u0000"}]}]}`)
	threadMeta := json.RawMessage(`{"name":"\u0000"}`)
	write(t, s, &store.Batch{
		UpdateTurns:   []store.TurnPatch{{ThreadID: th.ID, ID: tu.ID, Status: store.TurnFailed, Error: end, Meta: meta}},
		UpdateThreads: []store.ThreadPatch{{ID: th.ID, Meta: threadMeta}},
	})
	gotTurn, err = s.GetTurn(ctx, th.ID, tu.ID)
	require.NoError(t, err)
	require.Equal(t, store.TurnFailed, gotTurn.Status)
	requireJSONEq(t, end, gotTurn.Error)
	requireJSONEq(t, meta, gotTurn.Meta)
	inProgress, err := s.ListInProgressTurns(ctx)
	require.NoError(t, err)
	for _, it := range inProgress {
		require.NotEqual(t, tu.ID, it.ID)
	}
	gotThread, err = s.GetThread(ctx, th.ID)
	require.NoError(t, err)
	requireJSONEq(t, threadMeta, gotThread.Meta)

	search := func(term string) []string {
		return threadIDs(listAll(t, s, store.ListThreadsQuery{SearchTerm: term, Cwds: []string{th.Cwd}}))
	}
	require.Contains(t, search("before"), th.ID)
	require.Contains(t, search("after ␀"), th.ID)
}

// testNULInQueries: a NUL in what a query compares with text is refused
// with Invalid (a search term, a filter) or finds nothing (an id), never a
// storage error.
func testNULInQueries(t *testing.T, s store.Store) {
	ctx := t.Context()
	th, tu := createThread(t, s)
	for _, q := range []store.ListThreadsQuery{
		{SearchTerm: "a\x00b"},
		{SearchTerm: "\x00"},
		{Cwds: []string{"/work", "/a\x00"}},
		{ModelProviders: []string{"\x00"}},
	} {
		_, err := s.ListThreads(ctx, q)
		requireCode(t, err, apperr.Invalid)
		require.Contains(t, apperr.MessageOf(err), "NUL character")
	}
	_, err := s.GetTurn(ctx, th.ID, tu.ID+"\x00")
	requireCode(t, err, apperr.NotFound)
	_, err = s.GetItem(ctx, th.ID, "msg\x00")
	requireCode(t, err, apperr.NotFound)
	_, err = s.ListItems(ctx, store.ItemsQuery{ThreadID: th.ID, TurnID: "t\x00"})
	requireCode(t, err, apperr.NotFound)
}

func testValidation(t *testing.T, s store.Store) {
	ctx := t.Context()
	th, tu := createThread(t, s)
	withPayload := func(p string) *store.Batch {
		it := newItem(th.ID, tu.ID)
		it.Payload = json.RawMessage(p)
		return &store.Batch{AppendItems: []*store.Item{it}}
	}
	for _, p := range []string{`{"a":`, `"\u0000"`, `[{"a":"x\\\u0000"}]`, `{"appserver:nul":1}`, ``, `{} {}`} {
		requireCode(t, s.Write(ctx, withPayload(p)), apperr.Invalid)
	}
	nul := newThread()
	nul.Preview = "a\x00b"
	requireCode(t, s.Write(ctx, &store.Batch{CreateThreads: []*store.Thread{nul}}), apperr.Invalid)
	badMeta := newThread()
	badMeta.Meta = json.RawMessage(`{nope}`)
	requireCode(t, s.Write(ctx, &store.Batch{CreateThreads: []*store.Thread{badMeta}}), apperr.Invalid)
	require.Empty(t, listItems(t, s, store.ItemsQuery{ThreadID: th.ID}))
	// An empty batch is a no-op.
	require.NoError(t, s.Write(ctx, &store.Batch{}))
	require.NoError(t, s.Write(ctx, nil))
}

// testDeleteThread: a deleted thread is gone with its turns and items;
// other threads stay; a second delete is NotFound.
// testDropTurns: a TurnDrop removes the named turn, every later turn and
// their items (search included), keeps the earlier ones and the events,
// and the next turn and item take the Seqs after the last ones kept.
func testDropTurns(t *testing.T, s store.Store) {
	ctx := t.Context()
	cwd := "/drop/" + newID()
	th := newThread()
	th.Cwd = cwd
	turns := []*store.Turn{newTurn(th.ID), newTurn(th.ID), newTurn(th.ID)}
	var items []*store.Item
	for i, tu := range turns {
		for range 2 {
			it := newItem(th.ID, tu.ID)
			it.Payload = json.RawMessage(fmt.Sprintf(`{"type":"agentMessage","id":%q,"text":"word%d"}`, it.ItemID, i))
			items = append(items, it)
		}
	}
	write(t, s, &store.Batch{CreateThreads: []*store.Thread{th}, CreateTurns: turns, AppendItems: items,
		AppendEvents: []*store.Event{{ThreadID: th.ID, Seq: 1, Method: "turn/started", Data: []byte(`{}`)}}})
	other, otherTurn := createThread(t, s)
	write(t, s, &store.Batch{AppendItems: []*store.Item{newItem(other.ID, otherTurn.ID)}})
	search := func(term string) []string {
		return threadIDs(listAll(t, s, store.ListThreadsQuery{SearchTerm: term, Cwds: []string{cwd}}))
	}
	require.Equal(t, []string{th.ID}, search("word2"))

	requireCode(t, s.Write(ctx, &store.Batch{DropTurns: []store.TurnDrop{{ThreadID: th.ID, TurnID: otherTurn.ID}}}), apperr.NotFound)
	requireCode(t, s.Write(ctx, &store.Batch{DropTurns: []store.TurnDrop{{ThreadID: newID(), TurnID: turns[1].ID}}}), apperr.NotFound)
	requireCode(t, s.Write(ctx, &store.Batch{DropTurns: []store.TurnDrop{{ThreadID: th.ID, TurnID: ""}}}), apperr.NotFound)
	page, err := s.ListTurns(ctx, store.TurnsQuery{ThreadID: th.ID})
	require.NoError(t, err)
	require.Len(t, page.Turns, 3, "a refused drop drops nothing")

	write(t, s, &store.Batch{DropTurns: []store.TurnDrop{{ThreadID: th.ID, TurnID: turns[1].ID}}})
	page, err = s.ListTurns(ctx, store.TurnsQuery{ThreadID: th.ID})
	require.NoError(t, err)
	require.Len(t, page.Turns, 1)
	require.Equal(t, turns[0].ID, page.Turns[0].ID)
	require.Equal(t, []int64{1, 2}, itemSeqs(listItems(t, s, store.ItemsQuery{ThreadID: th.ID})))
	_, err = s.GetTurn(ctx, th.ID, turns[2].ID)
	requireCode(t, err, apperr.NotFound)
	_, err = s.GetItem(ctx, th.ID, items[2].ItemID)
	requireCode(t, err, apperr.NotFound)
	require.Empty(t, search("word2"), "dropped messages are not found")
	require.Equal(t, []string{th.ID}, search("word0"))
	evs, err := s.ListEvents(ctx, th.ID, 0, 10)
	require.NoError(t, err)
	require.Len(t, evs, 1, "events are kept")
	require.Len(t, listItems(t, s, store.ItemsQuery{ThreadID: other.ID}), 1, "other threads are untouched")

	// The dropped ids may be used again; Seqs continue from what is kept.
	again := &store.Turn{ThreadID: th.ID, ID: turns[1].ID, Status: store.TurnCompleted}
	reused := newItem(th.ID, again.ID)
	reused.ItemID = items[2].ItemID
	write(t, s, &store.Batch{CreateTurns: []*store.Turn{again}, AppendItems: []*store.Item{reused}})
	require.Equal(t, int64(2), again.Seq)
	require.Equal(t, int64(3), reused.Seq)

	// A drop and the turn that replaces it in one batch.
	next := newTurn(th.ID)
	write(t, s, &store.Batch{DropTurns: []store.TurnDrop{{ThreadID: th.ID, TurnID: turns[0].ID}}, CreateTurns: []*store.Turn{next},
		AppendItems: []*store.Item{newItem(th.ID, next.ID)}})
	page, err = s.ListTurns(ctx, store.TurnsQuery{ThreadID: th.ID})
	require.NoError(t, err)
	require.Len(t, page.Turns, 1)
	require.Equal(t, next.ID, page.Turns[0].ID)
	require.Equal(t, int64(1), next.Seq)
	require.Equal(t, []int64{1}, itemSeqs(listItems(t, s, store.ItemsQuery{ThreadID: th.ID})))
}

func testDeleteThread(t *testing.T, s store.Store) {
	ctx := context.Background()
	th, tu := createThread(t, s)
	write(t, s, &store.Batch{AppendItems: []*store.Item{newItem(th.ID, tu.ID), newItem(th.ID, tu.ID)}})
	other, otherTurn := createThread(t, s)
	write(t, s, &store.Batch{AppendItems: []*store.Item{newItem(other.ID, otherTurn.ID)}})

	require.NoError(t, s.DeleteThread(ctx, strings.ToUpper(th.ID)))
	_, err := s.GetThread(ctx, th.ID)
	requireCode(t, err, apperr.NotFound)
	_, err = s.GetTurn(ctx, th.ID, tu.ID)
	requireCode(t, err, apperr.NotFound)
	requireCode(t, s.DeleteThread(ctx, th.ID), apperr.NotFound)
	requireCode(t, s.DeleteThread(ctx, "not-a-uuid"), apperr.NotFound)

	_, err = s.GetThread(ctx, other.ID)
	require.NoError(t, err)
	items, err := s.ListItems(ctx, store.ItemsQuery{ThreadID: other.ID})
	require.NoError(t, err)
	require.Len(t, items.Items, 1)
	// The id can be used again: nothing of the old thread is left behind.
	th2 := newThread()
	th2.ID = th.ID
	write(t, s, &store.Batch{CreateThreads: []*store.Thread{th2}, CreateTurns: []*store.Turn{newTurn(th.ID)}})
}

// testEventSeqReservations: a reservation starts past the last one and
// past the greatest stored number, concurrent ones never overlap, each
// thread has its own, bad arguments are Invalid, and a deleted thread's
// reservation goes with it.
func testEventSeqReservations(t *testing.T, s store.Store) {
	ctx := t.Context()
	th, _ := createThread(t, s)
	other, _ := createThread(t, s)
	first, err := s.ReserveEventSeqs(ctx, th.ID, 100)
	require.NoError(t, err)
	require.EqualValues(t, 1, first, "a thread without events or reservations")
	first, err = s.ReserveEventSeqs(ctx, th.ID, 100)
	require.NoError(t, err)
	require.EqualValues(t, 101, first, "past the last reservation, though nothing was stored")
	// Stored events past the reservation (a daemon of an older version
	// numbered them) move the next one past them.
	write(t, s, &store.Batch{AppendEvents: []*store.Event{{ThreadID: th.ID, Seq: 500, Method: "m", Data: []byte(`{}`), CreatedAt: base}}})
	first, err = s.ReserveEventSeqs(ctx, th.ID, 10)
	require.NoError(t, err)
	require.EqualValues(t, 501, first)
	// Events stored without a reservation count too.
	write(t, s, &store.Batch{AppendEvents: []*store.Event{{ThreadID: other.ID, Seq: 7, Method: "m", Data: []byte(`{}`), CreatedAt: base}}})
	first, err = s.ReserveEventSeqs(ctx, strings.ToUpper(other.ID), 1)
	require.NoError(t, err)
	require.EqualValues(t, 8, first, "the id in any case")

	// Concurrent reservations (daemons taking a thread over at once) get
	// blocks of their own.
	const n = 8
	firsts := make([]int64, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, err := s.ReserveEventSeqs(ctx, th.ID, 5)
			assert.NoError(t, err)
			firsts[i] = f
		}()
	}
	wg.Wait()
	slices.Sort(firsts)
	for i, f := range firsts {
		require.EqualValues(t, 511+5*i, f)
	}

	_, err = s.ReserveEventSeqs(ctx, "not-a-uuid", 1)
	requireCode(t, err, apperr.Invalid)
	_, err = s.ReserveEventSeqs(ctx, th.ID, 0)
	requireCode(t, err, apperr.Invalid)

	require.NoError(t, s.DeleteThread(ctx, th.ID))
	first, err = s.ReserveEventSeqs(ctx, th.ID, 1)
	require.NoError(t, err)
	require.EqualValues(t, 1, first, "nothing of the deleted thread is left")
}

// testEvents: the event log keeps each event's bytes, lists them after a
// position in Seq order, refuses a Seq twice, prunes by age and goes with
// its thread.
func testEvents(t *testing.T, s store.Store) {
	ctx := t.Context()
	th, _ := createThread(t, s)
	other, _ := createThread(t, s)
	seq, err := s.LastEventSeq(ctx, th.ID)
	require.NoError(t, err)
	require.Zero(t, seq)
	ev := func(thread string, seq int64, at time.Time) *store.Event {
		return &store.Event{ThreadID: thread, Seq: seq, Method: "item/agentMessage/delta",
			Data: []byte(fmt.Sprintf(`{"method":"m","params":{"n":%d},"emittedAtMs":1}`, seq)), CreatedAt: at}
	}
	// Events of two threads in one batch, as the GroupCommitter merges them.
	write(t, s, &store.Batch{AppendEvents: []*store.Event{ev(th.ID, 1, base), ev(other.ID, 1, base), ev(th.ID, 2, base.Add(time.Second))}})
	write(t, s, &store.Batch{AppendEvents: []*store.Event{ev(th.ID, 3, base.Add(2*time.Second))}})
	requireCode(t, s.Write(ctx, &store.Batch{AppendEvents: []*store.Event{ev(th.ID, 2, base)}}), apperr.Conflict)

	seq, err = s.LastEventSeq(ctx, th.ID)
	require.NoError(t, err)
	require.EqualValues(t, 3, seq)
	evs, err := s.ListEvents(ctx, th.ID, 1, 10)
	require.NoError(t, err)
	require.Len(t, evs, 2)
	require.EqualValues(t, 2, evs[0].Seq)
	require.EqualValues(t, 3, evs[1].Seq)
	require.Equal(t, string(ev(th.ID, 2, base).Data), string(evs[0].Data))
	require.Equal(t, "item/agentMessage/delta", evs[0].Method)
	require.True(t, evs[0].CreatedAt.Equal(base.Add(time.Second).Truncate(time.Microsecond)))
	evs, err = s.ListEvents(ctx, th.ID, 0, 1)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	require.EqualValues(t, 1, evs[0].Seq)

	// Pruning takes the oldest first, across threads, up to the limit.
	n, err := s.PruneEvents(ctx, base.Add(1500*time.Millisecond), 10)
	require.NoError(t, err)
	require.EqualValues(t, 3, n)
	evs, err = s.ListEvents(ctx, th.ID, 0, 10)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	require.EqualValues(t, 3, evs[0].Seq)
	seq, err = s.LastEventSeq(ctx, other.ID)
	require.NoError(t, err)
	require.Zero(t, seq)

	require.NoError(t, s.DeleteThread(ctx, th.ID))
	seq, err = s.LastEventSeq(ctx, th.ID)
	require.NoError(t, err)
	require.Zero(t, seq)
}

// testPruneThreadEvents: a thread's log is cut to its newest events whose
// data fits the bound, oldest first, a batch at a time; other threads keep
// theirs; Reclaim then succeeds.
func testPruneThreadEvents(t *testing.T, s store.Store) {
	ctx := t.Context()
	th, _ := createThread(t, s)
	other, _ := createThread(t, s)
	var evs []*store.Event
	for seq := int64(1); seq <= 10; seq++ {
		// 100 bytes each.
		data := fmt.Appendf(nil, `{"seq":%d,"pad":"%s"}`, seq, strings.Repeat("x", 100-len(fmt.Sprintf(`{"seq":%d,"pad":""}`, seq))))
		require.Len(t, data, 100)
		evs = append(evs, &store.Event{ThreadID: th.ID, Seq: seq, Method: "m", Data: data},
			&store.Event{ThreadID: other.ID, Seq: seq, Method: "m", Data: data})
	}
	write(t, s, &store.Batch{AppendEvents: evs})
	seqs := func(id string) []int64 {
		got, err := s.ListEvents(ctx, id, 0, 100)
		require.NoError(t, err)
		var out []int64
		for _, ev := range got {
			out = append(out, ev.Seq)
		}
		return out
	}

	deleted, remaining, err := s.PruneThreadEvents(ctx, th.ID, 1000, 100)
	require.NoError(t, err)
	require.Zero(t, deleted, "within the bound")
	require.EqualValues(t, 1000, remaining)

	deleted, remaining, err = s.PruneThreadEvents(ctx, strings.ToUpper(th.ID), 450, 3)
	require.NoError(t, err)
	require.EqualValues(t, 3, deleted, "a batch at most")
	require.EqualValues(t, 700, remaining)
	require.Equal(t, []int64{4, 5, 6, 7, 8, 9, 10}, seqs(th.ID), "the oldest go first")

	deleted, remaining, err = s.PruneThreadEvents(ctx, th.ID, 450, 100)
	require.NoError(t, err)
	require.EqualValues(t, 3, deleted)
	require.EqualValues(t, 400, remaining)
	require.Equal(t, []int64{7, 8, 9, 10}, seqs(th.ID))
	require.Len(t, seqs(other.ID), 10, "other threads keep their events")
	last, err := s.LastEventSeq(ctx, th.ID)
	require.NoError(t, err)
	require.EqualValues(t, 10, last, "numbering goes on after a prune")

	deleted, remaining, err = s.PruneThreadEvents(ctx, th.ID, 0, 100)
	require.NoError(t, err)
	require.EqualValues(t, 4, deleted)
	require.Zero(t, remaining)
	deleted, _, err = s.PruneThreadEvents(ctx, "not-a-uuid", 0, 100)
	require.NoError(t, err)
	require.Zero(t, deleted)
	require.NoError(t, s.Reclaim(ctx))
}

// eventFrame is a notification frame as the daemon stores it, padded to
// size bytes.
func eventFrame(method string, seq int64, size int) []byte {
	f := fmt.Sprintf(`{"method":%q,"params":{"seq":%d,"pad":""},"emittedAtMs":1}`, method, seq)
	return []byte(strings.Replace(f, `"pad":""`, `"pad":"`+strings.Repeat("x", size-len(f))+`"`, 1))
}

// testEventsOfOneCommit: the events one commit carries (several of a
// thread, as a turn's commits do, among those of another thread) read back
// one by one, each with its own seq, method and frame, from any position
// and in pages of any size; an append overlapping stored ones is refused
// whole; pruning by age and by size and the spans go by event numbers.
func testEventsOfOneCommit(t *testing.T, s store.Store) {
	ctx := t.Context()
	th, _ := createThread(t, s)
	other, _ := createThread(t, s)
	old := base.AddDate(-3, 0, 0) // before any other test's events
	methods := []string{"turn/started", "item/started", "item/completed", "item/started", "item/agentMessage/delta",
		"item/completed", "turn/completed"}
	var want []store.Event
	ev := func(thread string, seq int64, at time.Time) *store.Event {
		e := &store.Event{ThreadID: thread, Seq: seq, Method: methods[(seq-1)%int64(len(methods))],
			Data: eventFrame(methods[(seq-1)%int64(len(methods))], seq, 100), CreatedAt: at}
		if thread == th.ID {
			want = append(want, *e)
		}
		return e
	}
	// One commit: seven events of th, interleaved with two of other.
	var first []*store.Event
	for seq := int64(1); seq <= 7; seq++ {
		first = append(first, ev(th.ID, seq, old))
		if seq <= 2 {
			first = append(first, ev(other.ID, seq, old))
		}
	}
	write(t, s, &store.Batch{AppendEvents: first})
	// Another, later: three more of th, the last one a frame that cannot
	// share a row (its method is not its frame's), then two of th with a
	// gap before them.
	later := old.Add(2 * time.Minute)
	second := []*store.Event{ev(th.ID, 8, later), ev(th.ID, 9, later), ev(th.ID, 10, later), ev(th.ID, 12, later), ev(th.ID, 13, later)}
	second[2].Method = "thread/status/changed"
	want[len(want)-3].Method = second[2].Method
	write(t, s, &store.Batch{AppendEvents: second})

	check := func(after int64, limit int, wantFrom, wantTo int) {
		t.Helper()
		got, err := s.ListEvents(ctx, th.ID, after, limit)
		require.NoError(t, err)
		require.Len(t, got, wantTo-wantFrom, "after %d, limit %d", after, limit)
		for i, g := range got {
			w := want[wantFrom+i]
			require.Equal(t, w.Seq, g.Seq)
			require.Equal(t, w.Method, g.Method, "event %d", w.Seq)
			require.Equal(t, string(w.Data), string(g.Data), "event %d", w.Seq)
			require.Equal(t, th.ID, g.ThreadID)
			require.True(t, g.CreatedAt.Equal(w.CreatedAt.Truncate(time.Microsecond)), "event %d: %v", w.Seq, g.CreatedAt)
		}
	}
	check(0, 100, 0, 12)
	check(3, 100, 3, 12)   // after a position inside the first commit's events
	check(3, 2, 3, 5)      // a page smaller than what one commit stored
	check(0, 1, 0, 1)      // one event
	check(6, 2, 6, 8)      // across the two commits
	check(10, 100, 10, 12) // after the gap
	check(13, 100, 12, 12)
	got, err := s.ListEvents(ctx, other.ID, 0, 100)
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.EqualValues(t, 2, got[1].Seq)
	last, err := s.LastEventSeq(ctx, th.ID)
	require.NoError(t, err)
	require.EqualValues(t, 13, last)

	// An append that overlaps stored events is refused, and writes nothing
	// of its batch.
	for _, evs := range [][]*store.Event{
		{ev(th.ID, 3, later)},
		{ev(th.ID, 7, later)},
		{ev(th.ID, 6, later), ev(th.ID, 7, later), ev(th.ID, 8, later)},
		{ev(th.ID, 11, later), ev(th.ID, 12, later)},
		{ev(th.ID, 14, later), ev(th.ID, 14, later)},
	} {
		requireCode(t, s.Write(ctx, &store.Batch{AppendEvents: append(evs, ev(other.ID, 3, later))}), apperr.Conflict)
	}
	want = want[:12]
	last, err = s.LastEventSeq(ctx, other.ID)
	require.NoError(t, err)
	require.EqualValues(t, 2, last, "a refused batch writes nothing")
	check(0, 100, 0, 12)
	// The gap may be filled.
	write(t, s, &store.Batch{AppendEvents: []*store.Event{ev(th.ID, 11, later)}})
	slices.SortFunc(want, func(a, b store.Event) int { return cmp.Compare(a.Seq, b.Seq) })
	check(0, 100, 0, 13)
	check(9, 3, 9, 12)

	// Spans start at the first event of the period.
	spans, err := s.EventSpans(ctx, old.Add(time.Minute))
	require.NoError(t, err)
	var mine []store.EventSpan
	for _, sp := range spans {
		if sp.ThreadID == th.ID || sp.ThreadID == other.ID {
			mine = append(mine, sp)
		}
	}
	require.Equal(t, []store.EventSpan{{ThreadID: th.ID, First: 8, Last: 13}}, mine)

	// Pruning by age deletes the first commit's events, all of them.
	n, err := s.PruneEvents(ctx, old.Add(time.Minute), 100)
	require.NoError(t, err)
	require.EqualValues(t, 9, n, "the events deleted")
	want = want[7:]
	check(0, 100, 0, 6)

	// Pruning by size keeps the newest events whose frames fit, and
	// reports the bytes of the frames left.
	var next []*store.Event
	for seq := int64(14); seq <= 19; seq++ {
		next = append(next, ev(th.ID, seq, later))
	}
	write(t, s, &store.Batch{AppendEvents: next[:3]})
	write(t, s, &store.Batch{AppendEvents: next[3:]})
	for _, bound := range []int64{1200, 650, 450, 0} {
		before, err := s.ListEvents(ctx, th.ID, 0, 100)
		require.NoError(t, err)
		deleted, remaining, err := s.PruneThreadEvents(ctx, th.ID, bound, 100)
		require.NoError(t, err)
		after, err := s.ListEvents(ctx, th.ID, 0, 100)
		require.NoError(t, err)
		require.EqualValues(t, len(before)-len(after), deleted, "bound %d", bound)
		var bytes int64
		for _, e := range after {
			bytes += int64(len(e.Data))
		}
		require.Equal(t, bytes, remaining, "bound %d: the bytes of the frames left", bound)
		require.LessOrEqual(t, remaining, bound)
		if len(after) > 0 {
			require.Equal(t, before[len(before)-len(after):], after, "bound %d: the newest are kept", bound)
		}
		if bound == 650 {
			require.Len(t, after, 6, "the last two commits' events fit")
		}
	}
}

// testEventsSkippingNumbers: a commit's events of a thread that skip
// numbers (those of deltas, which a store need not keep) read back with
// their own numbers from any position, and count their frames' bytes
// only when pruned by size.
func testEventsSkippingNumbers(t *testing.T, s store.Store) {
	ctx := t.Context()
	th, _ := createThread(t, s)
	other, _ := createThread(t, s)
	at := time.Now().UTC().Truncate(time.Microsecond)
	var want []store.Event
	var batch []*store.Event
	for _, seq := range []int64{1, 2, 4, 7, 8} {
		e := store.Event{ThreadID: th.ID, Seq: seq, Method: "item/completed", Data: eventFrame("item/completed", seq, 100+int(seq)), CreatedAt: at}
		want = append(want, e)
		batch = append(batch, &e, &store.Event{ThreadID: other.ID, Seq: seq, Method: "m", Data: eventFrame("m", seq, 100), CreatedAt: at})
	}
	write(t, s, &store.Batch{AppendEvents: batch})
	for _, c := range []struct {
		after int64
		limit int
		from  int
		to    int
	}{{0, 100, 0, 5}, {2, 100, 2, 5}, {3, 100, 2, 5}, {5, 100, 3, 5}, {8, 100, 5, 5}, {0, 2, 0, 2}, {2, 2, 2, 4}, {4, 1, 3, 4}} {
		got, err := s.ListEvents(ctx, th.ID, c.after, c.limit)
		require.NoError(t, err)
		require.Len(t, got, c.to-c.from, "after %d, limit %d", c.after, c.limit)
		for i, g := range got {
			w := want[c.from+i]
			require.Equal(t, w.Seq, g.Seq, "after %d, limit %d", c.after, c.limit)
			require.Equal(t, w.Method, g.Method)
			require.Equal(t, string(w.Data), string(g.Data), "event %d", w.Seq)
		}
	}
	last, err := s.LastEventSeq(ctx, th.ID)
	require.NoError(t, err)
	require.EqualValues(t, 8, last)
	var frames int64
	for _, e := range want {
		frames += int64(len(e.Data))
	}
	deleted, remaining, err := s.PruneThreadEvents(ctx, th.ID, 1<<20, 100)
	require.NoError(t, err)
	require.Zero(t, deleted)
	require.Equal(t, frames, remaining, "the bytes of the frames, and nothing for the numbers skipped")
	next := store.Event{ThreadID: th.ID, Seq: 10, Method: "turn/completed", Data: eventFrame("turn/completed", 10, 120), CreatedAt: at}
	write(t, s, &store.Batch{AppendEvents: []*store.Event{&next}})
	got, err := s.ListEvents(ctx, th.ID, 7, 100)
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.EqualValues(t, 8, got[0].Seq)
	require.EqualValues(t, 10, got[1].Seq)
}

// testGroupCommitterCarriesEvents: queued events ride the next commit round
// of the transcript (no write of their own), and those of a round spoiled
// by another batch are still written.
func testGroupCommitterCarriesEvents(t *testing.T, s store.Store) {
	ctx := t.Context()
	q := store.NewEventQueue(100)
	g := store.NewGroupCommitter(nopCloser{s}, store.GroupCommitConfig{Events: q})
	defer g.Close()
	th, tu := createThread(t, s)
	ev := func(seq int64) *store.Event {
		return &store.Event{ThreadID: th.ID, Seq: seq, Method: "m", Data: []byte(`{}`)}
	}
	require.True(t, q.Push(ev(1)))
	require.True(t, q.Push(ev(2)))
	require.Len(t, q.Queued(th.ID, 0), 2, "queued events are visible before they are stored")
	require.NoError(t, g.Write(ctx, &store.Batch{AppendItems: []*store.Item{newItem(th.ID, tu.ID)}}))
	evs, err := s.ListEvents(ctx, th.ID, 0, 10)
	require.NoError(t, err)
	require.Len(t, evs, 2, "the events rode the item's commit")
	require.Empty(t, q.Queued(th.ID, 0))

	// A round that fails (the item's turn does not exist) still stores
	// the events it carried.
	require.True(t, q.Push(ev(3)))
	requireCode(t, g.Write(ctx, &store.Batch{AppendItems: []*store.Item{newItem(th.ID, "no-such-turn")}}), apperr.NotFound)
	seq, err := s.LastEventSeq(ctx, th.ID)
	require.NoError(t, err)
	require.EqualValues(t, 3, seq)
}

// testIdempotencyKeys: one claimer per key until it expires; the others
// learn the turn it started, or that it is still starting one; another
// request under the key is a Conflict; an unfinished claim can be released.
func testIdempotencyKeys(t *testing.T, s store.Store) {
	ctx := t.Context()
	scope, key := newID()+"/alice", "k1"
	h1, h2 := []byte("hash-1"), []byte("hash-2")
	now, ttl := base, time.Hour
	claimed, turn, err := s.ClaimIdempotencyKey(ctx, scope, key, h1, now, now.Add(ttl))
	require.NoError(t, err)
	require.True(t, claimed)
	claimed, turn, err = s.ClaimIdempotencyKey(ctx, scope, key, h1, now, now.Add(ttl))
	require.NoError(t, err)
	require.False(t, claimed)
	require.Empty(t, turn, "the owner is still starting its turn")
	_, _, err = s.ClaimIdempotencyKey(ctx, scope, key, h2, now, now.Add(ttl))
	requireCode(t, err, apperr.Conflict)

	require.NoError(t, s.CompleteIdempotencyKey(ctx, scope, key, "turn-1"))
	require.NoError(t, s.ReleaseIdempotencyKey(ctx, scope, key), "a finished claim stays")
	claimed, turn, err = s.ClaimIdempotencyKey(ctx, scope, key, h1, now.Add(time.Minute), now.Add(ttl))
	require.NoError(t, err)
	require.False(t, claimed)
	require.Equal(t, "turn-1", turn)

	// An unfinished claim released: the next request claims it.
	claimed, _, err = s.ClaimIdempotencyKey(ctx, scope, "k2", h1, now, now.Add(ttl))
	require.NoError(t, err)
	require.True(t, claimed)
	require.NoError(t, s.ReleaseIdempotencyKey(ctx, scope, "k2"))
	claimed, _, err = s.ClaimIdempotencyKey(ctx, scope, "k2", h2, now, now.Add(ttl))
	require.NoError(t, err)
	require.True(t, claimed)

	// Expired: claimed anew, even with another request; pruning removes.
	later := now.Add(2 * ttl)
	claimed, _, err = s.ClaimIdempotencyKey(ctx, scope, key, h2, later, later.Add(ttl))
	require.NoError(t, err)
	require.True(t, claimed)
	n, err := s.PruneIdempotencyKeys(ctx, later.Add(ttl))
	require.NoError(t, err)
	require.EqualValues(t, 2, n)
}

// newDigest returns a credential digest unique to this run.
func newDigest() []byte {
	d := sha256.Sum256([]byte(newID()))
	return d[:]
}

// testCredentials: a credential is found under its kind and digest until
// deleted; of concurrent deletes exactly one finds it; a second put of a
// digest is a Conflict; a put prunes what expired; bad keys are Invalid.
func testCredentials(t *testing.T, s store.Store) {
	ctx := t.Context()
	now := base
	ticket := store.Credential{Digest: newDigest(), Kind: store.CredentialTicket, Subject: "alice",
		Origin: "https://app.example", Expires: now.Add(30 * time.Second)}
	require.NoError(t, s.PutCredential(ctx, ticket, now))
	got, found, err := s.GetCredential(ctx, store.CredentialTicket, ticket.Digest)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, ticket.Subject, got.Subject)
	require.Equal(t, ticket.Origin, got.Origin)
	require.Equal(t, ticket.Digest, got.Digest)
	require.True(t, now.Add(30*time.Second).Truncate(time.Microsecond).Equal(got.Expires), "expires %v", got.Expires)
	_, found, err = s.GetCredential(ctx, store.CredentialSession, ticket.Digest)
	require.NoError(t, err)
	require.False(t, found, "a ticket is not a session")
	_, found, err = s.DeleteCredential(ctx, store.CredentialSession, ticket.Digest)
	require.NoError(t, err)
	require.False(t, found, "deleting a session does not take a ticket with its digest")
	requireCode(t, s.PutCredential(ctx, ticket, now), apperr.Conflict)

	// Eight takers at once: one gets it.
	var wg sync.WaitGroup
	var takers atomic.Int32
	for range 8 {
		wg.Go(func() {
			c, found, err := s.DeleteCredential(ctx, store.CredentialTicket, ticket.Digest)
			assert.NoError(t, err)
			if found {
				takers.Add(1)
				assert.Equal(t, "alice", c.Subject)
			}
		})
	}
	wg.Wait()
	require.EqualValues(t, 1, takers.Load())
	_, found, err = s.GetCredential(ctx, store.CredentialTicket, ticket.Digest)
	require.NoError(t, err)
	require.False(t, found)

	// The operator's session, without an origin; a later put prunes it
	// once expired.
	session := store.Credential{Digest: newDigest(), Kind: store.CredentialSession, Expires: now.Add(time.Hour)}
	require.NoError(t, s.PutCredential(ctx, session, now))
	got, found, err = s.GetCredential(ctx, store.CredentialSession, session.Digest)
	require.NoError(t, err)
	require.True(t, found)
	require.Empty(t, got.Subject)
	require.Empty(t, got.Origin)
	later := store.Credential{Digest: newDigest(), Kind: store.CredentialTicket, Expires: now.Add(2 * time.Hour)}
	require.NoError(t, s.PutCredential(ctx, later, now.Add(time.Hour)))
	_, found, err = s.GetCredential(ctx, store.CredentialSession, session.Digest)
	require.NoError(t, err)
	require.False(t, found, "pruned: it expired when the later one was put")
	_, found, err = s.GetCredential(ctx, store.CredentialTicket, later.Digest)
	require.NoError(t, err)
	require.True(t, found)

	requireCode(t, s.PutCredential(ctx, store.Credential{Digest: []byte("short"), Kind: store.CredentialTicket}, now), apperr.Invalid)
	requireCode(t, s.PutCredential(ctx, store.Credential{Digest: newDigest(), Kind: "cookie"}, now), apperr.Invalid)
	requireCode(t, s.PutCredential(ctx, store.Credential{Digest: newDigest(), Kind: store.CredentialTicket, Subject: "a\x00b"}, now), apperr.Invalid)
	_, _, err = s.GetCredential(ctx, store.CredentialTicket, nil)
	requireCode(t, err, apperr.Invalid)
	_, _, err = s.DeleteCredential(ctx, "", newDigest())
	requireCode(t, err, apperr.Invalid)
}

// testEventConsumers: one holder per consumer at a time, the holder
// renewing its lease under one token, another taking it over only once it
// expired (or was released), with a new token that fences the old
// holder's cursor saves; a cursor only moves forward; a deleted consumer
// loses its lease and cursor; the spans of the threads with events
// created since a time.
func testEventConsumers(t *testing.T, s store.Store) {
	ctx := t.Context()
	name, ttl := "webhooks-"+newID(), time.Minute
	now := base
	_, err := s.EventCursor(ctx, name)
	requireCode(t, err, apperr.NotFound)

	a, ok, err := s.ClaimEventConsumer(ctx, name, "node-a", now, now.Add(ttl))
	require.NoError(t, err)
	require.True(t, ok)
	renewed, ok, err := s.ClaimEventConsumer(ctx, name, "node-a", now.Add(time.Second), now.Add(ttl+time.Second))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, a, renewed, "renewing keeps the token")
	_, ok, err = s.ClaimEventConsumer(ctx, name, "node-b", now.Add(30*time.Second), now.Add(ttl))
	require.NoError(t, err)
	require.False(t, ok, "held by node-a")

	cur, err := s.EventCursor(ctx, name)
	require.NoError(t, err)
	require.WithinDuration(t, now, cur.Created, time.Microsecond)
	require.Empty(t, cur.Positions)
	require.NoError(t, s.SaveEventCursor(ctx, name, a, map[string]int64{"t1": 5, "t2": 3}))
	require.NoError(t, s.SaveEventCursor(ctx, name, a, map[string]int64{"t1": 4, "t2": 7}))
	cur, err = s.EventCursor(ctx, name)
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"t1": 5, "t2": 7}, cur.Positions, "a position never moves back")

	// Expired: node-b takes over with a new token; node-a is fenced.
	late := now.Add(2 * ttl)
	b, ok, err := s.ClaimEventConsumer(ctx, name, "node-b", late, late.Add(ttl))
	require.NoError(t, err)
	require.True(t, ok)
	require.Greater(t, b, a)
	requireCode(t, s.SaveEventCursor(ctx, name, a, map[string]int64{"t1": 9}), apperr.Conflict)
	_, ok, err = s.ClaimEventConsumer(ctx, name, "node-a", late, late.Add(ttl))
	require.NoError(t, err)
	require.False(t, ok, "node-b holds it now")
	require.NoError(t, s.SaveEventCursor(ctx, name, b, map[string]int64{"t1": 6}))

	// Released: node-a may take it back at once.
	require.NoError(t, s.ReleaseEventConsumer(ctx, name, b, late))
	c, ok, err := s.ClaimEventConsumer(ctx, name, "node-a", late.Add(time.Millisecond), late.Add(ttl))
	require.NoError(t, err)
	require.True(t, ok)
	require.Greater(t, c, b)
	cur, err = s.EventCursor(ctx, name)
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"t1": 6, "t2": 7}, cur.Positions)

	// Deleted: lease and cursor gone, the old token fenced; a later claim
	// starts it anew with an empty cursor; deleting none is no error.
	other := "webhooks-" + newID()
	_, _, err = s.ClaimEventConsumer(ctx, other, "node-a", now, now.Add(ttl))
	require.NoError(t, err)
	require.NoError(t, s.DeleteEventConsumer(ctx, name))
	_, err = s.EventCursor(ctx, name)
	requireCode(t, err, apperr.NotFound)
	requireCode(t, s.SaveEventCursor(ctx, name, c, map[string]int64{"t1": 8}), apperr.Conflict)
	_, err = s.EventCursor(ctx, other)
	require.NoError(t, err, "another consumer is left alone")
	require.NoError(t, s.DeleteEventConsumer(ctx, name))
	_, ok, err = s.ClaimEventConsumer(ctx, name, "node-b", late, late.Add(ttl))
	require.NoError(t, err)
	require.True(t, ok)
	cur, err = s.EventCursor(ctx, name)
	require.NoError(t, err)
	require.Empty(t, cur.Positions)

	// Spans of the threads with events created since a time.
	t1, t2 := newID(), newID()
	var evs []*store.Event
	for seq := int64(1); seq <= 4; seq++ {
		evs = append(evs, &store.Event{ThreadID: t1, Seq: seq, Method: "m", Data: []byte("{}"), CreatedAt: base.Add(time.Duration(seq) * time.Minute)})
	}
	evs = append(evs, &store.Event{ThreadID: t2, Seq: 1, Method: "m", Data: []byte("{}"), CreatedAt: base})
	write(t, s, &store.Batch{AppendEvents: evs})
	spans, err := s.EventSpans(ctx, base.Add(2*time.Minute))
	require.NoError(t, err)
	var mine []store.EventSpan
	for _, sp := range spans {
		if sp.ThreadID == t1 || sp.ThreadID == t2 {
			mine = append(mine, sp)
		}
	}
	require.Equal(t, []store.EventSpan{{ThreadID: t1, First: 2, Last: 4}}, mine)
}

// testWebhooks: a subscription reads back as stored (its events, its
// owner, its secret, allow_private, the time to the microsecond), is
// listed oldest first, and once deleted is NotFound; a second put of an id
// is a Conflict; NUL characters and a missing url are Invalid.
func testWebhooks(t *testing.T, s store.Store) {
	ctx := t.Context()
	alice := store.Webhook{ID: "wh_" + newID(), Owner: "alice", URL: "https://hooks.example/a",
		Events: []string{"turn.completed", "turn.failed"}, Thread: newID(), Secret: "whsec_c2VjcmV0",
		CreatedAt: base}
	op := store.Webhook{ID: "wh_" + newID(), URL: "http://127.0.0.1:9/x", Secret: "whsec_b3A=",
		AllowPrivate: true, CreatedAt: base.Add(time.Second)}
	require.NoError(t, s.PutWebhook(ctx, op))
	require.NoError(t, s.PutWebhook(ctx, alice))
	requireCode(t, s.PutWebhook(ctx, alice), apperr.Conflict)

	got, err := s.GetWebhook(ctx, alice.ID)
	require.NoError(t, err)
	want := alice
	want.CreatedAt = base.Truncate(time.Microsecond)
	require.True(t, want.CreatedAt.Equal(got.CreatedAt), "created %v", got.CreatedAt)
	got.CreatedAt = want.CreatedAt
	require.Equal(t, want, got)
	got, err = s.GetWebhook(ctx, op.ID)
	require.NoError(t, err)
	require.Empty(t, got.Events, "no events: all of them")
	require.Empty(t, got.Owner)
	require.True(t, got.AllowPrivate)

	list, err := s.ListWebhooks(ctx)
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.Equal(t, alice.ID, list[0].ID, "oldest first")
	require.Equal(t, op.ID, list[1].ID)

	require.NoError(t, s.DeleteWebhook(ctx, alice.ID))
	_, err = s.GetWebhook(ctx, alice.ID)
	requireCode(t, err, apperr.NotFound)
	requireCode(t, s.DeleteWebhook(ctx, alice.ID), apperr.NotFound)
	list, err = s.ListWebhooks(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)

	bad := alice
	bad.ID, bad.URL = "wh_"+newID(), "https://hooks.example/\x00"
	requireCode(t, s.PutWebhook(ctx, bad), apperr.Invalid)
	bad.URL, bad.Events = "https://hooks.example/", []string{"turn.completed,turn.failed"}
	requireCode(t, s.PutWebhook(ctx, bad), apperr.Invalid)
	bad.Events, bad.URL = nil, ""
	requireCode(t, s.PutWebhook(ctx, bad), apperr.Invalid)
	_, err = s.GetWebhook(ctx, bad.ID)
	requireCode(t, err, apperr.NotFound)
}

// testWebhookDeliveries: a webhook's attempts read back newest first, in
// pages before a Seq, with their fields; the log keeps the newest keep of
// each webhook only, another webhook's log untouched; deleting a
// subscription deletes its log.
func testWebhookDeliveries(t *testing.T, s store.Store) {
	ctx := t.Context()
	hook := store.Webhook{ID: "wh_" + newID(), URL: "https://hooks.example/", Secret: "whsec_eA==", CreatedAt: base}
	require.NoError(t, s.PutWebhook(ctx, hook))
	other := "wh_config_" + newID() // a [[webhooks]] entry: no subscription
	retry := base.Add(2 * time.Second)
	failed := store.WebhookDelivery{Webhook: hook.ID, EventID: "evt_a_3", EventType: "turn.completed", At: base,
		Status: 500, Error: "the receiver answered 500", Duration: 1500 * time.Microsecond, NextRetry: &retry}
	require.NoError(t, s.AppendWebhookDelivery(ctx, failed, 3))
	require.NoError(t, s.AppendWebhookDelivery(ctx, store.WebhookDelivery{Webhook: other, EventID: "evt_b_1",
		EventType: "turn.failed", At: base, Error: "dial tcp: connection refused"}, 3))
	ok := store.WebhookDelivery{Webhook: hook.ID, EventID: "evt_a_3", EventType: "turn.completed",
		At: base.Add(2 * time.Second), Status: 200, Duration: 2 * time.Millisecond}
	require.NoError(t, s.AppendWebhookDelivery(ctx, ok, 3))

	got, err := s.ListWebhookDeliveries(ctx, hook.ID, 0, 10)
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Greater(t, got[0].Seq, got[1].Seq, "newest first")
	require.Equal(t, 200, got[0].Status)
	require.Empty(t, got[0].Error)
	require.Nil(t, got[0].NextRetry)
	require.Equal(t, 2*time.Millisecond, got[0].Duration)
	require.Equal(t, hook.ID, got[1].Webhook)
	require.Equal(t, "evt_a_3", got[1].EventID)
	require.Equal(t, "turn.completed", got[1].EventType)
	require.Equal(t, 500, got[1].Status)
	require.Equal(t, failed.Error, got[1].Error)
	require.Equal(t, 1500*time.Microsecond, got[1].Duration)
	require.True(t, base.Truncate(time.Microsecond).Equal(got[1].At), "at %v", got[1].At)
	require.NotNil(t, got[1].NextRetry)
	require.True(t, retry.Truncate(time.Microsecond).Equal(*got[1].NextRetry), "next retry %v", *got[1].NextRetry)

	// Pages before a Seq.
	page, err := s.ListWebhookDeliveries(ctx, hook.ID, 0, 1)
	require.NoError(t, err)
	require.Len(t, page, 1)
	require.Equal(t, got[0].Seq, page[0].Seq)
	page, err = s.ListWebhookDeliveries(ctx, hook.ID, page[0].Seq, 1)
	require.NoError(t, err)
	require.Len(t, page, 1)
	require.Equal(t, got[1].Seq, page[0].Seq)
	page, err = s.ListWebhookDeliveries(ctx, hook.ID, page[0].Seq, 1)
	require.NoError(t, err)
	require.Empty(t, page)

	// Bounded: five more attempts keep the newest three.
	for i := range 5 {
		require.NoError(t, s.AppendWebhookDelivery(ctx, store.WebhookDelivery{Webhook: hook.ID,
			EventID: fmt.Sprintf("evt_a_%d", 4+i), EventType: "turn.completed", At: base, Status: 204}, 3))
	}
	got, err = s.ListWebhookDeliveries(ctx, hook.ID, 0, 10)
	require.NoError(t, err)
	require.Len(t, got, 3)
	require.Equal(t, []string{"evt_a_8", "evt_a_7", "evt_a_6"}, []string{got[0].EventID, got[1].EventID, got[2].EventID})
	kept, err := s.ListWebhookDeliveries(ctx, other, 0, 10)
	require.NoError(t, err)
	require.Len(t, kept, 1, "another webhook's log is its own")
	require.Equal(t, 0, kept[0].Status)

	requireCode(t, s.AppendWebhookDelivery(ctx, store.WebhookDelivery{Webhook: hook.ID, Error: "a\x00b"}, 3), apperr.Invalid)
	requireCode(t, s.AppendWebhookDelivery(ctx, store.WebhookDelivery{EventID: "evt"}, 3), apperr.Invalid)

	require.NoError(t, s.DeleteWebhook(ctx, hook.ID))
	got, err = s.ListWebhookDeliveries(ctx, hook.ID, 0, 10)
	require.NoError(t, err)
	require.Empty(t, got, "the log goes with its subscription")
}

// testBudgetSpend: additions to a principal's period sum, concurrent ones
// included, are never lost; periods and principals are kept apart.
func testBudgetSpend(t *testing.T, s store.Store) {
	ctx := t.Context()
	who := "alice-" + newID()
	day := base.Truncate(24 * time.Hour)
	got, err := s.GetBudgetSpend(ctx, who, day)
	require.NoError(t, err)
	require.Zero(t, got)

	got, err = s.AddBudgetSpend(ctx, who, day, store.BudgetSpend{Tokens: 100, CostMicros: 7})
	require.NoError(t, err)
	require.Equal(t, store.BudgetSpend{Tokens: 100, CostMicros: 7}, got)

	const n = 20
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.AddBudgetSpend(ctx, who, day, store.BudgetSpend{Tokens: 10, CostMicros: 1})
			assert.NoError(t, err)
		}()
	}
	wg.Wait()
	got, err = s.GetBudgetSpend(ctx, who, day)
	require.NoError(t, err)
	require.Equal(t, store.BudgetSpend{Tokens: 100 + 10*n, CostMicros: 7 + n}, got)

	other, err := s.GetBudgetSpend(ctx, who, day.Add(24*time.Hour))
	require.NoError(t, err)
	require.Zero(t, other, "another period starts from nothing")
	other, err = s.GetBudgetSpend(ctx, "", day)
	require.NoError(t, err)
	require.Zero(t, other, "another principal's spending is its own")
}

// testThreadsPatchedAndCounted writes, in one batch, turns and items of
// three threads, two patches of one of them, a patch of another and none
// of the third: each thread's new turns and items take the seqs after its
// own, every patch applies, and a batch naming an unknown thread writes
// nothing (a store may patch and count a thread in one statement).
func testThreadsPatchedAndCounted(t *testing.T, s store.Store) {
	a, aTurn := createThread(t, s)
	b, bTurn := createThread(t, s)
	c, _ := createThread(t, s)
	write(t, s, &store.Batch{AppendItems: []*store.Item{newItem(a.ID, aTurn.ID), newItem(a.ID, aTurn.ID), newItem(b.ID, bTurn.ID)}})

	a2, a3, c2 := newTurn(a.ID), newTurn(a.ID), newTurn(c.ID)
	ai1, ai2, bi2 := newItem(a.ID, aTurn.ID), newItem(a.ID, aTurn.ID), newItem(b.ID, bTurn.ID)
	write(t, s, &store.Batch{
		CreateTurns: []*store.Turn{a2, c2, a3},
		AppendItems: []*store.Item{ai1, bi2, ai2},
		UpdateThreads: []store.ThreadPatch{
			{ID: a.ID, Name: ptr("first")},
			{ID: b.ID, Meta: json.RawMessage(`{"b":1}`)},
			{ID: a.ID, Preview: ptr("second")},
		},
	})
	require.Equal(t, []int64{2, 3, 2}, []int64{a2.Seq, a3.Seq, c2.Seq})
	require.Equal(t, []int64{3, 4, 2}, []int64{ai1.Seq, ai2.Seq, bi2.Seq})
	require.Equal(t, []int64{1, 2, 3, 4}, itemSeqs(listItems(t, s, store.ItemsQuery{ThreadID: a.ID})))
	require.Equal(t, []int64{1, 2}, itemSeqs(listItems(t, s, store.ItemsQuery{ThreadID: b.ID})))
	got, err := s.GetThread(t.Context(), a.ID)
	require.NoError(t, err)
	require.Equal(t, "first", *got.Name)
	require.Equal(t, "second", got.Preview)
	got, err = s.GetThread(t.Context(), b.ID)
	require.NoError(t, err)
	requireJSONEq(t, json.RawMessage(`{"b":1}`), got.Meta)

	// The next ones follow on, patch or none, beside a thread that is
	// only patched.
	a4, c3 := newTurn(a.ID), newTurn(c.ID)
	write(t, s, &store.Batch{CreateTurns: []*store.Turn{a4, c3},
		UpdateThreads: []store.ThreadPatch{{ID: c.ID}, {ID: b.ID, Name: ptr("only patched")}}})
	require.Equal(t, []int64{4, 3}, []int64{a4.Seq, c3.Seq})
	got, err = s.GetThread(t.Context(), b.ID)
	require.NoError(t, err)
	require.Equal(t, "only patched", *got.Name)
	requireJSONEq(t, json.RawMessage(`{"b":1}`), got.Meta)
	err = s.Write(t.Context(), &store.Batch{UpdateThreads: []store.ThreadPatch{{ID: newID(), Name: ptr("x")}}, CreateTurns: []*store.Turn{newTurn(a.ID)}})
	requireCode(t, err, apperr.NotFound)

	unknown := newID()
	lost := newItem(a.ID, aTurn.ID)
	err = s.Write(t.Context(), &store.Batch{
		AppendItems:   []*store.Item{lost},
		CreateTurns:   []*store.Turn{newTurn(unknown)},
		UpdateThreads: []store.ThreadPatch{{ID: unknown, Name: ptr("x")}},
	})
	requireCode(t, err, apperr.NotFound)
	// Counted but not patched: the bump alone finds no thread.
	err = s.Write(t.Context(), &store.Batch{AppendItems: []*store.Item{newItem(a.ID, aTurn.ID)}, CreateTurns: []*store.Turn{newTurn(newID())}})
	requireCode(t, err, apperr.NotFound)
	require.Equal(t, []int64{1, 2, 3, 4}, itemSeqs(listItems(t, s, store.ItemsQuery{ThreadID: a.ID})), "nothing of the failed batch is stored")
	next := newItem(a.ID, aTurn.ID)
	write(t, s, &store.Batch{AppendItems: []*store.Item{next}})
	require.Equal(t, int64(5), next.Seq, "the failed batch used no seq")
}
