package clientfs_test

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/appserver/appserver/internal/apptest"
	"github.com/stretchr/testify/require"
)

// Over the websocket a principal's fs/* methods, watches and searches
// stay in its workspace roots (-32602 naming the path and the roots
// outside them, through a symlink too), and nobody, the operator
// included, reaches the daemon's own files; the operator reaches the
// rest of the disk, as with the reference.
func TestFilesPrincipals(t *testing.T) {
	p := apptest.StartPrincipals(t, `{"steps":[]}`)
	secret := filepath.Join(p.BobRoot, "secret.txt")
	require.NoError(t, os.WriteFile(secret, []byte("bob's"), 0o644))
	mine := filepath.Join(p.CIRoot, "mine.txt")
	require.NoError(t, os.WriteFile(mine, []byte("ci's"), 0o644))
	require.NoError(t, os.Symlink(p.BobRoot, filepath.Join(p.CIRoot, "bob")))
	db := filepath.Join(p.DataDir, "appserver.db")

	ci := apptest.RPC(t, p.D.Addr, apptest.CIToken, nil)
	res := ci.Call("fs/readFile", map[string]any{"path": mine})
	require.JSONEq(t, `{"dataBase64":"`+base64.StdEncoding.EncodeToString([]byte("ci's"))+`"}`, string(res))
	ci.Call("fs/writeFile", map[string]any{"path": filepath.Join(p.CIRoot, "new.txt"), "dataBase64": "aGk="})
	for _, c := range []struct {
		method string
		params map[string]any
	}{
		{"fs/readFile", map[string]any{"path": secret}},
		{"fs/readFile", map[string]any{"path": filepath.Join(p.CIRoot, "bob", "secret.txt")}},
		{"fs/writeFile", map[string]any{"path": filepath.Join(p.BobRoot, "x"), "dataBase64": "aGk="}},
		{"fs/readDirectory", map[string]any{"path": p.BobRoot}},
		{"fs/getMetadata", map[string]any{"path": "/etc/hostname"}},
		{"fs/remove", map[string]any{"path": secret}},
		{"fs/copy", map[string]any{"sourcePath": secret, "destinationPath": filepath.Join(p.CIRoot, "stolen")}},
		{"fs/createDirectory", map[string]any{"path": filepath.Join(p.BobRoot, "d")}},
		{"fs/watch", map[string]any{"watchId": "w", "path": p.BobRoot}},
		{"fuzzyFileSearch", map[string]any{"query": "secret", "roots": []string{p.BobRoot}}},
		{"fuzzyFileSearch/sessionStart", map[string]any{"sessionId": "s", "roots": []string{p.BobRoot}}},
	} {
		f := ci.CallRaw(c.method, c.params)
		require.NotNil(t, f.Error, "%s %v", c.method, c.params)
		require.Equal(t, -32602, f.Error.Code, "%s %v", c.method, c.params)
		require.Contains(t, f.Error.Message, "is outside the workspace roots ("+p.CIRoot+")", c.method)
	}
	f := ci.CallRaw("fs/readFile", map[string]any{"path": db})
	require.Equal(t, -32602, f.Error.Code)
	b, err := os.ReadFile(secret)
	require.NoError(t, err)
	require.Equal(t, "bob's", string(b))

	op := apptest.RPC(t, p.D.Addr, apptest.OperatorToken, nil)
	op.Call("fs/readFile", map[string]any{"path": secret})
	op.Call("fs/getMetadata", map[string]any{"path": "/etc/hostname"})
	for _, c := range []struct {
		method string
		params map[string]any
	}{
		{"fs/readFile", map[string]any{"path": db}},
		{"fs/readDirectory", map[string]any{"path": p.DataDir}},
		{"fs/remove", map[string]any{"path": p.DataDir}},
		{"fs/readFile", map[string]any{"path": "/proc/self/environ"}},
		{"fs/watch", map[string]any{"watchId": "w", "path": p.DataDir}},
		{"fuzzyFileSearch", map[string]any{"query": "db", "roots": []string{p.DataDir}}},
	} {
		f := op.CallRaw(c.method, c.params)
		require.NotNil(t, f.Error, "%s %v", c.method, c.params)
		require.Equal(t, -32602, f.Error.Code, "%s %v", c.method, c.params)
		require.Contains(t, f.Error.Message, "is a protected path of the daemon", c.method)
	}
	_, err = os.Stat(db)
	require.NoError(t, err)
}

