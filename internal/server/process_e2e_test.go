package server_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
)

// runProcess spawns `sh -c script` under handle and returns its
// process/exited params.
func runProcess(c *procClient, handle, cwd, script string, extra map[string]any) map[string]any {
	c.T.Helper()
	params := map[string]any{"command": []string{"sh", "-c", script}, "processHandle": handle, "cwd": cwd}
	for k, v := range extra {
		params[k] = v
	}
	c.ok("process/spawn", params)
	return c.waitExit(handle)
}

// A principal's processes run inside its workspace roots under its
// ceiling's sandbox (workspace-write here): a cwd outside the roots is
// refused with -32602 naming the limit, a write outside the workspace
// fails, the daemon's data directory is hidden, a terminal still works.
// The operator's run as the reference runs them, unbounded.
func TestProcessPrincipalBounds(t *testing.T) {
	p := apptest.StartPrincipals(t, `{"steps":[]}`)
	ci := dialProcs(t, p.D, apptest.CIToken, true)
	for _, cwd := range []string{"/", p.DataDir, p.BobRoot, filepath.Join(p.CIRoot, "..")} {
		f := ci.call("process/spawn", map[string]any{"command": []string{"true"}, "processHandle": "x", "cwd": cwd})
		require.NotNil(t, f.Error, cwd)
		require.Equal(t, -32602, f.Error.Code, cwd)
		require.Contains(t, f.Error.Message, "is outside this principal's workspace roots", cwd)
	}

	// Outside the workspace and outside /tmp, which workspace-write
	// leaves writable.
	outside, err := os.MkdirTemp("/var/tmp", "appserver-process-test-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(outside) })
	escape := filepath.Join(outside, "escape.txt")
	var entries []os.DirEntry
	e := runProcess(ci, "write", p.CIRoot, "echo in > inside.txt && echo out > "+escape, nil)
	require.NotEqual(t, float64(0), e["exitCode"], "%v", e)
	require.FileExists(t, filepath.Join(p.CIRoot, "inside.txt"))
	require.NoFileExists(t, escape)

	entries, err = os.ReadDir(p.DataDir)
	require.NoError(t, err)
	require.NotEmpty(t, entries)
	e = runProcess(ci, "peek", p.CIRoot, "ls -A "+p.DataDir+"; cat "+filepath.Join(p.DataDir, entries[0].Name()), nil)
	require.NotContains(t, e["stdout"], entries[0].Name(), "the data directory is hidden: %v", e)

	ci.ok("process/spawn", map[string]any{"command": []string{"stty", "size"}, "processHandle": "tty", "cwd": p.CIRoot,
		"tty": true, "size": map[string]any{"rows": 7, "cols": 9}})
	e = ci.waitExit("tty")
	require.Equal(t, float64(0), e["exitCode"], "%v", e)
	require.Equal(t, "7 9\r\n", ci.stdout("tty"))

	op := dialProcs(t, p.D, apptest.OperatorToken, true)
	e = runProcess(op, "write", "/", "echo out > "+escape, nil)
	require.Equal(t, float64(0), e["exitCode"], "%v", e)
	require.FileExists(t, escape)
}
