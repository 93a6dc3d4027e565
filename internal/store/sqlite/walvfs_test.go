package sqlite_test

import (
	"bufio"
	"bytes"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/store/sqlite"
	"github.com/appserver/appserver/internal/store/storetest"
)

// A commit's frames reach the log in one write, not two per frame.
func TestWALWritesGathered(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "appserver.db"), true)
	turn := storetest.PlainTurnWriter(t, s, 7)
	turn(0)
	asked0, made0 := sqlite.WALWrites()
	const turns = 20
	for i := 1; i <= turns; i++ {
		turn(i)
	}
	asked, made := sqlite.WALWrites()
	asked, made = asked-asked0, made-made0
	t.Logf("%d turns: SQLite asked for %d writes to the log, the VFS made %d", turns, asked, made)
	// Two commits a turn, each of more than a dozen frames, each frame
	// asked for in two writes; each commit fits one buffer (give or take
	// the log's header, written when a checkpoint has restarted it).
	require.GreaterOrEqual(t, asked, int64(turns*2*2*8))
	require.LessOrEqual(t, made*8, asked)
}

// The VFS relies on a sync at every commit: a database path whose own
// parameters leave the writer below FULL is refused, with a clear error.
func TestWALRefusesWriterBelowFullSync(t *testing.T) {
	for _, mode := range []string{"OFF", "NORMAL"} {
		path := filepath.Join(t.TempDir(), "appserver.db") + "?_pragma=synchronous(" + mode + ")"
		_, err := sqlite.Open(t.Context(), sqlite.Config{Path: path, Migrate: true})
		require.Error(t, err, "path asking for %s", mode)
		require.True(t, apperr.Is(err, apperr.Invalid), "%v", err)
		require.Contains(t, err.Error(), "synchronous below FULL")
	}
	s := open(t, filepath.Join(t.TempDir(), "appserver.db")+"?_pragma=synchronous(EXTRA)", true)
	got, err := s.WriterSynchronous(t.Context())
	require.NoError(t, err)
	require.GreaterOrEqual(t, got, 2)
}

// Every commit is in the file when it returns: a connection through the
// plain unix VFS, with a file descriptor of its own, reads each at once.
func TestWALCommitsVisibleToOtherConnections(t *testing.T) {
	path := filepath.Join(t.TempDir(), "appserver.db")
	s := open(t, path, true)
	plain, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
	require.NoError(t, err)
	defer plain.Close()
	turn := storetest.PlainTurnWriter(t, s, 7)
	for i := range 50 {
		turn(i)
		var n int
		require.NoError(t, plain.QueryRow("SELECT count(*) FROM turns WHERE status = 'completed'").Scan(&n))
		require.Equal(t, i+1, n, "after turn %d", i)
	}
}

// Transactions larger than the buffer, transactions that spill pages to
// the log before they commit (and read them back), and the log's restart
// after a checkpoint all leave the database whole, as a connection through
// the plain unix VFS reads it.
func TestWALLargeAndSpillingTransactions(t *testing.T) {
	dir := t.TempDir()
	_ = open(t, filepath.Join(dir, "registers-the-vfs.db"), true)
	path := filepath.Join(dir, "big.db")
	db, err := sql.Open("sqlite", path+"?vfs="+sqlite.WALVFSName+
		"&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=cache_size(8)")
	require.NoError(t, err)
	defer db.Close()
	db.SetMaxOpenConns(1)
	_, err = db.Exec("CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB NOT NULL)")
	require.NoError(t, err)
	src := rand.NewChaCha8([32]byte{1})
	rng := rand.New(src)
	want := map[int][]byte{}
	k := 0
	for txn := range 20 {
		tx, err := db.Begin()
		require.NoError(t, err)
		for range 1 + rng.IntN(40) {
			size := 10 + rng.IntN(4096)
			switch rng.IntN(12) {
			case 0, 1:
				size = 100<<10 + rng.IntN(100<<10) // about the buffer's size
			case 2:
				size = 512<<10 + rng.IntN(512<<10)
			}
			v := make([]byte, size)
			_, _ = src.Read(v)
			k++
			want[k] = v
			_, err := tx.Exec("INSERT INTO t (k, v) VALUES (?, ?)", k, v)
			require.NoError(t, err)
			if rng.IntN(4) == 0 { // read back what may have spilled
				var got []byte
				require.NoError(t, tx.QueryRow("SELECT v FROM t WHERE k = ?", 1+rng.IntN(k)).Scan(&got))
			}
		}
		require.NoError(t, tx.Commit())
		if txn%7 == 6 {
			_, err := db.Exec("PRAGMA wal_checkpoint(TRUNCATE)")
			require.NoError(t, err)
		}
	}

	plain := openWhole(t, path)
	rows, err := plain.Query("SELECT k, v FROM t ORDER BY k")
	require.NoError(t, err)
	defer rows.Close()
	n := 0
	for rows.Next() {
		var key int
		var v []byte
		require.NoError(t, rows.Scan(&key, &v))
		require.True(t, bytes.Equal(want[key], v), "row %d", key)
		n++
	}
	require.NoError(t, rows.Err())
	require.Equal(t, len(want), n)
}