// The file methods are the same on the other transports, which are the
// operator's (local trust): stdio, where fs/changed and the session
// notifications come on stdout too, and the control socket; the daemon's
// own files stay refused there as well.
func TestFilesOverStdioAndSocket(t *testing.T) {
	dataDir, ws := t.TempDir(), apptest.RealTempDir(t)
	p, c := apptest.StartStdioProc(t, "serve", "--listen", "stdio://", "--data-dir", dataDir, "--log-level", "warn")
	c.Call("initialize", map[string]any{"clientInfo": map[string]any{"name": "editor", "version": "1"}, "capabilities": map[string]any{"experimentalApi": true}})
	c.Call("fs/writeFile", map[string]any{"path": filepath.Join(ws, "main.go"), "dataBase64": "cGFja2FnZSBtYWluCg=="})
	require.JSONEq(t, `{"dataBase64":"cGFja2FnZSBtYWluCg=="}`, string(c.Call("fs/readFile", map[string]any{"path": filepath.Join(ws, "main.go")})))
	c.Call("fs/watch", map[string]any{"watchId": "w", "path": ws})
	require.NoError(t, os.WriteFile(filepath.Join(ws, "new.go"), nil, 0o644))
	require.JSONEq(t, `{"watchId":"w","changedPaths":["`+filepath.Join(ws, "new.go")+`"]}`, string(c.Until("fs/changed").Params))
	c.Call("fuzzyFileSearch/sessionStart", map[string]any{"sessionId": "s", "roots": []string{ws}})
	require.JSONEq(t, `{"sessionId":"s","query":"","files":[]}`, string(c.Until("fuzzyFileSearch/sessionUpdated").Params))
	c.Until("fuzzyFileSearch/sessionCompleted")
	c.Call("fuzzyFileSearch/sessionUpdate", map[string]any{"sessionId": "s", "query": "main"})
	var upd struct {
		Query string `json:"query"`
		Files []struct {
			Path string `json:"path"`
		} `json:"files"`
	}
	require.NoError(t, json.Unmarshal(c.Until("fuzzyFileSearch/sessionUpdated").Params, &upd))
	require.Equal(t, "main", upd.Query)
	require.Len(t, upd.Files, 1)
	require.Equal(t, "main.go", upd.Files[0].Path)
	f := c.CallRaw("fs/readDirectory", map[string]any{"path": dataDir})
	require.NotNil(t, f.Error)
	require.Equal(t, -32602, f.Error.Code)
	require.Contains(t, f.Error.Message, "is a protected path of the daemon")
	p.CloseStdin(t)
	require.NoError(t, p.Wait(t, 15*time.Second), "stderr:\n%s", p.Stderr)

	sock := filepath.Join(apptest.SocketDir(t), "appserver.sock")
	sockData := t.TempDir()
	apptest.Start(t, "--listen", "unix://"+sock, "--data-dir", sockData)
	r := apptest.MustDial(t, "unix://"+sock, nil)
	r.Initialize(nil)
	r.Call("fs/readFile", map[string]any{"path": filepath.Join(ws, "main.go")})
	f = r.CallRaw("fs/getMetadata", map[string]any{"path": filepath.Join(sockData, "appserver.db")})
	require.NotNil(t, f.Error)
	require.Equal(t, -32602, f.Error.Code)
}
