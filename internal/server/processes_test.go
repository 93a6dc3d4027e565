package server_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
	"github.com/appserver/appserver/internal/server"
)

func procServer(t *testing.T, cfg server.ProcessConfig) *testServer {
	t.Helper()
	return newTestServer(t, server.Config{Processes: &cfg, Cwd: t.TempDir()})
}

func procConn(t *testing.T, ts *testServer) *apptest.Client {
	t.Helper()
	c := apptest.MustDial(t, ts.url, nil)
	c.Initialize(map[string]any{"experimentalApi": true})
	return c
}

// spawnSleep starts `sleep 60` under handle and returns the response.
func spawnSleep(c *apptest.Client, handle, cwd string) apptest.Frame {
	return c.CallRaw("process/spawn", map[string]any{"command": []string{"sleep", "60"}, "processHandle": handle, "cwd": cwd})
}

// recvUntil reads frames until one has the method, returning the frames
// read before it.
func recvUntil(c *apptest.Client, method string) (before []apptest.Frame, m apptest.Frame) {
	c.T.Helper()
	m = c.Until(method)
	before, c.Seen = c.Seen, nil
	return before, m
}

// The live processes of a connection and of the server are bounded; an
// ended process frees its place.
func TestProcessLimits(t *testing.T) {
	ts := procServer(t, server.ProcessConfig{MaxPerConnection: 2, MaxTotal: 3})
	cwd := t.TempDir()
	a, b := procConn(t, ts), procConn(t, ts)
	require.Nil(t, spawnSleep(a, "a1", cwd).Error)
	require.Nil(t, spawnSleep(a, "a2", cwd).Error)
	code, msg := errorOf(t, spawnSleep(a, "a3", cwd))
	require.Equal(t, -32600, code)
	require.Equal(t, "process/spawn: this connection already runs 2 processes, the most it may; kill one first", msg)
	require.Nil(t, spawnSleep(b, "b1", cwd).Error)
	code, msg = errorOf(t, spawnSleep(b, "b2", cwd))
	require.Equal(t, -32600, code)
	require.Equal(t, "process/spawn: the server already runs 3 processes for its clients, the most it may", msg)

	a.Call("process/kill", map[string]any{"processHandle": "a1"})
	_, exited := recvUntil(a, "process/exited")
	require.Contains(t, string(exited.Params), `"exitCode":137`)
	require.Nil(t, spawnSleep(b, "b2", cwd).Error, "a1's place is free")
}

// A process's notifications go to the connection that spawned it, and
// only after the spawn's response; its handle means nothing to another
// connection.
func TestProcessBelongsToItsConnection(t *testing.T) {
	ts := procServer(t, server.ProcessConfig{})
	cwd := t.TempDir()
	a, b := procConn(t, ts), procConn(t, ts)
	a.Send(map[string]any{"id": 1, "method": "process/spawn", "params": map[string]any{
		"command": []string{"sh", "-c", "echo hi; exec sleep 60"}, "processHandle": "p", "cwd": cwd, "streamStdoutStderr": true}})
	before, delta := recvUntil(a, "process/outputDelta")
	require.Len(t, before, 1, "the response, then the output")
	require.NotNil(t, before[0].Result)
	require.Contains(t, string(delta.Params), `"processHandle":"p"`)

	code, msg := b.CallError("process/kill", map[string]any{"processHandle": "p"})
	require.Equal(t, -32600, code)
	require.Equal(t, `no active process for process handle "p"`, msg)
	a.Call("process/kill", map[string]any{"processHandle": "p"})
	recvUntil(a, "process/exited")

	// b heard nothing of p: what it reads next is its own response.
	resp := b.CallRaw("process/kill", map[string]any{"processHandle": "p"})
	require.NotNil(t, resp.Error)
	require.Empty(t, b.Seen)
}

// Closing a connection kills its processes and their groups; by the time
// the server has closed the connection, they are gone.
func TestProcessKilledWithItsConnection(t *testing.T) {
	ts := procServer(t, server.ProcessConfig{})
	cwd := t.TempDir()
	c := procConn(t, ts)
	c.Send(map[string]any{"id": 1, "method": "process/spawn", "params": map[string]any{
		"command": []string{"sh", "-c", "sleep 60 & echo $$ $!; wait"}, "processHandle": "p", "cwd": cwd, "streamStdoutStderr": true}})
	_, delta := recvUntil(c, "process/outputDelta")
	var p struct {
		DeltaBase64 string `json:"deltaBase64"`
	}
	require.NoError(t, json.Unmarshal(delta.Params, &p))
	out, err := base64.StdEncoding.DecodeString(p.DeltaBase64)
	require.NoError(t, err)
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		pid, err := strconv.Atoi(f)
		require.NoError(t, err, string(out))
		require.True(t, alive(pid))
		pids = append(pids, pid)
	}
	require.Len(t, pids, 2)

	require.NoError(t, c.WS.Close(websocket.StatusNormalClosure, ""))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, ts.srv.CloseConnections(ctx))
	// The group gets SIGKILL when the connection ends; a process the
	// daemon does not wait for (the background sleep) dies a moment later.
	for _, pid := range pids {
		require.Eventually(t, func() bool { return !alive(pid) }, 10*time.Second, 10*time.Millisecond,
			"process %d outlived its connection", pid)
	}
}

// alive reports whether pid runs: it exists and is not a zombie (which
// its new parent may not have reaped yet).
func alive(pid int) bool {
	if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses.
	rest := string(b[strings.LastIndexByte(string(b), ')')+1:])
	return !strings.HasPrefix(strings.TrimSpace(rest), "Z")
}