// Frames a transaction spilled to the log before it rolled back never
// land on frames another writer committed after it. (Here SQLite's
// rollback reads the log back, which writes the buffer out before the
// other writer starts; what a rollback leaves gathered is dropped when
// the write lock is released, which TestWALFailedCommitStaysFailed
// covers.)
func TestWALSpilledRollbackThenOtherWriter(t *testing.T) {
	dir := t.TempDir()
	_ = open(t, filepath.Join(dir, "registers-the-vfs.db"), true)
	path := filepath.Join(dir, "two.db")
	conn := func() *sql.DB {
		db, err := sql.Open("sqlite", path+"?vfs="+sqlite.WALVFSName+
			"&_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=cache_size(8)")
		require.NoError(t, err)
		db.SetMaxOpenConns(1)
		t.Cleanup(func() { _ = db.Close() })
		return db
	}
	a, b := conn(), conn()
	_, err := a.Exec("CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB NOT NULL)")
	require.NoError(t, err)
	blob := bytes.Repeat([]byte{0xa5}, 3000)
	for round := range 5 {
		tx, err := a.Begin()
		require.NoError(t, err)
		for i := range 20 { // more pages than the cache holds (some spill), fewer than the buffer
			_, err := tx.Exec("INSERT INTO t (k, v) VALUES (?, ?)", 1_000_000+round*1000+i, blob)
			require.NoError(t, err)
		}
		require.NoError(t, tx.Rollback())
		for i := range 20 {
			_, err := b.Exec("INSERT INTO t (k, v) VALUES (?, ?)", round*100+i, []byte(fmt.Sprint(round, i)))
			require.NoError(t, err)
		}
		_, err = a.Exec("INSERT INTO t (k, v) VALUES (?, ?)", 500_000+round, []byte("a"))
		require.NoError(t, err)
	}
	plain := openWhole(t, path)
	for round := range 5 {
		for i := range 20 {
			var v []byte
			require.NoError(t, plain.QueryRow("SELECT v FROM t WHERE k = ?", round*100+i).Scan(&v))
			require.Equal(t, fmt.Sprint(round, i), string(v))
		}
	}
	var n int
	require.NoError(t, plain.QueryRow("SELECT count(*) FROM t").Scan(&n))
	require.Equal(t, 5*20+5, n)
}

// A process killed with SIGKILL between commits loses none of the turns
// whose writes had returned, and leaves the file whole: the gathered
// writes of a commit are in the file before the commit returns.
func TestWALKilledWriterLosesNoCommit(t *testing.T) {
	if path := os.Getenv("APPSERVER_WALVFS_CHILD"); path != "" {
		walWriterChild(t, path)
		return
	}
	path := filepath.Join(t.TempDir(), "appserver.db")
	done := -1
	killChildAfter(t, "TestWALKilledWriterLosesNoCommit", "APPSERVER_WALVFS_CHILD", path, func(line string) bool {
		if n, err := strconv.Atoi(line); err == nil {
			done = n
		}
		return done >= 60
	})
	require.GreaterOrEqual(t, done, 60, "the child wrote too few turns")

	plain := openWhole(t, path)
	var completed int
	require.NoError(t, plain.QueryRow("SELECT count(*) FROM turns WHERE status = 'completed'").Scan(&completed))
	require.GreaterOrEqual(t, completed, done+1)
}

