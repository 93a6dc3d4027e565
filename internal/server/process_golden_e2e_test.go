package server_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
)

// procClient drives process/* over one connection: process/outputDelta
// bytes are joined per handle and stream, and process/exited params are
// kept per handle until taken; the other frames wait in Seen.
type procClient struct {
	*apptest.Client
	out    map[string]map[string][]byte
	capHit map[string]map[string]bool
	exited map[string]map[string]any
}

// dialProcs opens a connection (with the bearer token when given) and
// initializes it with or without the experimental API.
func dialProcs(t *testing.T, d *apptest.Daemon, token string, experimental bool) *procClient {
	t.Helper()
	var hdr http.Header
	if token != "" {
		hdr = http.Header{"Authorization": {"Bearer " + token}}
	}
	c := &procClient{Client: apptest.MustDial(t, d.Addr, hdr), out: map[string]map[string][]byte{},
		capHit: map[string]map[string]bool{}, exited: map[string]map[string]any{}}
	f := c.call("initialize", map[string]any{
		"clientInfo":   map[string]any{"name": "probe", "title": nil, "version": "0"},
		"capabilities": map[string]any{"experimentalApi": experimental},
	})
	require.Nil(t, f.Error)
	return c
}

// absorb takes the output deltas and exits out of Seen, in order.
func (c *procClient) absorb() {
	c.T.Helper()
	rest := c.Seen[:0]
	for _, f := range c.Seen {
		switch f.Method {
		case "process/outputDelta":
			var p struct {
				ProcessHandle, Stream, DeltaBase64 string
				CapReached                         bool
			}
			require.NoError(c.T, json.Unmarshal(f.Params, &p))
			b, err := base64.StdEncoding.DecodeString(p.DeltaBase64)
			require.NoError(c.T, err)
			if c.out[p.ProcessHandle] == nil {
				c.out[p.ProcessHandle] = map[string][]byte{}
			}
			c.out[p.ProcessHandle][p.Stream] = append(c.out[p.ProcessHandle][p.Stream], b...)
			if p.CapReached {
				if c.capHit[p.ProcessHandle] == nil {
					c.capHit[p.ProcessHandle] = map[string]bool{}
				}
				c.capHit[p.ProcessHandle][p.Stream] = true
			}
		case "process/exited":
			var p map[string]any
			require.NoError(c.T, json.Unmarshal(f.Params, &p))
			c.exited[p["processHandle"].(string)] = p
		default:
			rest = append(rest, f)
		}
	}
	c.Seen = rest
}

// until reads frames until cond holds; false after 20 s without.
func (c *procClient) until(cond func() bool) bool {
	c.T.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for c.absorb(); !cond(); c.absorb() {
		f, err := c.Read(time.Until(deadline))
		if err != nil {
			require.ErrorIs(c.T, err, context.DeadlineExceeded)
			return false
		}
		c.Seen = append(c.Seen, f)
	}
	return true
}

// call sends a request and returns its response, error or not.
func (c *procClient) call(method string, params any) apptest.Frame {
	c.T.Helper()
	return c.CallRaw(method, params)
}

func (c *procClient) ok(method string, params any) {
	c.T.Helper()
	f := c.call(method, params)
	require.Nil(c.T, f.Error, "%s: %+v", method, f.Error)
}

// stdout is what handle has streamed on stdout so far.
func (c *procClient) stdout(handle string) string {
	c.absorb()
	return string(c.out[handle]["stdout"])
}

// waitExit returns handle's process/exited params and forgets the handle.
func (c *procClient) waitExit(handle string) map[string]any {
	c.T.Helper()
	require.True(c.T, c.until(func() bool { return c.exited[handle] != nil }), "no process/exited for %s", handle)
	e := c.exited[handle]
	delete(c.exited, handle)
	return e
}

