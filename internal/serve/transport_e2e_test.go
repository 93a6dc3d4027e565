package serve_test

import (
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
)

// The transports other than the network websocket: stdio:// (the daemon
// as a subprocess, a JSON message per line on its stdin and stdout) and
// the unix control socket.

// stdioTurn initializes c as an editor does, starts a thread in cwd and a
// turn of text on it, and returns the thread's id.
func stdioTurn(t *testing.T, c *apptest.Client, cwd, text string) string {
	t.Helper()
	c.Call("initialize", map[string]any{"clientInfo": map[string]any{"name": "editor", "version": "1"}})
	c.Notify("initialized", nil)
	threadID := apptest.StartThread(t, c, map[string]any{"cwd": cwd})
	c.Call("turn/start", apptest.Input(threadID, text))
	return threadID
}

// A turn over stdio: initialize, thread/start, turn/start, the turn's
// notifications and turn/completed, every stdout line a message (the log
// goes to stderr); closing stdin ends the daemon, with status 0.
func TestStdioTurn(t *testing.T) {
	fake := apptest.StartFake(t, `{"steps":[{"text":"Hello over stdio.","chunks":2}]}`)
	dataDir := t.TempDir()
	p, c := apptest.StartStdioProc(t, append([]string{"serve", "--listen", "stdio://", "--data-dir", dataDir, "--log-level", "info"}, apptest.FakeArgs(fake, "responses")...)...)
	threadID := stdioTurn(t, c, t.TempDir(), "Say hello")
	require.Equal(t, "completed", apptest.TurnCompleted(t, c).Turn.Status)
	var deltas []string
	for _, f := range c.Seen {
		if f.Method == "item/agentMessage/delta" {
			var d struct {
				Delta string `json:"delta"`
			}
			require.NoError(t, json.Unmarshal(f.Params, &d))
			deltas = append(deltas, d.Delta)
		}
	}
	require.Equal(t, "Hello over stdio.", strings.Join(deltas, ""))

	p.CloseStdin(t)
	require.NoError(t, p.Wait(t, 15*time.Second), "stderr:\n%s", p.Stderr)
	require.Contains(t, p.Stderr.String(), "appserver serving on stdio", "the log goes to stderr")
	require.Contains(t, p.Stderr.String(), "stdin closed")

	// The turn is stored like any other.
	d := apptest.Start(t, append([]string{"--data-dir", dataDir}, apptest.FakeArgs(fake, "responses")...)...)
	statuses, texts := apptest.ThreadTexts(t, d.RPC(t), threadID)
	require.Equal(t, []string{"completed"}, statuses)
	require.Equal(t, []string{"user:Say hello", "agent:Hello over stdio."}, texts)
}

// `appserver app-server` serves stdio, as `codex app-server` does without
// --listen.
func TestAppServerDefaultsToStdio(t *testing.T) {
	fake := apptest.StartFake(t, `{"steps":[{"text":"Hi."}]}`)
	p, c := apptest.StartStdioProc(t, append([]string{"app-server", "--data-dir", t.TempDir(), "--log-level", "warn"}, apptest.FakeArgs(fake, "responses")...)...)
	stdioTurn(t, c, t.TempDir(), "hi")
	require.Equal(t, "completed", apptest.TurnCompleted(t, c).Turn.Status)
	p.CloseStdin(t)
	require.NoError(t, p.Wait(t, 15*time.Second))
}

// Closing stdin while a turn runs ends the daemon at once, as the
// reference does, without the grace period: the turn is interrupted and
// stored so.
func TestStdioEOFInterruptsRunningTurn(t *testing.T) {
	fake := apptest.StartFake(t, `{"steps":[{"text":"Too late.","delay_ms":60000}]}`)
	dataDir := t.TempDir()
	p, c := apptest.StartStdioProc(t, append([]string{"serve", "--listen", "stdio://", "--data-dir", dataDir, "--log-level", "warn",
		"--shutdown-grace-period", "60s"}, apptest.FakeArgs(fake, "responses")...)...)
	threadID := stdioTurn(t, c, t.TempDir(), "slow")
	c.Until("turn/started")
	start := time.Now()
	p.CloseStdin(t)
	require.NoError(t, p.Wait(t, 20*time.Second), "stderr:\n%s", p.Stderr)
	require.Less(t, time.Since(start), 30*time.Second, "the daemon waited for the grace period")

	d := apptest.Start(t, append([]string{"--data-dir", dataDir}, apptest.FakeArgs(fake, "responses")...)...)
	statuses, _ := apptest.ThreadTexts(t, d.RPC(t), threadID)
	require.Equal(t, []string{"interrupted"}, statuses)
}

