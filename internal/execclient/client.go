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

// cleanupTimeout bounds what exec still asks of the daemon once the run
// is over (--timeout, a signal): interrupting the turn, reading how it
// ended, deleting a thread whose turn never started.
const cleanupTimeout = 10 * time.Second

// Options configure a Client.
type Options struct {
	// Server is the daemon's URL: http(s)://HOST:PORT, or its ws:// listen
	// address. Required.
	Server string
	// Token is the bearer token; "" sends none.
	Token string
	// Resume continues this thread; "" creates one.
	Resume string
	// Cwd is the working directory of a new thread; "" is the current
	// directory, unless DaemonCwd.
	Cwd string
	// DaemonCwd sends no directory with a new thread: the daemon picks
	// its default (a principal's first workspace root).
	DaemonCwd bool
	// Model is the model of a new thread, or of the turn on a resumed
	// one; "" is the thread's or the daemon's.
	Model string
	// ApprovalPolicy is a new thread's approval policy (untrusted,
	// on-failure, on-request, never); "" is the daemon's default.
	ApprovalPolicy string
	// Sandbox is a new thread's sandbox mode (read-only,
	// workspace-write, danger-full-access); "" is the daemon's default.
	Sandbox string
	// Timeout bounds the whole run; when it expires the turn is
	// interrupted and Run returns a StoppedError. 0 is no bound.
	Timeout time.Duration
	// OutputSchema is the path of a JSON Schema file: it is sent with the
	// turn and the final message must validate against it. "" is none.
	OutputSchema string
	// Images are image files sent with the prompt.
	Images []string
	// OnApproval is what exec does with approval and user-input requests;
	// "" is ApprovalAsk with a Terminal, else ApprovalDecline.
	OnApproval ApprovalRule
	// Terminal is where ApprovalAsk asks; nil is none.
	Terminal Terminal
	// IdempotencyKey is the turn's Idempotency-Key: a rerun with the same
	// key never starts a second turn. "" is a random key.
	IdempotencyKey string
	// JSON prints the JSONL event stream on stdout instead of the agent's
	// text.
	JSON bool
	// HTTPClient sends the requests; nil is a new http.Client.
	HTTPClient *http.Client
	// Now is the clock that times the turn; nil is time.Now.
	Now func() time.Time
	// Stdout receives the agent's text (or the JSONL stream); Stderr the
	// progress lines. Nil discards.
	Stdout, Stderr io.Writer
}

// Client runs turns on one daemon. A Client runs one turn at a time.
type Client struct {
	base, token    string
	hc             *http.Client
	stdout, stderr io.Writer
	opts           Options
	images         []api.UserInput
	schema         *outputSchema
}

// New checks the options and returns the client. A Server that is not an
// http, https or ws URL, an unknown policy, sandbox or rule, asking
// without a terminal, an image or schema file that cannot be used, and
// settings a resumed thread cannot take are errors.
func New(o Options) (*Client, error) {
	base, err := baseURL(o.Server)
	if err != nil {
		return nil, err
	}
	switch api.ApprovalPolicy(o.ApprovalPolicy) {
	case "", api.ApprovalUntrusted, api.ApprovalOnRequest, api.ApprovalNever, "on-failure":
	default:
		return nil, fmt.Errorf("--approval-policy: expected untrusted, on-failure, on-request or never, got %q", o.ApprovalPolicy)
	}
	switch api.SandboxMode(o.Sandbox) {
	case "", api.SandboxReadOnly, api.SandboxWorkspaceWrite, api.SandboxDangerFullAccess:
	default:
		return nil, fmt.Errorf("--sandbox: expected read-only, workspace-write or danger-full-access, got %q", o.Sandbox)
	}
	if o.Resume != "" && (o.ApprovalPolicy != "" || o.Sandbox != "" || o.Cwd != "" || o.DaemonCwd) {
		return nil, errors.New("--approval-policy, --sandbox and --cwd set up a new thread; a resumed thread keeps its own")
	}
	switch o.OnApproval {
	case "":
		o.OnApproval = ApprovalDecline
		if o.Terminal != nil {
			o.OnApproval = ApprovalAsk
		}
	case ApprovalAsk:
		if o.Terminal == nil {
			return nil, errors.New("--on-approval ask needs a terminal on stdin")
		}
	case ApprovalDecline, ApprovalFail:
	default:
		return nil, fmt.Errorf("--on-approval: expected ask, decline or fail, got %q", o.OnApproval)
	}
	if o.Timeout < 0 {
		return nil, errors.New("--timeout must not be negative")
	}
	c := &Client{base: base, token: o.Token, hc: o.HTTPClient, stdout: o.Stdout, stderr: o.Stderr, opts: o}
	for _, path := range o.Images {
		in, err := imageInput(path)
		if err != nil {
			return nil, err
		}
		c.images = append(c.images, in)
	}
	if o.OutputSchema != "" {
		if c.schema, err = loadOutputSchema(o.OutputSchema); err != nil {
			return nil, err
		}
	}
	if c.opts.IdempotencyKey == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		c.opts.IdempotencyKey = "exec-" + hex.EncodeToString(b[:])
	}
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

