package httpapi

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/dynamic"
)

// answerToolCall serves POST /v1/threads/{id}/tool-calls/{callId}: the
// answer settles the pending call through the broker, the same oneshot the
// websocket path resolves, so exactly one answer is used whichever
// transport brings it first; any later one gets 409.
func (a *API) answerToolCall(w http.ResponseWriter, r *http.Request) *problem {
	th, p := a.visibleThread(r)
	if p != nil {
		return p
	}
	b, p := a.readBody(w, r, false)
	if p != nil {
		return p
	}
	var shape api.HTTPToolCallAnswer
	if p := decodeStrict(b, &shape); p != nil {
		return p
	}
	// The websocket path substitutes a failure for an unusable answer; an
	// HTTP client gets told instead, and the call stays pending.
	res, err := dynamic.DecodeResult(b)
	if err != nil {
		return invalid("invalid tool call answer: %v", err)
	}
	callID := chi.URLParam(r, "callID")
	pending, ok := a.cfg.Hub.Broker().Lookup(th.ID, callID)
	if !ok {
		if l := a.logs.lookup(th.ID); l != nil && l.showedCall(callID) {
			return conflict("tool call %s was already answered or has ended", callID)
		}
		return notFound("no pending tool call %s in thread %s", callID, th.ID)
	}
	if !pending.Resolve(res) {
		return conflict("tool call %s was already answered or has ended", callID)
	}
	writeJSON(w, http.StatusOK, api.HTTPToolCallAnswered{ThreadID: th.ID, CallID: callID})
	return nil
}
