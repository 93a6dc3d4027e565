package eventlog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/store/pgtest"
	"github.com/appserver/appserver/internal/store/postgres"
	"github.com/appserver/appserver/internal/store/sqlite"
)

// eventLogBytes sums the data of a thread's stored events and returns
// their numbers.
func eventLogBytes(t *testing.T, st store.Store, threadID string) (n int64, seqs []int64) {
	t.Helper()
	for after := int64(0); ; {
		evs, err := st.ListEvents(t.Context(), threadID, after, store.MaxEventsLimit)
		require.NoError(t, err)
		if len(evs) == 0 {
			return n, seqs
		}
		for _, ev := range evs {
			n += int64(len(ev.Data))
			seqs = append(seqs, ev.Seq)
			after = ev.Seq
		}
	}
}

// dbFileSize is the bytes of the embedded store's files.
func dbFileSize(t *testing.T, dataDir string) int64 {
	t.Helper()
	var n int64
	for _, name := range []string{"appserver.db", "appserver.db-wal"} {
		if fi, err := os.Stat(filepath.Join(dataDir, name)); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// A command printing 200 MB in a turn: the client gets all of it live,
// the event log keeps at most the item's bound of its deltas (1 MiB by
// default; on Postgres, none on the embedded store) besides the item
// itself, and a resume replays what it kept, in order. On the embedded store, a smaller thread bound then prunes the
// oldest events and the database files shrink; an SSE resume from a
// pruned position is 410, from a kept one it streams.
func TestEventLogIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("streams 200 MB")
	}
	for _, backend := range []string{"embedded", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			dataDir := t.TempDir()
			storeArgs := []string{"--data-dir", dataDir}
			var pgURL string
			if backend == "postgres" {
				pgURL = pgtest.URL(t)
				storeArgs = []string{"--database-url", pgURL, "--migrate", "--data-dir", dataDir}
			}
			script := `{"steps":[
				{"match":{"user_text":"flood"},"tool_calls":[` + apptest.ShellCall("call_big", "head -c 200000000 /dev/zero | tr '\\0' x") + `]},
				{"match":{"call_output":"call_big"},"text":"done"},
				{"match":{"user_text":"again"},"text":"again"}]}`
			fake := apptest.StartFake(t, script)
			args := append(append(storeArgs, apptest.FakeArgs(fake, "responses")...), "-c", `event_prune_interval="100ms"`)
			d := apptest.Start(t, args...)
			r := apptest.RPC(t, d.Addr, "", map[string]any{"eventSeq": true})
			r.WS.SetReadLimit(-1)
			threadID := apptest.StartThread(t, r, map[string]any{"sandbox": "workspace-write", "approvalPolicy": "never"})

			r.Call("turn/start", apptest.Input(threadID, "flood"))
			// The deltas are counted without decoding them, so that the
			// client keeps up with the daemon's outbound queue.
			deltaPrefix := []byte(`{"method":"item/commandExecution/outputDelta"`)
			var live, unnumbered int
			var lastSeq int64
			for {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				_, data, err := r.WS.Read(ctx)
				cancel()
				require.NoError(t, err)
				if bytes.HasPrefix(data, deltaPrefix) {
					live++
					if !bytes.Contains(data[max(0, len(data)-32):], []byte(`,"seq":`)) {
						unnumbered++
					}
					continue
				}
				var f apptest.Frame
				require.NoError(t, json.Unmarshal(data, &f))
				if f.Seq > 0 {
					require.Greater(t, f.Seq, lastSeq, "numbers grow")
					lastSeq = f.Seq
				}
				if f.Method == "turn/completed" {
					break
				}
			}
			// 200 MB streams as many deltas (at most 10,000 a call,
			// docs/tools.md; fewer and larger on a loaded machine): the
			// first MiB of them numbered and logged, the rest live only.
			require.Positive(t, unnumbered, "the deltas past the item's bound are live only")
			require.Greater(t, live, unnumbered, "the deltas within the item's bound are numbered")

			// What the log keeps: the first MiB of deltas, the item (its
			// output capped at 1 MiB) and the turn's other events.
			var st store.Store
			var err error
			if backend == "postgres" {
				st, err = postgres.Open(t.Context(), postgres.Config{URL: pgURL})
			} else {
				st, err = sqlite.Open(t.Context(), sqlite.Config{Path: filepath.Join(dataDir, "appserver.db")})
			}
			require.NoError(t, err)
			defer st.Close()
			var logged int64
			var seqs []int64
			require.Eventually(t, func() bool {
				logged, seqs = eventLogBytes(t, st, threadID)
				return len(seqs) > 0 && seqs[len(seqs)-1] == lastSeq
			}, 10*time.Second, 20*time.Millisecond, "the log holds the turn's end")
			t.Logf("%d deltas live (%d past the item's bound); the log keeps %d events, %d bytes", live, unnumbered, len(seqs), logged)
			if backend == "embedded" {
				// No delta is stored: the numbered ones are gaps.
				require.LessOrEqual(t, logged, int64(1<<20+64<<10), "the 1 MiB item and a few small events")
				require.Less(t, len(seqs), 20, "no delta is stored")
			} else {
				require.LessOrEqual(t, logged, int64(2<<20+64<<10), "1 MiB of deltas, the 1 MiB item and a few small events")
				for i := 1; i < len(seqs); i++ {
					require.Equal(t, seqs[i-1]+1, seqs[i], "no gaps: live-only deltas are not numbered")
				}
			}

			// A client resuming from the start gets what the log kept.
			rr := apptest.RPC(t, d.Addr, "", map[string]any{"eventSeq": true})
			rr.WS.SetReadLimit(-1)
			rr.Call("thread/resume", map[string]any{"threadId": threadID, "afterSeq": 0})
			rr.Until("turn/completed")
			replayed := numbered(rr.Seen)
			require.Len(t, replayed, len(seqs)-1) // until took turn/completed
			for i, f := range replayed {
				require.Equal(t, seqs[i], f.Seq)
			}
			if backend != "embedded" {
				return
			}

			// A smaller bound for the thread: its oldest events go, and the
			// file gives their space back.
			require.NoError(t, st.Close())
			d.Stop(t)
			before := dbFileSize(t, dataDir)
			d = apptest.Start(t, append(args, "-c", "event_thread_max_mib=1")...)
			r = apptest.RPC(t, d.Addr, "", map[string]any{"eventSeq": true})
			r.WS.SetReadLimit(-1)
			// The thread's next turn lets the pruner look at it.
			r.Call("thread/resume", map[string]any{"threadId": threadID, "excludeTurns": true})
			require.Equal(t, "completed", apptest.RunTurn(t, r, threadID, "again").Turn.Status)
			st, err = sqlite.Open(t.Context(), sqlite.Config{Path: filepath.Join(dataDir, "appserver.db")})
			require.NoError(t, err)
			defer st.Close()
			require.Eventually(t, func() bool {
				logged, seqs = eventLogBytes(t, st, threadID)
				return logged <= 1<<20
			}, 20*time.Second, 50*time.Millisecond, "the thread's log is cut to 1 MiB")
			require.Eventually(t, func() bool { return dbFileSize(t, dataDir) < before-512<<10 }, 10*time.Second, 50*time.Millisecond,
				"the database files shrink (from %d bytes)", before)
			t.Logf("database files: %d bytes before, %d after pruning to %d bytes of events", before, dbFileSize(t, dataDir), logged)

			first := seqs[0]
			require.Greater(t, first, int64(2), "the oldest events went")
			resp := d.Do(t, "GET", "/v1/threads/"+threadID+"/events?after=1", "", nil)
			resp.Body.Close()
			require.Equal(t, http.StatusGone, resp.StatusCode, "a pruned position is gone")
			methods := d.OpenEvents(t, fmt.Sprintf("/v1/threads/%s/events?after=%d&until=turnCompleted", threadID, first<<16), "").Rest()
			require.NotEmpty(t, methods)
			require.Equal(t, "turn/completed", methods[len(methods)-1])
		})
	}
}
