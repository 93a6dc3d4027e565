package execclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/appserver/appserver/api"
)

// ApprovalRule is what exec does with an approval or user-input request
// shown on the turn's event stream.
type ApprovalRule string

// The approval rules of --on-approval.
const (
	// ApprovalAsk asks at the terminal: the default when stdin is one.
	ApprovalAsk ApprovalRule = "ask"
	// ApprovalDecline declines the request and lets the turn go on (the
	// model is told): the default without a terminal, as `codex exec`,
	// which refuses every approval it is sent.
	ApprovalDecline ApprovalRule = "decline"
	// ApprovalFail refuses the request and interrupts the turn: exec then
	// exits with ExitApprovalRefused.
	ApprovalFail ApprovalRule = "fail"
)

// Terminal is where exec asks a person: the controlling terminal, opened
// for reading with deadlines so that a question can be abandoned when the
// run ends (OpenTerminal).
type Terminal interface {
	io.ReadWriter
	SetReadDeadline(t time.Time) error
}

// The kinds of requests, as approval.requested names them.
const (
	kindCommand     = "command_execution"
	kindFileChange  = "file_change"
	kindUserInput   = "user_input"
	kindElicitation = "mcp_elicitation"
)

// request is an approval or user-input request shown on the stream.
type request struct {
	id, method, kind         string
	threadID, turnID, itemID string
	command, cwd, reason     string
	changes                  []api.FileUpdateChange
	questions                []api.ToolRequestUserInputQuestion
	server, message          string
	// wantsContent is set for an elicitation whose form asks for fields:
	// accepting it needs content exec cannot make up.
	wantsContent bool
	// decisions are a command approval's available decisions; empty is
	// all of them.
	decisions []string
}

