package execsession

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/appserver/appserver/internal/sandbox"
)

func newTestManager(t *testing.T, cfg ManagerConfig) *Manager {
	t.Helper()
	m := NewManager(cfg)
	t.Cleanup(func() { _ = m.Close() })
	return m
}

func sh(script string) []string { return []string{"/bin/bash", "-c", script} }

func execOK(t *testing.T, m *Manager, req ExecRequest) Result {
	t.Helper()
	if req.Cwd == "" {
		req.Cwd = t.TempDir()
	}
	res, err := m.Exec(context.Background(), req)
	if err != nil {
		t.Fatalf("Exec(%q): %v", req.Argv, err)
	}
	return res
}

func writeOK(t *testing.T, m *Manager, req WriteRequest) Result {
	t.Helper()
	res, err := m.Write(context.Background(), req)
	if err != nil {
		t.Fatalf("Write(%d, %q): %v", req.SessionID, req.Chars, err)
	}
	return res
}

// running returns the session id of a result that must still run.
func running(t *testing.T, r Result) int {
	t.Helper()
	if r.SessionID == nil || r.ExitCode != nil {
		t.Fatalf("want a running session, got exit=%v output=%q", r.ExitCode, r.Output)
	}
	return *r.SessionID
}

// exited returns the exit code of a result whose process must have exited.
func exited(t *testing.T, r Result) int {
	t.Helper()
	if r.ExitCode == nil || r.SessionID != nil {
		t.Fatalf("want an exited process, got session=%v output=%q", r.SessionID, r.Output)
	}
	return *r.ExitCode
}

// pollUntil writes chars once, then polls the session until its accumulated
// output contains want or the process exits.
func pollUntil(t *testing.T, m *Manager, id int, chars, want string) (string, Result) {
	t.Helper()
	var acc strings.Builder
	req := WriteRequest{SessionID: id, Chars: chars, YieldTime: 300 * time.Millisecond}
	for i := 0; i < 50; i++ {
		r := writeOK(t, m, req)
		acc.WriteString(r.Output)
		if strings.Contains(acc.String(), want) || r.ExitCode != nil {
			return acc.String(), r
		}
		req.Chars = ""
	}
	t.Fatalf("no %q in output %q", want, acc.String())
	return "", Result{}
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return f[0] != "Z" && f[0] != "X"
}

// requireReaped asserts that pid no longer exists at all: killed and reaped
// (kill(pid, 0) fails with ESRCH), so the daemon left no zombie behind.
func requireReaped(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("pid %d still exists (kill(0) = %v)", pid, err)
	}
}