// running lists the command lines of the processes (from /proc) that hold
// one of the patterns.
func running(patterns []string) []string {
	out := []string{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		cmd := strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
		for _, p := range patterns {
			if strings.Contains(cmd, p) {
				out = append(out, cmd)
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

// goneWithin waits up to 5 s for the processes holding the patterns to
// end and returns those still running.
func goneWithin(patterns []string) []string {
	left := running(patterns)
	for i := 0; i < 50 && len(left) > 0; i++ {
		time.Sleep(100 * time.Millisecond)
		left = running(patterns)
	}
	return left
}

// latin1 is b with one rune per byte, as the capture script decodes
// streamed bytes.
func latin1(b []byte) string {
	r := make([]rune, len(b))
	for i, c := range b {
		r[i] = rune(c)
	}
	return string(r)
}

// summarize is s, or its length when it is long, as the capture keeps it.
func summarize(s string) any {
	if len(s) > 256 {
		return map[string]any{"bytes": float64(len(s))}
	}
	return s
}

// platformWording are the reference's messages whose rest is the wording
// of its platform (Rust's OS errors, its base64 and path crates): only
// the part given is compared.
var platformWording = map[string]string{
	"failed to spawn process: ": "failed to spawn process: ",
	"invalid deltaBase64: ":     "invalid deltaBase64: ",
	"Invalid request: AbsolutePathBuf deserialized without a base path": "Invalid request: ",
}

// TestProcessMatchesReference replays the steps of
// testdata/golden/reference/process_script.json (see process_capture.js)
// against appserver and compares each record with the reference's in
// process.jsonl: results, error codes and messages (but for the
// platform's wording), the exit of each process with what it streamed and
// buffered, the processes left after a disconnect, and the gate of the
// experimental API.
func TestProcessMatchesReference(t *testing.T) {
	cwd := apptest.RealTempDir(t)
	script, err := os.ReadFile("testdata/golden/reference/process_script.json")
	require.NoError(t, err)
	var steps []struct {
		Call       string          `json:"call"`
		Params     json.RawMessage `json:"params"`
		WaitOutput string          `json:"waitOutput"`
		Text       string          `json:"text"`
		WaitExit   string          `json:"waitExit"`
		Disconnect []string        `json:"disconnect"`
		Connect    map[string]bool `json:"connect"`
	}
	require.NoError(t, json.Unmarshal([]byte(strings.ReplaceAll(string(script), "$CWD", cwd)), &steps))
	golden, err := os.ReadFile("testdata/golden/reference/process.jsonl")
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(golden)), "\n")
	require.Len(t, lines, len(steps))

	d := apptest.Start(t, "--data-dir", t.TempDir(), "-c", `model="gpt-5.5"`)
	c := dialProcs(t, d, "", true)
	for i, s := range steps {
		var want map[string]any
		require.NoError(t, json.Unmarshal([]byte(strings.ReplaceAll(lines[i], "$CWD", cwd)), &want))
		got := map[string]any{}
		switch {
		case s.Call != "":
			f := c.call(s.Call, s.Params)
			compareResponse(t, lines[i], want, f)
			continue
		case s.WaitOutput != "":
			got = map[string]any{"waitOutput": s.WaitOutput, "text": s.Text,
				"ok": c.until(func() bool { return strings.Contains(c.stdout(s.WaitOutput), s.Text) })}
		case s.WaitExit != "":
			h := s.WaitExit
			e := c.waitExit(h)
			e["stdout"], e["stderr"] = summarize(e["stdout"].(string)), summarize(e["stderr"].(string))
			capHit := map[string]any{}
			for k, v := range c.capHit[h] {
				capHit[k] = v
			}
			got = map[string]any{"waitExit": h, "exited": e, "capReached": capHit, "streamed": map[string]any{
				"stdout": summarize(latin1(c.out[h]["stdout"])), "stderr": summarize(latin1(c.out[h]["stderr"])),
			}}
			delete(c.out, h)
			delete(c.capHit, h)
		case s.Disconnect != nil:
			require.NoError(t, c.WS.Close(websocket.StatusNormalClosure, ""))
			left := []any{}
			for _, cmd := range goneWithin(s.Disconnect) {
				left = append(left, cmd)
			}
			patterns := []any{}
			for _, p := range s.Disconnect {
				patterns = append(patterns, p)
			}
			got = map[string]any{"disconnect": patterns, "running": left}
		case s.Connect != nil:
			c = dialProcs(t, d, "", s.Connect["experimentalApi"])
			got = map[string]any{"connect": map[string]any{"experimentalApi": s.Connect["experimentalApi"]}}
		}
		require.Equal(t, want, got, "step %d: %s", i, lines[i])
	}
}

// compareResponse holds a response to the reference's: the same result,
// or an error with the same code and message (platformWording aside).
func compareResponse(t *testing.T, line string, want map[string]any, f apptest.Frame) {
	t.Helper()
	if want["err"] == nil {
		require.Nil(t, f.Error, "%s", line)
		var res any
		require.NoError(t, json.Unmarshal(f.Result, &res))
		require.Equal(t, want["res"], res, "%s", line)
		return
	}
	require.NotNil(t, f.Error, "%s", line)
	werr := want["err"].(map[string]any)
	require.Equal(t, werr["code"], float64(f.Error.Code), "%s: %s", line, f.Error.Message)
	msg := werr["message"].(string)
	for prefix, kept := range platformWording {
		if strings.HasPrefix(msg, prefix) {
			require.True(t, strings.HasPrefix(f.Error.Message, kept), "%s: %s", line, f.Error.Message)
			require.Greater(t, len(f.Error.Message), len(kept), "%s: the reason is given", line)
			return
		}
	}
	require.Equal(t, msg, f.Error.Message, "%s", line)
}