// parseRequest reads a request event; patches are the file changes of
// the turn's items seen so far, for the diff of a file change approval.
func parseRequest(ev api.HTTPEvent, patches map[string][]api.FileUpdateChange) *request {
	r := &request{id: *ev.RequestID, method: ev.Method, kind: ev.Method}
	switch ev.Method {
	case api.MethodCommandExecutionRequestApproval:
		var p api.CommandExecutionRequestApprovalParams
		_ = json.Unmarshal(ev.Params, &p)
		r.kind, r.threadID, r.turnID, r.itemID = kindCommand, p.ThreadID, p.TurnID, p.ItemID
		r.command, r.cwd, r.reason = deref(p.Command), deref(p.Cwd), deref(p.Reason)
		if p.NetworkApprovalContext != nil && r.command == "" {
			r.command = fmt.Sprintf("network access to %s (%s)", p.NetworkApprovalContext.Host, p.NetworkApprovalContext.Protocol)
		}
		for _, d := range p.AvailableDecisions {
			r.decisions = append(r.decisions, d.Decision)
		}
	case api.MethodFileChangeRequestApproval:
		var p api.FileChangeRequestApprovalParams
		_ = json.Unmarshal(ev.Params, &p)
		r.kind, r.threadID, r.turnID, r.itemID = kindFileChange, p.ThreadID, p.TurnID, p.ItemID
		r.reason, r.changes = deref(p.Reason), patches[p.ItemID]
		if p.GrantRoot != nil {
			r.reason = strings.TrimSpace(r.reason + " (write access to " + *p.GrantRoot + ")")
		}
	case api.MethodToolRequestUserInput:
		var p api.ToolRequestUserInputParams
		_ = json.Unmarshal(ev.Params, &p)
		r.kind, r.threadID, r.turnID, r.itemID = kindUserInput, p.ThreadID, p.TurnID, p.ItemID
		r.questions = p.Questions
	case api.MethodMcpServerElicitationRequest:
		var p api.McpServerElicitationRequestParams
		_ = json.Unmarshal(ev.Params, &p)
		r.kind, r.threadID, r.turnID = kindElicitation, p.ThreadID, deref(p.TurnID)
		r.server, r.message = p.ServerName, p.Message
		var schema struct {
			Properties map[string]json.RawMessage `json:"properties"`
		}
		if len(p.RequestedSchema) > 0 && json.Unmarshal(p.RequestedSchema, &schema) == nil {
			r.wantsContent = len(schema.Properties) > 0
		}
	}
	return r
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// describe is the request in one line, for stderr.
func (r *request) describe() string {
	var s string
	switch r.kind {
	case kindCommand:
		s = fmt.Sprintf("approval requested: run `%s`", r.command)
		if r.cwd != "" {
			s += " in " + r.cwd
		}
	case kindFileChange:
		paths := make([]string, 0, len(r.changes))
		for _, c := range r.changes {
			paths = append(paths, c.Path)
		}
		s = "approval requested: change files"
		if len(paths) > 0 {
			s += " " + strings.Join(paths, ", ")
		}
	case kindUserInput:
		qs := make([]string, 0, len(r.questions))
		for _, q := range r.questions {
			qs = append(qs, strconv.Quote(q.Question))
		}
		s = "user input requested: " + strings.Join(qs, ", ")
	case kindElicitation:
		s = fmt.Sprintf("MCP server %s asks: %q", r.server, r.message)
	default:
		s = "request " + r.method + ", which exec cannot answer"
	}
	if r.reason != "" {
		s += " (reason: " + r.reason + ")"
	}
	return s
}

// known reports whether exec can answer the request's kind.
func (r *request) known() bool {
	switch r.kind {
	case kindCommand, kindFileChange, kindUserInput, kindElicitation:
		return true
	}
	return false
}

// answer is exec's answer to a request: the word shown (accept, decline,
// cancel, …), the body posted and whether the turn must be interrupted.
type answer struct {
	word      string
	body      any
	interrupt bool
}

// ruleAnswer is the answer of an --on-approval rule: decline, or refuse
// and interrupt.
func ruleAnswer(rule ApprovalRule, r *request) answer {
	fail := rule == ApprovalFail
	word := api.DecisionDecline
	if fail {
		word = api.DecisionCancel
	}
	a := answer{word: word, interrupt: fail}
	switch r.kind {
	case kindCommand, kindFileChange:
		a.body = map[string]string{"decision": word}
	case kindUserInput:
		a.body = api.ToolRequestUserInputResult{Answers: api.Map[api.ToolRequestUserInputAnswer]{}}
	case kindElicitation:
		a.body = api.McpServerElicitationRequestResult{Action: api.McpServerElicitationAction(word)}
	}
	return a
}

// handleRequest answers a request shown on the stream: at the terminal or
// by the rule, and says so on stderr. A request exec cannot answer
// interrupts the turn, so that nothing waits silently.
func (x *run) handleRequest(ctx context.Context, r *request) error {
	x.out.requested(r)
	x.progress("%s", r.describe())
	rule := x.c.opts.OnApproval
	var a answer
	by := "rule"
	switch {
	case !r.known():
		a = answer{word: api.DecisionCancel, interrupt: true}
		x.progress("exec cannot answer %s: interrupting the turn", r.method)
	case rule == ApprovalAsk:
		var err error
		if a, err = x.ask(ctx, r); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			// The terminal is gone (EOF): nobody can answer any more.
			x.progress("no answer from the terminal (%v): declined; the turn goes on", err)
			a, rule = ruleAnswer(ApprovalDecline, r), ApprovalDecline
		} else {
			by = "terminal"
		}
	default:
		a = ruleAnswer(rule, r)
		if a.interrupt {
			x.progress("--on-approval %s: refused; interrupting the turn", rule)
		} else {
			x.progress("--on-approval %s: declined; the turn goes on", rule)
		}
	}
	if a.body != nil {
		_, err := x.c.do(ctx, http.MethodPost, "/threads/"+x.threadID+"/approvals/"+r.id, nil, a.body, nil)
		var ae *apiError
		switch {
		case errors.As(err, &ae) && (ae.status == http.StatusConflict || ae.status == http.StatusNotFound):
			// Another client answered first, or the turn moved on.
			x.progress("request %s was already answered or has ended", r.id)
			return nil
		case err != nil:
			return fmt.Errorf("answer request %s: %w", r.id, err)
		}
	}
	x.out.answered(r, a.word, by)
	if a.interrupt {
		how := "--on-approval " + string(rule)
		switch {
		case !r.known():
			how = "no way to answer it"
		case by == "terminal":
			how = "cancelled at the terminal"
		}
		x.refused = &ApprovalRefusedError{Request: r.describe(), Rule: how}
		// A command or patch answered "cancel" interrupts the turn on its
		// own; the others need asking, and asking twice does no harm.
		if _, err := x.c.do(ctx, http.MethodPost, "/threads/"+x.threadID+"/turns/"+x.turnID+"/interrupt", nil, nil, nil); err != nil {
			var ae *apiError
			if !errors.As(err, &ae) || ae.status != http.StatusConflict {
				return fmt.Errorf("interrupt the turn: %w", err)
			}
		}
	}
	return nil
}

