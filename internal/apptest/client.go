package apptest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"
)

// Wait bounds every wait of a Client for a frame (a response, a
// notification): a bound on a hang, not a speed check. Under -race on a
// loaded machine a streamed reply of a few MB took over 10 s.
const Wait = 60 * time.Second

// Frame is one JSON-RPC message from the daemon: a response (ID with
// Result or Error), a notification (Method, Params) or a server request
// (ID, Method, Params).
type Frame struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *RPCError       `json:"error"`
	// Seq is a thread notification's position in the thread's event log
	// (clients of the experimental API that ask for it see it).
	Seq int64 `json:"seq"`
	// Raw is the message as it came over the wire.
	Raw json.RawMessage `json:"-"`
}

// IsRequest reports whether f is a server request (it has a method and an
// id the client answers with Reply).
func (f Frame) IsRequest() bool { return f.Method != "" && len(f.ID) > 0 }

// RPCError is the error member of a JSON-RPC response.
type RPCError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// Client is a JSON-RPC client of the daemon over any of its transports.
// Its calls fail the test on a transport error or when a wait exceeds
// Wait; the frames that arrive while it waits for something else are kept
// in Seen, in order. It is used by one test goroutine at a time.
type Client struct {
	T testing.TB
	// WS is the websocket the client speaks over (nil on stdio), for tests
	// of what only a websocket has: close codes, read limits, raw frames.
	WS *websocket.Conn
	// Seen holds the notifications and server requests read while waiting
	// for another frame, oldest first; tests read and reset it.
	Seen []Frame

	conn   frameConn
	nextID int
}

// frameConn carries whole JSON-RPC messages.
type frameConn interface {
	write(ctx context.Context, b []byte) error
	read(ctx context.Context) ([]byte, error)
}

type wsConn struct{ ws *websocket.Conn }

func (c wsConn) write(ctx context.Context, b []byte) error {
	return c.ws.Write(ctx, websocket.MessageText, b)
}

func (c wsConn) read(ctx context.Context) ([]byte, error) {
	typ, data, err := c.ws.Read(ctx)
	if err == nil && typ != websocket.MessageText {
		err = fmt.Errorf("a %v websocket message; JSON-RPC goes in text messages", typ)
	}
	return data, err
}

// lineConn is newline-delimited JSON, as the stdio transport speaks it:
// lines come from a reader goroutine that ends with the input.
type lineConn struct {
	w     io.Writer
	lines <-chan []byte // closed at the end of the input
}

func (c lineConn) write(_ context.Context, b []byte) error {
	_, err := c.w.Write(append(b, '\n'))
	return err
}

func (c lineConn) read(ctx context.Context) ([]byte, error) {
	select {
	case l, ok := <-c.lines:
		if !ok {
			return nil, io.EOF
		}
		return l, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// readLines sends each line of r on the returned channel (closed at the
// end of r) from a goroutine that ends with r; once the test ended, it
// drops what it reads. Whoever gives r ends it when the test ends.
func readLines(t testing.TB, r io.Reader) <-chan []byte {
	lines := make(chan []byte, 1024)
	ended := make(chan struct{})
	t.Cleanup(func() { close(ended) })
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(r)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			select {
			case lines <- append([]byte(nil), sc.Bytes()...):
			case <-ended:
			}
		}
	}()
	return lines
}

// NewLinesClient is a client speaking newline-delimited JSON: it writes to
// w and reads the lines of r (a stdio session's stdin and stdout). The
// caller ends r when the test ends (the daemon exits).
func NewLinesClient(t testing.TB, w io.Writer, r io.Reader) *Client {
	return &Client{T: t, conn: lineConn{w: w, lines: readLines(t, r)}}
}

// Dial opens a websocket JSON-RPC connection to addr, as the daemon
// announces it (ws:// or unix://PATH for the control socket), without
// initializing it. The response is the server's answer to the upgrade
// (its status and body when refused). The connection closes when the test
// ends.
func Dial(t testing.TB, addr string, hdr http.Header) (*Client, *http.Response, error) {
	t.Helper()
	return DialWith(t, addr, &websocket.DialOptions{HTTPHeader: hdr})
}

