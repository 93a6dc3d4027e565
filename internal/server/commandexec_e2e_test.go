package server_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
)

// xrpc drives requests that overlap (a running command/exec and its
// follow-up calls) over a client: command/exec/outputDelta payloads are
// decoded per processId.
type xrpc struct {
	*apptest.Client
	output map[string]string
}

func newXRPC(r *apptest.Client) *xrpc {
	return &xrpc{Client: r, output: map[string]string{}}
}

func (x *xrpc) send(method string, params any) string { return x.Request(method, params) }

func (x *xrpc) await(id string) apptest.Frame { return x.ResponseTo(id) }

func (x *xrpc) ok(method string, params any) {
	x.T.Helper()
	f := x.await(x.send(method, params))
	require.Nil(x.T, f.Error, "%s: %+v", method, f.Error)
}

// waitOutput reads output deltas, in order, until processId's output
// contains s.
func (x *xrpc) waitOutput(processID, s string) {
	x.T.Helper()
	for !strings.Contains(x.output[processID], s) {
		f := x.Until("command/exec/outputDelta")
		var p struct {
			ProcessID   string `json:"processId"`
			Stream      string `json:"stream"`
			DeltaBase64 string `json:"deltaBase64"`
		}
		require.NoError(x.T, json.Unmarshal(f.Params, &p))
		require.Equal(x.T, "stdout", p.Stream)
		b, err := base64.StdEncoding.DecodeString(p.DeltaBase64)
		require.NoError(x.T, err)
		x.output[p.ProcessID] += string(b)
	}
}

type execResult struct {
	ExitCode int    `json:"exitCode"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func TestCommandExecTTYWriteResizeTerminate(t *testing.T) {
	_, _, r := apptest.StartWithFake(t, `{"steps":[]}`)
	x := newXRPC(r)
	execID := x.send("command/exec", map[string]any{
		"command": []string{"sh", "-c", "echo ready; exec cat"}, "processId": "tty1", "tty": true,
		"size": map[string]any{"rows": 30, "cols": 100}, "disableTimeout": true,
	})
	x.waitOutput("tty1", "ready")
	x.ok("command/exec/write", map[string]any{"processId": "tty1", "deltaBase64": b64("hi\n")})
	x.waitOutput("tty1", "hi")
	x.ok("command/exec/resize", map[string]any{"processId": "tty1", "size": map[string]any{"rows": 40, "cols": 120}})

	// A second live process with the same id on this connection is refused.
	f := x.await(x.send("command/exec", map[string]any{"command": []string{"cat"}, "processId": "tty1", "tty": true}))
	require.NotNil(t, f.Error)
	require.Equal(t, -32600, f.Error.Code)
	require.Contains(t, f.Error.Message, "tty1")

	x.ok("command/exec/terminate", map[string]any{"processId": "tty1"})
	f = x.await(execID)
	require.Nil(t, f.Error, "%+v", f.Error)
	var res execResult
	require.NoError(t, json.Unmarshal(f.Result, &res))
	require.Equal(t, 128+int(syscall.SIGKILL), res.ExitCode)
	require.Empty(t, res.Stdout)

	// The id is free again once the process ended; now it is unknown.
	f = x.await(x.send("command/exec/write", map[string]any{"processId": "tty1", "deltaBase64": b64("x")}))
	require.NotNil(t, f.Error)
	require.Equal(t, -32600, f.Error.Code)
	require.Contains(t, f.Error.Message, "tty1")
}

func TestCommandExecStreamStdin(t *testing.T) {
	_, _, r := apptest.StartWithFake(t, `{"steps":[]}`)
	x := newXRPC(r)
	execID := x.send("command/exec", map[string]any{
		"command": []string{"cat"}, "processId": "in1", "streamStdin": true,
	})
	// Sent at once, without waiting for any output: requests naming the
	// same process id are served in arrival order (docs/protocol.md §2.5), so
	// the write waits until command/exec has registered the process.
	x.ok("command/exec/write", map[string]any{"processId": "in1", "deltaBase64": b64("hello\n")})
	x.ok("command/exec/write", map[string]any{"processId": "in1", "deltaBase64": b64("world\n"), "closeStdin": true})
	f := x.await(execID)
	require.Nil(t, f.Error, "%+v", f.Error)
	var res execResult
	require.NoError(t, json.Unmarshal(f.Result, &res))
	require.Equal(t, 0, res.ExitCode)
	require.Equal(t, "hello\nworld\n", res.Stdout)
	require.Empty(t, x.output["in1"], "stdout was not streamed")
}

func TestCommandExecFollowUpErrors(t *testing.T) {
	_, _, r := apptest.StartWithFake(t, `{"steps":[]}`)
	for _, tc := range []struct {
		method string
		params map[string]any
		code   int
		msg    string
	}{
		{"command/exec/write", map[string]any{"processId": "nope", "deltaBase64": b64("x")}, -32600, "nope"},
		{"command/exec/resize", map[string]any{"processId": "nope", "size": map[string]any{"rows": 1, "cols": 1}}, -32600, "nope"},
		{"command/exec/terminate", map[string]any{"processId": "nope"}, -32600, "nope"},
		{"command/exec", map[string]any{"command": []string{"cat"}, "tty": true}, -32600, "command/exec tty or streaming requires a client-supplied processId"},
		{"command/exec", map[string]any{"command": []string{"cat"}, "streamStdin": true}, -32600, "command/exec tty or streaming requires a client-supplied processId"},
		{"command/exec", map[string]any{"command": []string{"true"}, "size": map[string]any{"rows": 1, "cols": 1}}, -32602, "tty"},
	} {
		f := r.CallRaw(tc.method, tc.params)
		require.NotNil(t, f.Error, "%s %v", tc.method, tc.params)
		require.Equal(t, tc.code, f.Error.Code, "%s %v", tc.method, tc.params)
		require.Contains(t, f.Error.Message, tc.msg)
	}
}

func TestCommandExecKilledOnConnectionClose(t *testing.T) {
	_, d, r := apptest.StartWithFake(t, `{"steps":[]}`)
	_ = r
	c := newXRPC(d.RPC(t))
	c.send("command/exec", map[string]any{
		"command": []string{"sh", "-c", "echo $$; exec sleep 60"}, "processId": "bg",
		"streamStdoutStderr": true, "disableTimeout": true, "sandboxPolicy": map[string]any{"type": "dangerFullAccess"},
	})
	c.waitOutput("bg", "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(c.output["bg"]))
	require.NoError(t, err, c.output["bg"])
	require.NoError(t, syscall.Kill(pid, 0))
	require.NoError(t, c.WS.Close(websocket.StatusNormalClosure, ""))
	require.Eventually(t, func() bool {
		return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
	}, 10*time.Second, 20*time.Millisecond, "the process is gone after the connection closed")
}
