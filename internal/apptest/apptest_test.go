package apptest_test

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apptest"
)

func TestMain(m *testing.M) { apptest.Main(m) }

const helloScript = `{"steps":[{"text":"Hello there!","chunks":2}]}`

// oneTurn initializes c (unless it is already), runs a turn of the fake
// model's hello on a new thread and returns the thread's id and the
// agent's deltas.
func oneTurn(t *testing.T, c *apptest.Client) (string, []string) {
	t.Helper()
	threadID := apptest.StartThread(t, c, nil)
	c.Seen = nil
	tr := apptest.RunTurn(t, c, threadID, "Say hello")
	require.Equal(t, "completed", tr.Turn.Status)
	require.Equal(t, "Hello there!", tr.Turn.Items[len(tr.Turn.Items)-1].Text)
	var deltas []string
	for _, f := range apptest.Find(c.Seen, "item/agentMessage/delta") {
		deltas = append(deltas, apptest.Decode[struct{ Delta string }](t, f.Params).Delta)
	}
	return threadID, deltas
}

// The in-process daemon over its network websocket: requests, their
// errors, notifications collected while waiting, and the HTTP API with
// its event stream on the same listener.
func TestInProcessDaemonOverWebsocketAndHTTP(t *testing.T) {
	fake, d, c := apptest.StartWithFake(t, helloScript)
	require.True(t, strings.HasPrefix(d.Addr, "ws://127.0.0.1:"), d.Addr)
	require.Equal(t, http.StatusOK, apptest.Status(t, d.URL("/readyz")))

	code, msg := c.CallError("no/such/method", map[string]any{})
	require.Equal(t, -32601, code, msg)

	threadID, deltas := oneTurn(t, c)
	require.Equal(t, []string{"Hello ", "there!"}, deltas)
	for _, f := range apptest.Find(c.Seen, "item/completed") {
		apptest.ValidateSchema(t, "ItemCompletedNotification", f.Params)
	}
	require.Len(t, fake.Requests(), 1)
	require.Equal(t, "Say hello", apptest.ModelRequests(t, fake)[0].Input[len(apptest.ModelRequests(t, fake)[0].Input)-1].Content[0].Text)

	th := apptest.GetJSON[api.HTTPThread](t, d, "/v1/threads/"+threadID, "")
	require.Equal(t, threadID, th.Thread.ID)
	apptest.SetScript(t, fake, `{"steps":[{"text":"Again."}]}`)
	events := d.OpenEvents(t, "/v1/threads/"+threadID+"/events", "")
	resp := d.Do(t, http.MethodPost, "/v1/threads/"+threadID+"/turns", "", map[string]any{"input": []any{map[string]any{"type": "text", "text": "again"}}})
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	ev := events.Until("turn/completed")
	require.Contains(t, string(ev.Params), `"status":"completed"`)
}

// A daemon in process on stdio://: the same client over newline-delimited
// JSON; closing its input ends it without an error.
func TestInProcessDaemonOverStdio(t *testing.T) {
	fake := apptest.StartFake(t, helloScript)
	s := apptest.StartStdio(t, append([]string{"--data-dir", t.TempDir()}, apptest.FakeArgs(fake, "responses")...)...)
	require.Nil(t, s.WS)
	s.Initialize(map[string]any{"experimentalApi": true})
	_, deltas := oneTurn(t, s.Client)
	require.Equal(t, []string{"Hello ", "there!"}, deltas)
	require.NoError(t, s.Wait(t))
	require.ErrorIs(t, s.Closed(), io.EOF)
}

// The control socket: Addr names it, the client dials it.
func TestInProcessDaemonOverUnixSocket(t *testing.T) {
	path := filepath.Join(apptest.SocketDir(t), "ctl.sock")
	fake := apptest.StartFake(t, helloScript)
	d := apptest.Start(t, append([]string{"--listen", "unix://" + path, "--data-dir", t.TempDir()}, apptest.FakeArgs(fake, "responses")...)...)
	require.Equal(t, "unix://"+path, d.Addr)
	_, deltas := oneTurn(t, d.RPC(t))
	require.Equal(t, []string{"Hello ", "there!"}, deltas)
	d.Stop(t)
	_, err := os.Lstat(path)
	require.ErrorIs(t, err, os.ErrNotExist, "Stop waited for the daemon's shutdown")
}

