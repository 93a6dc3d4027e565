package httpapi

import (
	"encoding/json"
	"net/http"
	"slices"

	"github.com/go-chi/chi/v5"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/audit"
)

// maxSettledRequests is how many settled request ids a log remembers (to
// answer a late answer 409 rather than 404).
const maxSettledRequests = 1024

func (l *eventLog) rememberSettledLocked(key string) {
	l.settled = append(l.settled, key)
	if len(l.settled) > maxSettledRequests {
		l.settled = l.settled[1:]
	}
}

// answerRequest delivers an HTTP client's answer to a request the log
// showed: 404 for an unknown request, 409 for one already settled.
func (l *eventLog) answerRequest(id string, by audit.Actor, decode func(method string) (json.RawMessage, *problem)) *problem {
	l.mu.Lock()
	r := l.requests[id]
	settled := slices.Contains(l.settled, id)
	l.mu.Unlock()
	if r == nil {
		if settled {
			return conflict("request %s was already answered or has ended", id)
		}
		return notFound("no pending request %s in thread %s", id, l.thread)
	}
	raw, p := decode(r.Method)
	if p != nil {
		return p
	}
	if !r.AnswerAs(l.conn, by, raw, nil) {
		return conflict("request %s was already answered or has ended", id)
	}
	return nil
}

// decodeRequestAnswer checks an answer against the request's method: the
// result a websocket client would send, strictly decoded.
func decodeRequestAnswer(b []byte) func(method string) (json.RawMessage, *problem) {
	return func(method string) (json.RawMessage, *problem) {
		var present map[string]json.RawMessage
		if err := json.Unmarshal(b, &present); err != nil || present == nil {
			return nil, invalid("the answer must be a JSON object")
		}
		switch method {
		case "item/commandExecution/requestApproval":
			var v api.CommandExecutionRequestApprovalResult
			if p := decodeStrict(b, &v); p != nil {
				return nil, p
			}
			if _, ok := present["decision"]; !ok {
				return nil, invalid("missing field decision")
			}
		case "item/fileChange/requestApproval":
			var v api.FileChangeRequestApprovalResult
			if p := decodeStrict(b, &v); p != nil {
				return nil, p
			}
			switch v.Decision {
			case api.DecisionAccept, api.DecisionAcceptForSession, api.DecisionDecline, api.DecisionCancel:
			default:
				return nil, invalid("decision must be accept, acceptForSession, decline or cancel")
			}
		case "item/tool/requestUserInput":
			var v api.ToolRequestUserInputResult
			if p := decodeStrict(b, &v); p != nil {
				return nil, p
			}
			if _, ok := present["answers"]; !ok {
				return nil, invalid("missing field answers")
			}
		case "mcpServer/elicitation/request":
			var v api.McpServerElicitationRequestResult
			if p := decodeStrict(b, &v); p != nil {
				return nil, p
			}
			switch v.Action {
			case api.ElicitationAccept, api.ElicitationDecline, api.ElicitationCancel:
			default:
				return nil, invalid("action must be accept, decline or cancel")
			}
		}
		return json.RawMessage(b), nil
	}
}

// answerApproval serves POST /v1/threads/{id}/approvals/{requestId}: the
// answer to a request shown on the event stream with that requestId,
// exactly the result a websocket client would send ({"decision": …} for
// approvals, {"answers": …} for user input). The first answer is used,
// over either transport; a later one gets 409.
func (a *API) answerApproval(w http.ResponseWriter, r *http.Request) *problem {
	th, p := a.visibleThread(r)
	if p != nil {
		return p
	}
	b, p := a.readBody(w, r, false)
	if p != nil {
		return p
	}
	id := chi.URLParam(r, "requestID")
	l := a.logs.lookup(th.ID)
	if l == nil {
		return notFound("no pending request %s in thread %s", id, th.ID)
	}
	by, _ := audit.ActorOf(r.Context())
	if p := l.answerRequest(id, by, decodeRequestAnswer(b)); p != nil {
		return p
	}
	writeJSON(w, http.StatusOK, api.HTTPRequestAnswered{ThreadID: th.ID, RequestID: id})
	return nil
}
