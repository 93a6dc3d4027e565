package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/turns"
	"github.com/appserver/appserver/internal/turns/transcript"
)

// createThread serves POST /v1/threads.
func (a *API) createThread(w http.ResponseWriter, r *http.Request) *problem {
	var req api.HTTPThreadCreateRequest
	if p := a.decodeBody(w, r, &req, true); p != nil {
		return p
	}
	who := principalOf(r)
	// The thread's log subscribes from the start, so nothing the thread
	// does is missed and its tool calls always have a holder.
	l := a.logs.create()
	res, after, err := a.threads.StartThread(r.Context(), turns.Caller{Conn: l.conn, ClientName: who.ClientName(Originator), Principal: who}, api.ThreadStartParams{
		Model:                 req.Model,
		ModelProvider:         req.ModelProvider,
		Cwd:                   req.Cwd,
		ApprovalPolicy:        req.ApprovalPolicy,
		Sandbox:               req.Sandbox,
		BaseInstructions:      req.Instructions,
		DeveloperInstructions: req.DeveloperInstructions,
		DynamicTools:          req.DynamicTools,
	})
	if err != nil {
		a.logs.abandon(l)
		return a.fromError(r, err)
	}
	a.logs.bind(l, res.Thread.ID)
	defer l.release()
	if after != nil {
		after()
	}
	w.Header().Set("Location", "/v1/threads/"+res.Thread.ID)
	writeJSON(w, http.StatusCreated, api.HTTPThread{Thread: res.Thread})
	return nil
}

// getThread serves GET /v1/threads/{id}.
func (a *API) getThread(w http.ResponseWriter, r *http.Request) *problem {
	th, p := a.visibleThread(r)
	if p != nil {
		return p
	}
	writeJSON(w, http.StatusOK, api.HTTPThread{Thread: th})
	return nil
}

