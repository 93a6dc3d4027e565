package execclient

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/appserver/appserver/api"
)

// Environment variables of `appserver exec`.
const (
	// EnvToken holds the bearer token the client sends.
	EnvToken = "APPSERVER_TOKEN"
	// EnvServer is the default daemon URL.
	EnvServer = "APPSERVER_URL"
)

// DefaultServer is the daemon URL when neither a flag nor EnvServer names
// one.
const DefaultServer = "http://127.0.0.1:7878"

// Options configure a Client.
type Options struct {
	// Server is the daemon's URL: http(s)://HOST:PORT, or its ws:// listen
	// address. Required.
	Server string
	// Token is the bearer token; "" sends none.
	Token string
	// Thread continues this thread; "" creates one.
	Thread string
	// Cwd is the working directory of a new thread; "" is the current
	// directory.
	Cwd string
	// Model is the model of a new thread; "" is the daemon's default.
	Model string
	// IdempotencyKey is the turn's Idempotency-Key: a rerun with the same
	// key never starts a second turn. "" is a random key.
	IdempotencyKey string
	// JSON prints the finished turn as one JSON object on stdout instead
	// of streaming the agent's text.
	JSON bool
	// HTTPClient sends the requests; nil is a new http.Client.
	HTTPClient *http.Client
	// Now is the clock that times the turn; nil is time.Now.
	Now func() time.Time
	// Stdout receives the agent's text (or the JSON turn); Stderr the
	// progress lines. Nil discards.
	Stdout, Stderr io.Writer
}

// TurnEndedError is a turn that ended but did not complete.
type TurnEndedError struct {
	// Status is how the turn ended (failed, interrupted).
	Status api.TurnStatus
	// Message is the turn's error message, if any.
	Message string
}

// Error says how the turn ended, with its message.
func (e TurnEndedError) Error() string {
	if e.Message != "" {
		return fmt.Sprintf("turn %s: %s", e.Status, e.Message)
	}
	return "turn " + string(e.Status)
}

// Client runs turns on one daemon. A Client runs one turn at a time.
type Client struct {
	base, token    string
	hc             *http.Client
	stdout, stderr io.Writer
	opts           Options

	// Text printed to stdout so far, per agent message item.
	printed  map[string]bool
	lastByte byte
	// started is when the turn was posted.
	started time.Time
}

// New checks the options and returns the client; a Server that is not an
// http, https or ws URL is an error.
func New(o Options) (*Client, error) {
	base, err := baseURL(o.Server)
	if err != nil {
		return nil, err
	}
	if o.IdempotencyKey == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		o.IdempotencyKey = "exec-" + hex.EncodeToString(b[:])
	}
	c := &Client{base: base, token: o.Token, hc: o.HTTPClient, stdout: o.Stdout, stderr: o.Stderr, opts: o}
	if c.hc == nil {
		c.hc = &http.Client{}
	}
	if c.stdout == nil {
		c.stdout = io.Discard
	}
	if c.stderr == nil {
		c.stderr = io.Discard
	}
	if c.opts.Now == nil {
		c.opts.Now = time.Now
	}
	return c, nil
}

// baseURL turns the daemon's URL into the API's base URL.
func baseURL(s string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("--server: expected a URL such as http://127.0.0.1:7878, got %q", s)
	}
	switch u.Scheme {
	case "http", "https":
	case "ws":
		u.Scheme = "http"
	case "wss":
		u.Scheme = "https"
	default:
		return "", fmt.Errorf("--server: unsupported scheme %q (use http, https or ws)", u.Scheme)
	}
	return strings.TrimSuffix(u.Scheme+"://"+u.Host+u.Path, "/") + "/v1", nil
}

// apiError is a problem+json answer.
type apiError struct {
	status  int
	problem api.Problem
}

func (e *apiError) Error() string {
	if e.problem.Detail != "" {
		return fmt.Sprintf("%d %s: %s", e.status, e.problem.Title, e.problem.Detail)
	}
	return fmt.Sprintf("HTTP %d", e.status)
}

func (c *Client) progress(format string, args ...any) {
	fmt.Fprintf(c.stderr, "[exec] "+format+"\n", args...)
}

// do sends one request and decodes a JSON answer into out.
func (c *Client) do(ctx context.Context, method, path string, hdr http.Header, body, out any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return resp, decodeAPIError(resp)
	}
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			return resp, fmt.Errorf("%s %s: decode the answer: %w", method, path, err)
		}
	}
	return resp, nil
}

func decodeAPIError(resp *http.Response) error {
	e := &apiError{status: resp.StatusCode}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if json.Unmarshal(b, &e.problem) != nil || e.problem.Type == "" {
		e.problem = api.Problem{Title: http.StatusText(resp.StatusCode), Detail: strings.TrimSpace(string(b))}
	}
	return e
}

