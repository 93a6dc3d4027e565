package server

import (
	"context"
	"encoding/json"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/jsonscan"
	"github.com/appserver/appserver/internal/principal"
)

// operatorOnly are the methods a principal's connection may not call: they
// run commands outside any thread (command/exec), reach the daemon's MCP
// servers directly, or report on the whole daemon (server/diagnostics:
// every principal's requests, threads and turns). A principal gets the threads it created and what runs
// inside them, and writes its own user config (the config writer takes
// the connection's principal), nothing of the daemon's.
var operatorOnly = map[string]bool{
	api.MethodCommandExec:           true,
	api.MethodCommandExecWrite:      true,
	api.MethodCommandExecResize:     true,
	api.MethodCommandExecTerminate:  true,
	api.MethodMcpServerToolCall:     true,
	api.MethodMcpServerResourceRead: true,
	api.MethodConfigMcpServerReload: true,
	api.MethodServerDiagnostics:     true,
}

// Principal is who the connection acts for: the principal whose token
// opened it, or the operator.
func (s *Session) Principal() principal.Principal { return s.who }

// admit holds a principal's request to what it may reach before its
// method runs: the daemon's own methods are refused, and a request naming
// a thread the principal may not see answers as for a thread that does
// not exist (thread/read's answer), so that nothing tells the two apart.
// The thread's settings the method may change are bounded by turns
// (turns.Caller.Principal); lists are filtered by their methods.
func (s *Server) admit(ctx context.Context, c *Call) error {
	who := c.Session.who
	if who.IsOperator() {
		return nil
	}
	if operatorOnly[c.Method] {
		return InvalidRequest("%s is not available to %s: it reaches the daemon, not a thread", c.Method, who)
	}
	id := threadIDOf(c)
	if id == "" || s.cfg.Threads == nil {
		return nil
	}
	return s.visible(ctx, who, id)
}

// visible checks that a principal may see a thread.
func (s *Server) visible(ctx context.Context, who principal.Principal, id string) error {
	res, err := s.cfg.Threads.ReadThread(ctx, api.ThreadReadParams{ThreadID: id})
	if err != nil {
		return err
	}
	if !who.Sees(res.Thread) {
		return apperr.New(apperr.NotFound, "thread not loaded: %s", id)
	}
	return nil
}

// threadIDOf is the threadId a request's params name, "" when none.
func threadIDOf(c *Call) string {
	if members, ok := c.members(); ok {
		if v, ok := lastMember(members, "threadId"); ok && len(v) > 0 && v[0] == '"' {
			id, _ := jsonscan.Text(v)
			return id
		}
		return ""
	}
	var p struct {
		ThreadID string `json:"threadId"`
	}
	if json.Unmarshal(c.Params, &p) != nil {
		return ""
	}
	return p.ThreadID
}

// visibleIDs keeps the thread ids a principal may see.
func (s *Server) visibleIDs(ctx context.Context, who principal.Principal, ids []string) []string {
	if who.IsOperator() || s.cfg.Threads == nil {
		return ids
	}
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if s.visible(ctx, who, id) == nil {
			out = append(out, id)
		}
	}
	return out
}