// The built binary as a subprocess: over its websocket until kill -9,
// and on stdio until its stdin closes.
func TestSubprocessDaemon(t *testing.T) {
	fake := apptest.StartFake(t, `{"steps":[{"text":"Hello there!","chunks":2,"times":2}]}`)
	dataDir := t.TempDir()
	args := append([]string{"--data-dir", dataDir}, apptest.FakeArgs(fake, "responses")...)

	p := apptest.StartProc(t, args...)
	threadID, _ := oneTurn(t, p.RPC(t))
	p.Kill9(t)

	sp, c := apptest.StartStdioProc(t, append([]string{"app-server"}, args...)...)
	c.Initialize(map[string]any{"experimentalApi": true})
	read := c.Call("thread/read", map[string]any{"threadId": threadID, "includeTurns": true})
	require.Contains(t, string(read), `"status":"completed"`, "the turn survived kill -9")
	_, deltas := oneTurn(t, c)
	require.Equal(t, []string{"Hello ", "there!"}, deltas)
	sp.CloseStdin(t)
	require.NoError(t, sp.Wait(t, apptest.Wait), "stderr:\n%s", sp.Stderr)

	// SIGTERM ends a served daemon with status 0.
	p = apptest.StartProc(t, args...)
	p.Signal(t, syscall.SIGTERM)
	require.NoError(t, p.Wait(t, apptest.Wait))
}

// Read takes one frame and leaves Seen alone; Until and ResponseTo look in
// Seen first and keep there what they read past.
func TestClientBookkeeping(t *testing.T) {
	pr, pw := io.Pipe()
	c := apptest.NewLinesClient(t, io.Discard, pr)
	go func() {
		for _, l := range []string{
			`{"method":"a","params":{}}`,
			`{"id":1,"method":"item/tool/call","params":{}}`,
			`{"id":7,"result":{"ok":true}}`,
			`{"method":"b","params":{},"seq":3}`,
		} {
			_, _ = io.WriteString(pw, l+"\n")
		}
		pw.Close()
	}()
	b := c.Until("b")
	require.Equal(t, int64(3), b.Seq)
	require.Equal(t, `{"method":"b","params":{},"seq":3}`, string(b.Raw))
	require.Len(t, c.Seen, 3, "what came before b waits in Seen, the response too")
	res := c.ResponseTo("7")
	require.JSONEq(t, `{"ok":true}`, string(res.Result))
	require.Equal(t, []string{"a", "item/tool/call"}, apptest.MethodsOf(c.Seen))
	require.True(t, c.Seen[1].IsRequest())
	require.False(t, c.Seen[0].IsRequest())
	require.Equal(t, "a", c.Until("a").Method, "taken from Seen")
	require.Equal(t, []string{"item/tool/call"}, c.Methods())
	require.Empty(t, c.Seen)
	_, err := c.Read(time.Second)
	require.ErrorIs(t, err, io.EOF)
}

func TestSSEReader(t *testing.T) {
	r := apptest.NewSSEReader(strings.NewReader("retry: 1000\n\n: comment\nid: 65536\nevent: turn/started\ndata: {\"a\":1}\n\ndata: one\ndata: two\n\n"))
	ev, err := r.Next()
	require.NoError(t, err)
	require.Equal(t, apptest.SSEEvent{ID: "65536", Event: "turn/started", Data: `{"a":1}`}, ev)
	ev, err = r.Next()
	require.NoError(t, err)
	require.Equal(t, apptest.SSEEvent{Data: "one\ntwo"}, ev)
	_, err = r.Next()
	require.ErrorIs(t, err, io.EOF)
}

// Ids and times are normalised by identity, so two runs compare equal;
// a changed value does not, and the diff names the field.
func TestNormaliseAndDiff(t *testing.T) {
	run := func(thread, turn, item string, ms int, text string) []string {
		return apptest.NormaliseFrames(t, []string{
			`{"id":5,"result":{"turn":{"id":"` + turn + `"}}}`,
			`{"method":"item/completed","params":{"threadId":"` + thread + `","turnId":"` + turn + `","item":{"id":"` + item + `","text":"` + text + `"},"completedAtMs":` + string(rune('0'+ms)) + `}}`,
		})
	}
	a := run("0194f0d2-7c1e-7c3a-9b1e-1f2e3d4c5b6a", "1194f0d2-7c1e-7c3a-9b1e-1f2e3d4c5b6a", "2194f0d2-7c1e-7c3a-9b1e-1f2e3d4c5b6a", 1, "hi")
	b := run("3194f0d2-7c1e-7c3a-9b1e-1f2e3d4c5b6a", "4194f0d2-7c1e-7c3a-9b1e-1f2e3d4c5b6a", "5194f0d2-7c1e-7c3a-9b1e-1f2e3d4c5b6a", 2, "hi")
	require.Equal(t, a, b)
	require.Contains(t, a[1], `"threadId":"<thread>"`)
	require.Contains(t, a[1], `"id":"<uuid:1>"`)
	require.Equal(t, "", apptest.DiffTranscripts(a, b))
	c := run("0194f0d2-7c1e-7c3a-9b1e-1f2e3d4c5b6a", "1194f0d2-7c1e-7c3a-9b1e-1f2e3d4c5b6a", "2194f0d2-7c1e-7c3a-9b1e-1f2e3d4c5b6a", 1, "ho")
	require.Contains(t, apptest.DiffTranscripts(a, c), `params.item.text: -"hi" +"ho"`)
	require.Contains(t, apptest.DiffTranscripts(a, a[:1]), "- ")
}