// requireDead waits until pid is gone. A grandchild that was reparented to
// init can linger as init's zombie for a moment; that zombie is dead and is
// not ours to reap, so it counts as gone once its parent is not the daemon.
func requireDead(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := syscall.Kill(pid, 0)
		if errors.Is(err, syscall.ESRCH) {
			return
		}
		if !alive(pid) && parentOf(pid) != os.Getpid() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d survived (alive=%v, parent=%d)", pid, alive(pid), parentOf(pid))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func parentOf(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

var pidLine = regexp.MustCompile(`PID=(\d+)`)

// pidsIn extracts the numbers printed as PID=<n>.
func pidsIn(t *testing.T, out string, n int) []int {
	t.Helper()
	var pids []int
	for _, m := range pidLine.FindAllStringSubmatch(out, -1) {
		p, _ := strconv.Atoi(m[1])
		pids = append(pids, p)
	}
	if len(pids) < n {
		t.Fatalf("want %d PID= lines in %q", n, out)
	}
	return pids
}

func TestExecPipesMergesStreamsAndReportsExit(t *testing.T) {
	m := newTestManager(t, ManagerConfig{})
	res := execOK(t, m, ExecRequest{Argv: sh("echo hi; echo err >&2; exit 3"), YieldTime: 10 * time.Second})
	if code := exited(t, res); code != 3 {
		t.Fatalf("exit code %d", code)
	}
	if res.Output != "hi\nerr\n" {
		t.Fatalf("output %q", res.Output)
	}
	if res.WallTime > 5*time.Second {
		t.Fatalf("a finished command must not wait for the yield time (took %v)", res.WallTime)
	}
	text := res.Text()
	re := regexp.MustCompile(`^Chunk ID: [0-9a-f]{6}\nWall time: \d+\.\d{4} seconds\nProcess exited with code 3\nOriginal token count: 2\nOutput:\nhi\nerr\n$`)
	if !re.MatchString(text) {
		t.Fatalf("text %q", text)
	}
	if len(m.Sessions()) != 0 {
		t.Fatal("an exited process must not keep a session")
	}
}

func TestExecSignalExitCode(t *testing.T) {
	m := newTestManager(t, ManagerConfig{})
	res := execOK(t, m, ExecRequest{Argv: sh("kill -9 $$"), YieldTime: 10 * time.Second})
	if code := exited(t, res); code != 137 {
		t.Fatalf("exit code %d, want 128+9", code)
	}
}

func TestTTYSessionAcrossCalls(t *testing.T) {
	m := newTestManager(t, ManagerConfig{})
	res := execOK(t, m, ExecRequest{Argv: []string{"cat"}, TTY: true, YieldTime: 300 * time.Millisecond})
	id := running(t, res)
	if id < MinSessionID || id >= MaxSessionID {
		t.Fatalf("session id %d outside [1000, 100000)", id)
	}
	out, r := pollUntil(t, m, id, "abc\n", "abc\r\nabc\r\n")
	if r.SessionID == nil || *r.SessionID != id {
		t.Fatalf("session should keep running, got %+v (output %q)", r, out)
	}
	// Ctrl-D ends cat: the exit is reported and the session released.
	_, r = pollUntil(t, m, id, "\u0004", "\x00never")
	if code := exited(t, r); code != 0 {
		t.Fatalf("exit %d", code)
	}
	_, err := m.Write(context.Background(), WriteRequest{SessionID: id})
	var unknown *UnknownSessionError
	if !errors.As(err, &unknown) || err.Error() != "Unknown process id "+strconv.Itoa(id) {
		t.Fatalf("write after exit: %v", err)
	}
}

func TestInteractiveBashKeepsState(t *testing.T) {
	m := newTestManager(t, ManagerConfig{})
	res := execOK(t, m, ExecRequest{Argv: []string{"/bin/bash", "--norc", "--noprofile", "-i"}, TTY: true, YieldTime: 300 * time.Millisecond})
	id := running(t, res)
	pollUntil(t, m, id, "export CODEX_VAR=codex$((40+2))\n", "\n")
	out, _ := pollUntil(t, m, id, "echo \"[$CODEX_VAR]\"\n", "[codex42]")
	if !strings.Contains(out, "[codex42]") {
		t.Fatalf("output %q", out)
	}
	// The environment forced for sessions is visible inside.
	out, _ = pollUntil(t, m, id, "echo \"<$TERM,$NO_COLOR,$PAGER,$CODEX_CI,$LC_ALL>\"\n", "<dumb,1,cat,1,C.UTF-8>")
	if !strings.Contains(out, "<dumb,1,cat,1,C.UTF-8>") {
		t.Fatalf("env %q", out)
	}
	_, r := pollUntil(t, m, id, "exit 7\n", "\x00never")
	if code := exited(t, r); code != 7 {
		t.Fatalf("exit %d", code)
	}
}

func TestYieldTimeAndLaterPoll(t *testing.T) {
	m := newTestManager(t, ManagerConfig{})
	res := execOK(t, m, ExecRequest{Argv: sh("echo start; sleep 0.6; echo late; exit 4"), YieldTime: 250 * time.Millisecond})
	id := running(t, res)
	if res.WallTime < 250*time.Millisecond {
		t.Fatalf("a running command must be collected for the whole yield time, got %v", res.WallTime)
	}
	// An empty poll waits until the process exits, well before its 5 s.
	r := writeOK(t, m, WriteRequest{SessionID: id, YieldTime: MinEmptyPollYieldTime})
	if code := exited(t, r); code != 4 {
		t.Fatalf("exit %d", code)
	}
	// Each byte is returned once, in order, across the two calls (on a
	// loaded machine "start" may miss the first one).
	if res.Output+r.Output != "start\nlate\n" || !strings.HasSuffix(r.Output, "late\n") {
		t.Fatalf("chunks %q + %q", res.Output, r.Output)
	}
	if r.WallTime >= MinEmptyPollYieldTime {
		t.Fatalf("the poll should end at the exit, took %v", r.WallTime)
	}
}

func TestPipeSessionStdinClosedAndCtrlC(t *testing.T) {
	m := newTestManager(t, ManagerConfig{})
	id := running(t, execOK(t, m, ExecRequest{Argv: []string{"sleep", "30"}, YieldTime: 50 * time.Millisecond}))
	_, err := m.Write(context.Background(), WriteRequest{SessionID: id, Chars: "zz"})
	if !errors.Is(err, ErrStdinClosed) || err.Error() != "this session's stdin is closed (it runs without a tty); to type into a command, start it again with exec_command and tty=true" {
		t.Fatalf("write to a pipe session: %v", err)
	}
	r := writeOK(t, m, WriteRequest{SessionID: id, Chars: "\u0003", YieldTime: 5 * time.Second})
	if code := exited(t, r); code != 130 {
		t.Fatalf("Ctrl-C exit %d, want 130", code)
	}
}

func TestOutputBeyondBufferKeepsHeadAndTail(t *testing.T) {
	m := newTestManager(t, ManagerConfig{})
	// 3 MiB of output, collected in one call: the session buffer keeps
	// 512 KiB of head and of tail and marks the gap.
	res := execOK(t, m, ExecRequest{Argv: sh("head -c 3145728 /dev/zero | tr '\\0' a; echo; echo END"), YieldTime: 20 * time.Second, MaxOutputTokens: MaxOutputTokensCeiling})
	exited(t, res)
	if !strings.HasSuffix(res.Output, "END\n") || !strings.HasPrefix(res.Output, "aaaa") {
		t.Fatalf("output ends %q", res.Output[max(len(res.Output)-20, 0):])
	}
	if len(res.Output) > OutputBufferBytes+200 {
		t.Fatalf("output of %d bytes exceeds the session buffer", len(res.Output))
	}
}

func TestCapPrunesLeastRecentlyUsedOutsideProtected(t *testing.T) {
	m := newTestManager(t, ManagerConfig{MaxSessions: 4, ProtectedSessions: 2, DeterministicIDs: true})
	var ids, pids []int
	for i := 0; i < 4; i++ {
		res := execOK(t, m, ExecRequest{Argv: sh("echo PID=$$; exec sleep 100"), YieldTime: 100 * time.Millisecond})
		ids = append(ids, running(t, res))
		pids = append(pids, res.pidOf(m, ids[i]))
		time.Sleep(2 * time.Millisecond) // distinct last-used times
	}
	if !slices.Equal(ids, []int{1000, 1001, 1002, 1003}) {
		t.Fatalf("deterministic ids %v", ids)
	}
	// Touch the oldest: now 1001 is the least recently used.
	writeOK(t, m, WriteRequest{SessionID: 1000, YieldTime: time.Millisecond})
	res := execOK(t, m, ExecRequest{Argv: []string{"sleep", "100"}, YieldTime: 10 * time.Millisecond})
	if got := running(t, res); got != 1004 {
		t.Fatalf("new id %d", got)
	}
	requireDead(t, pids[1])
	_, err := m.Write(context.Background(), WriteRequest{SessionID: 1001})
	var unknown *UnknownSessionError
	if !errors.As(err, &unknown) {
		t.Fatalf("pruned session still answers: %v", err)
	}
	if n := len(m.Sessions()); n != 4 {
		t.Fatalf("%d live sessions, want the cap of 4", n)
	}
	for _, i := range []int{0, 2, 3} {
		if !alive(pids[i]) {
			t.Fatalf("session %d (pid %d) should have survived", ids[i], pids[i])
		}
	}
}

func TestCapPrefersExitedSession(t *testing.T) {
	m := newTestManager(t, ManagerConfig{MaxSessions: 3, ProtectedSessions: 1, DeterministicIDs: true})
	a := running(t, execOK(t, m, ExecRequest{Argv: []string{"sleep", "100"}, YieldTime: 10 * time.Millisecond}))
	b := running(t, execOK(t, m, ExecRequest{Argv: sh("sleep 0.3"), YieldTime: 10 * time.Millisecond}))
	c := running(t, execOK(t, m, ExecRequest{Argv: []string{"sleep", "100"}, YieldTime: 10 * time.Millisecond}))
	// b exits without anyone polling it: it stays listed until pruned.
	deadline := time.Now().Add(10 * time.Second)
	for {
		m.mu.Lock()
		done := m.sessions[b].proc.hasExited()
		m.mu.Unlock()
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("sleep 0.3 did not exit")
		}
		time.Sleep(20 * time.Millisecond)
	}
	execOK(t, m, ExecRequest{Argv: []string{"sleep", "100"}, YieldTime: 10 * time.Millisecond})
	var live []int
	for _, s := range m.Sessions() {
		live = append(live, s.ID)
	}
	// a is older than b, but the exited b goes first.
	if !slices.Contains(live, a) || slices.Contains(live, b) || !slices.Contains(live, c) {
		t.Fatalf("live sessions %v (a=%d b=%d c=%d)", live, a, b, c)
	}
}