// Run runs one turn with prompt and returns once it ended: nil when it
// completed, a TurnEndedError when it failed or was interrupted. When ctx
// ends first, the turn is interrupted on the daemon too.
func (c *Client) Run(ctx context.Context, prompt string) error {
	threadID := c.opts.Thread
	if threadID == "" {
		cwd := c.opts.Cwd
		if cwd == "" {
			var err error
			if cwd, err = os.Getwd(); err != nil {
				return err
			}
		}
		req := api.HTTPThreadCreateRequest{Cwd: &cwd}
		if c.opts.Model != "" {
			req.Model = &c.opts.Model
		}
		var th api.HTTPThread
		if _, err := c.do(ctx, http.MethodPost, "/threads", nil, req, &th); err != nil {
			return fmt.Errorf("create a thread: %w", err)
		}
		threadID = th.Thread.ID
		c.progress("thread %s created", threadID)
	} else {
		c.progress("thread %s", threadID)
	}

	c.started = c.opts.Now()
	turn, err := c.postTurn(ctx, threadID, prompt)
	if err != nil {
		return err
	}
	c.progress("turn %s started", turn.ID)
	interrupted := false
	if err := c.stream(ctx, threadID, turn.ID, *turn.EventsAfter); err != nil {
		if ctx.Err() == nil {
			return err
		}
		interrupted = true
		// Ctrl-C: stop the turn on the daemon too, then report how it ended.
		ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		_, _ = c.do(ictx, http.MethodPost, "/threads/"+threadID+"/turns/"+turn.ID+"/interrupt?wait=true", nil, nil, nil)
		cancel()
	}
	fctx := ctx
	if interrupted {
		var cancel context.CancelFunc
		fctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
	}
	var final api.HTTPTurn
	if _, err := c.do(fctx, http.MethodGet, "/threads/"+threadID+"/turns/"+turn.ID+"?wait=true", nil, nil, &final); err != nil {
		return fmt.Errorf("read the turn: %w", err)
	}
	return c.finish(final)
}

// postTurn posts the prompt, retrying transport errors and 503 with the
// same Idempotency-Key, so a retry never starts a second turn.
func (c *Client) postTurn(ctx context.Context, threadID, prompt string) (api.HTTPTurn, error) {
	body := api.HTTPTurnCreateRequest{Input: api.List[api.UserInput]{{Type: api.UserInputText, Text: prompt}}}
	hdr := http.Header{"Idempotency-Key": {c.opts.IdempotencyKey}}
	var turn api.HTTPTurn
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if attempt > 0 {
			c.progress("retrying: %v", err)
			select {
			case <-time.After(time.Duration(attempt) * 500 * time.Millisecond):
			case <-ctx.Done():
				return turn, ctx.Err()
			}
		}
		_, err = c.do(ctx, http.MethodPost, "/threads/"+threadID+"/turns", hdr, body, &turn)
		var ae *apiError
		if err == nil || ctx.Err() != nil || (errors.As(err, &ae) && ae.status != http.StatusServiceUnavailable) {
			break
		}
	}
	if err != nil {
		return turn, fmt.Errorf("start the turn: %w", err)
	}
	if turn.EventsAfter == nil {
		return turn, errors.New("start the turn: the answer has no eventsAfter")
	}
	return turn, nil
}