// errTimedOut is the cause of a run's context when --timeout expired.
var errTimedOut = errors.New("exec: --timeout expired")

// run is the state of one Run.
type run struct {
	c   *Client
	out output

	threadID, turnID string
	started          time.Time
	// patches are the file changes of the turn's items, for showing a
	// file change approval's diff.
	patches map[string][]api.FileUpdateChange
	// refused is set when exec refused a request and interrupted the
	// turn.
	refused *ApprovalRefusedError
	// typed is what was typed at the terminal and not read yet.
	typed []byte
}

func (x *run) progress(format string, args ...any) {
	fmt.Fprintf(x.c.stderr, "[exec] "+format+"\n", args...)
}

// Run runs one turn with prompt and returns once it ended: nil when it
// completed (with a valid final message under an output schema), else an
// error whose ExitCode says how it ended. When ctx ends or the timeout
// expires first, the turn is interrupted on the daemon too. A thread Run
// created is deleted again when its turn could not be started.
func (c *Client) Run(ctx context.Context, prompt string) error {
	x := &run{c: c, patches: map[string][]api.FileUpdateChange{}}
	if c.opts.JSON {
		x.out = &jsonlOutput{w: c.stdout}
	} else {
		x.out = newTextOutput(c.stdout)
	}
	runCtx := ctx
	if c.opts.Timeout > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeoutCause(ctx, c.opts.Timeout, errTimedOut)
		defer cancel()
	}
	err := x.run(runCtx, prompt)
	if err != nil && runCtx.Err() != nil {
		var stopped StoppedError
		if !errors.As(err, &stopped) {
			err = x.stopped(runCtx, err)
		}
	}
	return err
}

// stopped is the error of a run that ctx ended before its turn started.
func (x *run) stopped(ctx context.Context, err error) error {
	if context.Cause(ctx) == errTimedOut {
		return StoppedError{Timeout: x.c.opts.Timeout, Err: err}
	}
	return StoppedError{Err: err}
}

func (x *run) run(ctx context.Context, prompt string) error {
	c := x.c
	created := false
	x.threadID = c.opts.Resume
	if x.threadID == "" {
		var req api.HTTPThreadCreateRequest
		if !c.opts.DaemonCwd {
			cwd := c.opts.Cwd
			if cwd == "" {
				var err error
				if cwd, err = os.Getwd(); err != nil {
					return err
				}
			}
			req.Cwd = &cwd
		}
		if c.opts.Model != "" {
			req.Model = &c.opts.Model
		}
		if c.opts.ApprovalPolicy != "" {
			req.ApprovalPolicy = &api.AskForApproval{Policy: api.ApprovalPolicy(c.opts.ApprovalPolicy)}
		}
		if c.opts.Sandbox != "" {
			mode := api.SandboxMode(c.opts.Sandbox)
			req.Sandbox = &mode
		}
		var th api.HTTPThread
		if _, err := c.do(ctx, http.MethodPost, "/threads", nil, req, &th); err != nil {
			return fmt.Errorf("create a thread: %w", err)
		}
		x.threadID, created = th.Thread.ID, true
		x.progress("thread %s created", x.threadID)
	} else {
		x.progress("thread %s", x.threadID)
	}
	x.out.threadStarted(x.threadID)

	x.started = c.opts.Now()
	turn, err := x.postTurn(ctx, prompt, created)
	if err != nil {
		if created {
			x.deleteThread(ctx)
		}
		return err
	}
	x.turnID = turn.ID
	x.progress("turn %s started", turn.ID)
	x.out.turnStarted(turn.ID)

	streamErr := x.stream(ctx, *turn.EventsAfter)
	fctx := ctx
	if ctx.Err() != nil {
		// --timeout or a signal: stop the turn on the daemon too, then
		// report how it ended.
		if context.Cause(ctx) == errTimedOut {
			x.progress("--timeout %s expired: interrupting the turn", c.opts.Timeout)
		} else {
			x.progress("stopped: interrupting the turn")
		}
		var cancel context.CancelFunc
		fctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		_, _ = c.do(fctx, http.MethodPost, "/threads/"+x.threadID+"/turns/"+turn.ID+"/interrupt?wait=true", nil, nil, nil)
	} else if streamErr != nil {
		return streamErr
	}
	var final api.HTTPTurn
	if _, err := c.do(fctx, http.MethodGet, "/threads/"+x.threadID+"/turns/"+turn.ID+"?wait=true", nil, nil, &final); err != nil {
		return fmt.Errorf("read the turn: %w", err)
	}
	return x.finish(ctx, final)
}