// DialWith is Dial with the websocket's dial options (a TLS client for
// wss://, subprotocols).
func DialWith(t testing.TB, addr string, opts *websocket.DialOptions) (*Client, *http.Response, error) {
	t.Helper()
	url := addr
	if path, ok := strings.CutPrefix(addr, "unix://"); ok {
		o := *opts
		o.HTTPClient = &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}}}
		opts, url = &o, "ws://localhost/rpc"
	}
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	defer cancel()
	ws, resp, err := websocket.Dial(ctx, url, opts)
	if err != nil {
		return nil, resp, err
	}
	ws.SetReadLimit(-1)
	t.Cleanup(func() { _ = ws.CloseNow() })
	return &Client{T: t, WS: ws, conn: wsConn{ws}}, resp, nil
}

// MustDial is Dial that fails the test when the upgrade is refused.
func MustDial(t testing.TB, addr string, hdr http.Header) *Client {
	t.Helper()
	c, resp, err := Dial(t, addr, hdr)
	require.NoError(t, err)
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	return c
}

// ClientInfo is what clients of these tests say they are: the TUI whose
// captures the golden files hold.
var ClientInfo = map[string]any{"name": "codex-tui", "title": nil, "version": "0.169.0"}

// Initialize initializes the connection as the TUI (ClientInfo), with
// caps as its capabilities (none when nil), and returns the result.
func (c *Client) Initialize(caps map[string]any) json.RawMessage {
	c.T.Helper()
	params := map[string]any{"clientInfo": ClientInfo}
	if caps != nil {
		params["capabilities"] = caps
	}
	return c.Call("initialize", params)
}

// SendRaw writes one message as it is.
func (c *Client) SendRaw(msg string) {
	c.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	defer cancel()
	require.NoError(c.T, c.conn.write(ctx, []byte(msg)))
}

// Send writes v as one message.
func (c *Client) Send(v any) {
	c.T.Helper()
	c.SendRaw(string(JSON(c.T, v)))
}

// Request sends a request with the next id and returns the id, as it
// appears in the response (ResponseTo waits for it). A nil params leaves
// the params member out.
func (c *Client) Request(method string, params any) string {
	c.T.Helper()
	c.nextID++
	msg := map[string]any{"id": c.nextID, "method": method}
	if params != nil {
		msg["params"] = params
	}
	c.Send(msg)
	return fmt.Sprint(c.nextID)
}

// Notify sends a client notification.
func (c *Client) Notify(method string, params any) {
	c.T.Helper()
	msg := map[string]any{"method": method}
	if params != nil {
		msg["params"] = params
	}
	c.Send(msg)
}

// Reply answers the server request id with result.
func (c *Client) Reply(id json.RawMessage, result any) {
	c.T.Helper()
	c.Send(map[string]any{"id": id, "result": result})
}

// ReplyError answers the server request id with a JSON-RPC error.
func (c *Client) ReplyError(id json.RawMessage, code int, message string) {
	c.T.Helper()
	c.Send(map[string]any{"id": id, "error": map[string]any{"code": code, "message": message}})
}

// Read reads the next frame within timeout, whatever it is; it does not
// look at Seen. Every frame must be one JSON object without the jsonrpc
// member (the Codex framing omits it).
func (c *Client) Read(timeout time.Duration) (Frame, error) {
	c.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	data, err := c.conn.read(ctx)
	if err != nil {
		return Frame{}, err
	}
	f, err := decodeFrame(data)
	require.NoError(c.T, err)
	return f, nil
}

// ReadContext is Read for clients driven from goroutines of their own
// (load, races): it never fails the test, and returns a frame that breaks
// the rules as an error.
func (c *Client) ReadContext(ctx context.Context) (Frame, error) {
	data, err := c.conn.read(ctx)
	if err != nil {
		return Frame{}, err
	}
	return decodeFrame(data)
}

// WriteContext writes v as one message, for clients driven from
// goroutines of their own: it never fails the test.
func (c *Client) WriteContext(ctx context.Context, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return c.conn.write(ctx, b)
}