// stream follows the thread's events from `after` until the turn
// completes, printing the turn's text; a dropped stream is resumed from
// the last event seen. If the events are gone (410), the caller's final
// read prints the answer instead.
func (c *Client) stream(ctx context.Context, threadID, turnID string, after int64) error {
	c.printed = map[string]bool{}
	failures := 0
	for {
		done, last, err := c.streamOnce(ctx, threadID, turnID, after)
		if done {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var ae *apiError
		if errors.As(err, &ae) {
			if ae.status == http.StatusGone {
				c.progress("the event stream is no longer available; waiting for the turn to end")
				return nil
			}
			return fmt.Errorf("stream the events: %w", err)
		}
		if last > after {
			after, failures = last, 0
		}
		if failures++; failures > 5 {
			return fmt.Errorf("stream the events: %w", err)
		}
		c.progress("event stream interrupted (%v); resuming after event %d", err, after)
		select {
		case <-time.After(time.Duration(failures) * 300 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// streamOnce reads one event stream; it reports whether the turn completed
// and the id of the last event handled.
func (c *Client) streamOnce(ctx context.Context, threadID, turnID string, after int64) (bool, int64, error) {
	q := url.Values{"after": {strconv.FormatInt(after, 10)}, "until": {"turnCompleted"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/threads/"+threadID+"/events?"+q.Encode(), nil)
	if err != nil {
		return false, after, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return false, after, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, after, decodeAPIError(resp)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	last, id := after, int64(0)
	var data []byte
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case len(line) == 0:
			if data != nil {
				done, err := c.handle(turnID, data)
				if err != nil {
					return false, last, err
				}
				if id > 0 {
					last = id
				}
				if done {
					return true, last, nil
				}
			}
			data, id = nil, 0
		case bytes.HasPrefix(line, []byte("id:")):
			id, _ = strconv.ParseInt(strings.TrimSpace(string(line[3:])), 10, 64)
		case bytes.HasPrefix(line, []byte("data:")):
			data = append(data, bytes.TrimPrefix(line[5:], []byte(" "))...)
		}
	}
	if err := sc.Err(); err != nil {
		return false, last, err
	}
	return false, last, io.ErrUnexpectedEOF
}

// handle shows one event; it reports whether it was the turn's end.
func (c *Client) handle(turnID string, data []byte) (bool, error) {
	var ev api.HTTPEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		return false, fmt.Errorf("bad event %q: %w", data, err)
	}
	var p struct {
		TurnID string          `json:"turnId"`
		ItemID string          `json:"itemId"`
		Delta  string          `json:"delta"`
		Item   json.RawMessage `json:"item"`
		Turn   struct {
			ID string `json:"id"`
		} `json:"turn"`
		Tool   string `json:"tool"`
		CallID string `json:"callId"`
		Error  struct {
			Message string `json:"message"`
		} `json:"error"`
		Detail string `json:"detail"`
	}
	_ = json.Unmarshal(ev.Params, &p)
	if p.TurnID != "" && p.TurnID != turnID {
		return false, nil
	}
	switch ev.Method {
	case "item/agentMessage/delta":
		if !c.opts.JSON {
			c.print(p.Delta)
			c.printed[p.ItemID] = true
		}
	case "item/started", "item/completed":
		var it struct {
			Type       string `json:"type"`
			ID         string `json:"id"`
			Text       string `json:"text"`
			Tool       string `json:"tool"`
			Command    string `json:"command"`
			Status     string `json:"status"`
			ExitCode   *int   `json:"exitCode"`
			DurationMs *int64 `json:"durationMs"`
		}
		_ = json.Unmarshal(p.Item, &it)
		switch {
		case it.Type == "agentMessage" && ev.Method == "item/completed":
			if !c.opts.JSON {
				if !c.printed[it.ID] {
					c.print(it.Text)
				}
				if c.lastByte != '\n' && c.lastByte != 0 {
					c.print("\n")
				}
			}
		case it.Type == "agentMessage", it.Type == "userMessage", it.Type == "reasoning":
		default:
			label := it.Type
			if it.Tool != "" {
				label += " " + it.Tool
			}
			if it.Command != "" {
				label += ": " + it.Command
			}
			if ev.Method == "item/started" {
				c.progress("%s", label)
				break
			}
			// How it ended: a command's exit status, else the item's
			// status, and how long it ran when the item says.
			outcome := it.Status
			if it.ExitCode != nil {
				outcome = fmt.Sprintf("exit %d", *it.ExitCode)
			}
			if outcome == "" {
				outcome = "done"
			}
			if it.DurationMs != nil {
				outcome += " in " + humanDuration(time.Duration(*it.DurationMs)*time.Millisecond)
			}
			c.progress("%s -> %s", label, outcome)
		}
	case api.HTTPToolCallEventMethod:
		c.progress("tool call %s (%s) is waiting for a client that registered the tool", p.Tool, p.CallID)
	case "error":
		c.progress("error: %s", p.Error.Message)
	case api.HTTPStreamErrorMethod:
		return false, &apiError{status: http.StatusGone, problem: api.Problem{Detail: p.Detail}}
	case "turn/completed":
		return p.Turn.ID == turnID || p.Turn.ID == "", nil
	}
	return false, nil
}

func (c *Client) print(s string) {
	if s == "" {
		return
	}
	_, _ = io.WriteString(c.stdout, s)
	c.lastByte = s[len(s)-1]
}

// finish reports the ended turn and turns a failure into an error.
func (c *Client) finish(t api.HTTPTurn) error {
	if c.opts.JSON {
		b, err := json.MarshalIndent(t, "", "  ")
		if err != nil {
			return err
		}
		_, _ = c.stdout.Write(append(b, '\n'))
	} else if t.FinalMessage != nil && len(c.printed) == 0 && c.lastByte == 0 {
		// The stream was lost before any text: print the answer now.
		c.print(*t.FinalMessage)
		if c.lastByte != '\n' {
			c.print("\n")
		}
	}
	msg := fmt.Sprintf("turn %s %s in %s", t.ID, t.Status, humanDuration(c.opts.Now().Sub(c.started)))
	if t.Usage != nil {
		msg += fmt.Sprintf(" (%d tokens: %d in, %d out)", t.Usage.TotalTokens, t.Usage.InputTokens, t.Usage.OutputTokens)
	}
	c.progress("%s", msg)
	if t.Status == api.TurnCompleted {
		return nil
	}
	e := TurnEndedError{Status: t.Status}
	if t.Error != nil {
		e.Message = t.Error.Message
	}
	return e
}

// humanDuration rounds d for a progress line: milliseconds below a second,
// tenths of a second above.
func humanDuration(d time.Duration) string {
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(100 * time.Millisecond).String()
}