// deleteThread deletes the thread this run created for a turn that did
// not start, so that a failed start leaves nothing behind.
func (x *run) deleteThread(ctx context.Context) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if _, err := x.c.do(dctx, http.MethodDelete, "/threads/"+x.threadID, nil, nil, nil); err != nil {
		x.progress("could not delete thread %s, whose turn did not start: %v", x.threadID, err)
		return
	}
	x.progress("thread %s deleted: its turn did not start", x.threadID)
}

// postTurn posts the prompt, retrying transport errors and 503 with the
// same Idempotency-Key, so a retry never starts a second turn.
func (x *run) postTurn(ctx context.Context, prompt string, newThread bool) (api.HTTPTurn, error) {
	c := x.c
	input := append(api.List[api.UserInput]{}, c.images...)
	input = append(input, api.UserInput{Type: api.UserInputText, Text: prompt})
	body := api.HTTPTurnCreateRequest{Input: input}
	if !newThread && c.opts.Model != "" {
		body.Model = &c.opts.Model
	}
	if c.schema != nil {
		body.OutputSchema = c.schema.raw
	}
	hdr := http.Header{"Idempotency-Key": {c.opts.IdempotencyKey}}
	var turn api.HTTPTurn
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if attempt > 0 {
			x.progress("retrying: %v", err)
			select {
			case <-time.After(time.Duration(attempt) * 500 * time.Millisecond):
			case <-ctx.Done():
				return turn, fmt.Errorf("start the turn: %w", err)
			}
		}
		_, err = c.do(ctx, http.MethodPost, "/threads/"+x.threadID+"/turns", hdr, body, &turn)
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
// completes; a dropped stream is resumed from the last event seen. If the
// events are gone (410), the caller's final read reports the turn
// instead.
func (x *run) stream(ctx context.Context, after int64) error {
	failures := 0
	for {
		done, last, err := x.streamOnce(ctx, after)
		if done {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var ae *apiError
		if errors.As(err, &ae) {
			if ae.status == http.StatusGone {
				x.progress("the event stream is no longer available; waiting for the turn to end")
				return nil
			}
			return fmt.Errorf("stream the events: %w", err)
		}
		var fatal fatalError
		if errors.As(err, &fatal) {
			return fatal.err
		}
		if last > after {
			after, failures = last, 0
		}
		if failures++; failures > 5 {
			return fmt.Errorf("stream the events: %w", err)
		}
		x.progress("event stream interrupted (%v); resuming after event %d", err, after)
		select {
		case <-time.After(time.Duration(failures) * 300 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// fatalError ends the stream for good: not a connection to retry.
type fatalError struct{ err error }

func (e fatalError) Error() string { return e.err.Error() }

// streamOnce reads one event stream; it reports whether the turn completed
// and the id of the last event handled.
func (x *run) streamOnce(ctx context.Context, after int64) (bool, int64, error) {
	c := x.c
	q := url.Values{"after": {strconv.FormatInt(after, 10)}, "until": {"turnCompleted"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/threads/"+x.threadID+"/events?"+q.Encode(), nil)
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
				done, err := x.handle(ctx, data)
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

// handle shows one event, and answers it when it is a request; it reports
// whether it was the turn's end.
func (x *run) handle(ctx context.Context, data []byte) (bool, error) {
	var ev api.HTTPEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		return false, fatalError{fmt.Errorf("bad event %q: %w", data, err)}
	}
	if ev.RequestID != nil {
		// A request of this thread or of a sub-agent of its turn: nobody
		// else may be there to answer it.
		if err := x.handleRequest(ctx, parseRequest(ev, x.patches)); err != nil {
			if ctx.Err() != nil {
				return false, err
			}
			return false, fatalError{err}
		}
		return false, nil
	}
	var p struct {
		ThreadID string          `json:"threadId"`
		TurnID   string          `json:"turnId"`
		Item     json.RawMessage `json:"item"`
		Turn     struct {
			ID string `json:"id"`
		} `json:"turn"`
		Tool   string `json:"tool"`
		CallID string `json:"callId"`
		Error  struct {
			Message string `json:"message"`
		} `json:"error"`
		WillRetry bool   `json:"willRetry"`
		Detail    string `json:"detail"`
	}
	_ = json.Unmarshal(ev.Params, &p)
	switch ev.Method {
	case api.HTTPToolCallEventMethod:
		x.progress("tool call %s (%s) is waiting for a client that registered the tool; exec registers none", p.Tool, p.CallID)
		return false, nil
	case api.HTTPStreamErrorMethod:
		return false, &apiError{status: http.StatusGone, problem: api.Problem{Detail: p.Detail}}
	case api.MethodTurnCompleted:
		return p.Turn.ID == x.turnID || p.Turn.ID == "", nil
	}
	if (p.ThreadID != "" && p.ThreadID != x.threadID) || (p.TurnID != "" && p.TurnID != x.turnID) {
		return false, nil // a sub-agent's, or another turn's
	}
	switch ev.Method {
	case api.MethodItemStarted, api.MethodItemCompleted:
		x.itemProgress(ev.Method, p.Item)
	case api.MethodError:
		if p.WillRetry {
			x.progress("error (retrying): %s", p.Error.Message)
		} else {
			x.progress("error: %s", p.Error.Message)
		}
	}
	x.out.notification(ev.Method, ev.Params)
	return false, nil
}

// itemProgress shows a tool item as it starts and as it ends, and keeps a
// file change's patch for its approval.
func (x *run) itemProgress(method string, raw json.RawMessage) {
	var it struct {
		Type       string                 `json:"type"`
		ID         string                 `json:"id"`
		Tool       string                 `json:"tool"`
		Server     string                 `json:"server"`
		Command    string                 `json:"command"`
		Status     string                 `json:"status"`
		ExitCode   *int                   `json:"exitCode"`
		DurationMs *int64                 `json:"durationMs"`
		Changes    []api.FileUpdateChange `json:"changes"`
	}
	_ = json.Unmarshal(raw, &it)
	switch it.Type {
	case string(api.ItemAgentMessage), string(api.ItemUserMessage), string(api.ItemReasoning), string(api.ItemPlan):
		return
	case string(api.ItemFileChange):
		x.patches[it.ID] = it.Changes
	}
	label := it.Type
	if it.Server != "" {
		label += " " + it.Server
	}
	if it.Tool != "" {
		label += " " + it.Tool
	}
	if it.Command != "" {
		label += ": " + it.Command
	}
	for _, ch := range it.Changes {
		label += " " + ch.Path
	}
	if method == api.MethodItemStarted {
		x.progress("%s", label)
		return
	}
	// How it ended: a command's exit status, else the item's status, and
	// how long it ran when the item says.
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
	x.progress("%s -> %s", label, outcome)
}

// finish reports the ended turn and turns its outcome into Run's error.
func (x *run) finish(ctx context.Context, t api.HTTPTurn) error {
	x.out.turnEnded(t)
	msg := fmt.Sprintf("turn %s %s in %s", t.ID, t.Status, humanDuration(x.c.opts.Now().Sub(x.started)))
	if t.Usage != nil {
		msg += fmt.Sprintf(" (%d tokens: %d in, %d out)", t.Usage.TotalTokens, t.Usage.InputTokens, t.Usage.OutputTokens)
	}
	x.progress("%s", msg)
	switch {
	case t.Status == api.TurnCompleted:
		if x.c.schema != nil {
			if err := x.c.schema.check(t.FinalMessage); err != nil {
				x.progress("%v", err)
				return err
			}
			x.progress("the final message matches --output-schema")
		}
		return nil
	case ctx.Err() != nil:
		return x.stopped(ctx, nil)
	case x.refused != nil:
		return *x.refused
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