// SIGTERM ends a stdio daemon whose client keeps stdin open: the client
// hears the running turn end (interrupted), then stdout closes and the
// daemon exits with status 0.
func TestStdioSIGTERMWithStdinOpen(t *testing.T) {
	fake := apptest.StartFake(t, `{"steps":[{"text":"Too late.","delay_ms":60000}]}`)
	p, c := apptest.StartStdioProc(t, append([]string{"serve", "--listen", "stdio://", "--data-dir", t.TempDir(), "--log-level", "warn",
		"--shutdown-grace-period", "60s"}, apptest.FakeArgs(fake, "responses")...)...)
	stdioTurn(t, c, t.TempDir(), "slow")
	c.Until("turn/started")
	p.Signal(t, syscall.SIGTERM)
	require.Equal(t, "interrupted", apptest.TurnCompleted(t, c).Turn.Status)
	require.ErrorIs(t, c.Closed(), io.EOF, "stdout closes")
	require.NoError(t, p.Wait(t, 20*time.Second), "stderr:\n%s", p.Stderr)
}

// unixRPC connects a JSON-RPC client to the control socket at path and
// initializes it.
func unixRPC(t *testing.T, path string) *apptest.Client {
	t.Helper()
	c := apptest.MustDial(t, "unix://"+path, nil)
	c.Initialize(nil)
	return c
}

// A turn over the control socket (unix://PATH): the socket is 0600, the
// JSON-RPC websocket needs no token there even when the network listener
// would ask for one, and the socket is gone once the daemon stopped.
func TestUnixSocketTurn(t *testing.T) {
	fake := apptest.StartFake(t, `{"steps":[{"text":"Hello over the socket."}]}`)
	path := filepath.Join(apptest.SocketDir(t), "ctl", "appserver.sock")
	d := apptest.Start(t, append([]string{"--listen", "unix://" + path, "--data-dir", t.TempDir(),
		"--ws-auth", "capability-token", "--ws-token-sha256", strings.Repeat("0", 64)}, apptest.FakeArgs(fake, "responses")...)...)
	require.Equal(t, "unix://"+path, d.Addr)
	fi, err := os.Lstat(path)
	require.NoError(t, err)
	require.Equal(t, fs.ModeSocket, fi.Mode().Type())
	require.Equal(t, fs.FileMode(0o600), fi.Mode().Perm())

	r := unixRPC(t, path)
	threadID := apptest.StartThread(t, r, nil)
	r.Call("turn/start", map[string]any{"threadId": threadID, "input": []map[string]any{{"type": "text", "text": "hi"}}})
	var done apptest.TurnResult
	require.NoError(t, json.Unmarshal(r.Until("turn/completed").Params, &done))
	require.Equal(t, "completed", done.Turn.Status)

	d.Stop(t)
	_, err = os.Lstat(path)
	require.ErrorIs(t, err, fs.ErrNotExist)
}

// A bare unix:// puts the socket in data_dir, as the reference puts it in
// its home; a socket left by a killed daemon is replaced by the next one.
func TestUnixSocketDefaultPathAndStaleSocket(t *testing.T) {
	fake := apptest.StartFake(t, `{"steps":[]}`)
	dataDir := apptest.SocketDir(t)
	path := filepath.Join(dataDir, "app-server-control", "app-server-control.sock")
	args := append([]string{"--listen", "unix://", "--data-dir", dataDir}, apptest.FakeArgs(fake, "responses")...)
	p := apptest.StartProc(t, args...)
	require.Equal(t, "unix://"+path, p.Addr)
	di, err := os.Stat(filepath.Dir(path))
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o700), di.Mode().Perm())
	unixRPC(t, path)
	p.Kill9(t)
	_, err = os.Lstat(path)
	require.NoError(t, err, "a killed daemon leaves its socket")

	p = apptest.StartProc(t, args...)
	require.Equal(t, "unix://"+path, p.Addr)
	r := unixRPC(t, path)
	r.Call("thread/list", map[string]any{})
	// A second daemon on the same socket is refused while the first runs.
	cmd := exec.Command(apptest.Binary(t), append([]string{"serve", "--log-level", "warn"}, args...)...)
	out, err := cmd.CombinedOutput()
	var exitErr *exec.ExitError
	require.True(t, errors.As(err, &exitErr), "%v\n%s", err, out)
	require.Contains(t, string(out), "in use by another process")
}

// A sandboxed command cannot reach the control socket, which trusts its
// peer without a token: the socket is among the paths the sandbox hides
// (a command sees an empty character device there), so a command the
// model runs never drives the daemon as its user would.
func TestControlSocketHiddenFromSandboxedCommands(t *testing.T) {
	ws := apptest.Workspace(t)
	path := filepath.Join(apptest.SocketDir(t), "ctl.sock")
	fake := apptest.StartFake(t, apptest.CallScript(`[`+apptest.ShellCall("call_s", "stat -c %F "+path)+`]`, "call_s", "done"))
	apptest.Start(t, append([]string{"--listen", "unix://" + path, "--data-dir", t.TempDir()}, apptest.FakeArgs(fake, "responses")...)...)
	r := unixRPC(t, path)
	threadID := apptest.StartThread(t, r, map[string]any{"cwd": ws, "approvalPolicy": "never", "sandbox": "workspace-write"})
	apptest.Turn(t, r, apptest.Input(threadID, "go"), nil)
	out := apptest.ModelOutput(t, fake, 1, "call_s")
	require.Contains(t, out, "character special file")
	require.NotContains(t, out, "socket")
}