// A commit whose log write fails is reported failed and never comes back,
// not even when the log is read and written again before a crash (here a
// checkpoint reads it) and the next open recovers the log from the file.
func TestWALFailedCommitStaysFailed(t *testing.T) {
	if path := os.Getenv("APPSERVER_WALVFS_FAULT_CHILD"); path != "" {
		walFaultChild(t, path)
		return
	}
	path := filepath.Join(t.TempDir(), "fault.db")
	ready := false
	stderr := killChildAfter(t, "TestWALFailedCommitStaysFailed", "APPSERVER_WALVFS_FAULT_CHILD", path, func(line string) bool {
		ready = line == "ready"
		return ready
	})
	require.True(t, ready, "the child did not get ready: %s", stderr)

	plain := openWhole(t, path)
	var doomed, kept int
	require.NoError(t, plain.QueryRow("SELECT count(*) FROM t WHERE v LIKE 'doomed%'").Scan(&doomed))
	require.Zero(t, doomed, "a commit reported failed came back")
	require.NoError(t, plain.QueryRow("SELECT count(*) FROM t WHERE v LIKE 'kept%'").Scan(&kept))
	require.Equal(t, 3, kept)
}

// walFaultChild commits rows to a database at path through the VFS, then
// commits that fail with the disk failing, then checkpoints once it works
// again, prints "ready" and waits to be killed.
func walFaultChild(t *testing.T, path string) {
	_ = open(t, filepath.Join(filepath.Dir(path), "registers-the-vfs.db"), true)
	db, err := sql.Open("sqlite", path+"?vfs="+sqlite.WALVFSName+
		"&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=wal_autocheckpoint(0)")
	require.NoError(t, err)
	db.SetMaxOpenConns(1)
	_, err = db.Exec("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT NOT NULL)")
	require.NoError(t, err)
	for i := range 3 {
		_, err := db.Exec("INSERT INTO t (v) VALUES (?)", fmt.Sprint("kept-", i))
		require.NoError(t, err)
	}
	sqlite.SetWALFlushFault(true)
	for i := range 3 {
		_, err := db.Exec("INSERT INTO t (v) VALUES (?)", fmt.Sprint("doomed-", i))
		require.Error(t, err)
	}
	sqlite.SetWALFlushFault(false)
	// The checkpoint reads the log's committed frames and leaves the log
	// as it is: a failed commit's frames written now would follow them,
	// and the next open's recovery would take them for a commit.
	_, err = db.Exec("PRAGMA wal_checkpoint(PASSIVE)")
	require.NoError(t, err)
	fmt.Println("ready")
	select {}
}

// walWriterChild writes plain turns to the store at path until killed,
// printing each turn's number once its writes have returned.
func walWriterChild(t *testing.T, path string) {
	s, err := sqlite.Open(t.Context(), sqlite.Config{Path: path, Migrate: true})
	require.NoError(t, err)
	turn := storetest.PlainTurnWriter(t, s, 7)
	for i := 0; ; i++ {
		turn(i)
		fmt.Println(i)
	}
}

// openWhole opens the database at path through the plain unix VFS and
// checks that it is whole.
func openWhole(t *testing.T, path string) *sql.DB {
	t.Helper()
	plain, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = plain.Close() })
	var check string
	require.NoError(t, plain.QueryRow("PRAGMA integrity_check").Scan(&check))
	require.Equal(t, "ok", check)
	return plain
}

// killChildAfter runs test in a child process of this test binary, with
// env set to path, passes it each line the child prints until stop says
// so or the child ends, then kills the child with SIGKILL; it returns
// what the child wrote to stderr.
func killChildAfter(t *testing.T, test, env, path string, stop func(line string) bool) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$")
	cmd.Env = append(os.Environ(), env+"="+path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		if stop(lines.Text()) {
			break
		}
	}
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	return stderr.String()
}
