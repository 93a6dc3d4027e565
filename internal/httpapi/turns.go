package httpapi

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/turns"
)

// maxPreferWait caps Prefer: wait=N.
const maxPreferWait = time.Hour

// waitOpts is how long a request blocks for its turn to end.
type waitOpts struct {
	wait    bool
	bounded bool          // with a bound: Prefer: wait=N
	limit   time.Duration // the bound
	applied string        // Preference-Applied value
}

// parseWait reads ?wait=true (until the turn ends) and Prefer: wait=N (at
// most N seconds, RFC 7240; with both, the bound applies).
func parseWait(r *http.Request) (waitOpts, *problem) {
	var o waitOpts
	switch v := r.URL.Query().Get("wait"); v {
	case "", "false", "0":
	case "true", "1":
		o.wait = true
	default:
		return o, invalid("query parameter wait must be true or false, got %q", v)
	}
	for _, h := range r.Header.Values("Prefer") {
		for pref := range strings.SplitSeq(h, ",") {
			name, val, _ := strings.Cut(strings.TrimSpace(pref), "=")
			if !strings.EqualFold(strings.TrimSpace(name), "wait") {
				continue
			}
			n, err := strconv.Atoi(strings.Trim(strings.TrimSpace(val), `"`))
			if err != nil || n < 0 {
				return o, invalid("Prefer: wait must be a whole number of seconds, got %q", val)
			}
			d := min(time.Duration(n)*time.Second, maxPreferWait)
			o.wait, o.bounded, o.limit = true, true, d
			o.applied = "wait=" + strconv.Itoa(int(d/time.Second))
		}
	}
	return o, nil
}

// await blocks until the turn ends, the bound passes, the client leaves or
// the API stops; it reports whether the turn ended.
func (a *API) await(ctx context.Context, st *turnState, o waitOpts) bool {
	var timeout <-chan time.Time
	if o.bounded {
		t := time.NewTimer(o.limit)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-st.done:
		return true
	case <-ctx.Done():
	case <-timeout:
	case <-a.stopping:
	}
	select {
	case <-st.done:
		return true
	default:
		return false
	}
}

// validateInput checks the input items of a turn.
// strictUserInput is api.UserInput's field set without its lenient
// decoder, whose json.Unmarshal would drop unknown members: a CI bot that
// misspells "text_elements" hears about it.
type strictUserInput struct {
	Type         api.UserInputType `json:"type"`
	Text         string            `json:"text"`
	TextElements []api.TextElement `json:"text_elements"`
	URL          string            `json:"url"`
	FileID       string            `json:"fileId"`
	Detail       *api.ImageDetail  `json:"detail"`
	Path         string            `json:"path"`
	Name         string            `json:"name"`
}

