package server_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
	"github.com/appserver/appserver/internal/clientfs"
	"github.com/appserver/appserver/internal/fsguard"
	"github.com/appserver/appserver/internal/server"
)

func filesServer(t *testing.T, masked ...string) (*testServer, *clientfs.Service) {
	t.Helper()
	g, err := fsguard.New(fsguard.Config{Masked: masked})
	require.NoError(t, err)
	svc := clientfs.New(clientfs.Config{Guard: g, WatchDelay: 20 * time.Millisecond})
	t.Cleanup(svc.Stop)
	return newTestServer(t, server.Config{Files: svc}), svc
}

// A connection's watches and search sessions end with it; the answer to
// fuzzyFileSearch/sessionStart comes before the session's notifications.
func TestFilesEndWithTheirConnection(t *testing.T) {
	ts, svc := filesServer(t)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), nil, 0o644))
	c := apptest.MustDial(t, ts.url, nil)
	c.Initialize(map[string]any{"experimentalApi": true})
	c.Call("fs/watch", map[string]any{"watchId": "w", "path": dir})
	c.Send(map[string]any{"id": 2, "method": "fuzzyFileSearch/sessionStart", "params": map[string]any{"sessionId": "s", "roots": []string{dir}}})
	var methods []string
	for len(methods) < 3 {
		f := c.Next()
		if f.Method == "" {
			methods = append(methods, "response")
			continue
		}
		methods = append(methods, f.Method)
	}
	require.Equal(t, []string{"response", "fuzzyFileSearch/sessionUpdated", "fuzzyFileSearch/sessionCompleted"}, methods)
	w, s := svc.Open()
	require.Equal(t, [2]int{1, 1}, [2]int{w, s})

	require.NoError(t, c.WS.Close(websocket.StatusNormalClosure, ""))
	require.Eventually(t, func() bool {
		w, s := svc.Open()
		return w == 0 && s == 0
	}, 5*time.Second, 5*time.Millisecond)
}

// The session methods need the experimental API, the others do not; a
// relative path is refused when the params are read, as the reference
// does; the daemon's own files are refused to the operator too.
func TestFilesGatingAndRefusals(t *testing.T) {
	data := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(data, "appserver.db"), []byte("x"), 0o600))
	ts, _ := filesServer(t, data)
	c := apptest.MustDial(t, ts.url, nil)
	c.Initialize(nil)
	code, msg := c.CallError("fuzzyFileSearch/sessionStart", map[string]any{"sessionId": "s", "roots": []string{"/"}})
	require.Equal(t, -32600, code)
	require.Equal(t, "fuzzyFileSearch/sessionStart requires experimentalApi capability", msg)
	c.Call("fuzzyFileSearch", map[string]any{"query": "", "roots": []string{"/"}})
	code, msg = c.CallError("fs/readFile", map[string]any{"path": "etc/hostname"})
	require.Equal(t, -32600, code)
	require.Equal(t, "Invalid request: AbsolutePathBuf deserialized without a base path", msg)
	code, msg = c.CallError("fs/readFile", map[string]any{"path": filepath.Join(data, "appserver.db")})
	require.Equal(t, -32602, code)
	require.Contains(t, msg, "is a protected path of the daemon")
	code, msg = c.CallError("fs/readFile", map[string]any{"path": filepath.Join(data, "missing")})
	require.Equal(t, -32602, code, msg)
	code, msg = c.CallError("fs/readFile", map[string]any{"path": "/nonexistent/x"})
	require.Equal(t, -32603, code)
	require.Equal(t, "No such file or directory (os error 2)", msg)
}