// decodeFrame decodes one message of the daemon.
func decodeFrame(data []byte) (Frame, error) {
	var f struct {
		Frame
		JSONRPC *string `json:"jsonrpc"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return Frame{}, fmt.Errorf("not a JSON-RPC message: %q: %w", data, err)
	}
	if f.JSONRPC != nil {
		return Frame{}, fmt.Errorf("the server must not write the jsonrpc member: %s", data)
	}
	f.Frame.Raw = data
	return f.Frame, nil
}

// Next is Read within Wait, failing the test on an error.
func (c *Client) Next() Frame {
	c.T.Helper()
	f, err := c.Read(Wait)
	require.NoError(c.T, err, "waiting for a frame")
	return f
}

// ResponseTo returns the response to the request id, taking it out of
// Seen or reading on; every other frame read meanwhile (notifications,
// server requests, responses to other requests) goes to Seen, so requests
// may overlap.
func (c *Client) ResponseTo(id string) Frame {
	c.T.Helper()
	return c.UntilFunc("the response to "+id, func(f Frame) bool {
		return f.Method == "" && (string(f.ID) == id || string(f.ID) == `"`+id+`"`)
	})
}

// Response returns the next response, whatever its id, taking it out of
// Seen or reading on (what else it reads goes to Seen).
func (c *Client) Response() Frame {
	c.T.Helper()
	return c.UntilFunc("a response", func(f Frame) bool { return f.Method == "" })
}

// CallRaw sends a request and returns its response, error or not.
func (c *Client) CallRaw(method string, params any) Frame {
	c.T.Helper()
	return c.ResponseTo(c.Request(method, params))
}

// Call sends a request and returns its result, failing the test on an
// error response.
func (c *Client) Call(method string, params any) json.RawMessage {
	c.T.Helper()
	f := c.CallRaw(method, params)
	require.Nil(c.T, f.Error, "%s: %+v", method, f.Error)
	return f.Result
}

// CallError sends a request that must fail and returns the error's code
// and message.
func (c *Client) CallError(method string, params any) (int, string) {
	c.T.Helper()
	f := c.CallRaw(method, params)
	require.NotNil(c.T, f.Error, "%s succeeded: %s", method, f.Result)
	return f.Error.Code, f.Error.Message
}

// Until returns the first notification or server request with method,
// taking it out of Seen or reading on (what else it reads goes to Seen,
// responses included).
func (c *Client) Until(method string) Frame {
	c.T.Helper()
	return c.UntilFunc(method, func(f Frame) bool { return f.Method == method })
}

// UntilInTurn is Until that fails if turn/completed comes first (unless
// method is turn/completed).
func (c *Client) UntilInTurn(method string) Frame {
	c.T.Helper()
	return c.UntilFunc(method, func(f Frame) bool {
		if f.Method == method {
			return true
		}
		require.NotEqual(c.T, "turn/completed", f.Method, "the turn completed before %s", method)
		return false
	})
}

// UntilFunc is Until for the first frame match accepts; what names it in
// a failure.
func (c *Client) UntilFunc(what string, match func(Frame) bool) Frame {
	c.T.Helper()
	for i, f := range c.Seen {
		if match(f) {
			c.Seen = append(c.Seen[:i:i], c.Seen[i+1:]...)
			return f
		}
	}
	for {
		f, err := c.Read(Wait)
		require.NoError(c.T, err, "waiting for %s", what)
		if match(f) {
			return f
		}
		c.Seen = append(c.Seen, f)
	}
}

// Take returns the oldest frame of Seen, taking it out, or else the next
// frame off the wire (responses included).
func (c *Client) Take() Frame {
	c.T.Helper()
	if len(c.Seen) > 0 {
		f := c.Seen[0]
		c.Seen = c.Seen[1:]
		return f
	}
	return c.Next()
}

// Through takes frames (Take) up to and including the first one match
// accepts, and returns them.
func (c *Client) Through(match func(Frame) bool) []Frame {
	c.T.Helper()
	var out []Frame
	for {
		f := c.Take()
		out = append(out, f)
		if match(f) {
			return out
		}
	}
}

// Methods returns the methods of Seen, in order, and clears it.
func (c *Client) Methods() []string {
	out := MethodsOf(c.Seen)
	c.Seen = nil
	return out
}

// MethodsOf returns the methods of frames, in order (responses have
// none and are left out).
func MethodsOf(frames []Frame) []string {
	out := make([]string, 0, len(frames))
	for _, f := range frames {
		if f.Method != "" {
			out = append(out, f.Method)
		}
	}
	return out
}

// Find returns the frames of frames with method.
func Find(frames []Frame, method string) []Frame {
	var out []Frame
	for _, f := range frames {
		if f.Method == method {
			out = append(out, f)
		}
	}
	return out
}

// Closed reads until the connection ends and returns the error that ended
// it (a websocket.CloseError on a websocket, io.EOF on stdio).
func (c *Client) Closed() error {
	c.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	defer cancel()
	for {
		if _, err := c.conn.read(ctx); err != nil {
			require.False(c.T, errors.Is(err, context.DeadlineExceeded), "the connection did not end")
			return err
		}
	}
}

// Decode unmarshals raw into a T, failing the test if it does not fit.
func Decode[T any](t testing.TB, raw json.RawMessage) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal(raw, &v), "%s", raw)
	return v
}

// JSON marshals v, failing the test if it cannot.
func JSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}