// strictInputFields rejects unknown members inside the input items of a
// turn body that decodeStrict already accepted.
func strictInputFields(body []byte) *problem {
	var top struct {
		Input []json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal(body, &top); err != nil {
		return invalid("%s", describeJSONError(err))
	}
	for i, raw := range top.Input {
		var u strictUserInput
		if p := decodeStrict(raw, &u); p != nil {
			p.detail = fmt.Sprintf("input[%d]: %s", i, p.detail)
			return p
		}
	}
	return nil
}

func validateInput(in api.List[api.UserInput]) *problem {
	if len(in) == 0 {
		return invalid("input must hold at least one item, e.g. [{\"type\":\"text\",\"text\":\"…\"}]")
	}
	for i, u := range in {
		switch u.Type {
		case api.UserInputText:
			// No store keeps a NUL in text: refused here, not as a
			// failed turn.
			if strings.IndexByte(u.Text, 0) >= 0 {
				return invalid("input[%d].text contains a NUL character", i)
			}
		case api.UserInputImage, api.UserInputAudio:
			if u.URL == "" && u.FileID == "" {
				return invalid("input[%d]: %s needs url or fileId", i, u.Type)
			}
		case api.UserInputLocalImage, api.UserInputLocalAudio:
			if u.Path == "" {
				return invalid("input[%d]: %s needs path", i, u.Type)
			}
		case api.UserInputSkill, api.UserInputMention:
			if u.Name == "" || u.Path == "" {
				return invalid("input[%d]: %s needs name and path", i, u.Type)
			}
		case "":
			return invalid("input[%d]: missing field type", i)
		default:
			return invalid("input[%d]: unknown input type %q (expected text, image, localImage, audio, localAudio, skill or mention)", i, u.Type)
		}
	}
	return nil
}

// postTurn serves POST /v1/threads/{id}/turns.
func (a *API) postTurn(w http.ResponseWriter, r *http.Request) *problem {
	th, p := a.visibleThread(r)
	if p != nil {
		return p
	}
	var req api.HTTPTurnCreateRequest
	body, p := a.readBody(w, r, false)
	if p != nil {
		return p
	}
	if p := decodeStrict(body, &req); p != nil {
		return p
	}
	if p := strictInputFields(body); p != nil {
		return p
	}
	if p := validateInput(req.Input); p != nil {
		return p
	}
	wo, p := parseWait(r)
	if p != nil {
		return p
	}
	who := principalOf(r)
	ctx := r.Context()

	var entry *idemEntry
	replayed, stored := false, false
	if key := r.Header.Get("Idempotency-Key"); key != "" || len(r.Header.Values("Idempotency-Key")) > 0 {
		if !validIdempotencyKey(key) {
			return invalid("Idempotency-Key must be 1-%d visible ASCII characters", maxIdempotencyKeyLen)
		}
		canon, _ := json.Marshal(req)
		k, hash := idemKey{who: who, thread: th.ID, key: key}, sha256.Sum256(canon)
		e, owner, p := a.idem.begin(ctx, k, hash)
		if p != nil {
			return p
		}
		entry, replayed = e, !owner
		if owner {
			// This process owns the key; the store says whether another
			// daemon (or this one before a restart) has it.
			turnID, claimed, p := a.claimKey(r, k, hash)
			if p != nil {
				a.idem.fail(entry)
				return p
			}
			if !claimed {
				// The first claim was made here or on another daemon; its
				// position is not known here, so the stream starts at the
				// beginning of the thread's retained log, which has the
				// turn (a replay of up to event_retention of events).
				a.idem.succeed(entry, turnID, 0)
				replayed = true
			}
			stored = claimed
		}
	}

	l, err := a.logs.attach(ctx, th.ID)
	if err != nil {
		if entry != nil && !replayed {
			a.idem.fail(entry)
		}
		if stored {
			a.releaseKey(entry.key)
		}
		return a.fromError(r, err)
	}
	defer l.release()

	var turnID string
	var eventsAfter int64
	var st *turnState
	if replayed {
		turnID, eventsAfter = entry.turnID, entry.eventsAfter
		st, p = a.trackExisting(ctx, th, l, turnID)
		if p != nil {
			return p
		}
	} else {
		res, after, err := a.mgr.StartTurn(ctx, turns.Caller{Conn: l.conn, ClientName: who.originator()}, api.TurnStartParams{
			ThreadID:            th.ID,
			Input:               req.Input,
			Model:               req.Model,
			Effort:              req.Effort,
			OutputSchema:        req.OutputSchema,
			ClientUserMessageID: req.ClientUserMessageID,
		})
		if err != nil {
			if entry != nil {
				a.idem.fail(entry)
			}
			if stored {
				a.releaseKey(entry.key)
			}
			return a.fromError(r, err)
		}
		turnID = res.Turn.ID
		// Track the turn and note where its events start before it runs
		// (after starts it), so neither its end nor its events are missed.
		st = l.track(turnID)
		eventsAfter = l.lastSeq()
		if after != nil {
			after()
		}
		if entry != nil {
			a.idem.succeed(entry, turnID, eventsAfter)
		}
		if stored {
			if err := a.cfg.Store.CompleteIdempotencyKey(context.WithoutCancel(ctx), idemScope(entry.key), entry.key.key, turnID); err != nil {
				// The turn runs; a retry on another daemon may wait
				// for the key until it expires. Logged, not failed.
				a.log.Error("recording an idempotency key's turn", "key", entry.key.key, "err", err)
			}
		}
	}

	if wo.wait {
		a.await(ctx, st, wo)
		if wo.applied != "" {
			w.Header().Set("Preference-Applied", wo.applied)
		}
	}
	view, p := a.turnView(ctx, th, turnID, l)
	if p != nil {
		return p
	}
	view.EventsAfter = &eventsAfter
	if replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	w.Header().Set("Location", "/v1/threads/"+th.ID+"/turns/"+turnID)
	status := http.StatusOK
	if view.Status == api.TurnInProgress {
		status = http.StatusAccepted
	}
	writeJSON(w, status, view)
	return nil
}

// trackExisting makes the log watch a turn that exists (per the store or
// the log) and returns its state; a turn nobody knows is a 404. The store
// is read again after tracking, so a turn that ended before the log
// subscribed is not waited for forever.
func (a *API) trackExisting(ctx context.Context, th api.Thread, l *eventLog, turnID string) (*turnState, *problem) {
	l.mu.Lock()
	_, known := l.turns[turnID]
	l.mu.Unlock()
	if !known {
		rec, err := a.cfg.Store.GetTurn(ctx, th.ID, turnID)
		if apperr.Is(err, apperr.NotFound) || apperr.Is(err, apperr.Invalid) {
			return nil, notFound("turn %s not found in thread %s", turnID, th.ID)
		}
		if err != nil {
			return nil, a.fromError(nil, err)
		}
		if rec.Status != store.TurnInProgress {
			st := l.track(turnID)
			l.finishFromStore(turnID, api.TurnStatus(rec.Status))
			return st, nil
		}
	}
	st := l.track(turnID)
	if rec, err := a.cfg.Store.GetTurn(ctx, th.ID, turnID); err == nil && rec.Status != store.TurnInProgress {
		l.finishFromStore(turnID, api.TurnStatus(rec.Status))
	}
	return st, nil
}

// getTurn serves GET /v1/threads/{id}/turns/{turnId}.
func (a *API) getTurn(w http.ResponseWriter, r *http.Request) *problem {
	th, p := a.visibleThread(r)
	if p != nil {
		return p
	}
	wo, p := parseWait(r)
	if p != nil {
		return p
	}
	turnID := chi.URLParam(r, "turnID")
	var l *eventLog
	if wo.wait {
		var err error
		if l, err = a.logs.attach(r.Context(), th.ID); err != nil {
			return a.fromError(r, err)
		}
		defer l.release()
		st, p := a.trackExisting(r.Context(), th, l, turnID)
		if p != nil {
			return p
		}
		a.await(r.Context(), st, wo)
		if wo.applied != "" {
			w.Header().Set("Preference-Applied", wo.applied)
		}
	} else {
		l = a.logs.lookup(th.ID)
	}
	view, p := a.turnView(r.Context(), th, turnID, l)
	if p != nil {
		return p
	}
	writeJSON(w, http.StatusOK, view)
	return nil
}

// interruptTurn serves POST /v1/threads/{id}/turns/{turnId}/interrupt.
func (a *API) interruptTurn(w http.ResponseWriter, r *http.Request) *problem {
	th, p := a.visibleThread(r)
	if p != nil {
		return p
	}
	if p := a.decodeBody(w, r, &struct{}{}, true); p != nil {
		return p
	}
	wo, p := parseWait(r)
	if p != nil {
		return p
	}
	turnID := chi.URLParam(r, "turnID")
	ctx := r.Context()
	l, err := a.logs.attach(ctx, th.ID)
	if err != nil {
		return a.fromError(r, err)
	}
	defer l.release()
	after, err := a.mgr.InterruptTurn(ctx, api.TurnInterruptParams{ThreadID: th.ID, TurnID: turnID})
	if err != nil {
		if !apperr.Is(err, apperr.Invalid) {
			return a.fromError(r, err)
		}
		// No running turn, or another one: tell a finished turn from an
		// unknown one.
		if _, p := a.trackExisting(ctx, th, l, turnID); p != nil {
			return p
		}
		return conflict("turn %s is not running", turnID)
	}
	st := l.track(turnID)
	after()
	if wo.wait {
		a.await(ctx, st, wo)
		if wo.applied != "" {
			w.Header().Set("Preference-Applied", wo.applied)
		}
	}
	view, p := a.turnView(ctx, th, turnID, l)
	if p != nil {
		return p
	}
	status := http.StatusOK
	if view.Status == api.TurnInProgress {
		status = http.StatusAccepted
	}
	writeJSON(w, status, view)
	return nil
}

// turnBody is api.HTTPTurn with the items as raw JSON: as announced (for
// a turn the log recorded) or as stored, so they are not decoded and
// encoded again on the way out. TestTurnBodyMatchesHTTPTurn keeps the two
// in step.
type turnBody struct {
	ID           string                   `json:"id"`
	ThreadID     string                   `json:"threadId"`
	Status       api.TurnStatus           `json:"status"`
	Error        *api.TurnError           `json:"error"`
	StartedAt    *int64                   `json:"startedAt"`
	CompletedAt  *int64                   `json:"completedAt"`
	Items        []json.RawMessage        `json:"items"`
	FinalMessage *string                  `json:"finalMessage"`
	Usage        *api.TokenUsageBreakdown `json:"usage"`
	EventsAfter  *int64                   `json:"eventsAfter,omitempty"`
}

// turnView renders a turn: from the log when it recorded the whole turn
// (the answer to a waiting request), else from the store, with what the
// log knows (usage, and a turn not persisted yet). l may be nil.
func (a *API) turnView(ctx context.Context, th api.Thread, turnID string, l *eventLog) (turnBody, *problem) {
	out := turnBody{ID: turnID, ThreadID: th.ID, Items: []json.RawMessage{}}
	var logStatus api.TurnStatus
	if l != nil {
		l.mu.Lock()
		st := l.turns[turnID]
		if st != nil {
			logStatus = st.status
			if st.hasUsage {
				u := st.usage
				out.Usage = &u
			}
			if st.started && st.ended != nil {
				out.Status, out.Error = st.ended.Status, st.ended.Error
				out.StartedAt, out.CompletedAt = st.ended.StartedAt, st.ended.CompletedAt
				out.Items = append(out.Items, st.items...)
			}
		}
		l.mu.Unlock()
	}
	if out.Status != "" {
		out.FinalMessage = finalMessage(out.Items)
		return out, nil
	}
	rec, err := a.cfg.Store.GetTurn(ctx, th.ID, turnID)
	switch {
	case err == nil:
		out.Status = api.TurnStatus(rec.Status)
		if len(rec.Error) > 0 && string(rec.Error) != "null" {
			var te api.TurnError
			if json.Unmarshal(rec.Error, &te) == nil {
				out.Error = &te
			}
		}
		if rec.StartedAt != nil {
			s := rec.StartedAt.Unix()
			out.StartedAt = &s
		}
		if rec.CompletedAt != nil {
			c := rec.CompletedAt.Unix()
			out.CompletedAt = &c
		}
		items, err := a.turnItems(ctx, th.ID, turnID)
		if err != nil {
			return out, a.fromError(nil, err)
		}
		out.Items = items
	case apperr.Is(err, apperr.NotFound) || apperr.Is(err, apperr.Invalid):
		// Not persisted: the turn has just started, or the thread lives in
		// memory only; otherwise it does not exist.
		if logStatus == "" {
			return out, notFound("turn %s not found in thread %s", turnID, th.ID)
		}
		out.Status = logStatus
		if th.Ephemeral {
			res, err := a.mgr.ListItems(ctx, api.ThreadItemsListParams{ThreadID: th.ID, TurnID: &turnID})
			if err == nil {
				for _, e := range res.Data {
					if raw, err := json.Marshal(e.Item); err == nil {
						out.Items = append(out.Items, raw)
					}
				}
			}
		}
	default:
		return out, a.fromError(nil, err)
	}
	out.FinalMessage = finalMessage(out.Items)
	return out, nil
}

// finalMessage is the text of the last agent message among items.
func finalMessage(items []json.RawMessage) *string {
	for i := len(items) - 1; i >= 0; i-- {
		var it struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(items[i], &it) == nil && it.Type == "agentMessage" {
			return &it.Text
		}
	}
	return nil
}

// turnItems reads every persisted item of a turn, as stored.
func (a *API) turnItems(ctx context.Context, threadID, turnID string) ([]json.RawMessage, error) {
	out := []json.RawMessage{}
	cursor := ""
	for {
		page, err := a.cfg.Store.ListItems(ctx, store.ItemsQuery{ThreadID: threadID, TurnID: turnID, Limit: store.MaxLimit, Cursor: cursor})
		if err != nil {
			return nil, err
		}
		for _, it := range page.Items {
			out = append(out, it.Payload)
		}
		if page.NextCursor == "" {
			return out, nil
		}
		cursor = page.NextCursor
	}
}
