package cluster

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/pgnotify"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/store/pgtest"
	"github.com/appserver/appserver/internal/store/postgres"
)

// recorder is the Events of a node under test.
type recorder struct {
	mu        sync.Mutex
	lost      []string
	recovered []string
}

func (r *recorder) LeaseLost(threadID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lost = append(r.lost, threadID)
}

func (r *recorder) TurnRecovered(threadID, turnID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recovered = append(r.recovered, threadID+"/"+turnID)
}

// Command answers "echo" with its params, fails "fail" with its params as
// the message, and fails anything else.
func (r *recorder) Command(_ context.Context, method string, params json.RawMessage) (any, error) {
	if method == "fail" {
		var p struct{ Message string }
		_ = json.Unmarshal(params, &p)
		return nil, apperr.New(apperr.Invalid, "%s", p.Message)
	}
	if method != "echo" {
		return nil, apperr.New(apperr.Invalid, "unknown method %s", method)
	}
	return params, nil
}

func (r *recorder) snapshot() (lost, recovered []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.lost...), append([]string(nil), r.recovered...)
}

func openStore(t testing.TB) *postgres.Store {
	t.Helper()
	st, err := postgres.Open(t.Context(), postgres.Config{URL: pgtest.URL(t), MaxConns: 8, Migrate: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// newNode returns a node on a notifier of its own, which runs; the node
// does not run until Start.
func newNode(t testing.TB, st *postgres.Store, id string, ttl time.Duration, ev Events) *Node {
	t.Helper()
	notes, err := pgnotify.New(pgnotify.Config{Pool: st.Pool()})
	require.NoError(t, err)
	n, err := New(Config{Pool: st.Pool(), Notifier: notes, Events: ev, NodeID: id, LeaseTTL: ttl})
	require.NoError(t, err)
	require.NoError(t, notes.Start(t.Context()))
	t.Cleanup(notes.Stop)
	t.Cleanup(n.Stop)
	return n
}

// newThread stores a thread without turns.
func newThread(t testing.TB, st store.Store) string {
	t.Helper()
	id := uuid.NewString()
	require.NoError(t, st.Write(t.Context(), &store.Batch{CreateThreads: []*store.Thread{{ID: id, Cwd: "/", ModelProvider: "fake", Source: "vscode"}}}))
	return id
}

// threadWithTurn stores a thread whose turn "turn-1" is in progress.
func threadWithTurn(t *testing.T, st store.Store, w store.Store) string {
	t.Helper()
	id := newThread(t, st)
	require.NoError(t, w.Write(t.Context(), &store.Batch{
		CreateTurns: []*store.Turn{{ThreadID: id, ID: "turn-1", Status: store.TurnInProgress}},
		AppendItems: []*store.Item{item(id, "item-1")},
	}))
	return id
}

func item(threadID, itemID string) *store.Item {
	return &store.Item{ThreadID: threadID, TurnID: "turn-1", ItemID: itemID, Type: "agentMessage", Payload: json.RawMessage(`{"type":"agentMessage"}`)}
}

func items(t *testing.T, st store.Store, threadID string) int {
	t.Helper()
	page, err := st.ListItems(t.Context(), store.ItemsQuery{ThreadID: threadID, Limit: store.MaxLimit})
	require.NoError(t, err)
	return len(page.Items)
}

func turnStatus(t *testing.T, st store.Store, threadID string) string {
	t.Helper()
	tr, err := st.GetTurn(t.Context(), threadID, "turn-1")
	require.NoError(t, err)
	return tr.Status
}

// A paused node (a, whose heartbeat never runs) keeps its lease only for
// the TTL: until then nobody touches its turn; after it, one of the live
// nodes interrupts the turn, exactly once, and a's writes are refused by
// the database although a still believes it holds the lease.
func TestExpiredLeaseIsTakenOverOnceAndFencesItsNode(t *testing.T) {
	st := openStore(t)
	const ttl = 400 * time.Millisecond
	a := newNode(t, st, "a", ttl, &recorder{})
	_, _, err := a.Acquire(t.Context(), "00000000-0000-0000-0000-000000000000")
	require.Error(t, err, "no lease for a thread that does not exist")
	id := newThread(t, st)
	token, prev, err := a.Acquire(t.Context(), id)
	require.NoError(t, err)
	require.Zero(t, prev, "nobody held the lease before")
	fenced := a.Fenced(st)
	require.NoError(t, fenced.Write(t.Context(), &store.Batch{
		CreateTurns: []*store.Turn{{ThreadID: id, ID: "turn-1", Status: store.TurnInProgress}},
		AppendItems: []*store.Item{item(id, "item-1")},
	}))

	// Two live nodes start (their start-up recovery) while a's lease is
	// valid: they leave its turn alone.
	var recB, recC recorder
	b, c := newNode(t, st, "b", ttl, &recB), newNode(t, st, "c", ttl, &recC)
	require.NoError(t, b.Start(t.Context()))
	require.NoError(t, c.Start(t.Context()))
	require.Equal(t, store.TurnInProgress, turnStatus(t, st, id))
	_, _, err = b.Acquire(t.Context(), id)
	require.True(t, apperr.Is(err, apperr.Conflict), "%v", err)
	require.Contains(t, err.Error(), "busy on node a")

	// Past the TTL the periodic scans settle the turn.
	require.Eventually(t, func() bool { return turnStatus(t, st, id) == store.TurnInterrupted }, 10*ttl, 20*time.Millisecond)
	// More scans find nothing left to do.
	require.NoError(t, b.scan(t.Context()))
	require.NoError(t, c.scan(t.Context()))
	_, rb := recB.snapshot()
	_, rc := recC.snapshot()
	require.Equal(t, []string{id + "/turn-1"}, append(rb, rc...), "the dead turn is announced exactly once across the nodes")

	// a wakes up: its writes carry its old token and change nothing.
	err = fenced.Write(t.Context(), &store.Batch{AppendItems: []*store.Item{item(id, "item-2")}})
	require.True(t, apperr.Is(err, apperr.Conflict), "%v", err)
	err = fenced.Write(t.Context(), &store.Batch{UpdateTurns: []store.TurnPatch{{ThreadID: id, ID: "turn-1", Status: store.TurnCompleted}}})
	require.True(t, apperr.Is(err, apperr.Conflict), "%v", err)
	require.Equal(t, 1, items(t, st, id))
	require.Equal(t, store.TurnInterrupted, turnStatus(t, st, id))

	// The lease was left free: another node takes the thread for its next
	// turn and learns that someone else held it since a did.
	a.Release(id)
	tokenB, prevB, err := b.Acquire(t.Context(), id)
	require.NoError(t, err)
	require.Greater(t, tokenB, token)
	require.NotEqual(t, token, prevB, "the takeover's token came between a's and b's")
	b.Release(id)
}

// A node whose heartbeat runs keeps its leases however long its turn
// takes; another node's scans leave the turn running and its writes pass.
func TestHeartbeatKeepsTheLease(t *testing.T) {
	st := openStore(t)
	const ttl = 300 * time.Millisecond
	var recA, recB recorder
	a, b := newNode(t, st, "a", ttl, &recA), newNode(t, st, "b", ttl, &recB)
	require.NoError(t, a.Start(t.Context()))
	id := newThread(t, st)
	token, _, err := a.Acquire(t.Context(), id)
	require.NoError(t, err)
	fenced := a.Fenced(st)
	require.NoError(t, fenced.Write(t.Context(), &store.Batch{
		CreateTurns: []*store.Turn{{ThreadID: id, ID: "turn-1", Status: store.TurnInProgress}},
		AppendItems: []*store.Item{item(id, "item-1")},
	}))
	require.NoError(t, b.Start(t.Context()))
	// Several TTLs, each with several scans of b.
	time.Sleep(5 * ttl)
	require.NoError(t, fenced.Write(t.Context(), &store.Batch{AppendItems: []*store.Item{item(id, "item-2")}}))
	require.Equal(t, store.TurnInProgress, turnStatus(t, st, id))
	lost, _ := recA.snapshot()
	require.Empty(t, lost)
	_, recovered := recB.snapshot()
	require.Empty(t, recovered)

	// The lease is given back with the turn's end: b may take it at once.
	require.NoError(t, fenced.Write(t.Context(), &store.Batch{UpdateTurns: []store.TurnPatch{{ThreadID: id, ID: "turn-1", Status: store.TurnCompleted}}}))
	a.Release(id)
	_, prev, err := b.Acquire(t.Context(), id)
	require.NoError(t, err)
	require.Equal(t, token, prev)
	b.Release(id)
}

// A node that finds its lease taken over tells its manager, once.
func TestHeartbeatReportsALostLease(t *testing.T) {
	st := openStore(t)
	const ttl = 300 * time.Millisecond
	var recA, recB recorder
	a, b := newNode(t, st, "a", ttl, &recA), newNode(t, st, "b", ttl, &recB)
	id := threadWithTurn(t, st, st)
	_, _, err := a.Acquire(t.Context(), id)
	require.NoError(t, err)
	// Another node's view of a dead a: the lease expired.
	_, err = st.Pool().Exec(t.Context(), `UPDATE thread_leases SET expires_at = clock_timestamp() WHERE thread_id = $1`, id)
	require.NoError(t, err)
	require.NoError(t, b.Start(t.Context()))
	_, recovered := recB.snapshot()
	require.Equal(t, []string{id + "/turn-1"}, recovered, "start-up recovery takes an expired lease")
	require.NoError(t, a.Start(t.Context()))
	require.Eventually(t, func() bool { lost, _ := recA.snapshot(); return len(lost) > 0 }, 10*ttl, 10*time.Millisecond)
	time.Sleep(ttl) // more heartbeats
	lost, _ := recA.snapshot()
	require.Equal(t, []string{id}, lost)
	_, _, err = a.Acquire(t.Context(), id)
	require.True(t, apperr.Is(err, apperr.Conflict), "no new work on a lost lease: %v", err)
	a.Release(id)
}

// Fences of several threads in one group commit: the batch of the thread
// whose lease is lost fails alone.
func TestGroupCommitFailsOnlyTheFencedOutBatch(t *testing.T) {
	st := openStore(t)
	gc := store.NewGroupCommitter(st, store.GroupCommitConfig{})
	t.Cleanup(func() { _ = gc.Close() })
	n := newNode(t, st, "a", time.Minute, &recorder{})
	ids := []string{threadWithTurn(t, st, st), threadWithTurn(t, st, st)}
	for _, id := range ids {
		_, _, err := n.Acquire(t.Context(), id)
		require.NoError(t, err)
	}
	_, err := st.Pool().Exec(t.Context(), `UPDATE thread_leases SET token = token + 1000 WHERE thread_id = $1`, ids[1])
	require.NoError(t, err)
	fenced := n.Fenced(gc)
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fenced.Write(context.Background(), &store.Batch{AppendItems: []*store.Item{item(id, "item-2")}})
		}()
	}
	wg.Wait()
	require.NoError(t, errs[0])
	require.True(t, apperr.Is(errs[1], apperr.Conflict), "%v", errs[1])
	require.Equal(t, 2, items(t, st, ids[0]))
	require.Equal(t, 1, items(t, st, ids[1]))
	for _, id := range ids {
		n.Release(id)
	}
}

// releasingStore gives the lease of thread back (its turn ended) after
// the fenced store took its fence and before the write reaches the
// database, once.
type releasingStore struct {
	*postgres.Store
	n      *Node
	thread string
	once   sync.Once
}

func (r *releasingStore) Write(ctx context.Context, b *store.Batch) error {
	r.once.Do(func() { r.n.Release(r.thread) })
	return r.Store.Write(ctx, b)
}

// A write that takes the fence of a lease given back before it commits (a
// client's write racing the end of the thread's turn) is made again on the
// thread having no live lease, and commits; one whose lease another node
// took is refused, whether this node gave its lease back meanwhile
// without noticing the takeover or still holds it under the same token.
func TestWriteRacingReleaseIsNotRefused(t *testing.T) {
	st := openStore(t)
	n := newNode(t, st, "a", time.Minute, &recorder{})
	id := threadWithTurn(t, st, st)
	_, _, err := n.Acquire(t.Context(), id)
	require.NoError(t, err)
	fenced := n.Fenced(&releasingStore{Store: st, n: n, thread: id})
	require.NoError(t, fenced.Write(t.Context(), &store.Batch{AppendItems: []*store.Item{item(id, "item-2")}}))
	require.Equal(t, 2, items(t, st, id))
	require.Zero(t, n.fence(id))

	for _, release := range []bool{true, false} {
		taken := threadWithTurn(t, st, st)
		_, _, err = n.Acquire(t.Context(), taken)
		require.NoError(t, err)
		// Another node's lease now, live.
		_, err = st.Pool().Exec(t.Context(), `UPDATE thread_leases SET token = token + 1000 WHERE thread_id = $1`, taken)
		require.NoError(t, err)
		var w store.Store = st
		if release {
			w = &releasingStore{Store: st, n: n, thread: taken}
		}
		err = n.Fenced(w).Write(t.Context(), &store.Batch{AppendItems: []*store.Item{item(taken, "item-2")}})
		require.True(t, apperr.Is(err, apperr.Conflict), "released %v: %v", release, err)
		require.Equal(t, 1, items(t, st, taken), "released %v", release)
		n.Release(taken)
	}
}

// A request for a thread goes to the node holding its lease, and the
// answer, or the error with its code, comes back.
func TestForwardReachesTheOwner(t *testing.T) {
	st := openStore(t)
	var recA, recB recorder
	a, b := newNode(t, st, "a", time.Minute, &recA), newNode(t, st, "b", time.Minute, &recB)
	require.NoError(t, a.Start(t.Context()))
	require.NoError(t, b.Start(t.Context()))
	id := newThread(t, st)

	_, ok, err := b.Forward(t.Context(), id, "echo", map[string]string{"x": "y"})
	require.NoError(t, err)
	require.False(t, ok, "nobody holds the thread: nothing to forward")

	_, _, err = a.Acquire(t.Context(), id)
	require.NoError(t, err)
	_, ok, err = a.Forward(t.Context(), id, "echo", map[string]string{"x": "y"})
	require.NoError(t, err)
	require.False(t, ok, "the owner runs its requests itself")

	res, ok, err := b.Forward(t.Context(), id, "echo", map[string]string{"x": "y"})
	require.NoError(t, err)
	require.True(t, ok)
	require.JSONEq(t, `{"x":"y"}`, string(res))
	// A NUL (a tool's output in a client's answer) goes and comes back.
	res, ok, err = b.Forward(t.Context(), id, "echo", map[string]string{"output": "a\x00b ␀"})
	require.NoError(t, err)
	require.True(t, ok)
	require.JSONEq(t, `{"output":"a\u0000b ␀"}`, string(res))
	_, ok, err = b.Forward(t.Context(), id, "other", struct{}{})
	require.True(t, ok)
	require.True(t, apperr.Is(err, apperr.Invalid), "%v", err)
	require.Equal(t, "unknown method other", apperr.MessageOf(err))
	_, ok, err = b.Forward(t.Context(), id, "fail", map[string]string{"message": "a\x00b"})
	require.True(t, ok)
	require.Equal(t, "a\uFFFDb", apperr.MessageOf(err), "an error's text comes back, its NUL replaced")

	var left int
	require.NoError(t, st.Pool().QueryRow(t.Context(), `SELECT count(*) FROM node_commands`).Scan(&left))
	require.Zero(t, left, "answered requests are deleted")
	a.Release(id)
}

// A request forwarded to a node that holds the lease but does not run yet
// (its notifier heard it, it did not) waits, and runs when the node
// starts.
func TestRequestSentBeforeStartRunsAtStart(t *testing.T) {
	st := openStore(t)
	var recA, recB recorder
	a, b := newNode(t, st, "a", time.Minute, &recA), newNode(t, st, "b", time.Minute, &recB)
	require.NoError(t, b.Start(t.Context()))
	id := newThread(t, st)
	_, _, err := a.Acquire(t.Context(), id)
	require.NoError(t, err)
	type answer struct {
		res json.RawMessage
		err error
	}
	answers := make(chan answer, 1)
	go func() {
		res, _, err := b.Forward(t.Context(), id, "echo", map[string]string{"x": "y"})
		answers <- answer{res, err}
	}()
	select {
	case a := <-answers:
		t.Fatalf("a node not started answered: %s %v", a.res, a.err)
	case <-time.After(300 * time.Millisecond):
	}
	require.NoError(t, a.Start(t.Context()))
	got := <-answers
	require.NoError(t, got.err)
	require.JSONEq(t, `{"x":"y"}`, string(got.res))
	a.Release(id)
}

// A daemon restarted under a fixed node id settles the turns its previous
// process left running at once, not after their leases expire.
func TestRestartUnderTheSameIDSettlesItsOwnTurns(t *testing.T) {
	st := openStore(t)
	old := newNode(t, st, "a", time.Minute, &recorder{})
	id := newThread(t, st)
	_, _, err := old.Acquire(t.Context(), id)
	require.NoError(t, err)
	require.NoError(t, old.Fenced(st).Write(t.Context(), &store.Batch{
		CreateTurns: []*store.Turn{{ThreadID: id, ID: "turn-1", Status: store.TurnInProgress}},
	}))
	// The process dies holding the lease; its successor starts.
	var rec recorder
	restarted := newNode(t, st, "a", time.Minute, &rec)
	require.NoError(t, restarted.Start(t.Context()))
	_, recovered := rec.snapshot()
	require.Equal(t, []string{id + "/turn-1"}, recovered)
	require.Equal(t, store.TurnInterrupted, turnStatus(t, st, id))
}

// BenchmarkLeaseCycle is what a turn pays for its lease on Postgres: one
// Acquire and one Release.
func BenchmarkLeaseCycle(b *testing.B) {
	st := openStore(b)
	n := newNode(b, st, "a", time.Minute, &recorder{})
	id := newThread(b, st)
	for b.Loop() {
		if _, _, err := n.Acquire(b.Context(), id); err != nil {
			b.Fatal(err)
		}
		n.Release(id)
	}
}

// BenchmarkFencedWrite compares an item append with and without the fence
// a leased turn's writes carry.
func BenchmarkFencedWrite(b *testing.B) {
	st := openStore(b)
	n := newNode(b, st, "a", time.Minute, &recorder{})
	for _, fenced := range []bool{false, true} {
		b.Run(map[bool]string{false: "plain", true: "fenced"}[fenced], func(b *testing.B) {
			id := newThread(b, st)
			require.NoError(b, st.Write(b.Context(), &store.Batch{
				CreateTurns: []*store.Turn{{ThreadID: id, ID: "turn-1", Status: store.TurnInProgress}},
			}))
			w := store.Store(st)
			if fenced {
				_, _, err := n.Acquire(b.Context(), id)
				require.NoError(b, err)
				defer n.Release(id)
				w = n.Fenced(st)
			}
			i := 0
			for b.Loop() {
				i++
				if err := w.Write(b.Context(), &store.Batch{AppendItems: []*store.Item{item(id, "item-"+strconv.Itoa(i))}}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