// ask puts the request to the person at the terminal and returns the
// answer; it returns ctx's error when the run ends first and io.EOF when
// the terminal closes.
func (x *run) ask(ctx context.Context, r *request) (answer, error) {
	t := x.c.opts.Terminal
	switch r.kind {
	case kindCommand, kindFileChange:
		if r.kind == kindCommand {
			fmt.Fprintf(t, "\n  $ %s\n", r.command)
			if r.cwd != "" {
				fmt.Fprintf(t, "  in %s\n", r.cwd)
			}
		}
		for _, c := range r.changes {
			fmt.Fprintf(t, "\n  %s %s\n", c.Kind.Type, c.Path)
			for line := range strings.SplitSeq(strings.TrimRight(c.Diff, "\n"), "\n") {
				fmt.Fprintf(t, "  %s\n", line)
			}
		}
		if r.reason != "" {
			fmt.Fprintf(t, "  reason: %s\n", r.reason)
		}
		choices := []struct{ key, word, label string }{
			{"y", api.DecisionAccept, "[y]es"},
			{"a", api.DecisionAcceptForSession, "[a]lways in this thread"},
			{"n", api.DecisionDecline, "[n]o, go on"},
			{"c", api.DecisionCancel, "[c]ancel the turn"},
		}
		var offered []string
		for _, ch := range choices {
			if r.offers(ch.word) {
				offered = append(offered, ch.label)
			}
		}
		verb := "Run it?"
		if r.kind == kindFileChange {
			verb = "Apply it?"
		}
		for {
			fmt.Fprintf(t, "%s %s: ", verb, strings.Join(offered, ", "))
			line, err := x.readLine(ctx)
			if err != nil {
				return answer{}, err
			}
			for _, ch := range choices {
				if r.offers(ch.word) && strings.EqualFold(line, ch.key) {
					return answer{word: ch.word, body: map[string]string{"decision": ch.word}, interrupt: ch.word == api.DecisionCancel}, nil
				}
			}
		}
	case kindUserInput:
		answers := api.Map[api.ToolRequestUserInputAnswer]{}
		for _, q := range r.questions {
			fmt.Fprintf(t, "\n  %s: %s\n", q.Header, q.Question)
			for i, o := range q.Options {
				fmt.Fprintf(t, "    %d. %s — %s\n", i+1, o.Label, o.Description)
			}
			fmt.Fprint(t, "Answer (a number, your own words, or empty to skip): ")
			line, err := x.readLine(ctx)
			if err != nil {
				return answer{}, err
			}
			if n, err := strconv.Atoi(line); err == nil && n >= 1 && n <= len(q.Options) {
				line = q.Options[n-1].Label
			}
			if line != "" {
				answers[q.ID] = api.ToolRequestUserInputAnswer{Answers: api.List[string]{line}}
			}
		}
		return answer{word: "answered", body: api.ToolRequestUserInputResult{Answers: answers}}, nil
	default: // kindElicitation
		fmt.Fprintf(t, "\n  %s: %s\n", r.server, r.message)
		offered := "[d]ecline, [c]ancel the turn"
		if !r.wantsContent {
			offered = "[a]ccept, " + offered
		}
		for {
			fmt.Fprintf(t, "Answer? %s: ", offered)
			line, err := x.readLine(ctx)
			if err != nil {
				return answer{}, err
			}
			switch strings.ToLower(line) {
			case "a":
				if !r.wantsContent {
					return answer{word: string(api.ElicitationAccept), body: api.McpServerElicitationRequestResult{Action: api.ElicitationAccept}}, nil
				}
			case "d":
				return answer{word: string(api.ElicitationDecline), body: api.McpServerElicitationRequestResult{Action: api.ElicitationDecline}}, nil
			case "c":
				return answer{word: string(api.ElicitationCancel), body: api.McpServerElicitationRequestResult{Action: api.ElicitationCancel}, interrupt: true}, nil
			}
		}
	}
}

// offers reports whether a command approval offers the decision.
func (r *request) offers(decision string) bool {
	if len(r.decisions) == 0 {
		return true
	}
	for _, d := range r.decisions {
		if d == decision {
			return true
		}
	}
	return false
}

// readLine reads one line from the terminal. It reads with short
// deadlines so that it notices the end of the run (ctx) while nobody
// types, and keeps what was typed ahead for the next question.
func (x *run) readLine(ctx context.Context) (string, error) {
	t := x.c.opts.Terminal
	buf := make([]byte, 256)
	for {
		if i := bytes.IndexByte(x.typed, '\n'); i >= 0 {
			line := strings.TrimSpace(string(x.typed[:i]))
			x.typed = x.typed[i+1:]
			return line, nil
		}
		if err := ctx.Err(); err != nil {
			return "", err
		}
		deadline := t.SetReadDeadline(time.Now().Add(200*time.Millisecond)) == nil
		n, err := t.Read(buf)
		x.typed = append(x.typed, buf[:n]...)
		switch {
		case err == nil:
		case deadline && errors.Is(err, os.ErrDeadlineExceeded):
		default:
			return "", err
		}
	}
}
