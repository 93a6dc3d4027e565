package httpapi

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/turns"
)

// listQueue serves GET /v1/threads/{id}/queue: the thread's queued
// messages in the order they will start, paged as thread/queue/list.
func (a *API) listQueue(w http.ResponseWriter, r *http.Request) *problem {
	th, p := a.visibleThread(r)
	if p != nil {
		return p
	}
	params := api.ThreadQueueListParams{ThreadID: th.ID}
	if c := r.URL.Query().Get("cursor"); c != "" {
		params.Cursor = &c
	}
	n, ok, p := queryInt(r, "limit", 100)
	if p != nil {
		return p
	}
	if ok {
		limit := uint32(n)
		params.Limit = &limit
	}
	res, err := a.threads.QueueList(r.Context(), params)
	if err != nil {
		return a.fromError(r, err)
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// addQueue serves POST /v1/threads/{id}/queue: queues a message (an idle
// thread starts it at once); a repeated clientUserMessageId answers the
// entry it queued.
func (a *API) addQueue(w http.ResponseWriter, r *http.Request) *problem {
	th, p := a.visibleThread(r)
	if p != nil {
		return p
	}
	var req api.HTTPQueueAddRequest
	if p := a.decodeBody(w, r, &req, false); p != nil {
		return p
	}
	if p := validateInput(req.Input); p != nil {
		return p
	}
	res, after, err := a.threads.QueueAdd(r.Context(), api.ThreadQueueAddParams{ThreadID: th.ID,
		ClientUserMessageID: req.ClientUserMessageID, Input: req.Input, ResponsesapiClientMetadata: req.ResponsesapiClientMetadata})
	if err != nil {
		return a.fromError(r, err)
	}
	if after != nil {
		after()
	}
	w.Header().Set("Location", "/v1/threads/"+th.ID+"/queue/"+res.QueuedSubmission.ID)
	writeJSON(w, http.StatusOK, res)
	return nil
}

// updateQueue serves PATCH /v1/threads/{id}/queue/{queuedId}.
func (a *API) updateQueue(w http.ResponseWriter, r *http.Request) *problem {
	th, p := a.visibleThread(r)
	if p != nil {
		return p
	}
	var req api.HTTPQueueUpdateRequest
	if p := a.decodeBody(w, r, &req, false); p != nil {
		return p
	}
	if p := validateInput(req.Input); p != nil {
		return p
	}
	res, after, err := a.threads.QueueUpdate(r.Context(), api.ThreadQueueUpdateParams{ThreadID: th.ID,
		QueuedSubmissionID: chi.URLParam(r, "queuedID"), Input: req.Input, ResponsesapiClientMetadata: req.ResponsesapiClientMetadata})
	if err != nil {
		return a.fromError(r, err)
	}
	if after != nil {
		after()
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// deleteQueue serves DELETE /v1/threads/{id}/queue/{queuedId}: 204, or
// 404 for an entry not queued.
func (a *API) deleteQueue(w http.ResponseWriter, r *http.Request) *problem {
	th, p := a.visibleThread(r)
	if p != nil {
		return p
	}
	id := chi.URLParam(r, "queuedID")
	res, after, err := a.threads.QueueDelete(r.Context(), api.ThreadQueueDeleteParams{ThreadID: th.ID, QueuedSubmissionID: id})
	if err != nil {
		return a.fromError(r, err)
	}
	if !res.Deleted {
		return notFound("queued submission not found: %s", id)
	}
	if after != nil {
		after()
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// orderQueue serves PUT /v1/threads/{id}/queue: the entries in a new
// order.
func (a *API) orderQueue(w http.ResponseWriter, r *http.Request) *problem {
	th, p := a.visibleThread(r)
	if p != nil {
		return p
	}
	var req api.HTTPQueueOrderRequest
	if p := a.decodeBody(w, r, &req, false); p != nil {
		return p
	}
	_, after, err := a.threads.QueueReorder(r.Context(), api.ThreadQueueReorderParams{ThreadID: th.ID, QueuedSubmissionIDs: req.QueuedSubmissionIDs})
	if err != nil {
		return a.fromError(r, err)
	}
	if after != nil {
		after()
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// startQueue serves POST /v1/threads/{id}/queue/{queuedId}/start: the
// entry becomes a turn, answered as POST .../turns answers (202 and the
// turn; Location names it).
func (a *API) startQueue(w http.ResponseWriter, r *http.Request) *problem {
	th, p := a.visibleThread(r)
	if p != nil {
		return p
	}
	if p := a.decodeBody(w, r, &struct{}{}, true); p != nil {
		return p
	}
	who := principalOf(r)
	ctx := r.Context()
	l, err := a.logs.attach(ctx, th.ID)
	if err != nil {
		return a.fromError(r, err)
	}
	defer l.release()
	id := chi.URLParam(r, "queuedID")
	res, after, err := a.threads.QueueStart(ctx, turns.Caller{Conn: l.conn, ClientName: who.ClientName(Originator), Principal: who},
		api.ThreadQueueStartParams{ThreadID: th.ID, QueuedSubmissionID: &id})
	if err != nil {
		return a.fromError(r, err)
	}
	eventsAfter := l.lastSeq()
	if after != nil {
		after()
	}
	view, p := a.turnView(ctx, th, res.Turn.ID)
	if p != nil {
		return p
	}
	view.EventsAfter = &eventsAfter
	w.Header().Set("Location", "/v1/threads/"+th.ID+"/turns/"+res.Turn.ID)
	status := http.StatusOK
	if view.Status == api.TurnInProgress {
		status = http.StatusAccepted
	}
	writeJSON(w, status, view)
	return nil
}
