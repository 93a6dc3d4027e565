package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
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
	// envExecToken holds the bearer token exec sends.
	envExecToken = "APPSERVER_TOKEN"
	// envExecServer is the default of --server.
	envExecServer = "APPSERVER_URL"
)

const execUsage = `usage: appserver exec [flags] "prompt"

Runs one turn on a running daemon over its HTTP API: creates a thread (or
continues --thread), posts the prompt, streams the agent's text to stdout
and progress to stderr, and exits non-zero unless the turn completes.
The bearer token is read from $APPSERVER_TOKEN. A prompt of "-" is read
from stdin.

flags:
`

// execOptions are exec's flags.
type execOptions struct {
	server, thread, cwd, model, key string
	json                            bool
}

// turnEndedError is a turn that ended but did not complete.
type turnEndedError struct {
	status api.TurnStatus
	msg    string
}

func (e turnEndedError) Error() string {
	if e.msg != "" {
		return fmt.Sprintf("turn %s: %s", e.status, e.msg)
	}
	return "turn " + string(e.status)
}

func runExec(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o execOptions
	fs := flag.NewFlagSet("exec", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, execUsage)
		fs.PrintDefaults()
	}
	defServer := os.Getenv(envExecServer)
	if defServer == "" {
		defServer = "http://127.0.0.1:7878"
	}
	fs.StringVar(&o.server, "server", defServer, "daemon URL: http(s)://HOST:PORT or the ws:// listen address (default $"+envExecServer+")")
	fs.StringVar(&o.thread, "thread", "", "continue this thread instead of creating one")
	fs.BoolVar(&o.json, "json", false, "print the finished turn as one JSON object on stdout instead of streaming text")
	fs.StringVar(&o.cwd, "cwd", "", "working directory of a new thread (default: the current directory)")
	fs.StringVar(&o.model, "model", "", "model of a new thread (default: the daemon's)")
	fs.StringVar(&o.key, "idempotency-key", "", "Idempotency-Key of the turn; a rerun with the same key never starts a second turn (default: random)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err.Error()}
	}
	prompt := strings.Join(fs.Args(), " ")
	if prompt == "-" {
		b, err := io.ReadAll(os.Stdin)
		if err != nil {
			return fmt.Errorf("read the prompt from stdin: %w", err)
		}
		prompt = string(b)
	}
	if strings.TrimSpace(prompt) == "" {
		fs.Usage()
		return usageError{"exec needs a prompt"}
	}
	base, err := execBaseURL(o.server)
	if err != nil {
		return usageError{err.Error()}
	}
	if o.key == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		o.key = "exec-" + hex.EncodeToString(b[:])
	}
	if o.cwd == "" && o.thread == "" {
		if o.cwd, err = os.Getwd(); err != nil {
			return err
		}
	}
	c := &execClient{base: base, token: os.Getenv(envExecToken), hc: &http.Client{}, stdout: stdout, stderr: stderr, opts: o}
	return c.run(ctx, prompt)
}

// execBaseURL turns --server into the API's base URL.
func execBaseURL(s string) (string, error) {
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

// execClient is exec's HTTP client.
type execClient struct {
	base, token    string
	hc             *http.Client
	stdout, stderr io.Writer
	opts           execOptions

	// Text printed to stdout so far, per agent message item.
	printed  map[string]bool
	lastByte byte
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

func (c *execClient) progress(format string, args ...any) {
	fmt.Fprintf(c.stderr, "[exec] "+format+"\n", args...)
}

// do sends one request and decodes a JSON answer into out.
func (c *execClient) do(ctx context.Context, method, path string, hdr http.Header, body, out any) (*http.Response, error) {
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

func (c *execClient) run(ctx context.Context, prompt string) error {
	threadID := c.opts.thread
	if threadID == "" {
		req := api.HTTPThreadCreateRequest{}
		if c.opts.cwd != "" {
			req.Cwd = &c.opts.cwd
		}
		if c.opts.model != "" {
			req.Model = &c.opts.model
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
func (c *execClient) postTurn(ctx context.Context, threadID, prompt string) (api.HTTPTurn, error) {
	body := api.HTTPTurnCreateRequest{Input: api.List[api.UserInput]{{Type: api.UserInputText, Text: prompt}}}
	hdr := http.Header{"Idempotency-Key": {c.opts.key}}
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
func (c *execClient) stream(ctx context.Context, threadID, turnID string, after int64) error {
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
func (c *execClient) streamOnce(ctx context.Context, threadID, turnID string, after int64) (bool, int64, error) {
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
func (c *execClient) handle(turnID string, data []byte) (bool, error) {
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
		if !c.opts.json {
			c.print(p.Delta)
			c.printed[p.ItemID] = true
		}
	case "item/started", "item/completed":
		var it struct {
			Type    string `json:"type"`
			ID      string `json:"id"`
			Text    string `json:"text"`
			Tool    string `json:"tool"`
			Command string `json:"command"`
			Status  string `json:"status"`
		}
		_ = json.Unmarshal(p.Item, &it)
		switch {
		case it.Type == "agentMessage" && ev.Method == "item/completed":
			if !c.opts.json {
				if !c.printed[it.ID] {
					c.print(it.Text)
				}
				if c.lastByte != '\n' && c.lastByte != 0 {
					c.print("\n")
				}
			}
		case it.Type == "agentMessage", it.Type == "userMessage", it.Type == "reasoning":
		case ev.Method == "item/started":
			label := it.Type
			if it.Tool != "" {
				label += " " + it.Tool
			}
			if it.Command != "" {
				label += ": " + it.Command
			}
			c.progress("%s", label)
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

func (c *execClient) print(s string) {
	if s == "" {
		return
	}
	_, _ = io.WriteString(c.stdout, s)
	c.lastByte = s[len(s)-1]
}

// finish reports the ended turn and turns a failure into an error.
func (c *execClient) finish(t api.HTTPTurn) error {
	if c.opts.json {
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
	msg := fmt.Sprintf("turn %s %s", t.ID, t.Status)
	if t.Usage != nil {
		msg += fmt.Sprintf(" (%d tokens: %d in, %d out)", t.Usage.TotalTokens, t.Usage.InputTokens, t.Usage.OutputTokens)
	}
	c.progress("%s", msg)
	if t.Status == api.TurnCompleted {
		return nil
	}
	e := turnEndedError{status: t.Status}
	if t.Error != nil {
		e.msg = t.Error.Message
	}
	return e
}