// deleteThread serves DELETE /v1/threads/{id}: the thread goes for good
// with its turns and items, as thread/delete does (a running turn is
// interrupted first; every websocket client hears thread/deleted). The
// API's event log of the thread, if it keeps one, is detached.
func (a *API) deleteThread(w http.ResponseWriter, r *http.Request) *problem {
	th, p := a.visibleThread(r)
	if p != nil {
		return p
	}
	after, err := a.threads.DeleteThread(r.Context(), api.ThreadDeleteParams{ThreadID: th.ID})
	if err != nil {
		return a.fromError(r, err)
	}
	a.logs.forget(th.ID)
	if after != nil {
		after()
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// queryInt parses an optional non-negative integer query parameter.
func queryInt(r *http.Request, name string, maxValue int64) (int64, bool, *problem) {
	raw := r.URL.Query().Get(name)
	if raw == "" {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || n < 0 || n > maxValue {
		return 0, false, invalid("query parameter %s must be an integer from 0 to %d, got %q", name, maxValue, raw)
	}
	return n, true, nil
}

// pageLimit parses ?limit=: 1 to most, def when absent.
func pageLimit(r *http.Request, def int, most int64) (int, *problem) {
	n, ok, p := queryInt(r, "limit", most)
	if p != nil {
		return 0, p
	}
	if !ok {
		return def, nil
	}
	if n == 0 {
		return 0, invalid("query parameter limit must be from 1 to %d", most)
	}
	return int(n), nil
}

// seqCursor parses ?cursor= of a list paged by sequence numbers: a
// positive number, 0 when absent.
func seqCursor(r *http.Request) (int64, *problem) {
	c := r.URL.Query().Get("cursor")
	if c == "" {
		return 0, nil
	}
	seq, err := strconv.ParseInt(c, 10, 64)
	if err != nil || seq <= 0 {
		return 0, invalid("query parameter cursor %q is not a cursor of this list", c)
	}
	return seq, nil
}

// listThreads serves GET /v1/threads: newest first, cursor-paginated. For
// a principal, other principals' threads are skipped, so a page may hold
// fewer than limit threads; follow nextCursor until it is null.
func (a *API) listThreads(w http.ResponseWriter, r *http.Request) *problem {
	limit, p := pageLimit(r, transcript.DefaultItemsPage, transcript.MaxItemsPage)
	if p != nil {
		return p
	}
	q := r.URL.Query()
	params := api.ThreadListParams{}
	if c := q.Get("cursor"); c != "" {
		params.Cursor = &c
	}
	switch v := q.Get("archived"); v {
	case "", "false":
	case "true":
		t := true
		params.Archived = &t
	default:
		return invalid("query parameter archived must be true or false, got %q", v)
	}
	n := uint32(limit)
	params.Limit = &n
	res, err := a.threads.ListAllThreads(r.Context(), principalOf(r), params)
	if err != nil {
		return a.fromError(r, err)
	}
	out := api.HTTPThreadList{Data: api.List[api.Thread]{}, NextCursor: res.NextCursor}
	out.Data = append(out.Data, res.Data...)
	writeJSON(w, http.StatusOK, out)
	return nil
}

// listChildren serves GET /v1/threads/{id}/children: the sub-agents the
// thread spawned, in spawn order, on one page (a thread has few: the
// collaboration tools limit them).
func (a *API) listChildren(w http.ResponseWriter, r *http.Request) *problem {
	th, p := a.visibleThread(r)
	if p != nil {
		return p
	}
	kids, err := a.threads.ListChildren(r.Context(), th.ID)
	if err != nil {
		return a.fromError(r, err)
	}
	who := principalOf(r)
	out := api.HTTPThreadList{Data: make(api.List[api.Thread], 0, len(kids))}
	for _, k := range kids {
		if who.Sees(k) {
			out.Data = append(out.Data, k)
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// listItems serves GET /v1/threads/{id}/items: persisted items in sequence
// order, optionally only those after ?since=SEQ or of ?turnId=.
func (a *API) listItems(w http.ResponseWriter, r *http.Request) *problem {
	th, p := a.visibleThread(r)
	if p != nil {
		return p
	}
	limit, p := pageLimit(r, transcript.DefaultItemsPage, transcript.MaxItemsPage)
	if p != nil {
		return p
	}
	since, _, p := queryInt(r, "since", 1<<62)
	if p != nil {
		return p
	}
	q := r.URL.Query()
	if th.Ephemeral {
		return a.listEphemeralItems(w, r, th, limit, q.Get("turnId"), q.Get("cursor"), since)
	}
	items, next, err := a.threads.ItemRecords(r.Context(), transcript.ItemsQuery{
		ThreadID: th.ID, TurnID: q.Get("turnId"), AfterSeq: since, Limit: limit, Cursor: q.Get("cursor"),
	})
	if err != nil {
		if apperr.Is(err, apperr.Invalid) {
			return invalid("invalid cursor")
		}
		return a.fromError(r, err)
	}
	out := api.HTTPItemList{Data: make(api.List[api.HTTPItem], 0, len(items))}
	for _, it := range items {
		var ti api.ThreadItem
		if err := json.Unmarshal(it.Payload, &ti); err != nil {
			return a.fromError(r, apperr.Wrap(apperr.Internal, err, "corrupt item"))
		}
		seq := it.Seq
		out.Data = append(out.Data, api.HTTPItem{Seq: &seq, TurnID: it.TurnID, Item: ti})
	}
	if next != "" {
		out.NextCursor = &next
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// listEphemeralItems lists a memory-only thread's items (created over the
// websocket; the HTTP API never creates one), which have no stored
// sequence numbers.
func (a *API) listEphemeralItems(w http.ResponseWriter, r *http.Request, th api.Thread, limit int, turnID, cursor string, since int64) *problem {
	if since > 0 {
		return invalid("since is not supported for an ephemeral thread")
	}
	params := api.ThreadItemsListParams{ThreadID: th.ID}
	if turnID != "" {
		params.TurnID = &turnID
	}
	if cursor != "" {
		params.Cursor = &api.ThreadItemsListCursor{Opaque: cursor}
	}
	n := uint32(limit)
	params.Limit = &n
	res, err := a.threads.ListItems(r.Context(), params)
	if err != nil {
		return a.fromError(r, err)
	}
	out := api.HTTPItemList{Data: make(api.List[api.HTTPItem], 0, len(res.Data)), NextCursor: res.NextCursor}
	for _, e := range res.Data {
		out.Data = append(out.Data, api.HTTPItem{TurnID: e.TurnID, Item: e.Item})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