func TestDefaultCapIs64(t *testing.T) {
	m := newTestManager(t, ManagerConfig{})
	for i := 0; i < DefaultMaxSessions+3; i++ {
		running(t, execOK(t, m, ExecRequest{Argv: []string{"sleep", "100"}, YieldTime: time.Millisecond}))
	}
	if n := len(m.Sessions()); n != DefaultMaxSessions {
		t.Fatalf("%d live sessions, want %d", n, DefaultMaxSessions)
	}
}

func TestReleaseKillsLeftoverBackgroundChild(t *testing.T) {
	m := newTestManager(t, ManagerConfig{})
	// The shell exits at once; its background child keeps the pipe open.
	res := execOK(t, m, ExecRequest{Argv: sh("sleep 100 & echo PID=$!"), YieldTime: 5 * time.Second})
	if code := exited(t, res); code != 0 {
		t.Fatalf("exit %d", code)
	}
	requireDead(t, pidsIn(t, res.Output, 1)[0])
}

func TestCloseKillsProcessGroupsAndDescendants(t *testing.T) {
	m := NewManager(ManagerConfig{})
	dir := t.TempDir()
	var leaders, others []int
	start := func(req ExecRequest, wantPIDs int) {
		req.Cwd = dir
		req.YieldTime = 500 * time.Millisecond
		res, err := m.Exec(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		id := running(t, res)
		out := res.Output
		if len(pidLine.FindAllString(out, -1)) < wantPIDs {
			out += pollPIDs(t, m, id, "", wantPIDs-len(pidLine.FindAllString(out, -1)))
		}
		pids := pidsIn(t, out, wantPIDs)
		leaders = append(leaders, pids[0])
		others = append(others, pids[1:]...)
	}
	// A pipe session whose child spawns a grandchild in the same group.
	start(ExecRequest{Argv: sh("echo PID=$$; sleep 1000 & echo PID=$!; wait")}, 2)
	// A grandchild that moved to a new session and process group (setsid):
	// only the descendant sweep finds it.
	start(ExecRequest{Argv: sh("echo PID=$$; setsid sleep 1000 & echo PID=$!; wait")}, 2)
	// An interactive shell on a PTY with a background job (job control puts
	// it in its own process group).
	start(ExecRequest{Argv: []string{"/bin/bash", "--norc", "--noprofile", "-i", "-c", "echo PID=$$; sleep 1000 & echo PID=$!; sleep 1000"}, TTY: true}, 2)
	for _, p := range append(slices.Clone(leaders), others...) {
		if !alive(p) {
			t.Fatalf("pid %d not running before Close", p)
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range leaders {
		requireReaped(t, p)
	}
	for _, p := range others {
		requireDead(t, p)
	}
	if _, err := m.Exec(context.Background(), ExecRequest{Argv: []string{"true"}, Cwd: dir}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Exec after Close: %v", err)
	}
	_ = m.Close() // idempotent
}

func TestExecCancelledKeepsSessionForClose(t *testing.T) {
	m := NewManager(ManagerConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	var res Result
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		res, err = m.Exec(ctx, ExecRequest{Argv: sh("echo PID=$$; exec sleep 100"), Cwd: t.TempDir(), YieldTime: 20 * time.Second})
	}()
	// Wait for the process to appear, then interrupt the call.
	var pid int
	for pid == 0 {
		for _, s := range m.Sessions() {
			pid = s.Pid
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v res %+v", err, res)
	}
	if len(m.Sessions()) != 1 || !alive(pid) {
		t.Fatal("an interrupted call leaves its session running")
	}
	_ = m.Close()
	requireReaped(t, pid)
}

func TestCommandHookAndEnv(t *testing.T) {
	var mu sync.Mutex
	var seen [][]string
	m := newTestManager(t, ManagerConfig{
		Command: func(argv []string) (*sandbox.Cmd, error) {
			mu.Lock()
			seen = append(seen, argv)
			mu.Unlock()
			// A wrapper in the style of a sandbox helper: it runs argv
			// through another program.
			return sandbox.Plain(exec.Command("/usr/bin/env", append([]string{"WRAPPED=yes"}, argv...)...)), nil
		},
		Env: func() []string { return []string{"PATH=" + os.Getenv("PATH"), "TERM=xterm", "KEEP=1"} },
	})
	res := execOK(t, m, ExecRequest{Argv: sh(`echo "$WRAPPED $KEEP $TERM $LANG"; pwd`), Cwd: "/tmp", YieldTime: 5 * time.Second})
	if res.Output != "yes 1 dumb C.UTF-8\n/tmp\n" {
		t.Fatalf("output %q", res.Output)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 || seen[0][0] != "/bin/bash" {
		t.Fatalf("hook saw %v", seen)
	}
	// A per-request command overrides the Manager's.
	res = execOK(t, m, ExecRequest{Argv: sh("echo $WRAPPED."), YieldTime: 5 * time.Second,
		Command: func(argv []string) (*sandbox.Cmd, error) {
			return sandbox.Plain(exec.Command(argv[0], argv[1:]...)), nil
		}})
	if res.Output != ".\n" {
		t.Fatalf("override output %q", res.Output)
	}
}

func TestSpawnErrors(t *testing.T) {
	m := newTestManager(t, ManagerConfig{})
	_, err := m.Exec(context.Background(), ExecRequest{Argv: []string{"/bin/true"}, Cwd: "/nonexistent/dir"})
	if err == nil || err.Error() != "Failed to create unified exec process: No such file or directory (os error 2)" {
		t.Fatalf("bad cwd: %v", err)
	}
	_, err = m.Exec(context.Background(), ExecRequest{Argv: []string{"/no/such/binary"}, Cwd: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "No such file or directory (os error 2)") {
		t.Fatalf("missing binary: %v", err)
	}
	_, err = m.Exec(context.Background(), ExecRequest{Cwd: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "missing command line") {
		t.Fatalf("empty argv: %v", err)
	}
	if len(m.Sessions()) != 0 {
		t.Fatal("failed spawns must not leave sessions")
	}
}

type recorder struct {
	mu      sync.Mutex
	started []SessionInfo
	output  strings.Builder
	ended   []SessionEnd
	done    chan struct{}
}

func (r *recorder) SessionStarted(info SessionInfo) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.started = append(r.started, info)
}

func (r *recorder) SessionOutput(_ SessionInfo, chunk []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.output.Write(chunk)
}

func (r *recorder) SessionEnded(_ SessionInfo, end SessionEnd) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ended = append(r.ended, end)
	close(r.done)
}

func TestObserverSeesLifecycle(t *testing.T) {
	rec := &recorder{done: make(chan struct{})}
	m := newTestManager(t, ManagerConfig{Observer: rec, ThreadID: "thr"})
	res := execOK(t, m, ExecRequest{Argv: sh("echo one; sleep 0.3; echo two; exit 5"), YieldTime: 100 * time.Millisecond, TurnID: "turn", CallID: "call"})
	id := running(t, res)
	<-rec.done
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.started) != 1 || rec.started[0].ID != id || rec.started[0].CallID != "call" || rec.started[0].ThreadID != "thr" || rec.started[0].Pid == 0 {
		t.Fatalf("started %+v", rec.started)
	}
	if rec.output.String() != "one\ntwo\n" {
		t.Fatalf("streamed %q", rec.output.String())
	}
	if len(rec.ended) != 1 || rec.ended[0].ExitCode != 5 || rec.ended[0].Transcript != "one\ntwo\n" {
		t.Fatalf("ended %+v", rec.ended)
	}
}

// pidOf returns the leader pid of a live session.
func (r Result) pidOf(m *Manager, id int) int {
	for _, s := range m.Sessions() {
		if s.ID == id {
			return s.Pid
		}
	}
	return 0
}

// BenchmarkExecTrue measures one exec_command round trip of /bin/true on
// pipes: spawn, collect until exit, reap and release.
func BenchmarkExecTrue(b *testing.B) {
	m := NewManager(ManagerConfig{})
	defer m.Close()
	dir := b.TempDir()
	for b.Loop() {
		res, err := m.Exec(context.Background(), ExecRequest{Argv: []string{"/bin/true"}, Cwd: dir, YieldTime: 10 * time.Second})
		if err != nil || res.ExitCode == nil {
			b.Fatalf("%v %+v", err, res)
		}
	}
}

// BenchmarkExecTrueTTY is BenchmarkExecTrue on a PTY.
func BenchmarkExecTrueTTY(b *testing.B) {
	m := NewManager(ManagerConfig{})
	defer m.Close()
	dir := b.TempDir()
	for b.Loop() {
		res, err := m.Exec(context.Background(), ExecRequest{Argv: []string{"/bin/true"}, Cwd: dir, TTY: true, YieldTime: 10 * time.Second})
		if err != nil || res.ExitCode == nil {
			b.Fatalf("%v %+v", err, res)
		}
	}
}

// TestEscapedHoldersAreKilled covers processes that leave the session's
// process tree (setsid -f double-forks into a new session, reparented to
// init) while keeping its terminal or output pipe open: they are found by
// the open file and killed, and Close does not hang on the open output.
func TestEscapedHoldersAreKilled(t *testing.T) {
	m := NewManager(ManagerConfig{})
	dir := t.TempDir()
	escape := "setsid -f sh -c 'echo PID=$$; exec sleep 1000'; "

	// A pipe session whose leader exits at once: the escapee is killed when
	// the exit is reported.
	res, err := m.Exec(context.Background(), ExecRequest{Argv: sh(escape + "sleep 0.2"), Cwd: dir, YieldTime: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	exited(t, res)
	requireDead(t, pidsIn(t, res.Output, 1)[0])

	// A tty session still running at Close.
	res, err = m.Exec(context.Background(), ExecRequest{Argv: sh(escape + "exec sleep 1000"), Cwd: dir, TTY: true, YieldTime: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	id := running(t, res)
	out := res.Output
	if len(pidLine.FindAllString(out, -1)) == 0 {
		out += pollPIDs(t, m, id, "", 1)
	}
	escaped := pidsIn(t, out, 1)[0]
	if !alive(escaped) || parentOf(escaped) == os.Getpid() {
		t.Fatalf("pid %d should run outside the tree", escaped)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	requireDead(t, escaped)
}
