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
// the API stops. The thread table says whether the turn ended; the log only
// wakes it when a turn/completed goes by. A turn that cannot be read is
// not waited for.
func (a *API) await(ctx context.Context, threadID, turnID string, l *eventLog, o waitOpts) {
	var timeout <-chan time.Time
	if o.bounded {
		t := time.NewTimer(o.limit)
		defer t.Stop()
		timeout = t.C
	}
	for {
		ended := l.turnEnded() // before reading: an end after the read wakes us
		status, err := a.threads.TurnStatus(ctx, threadID, turnID)
		if err != nil || status != api.TurnInProgress {
			return
		}
		select {
		case <-ended:
		case <-ctx.Done():
			return
		case <-timeout:
			return
		case <-a.stopping:
			return
		}
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
		k, hash := idemKey{who: who.Name(), thread: th.ID, key: key}, sha256.Sum256(canon)
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
			a.releaseKey(ctx, entry.key)
		}
		return a.fromError(r, err)
	}
	defer l.release()

	var turnID string
	var eventsAfter int64
	if replayed {
		turnID, eventsAfter = entry.turnID, entry.eventsAfter
		if p := a.turnExists(ctx, th, turnID); p != nil {
			return p
		}
	} else {
		res, after, err := a.threads.StartTurn(ctx, turns.Caller{Conn: l.conn, ClientName: who.ClientName(Originator), Principal: who}, api.TurnStartParams{
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
				a.releaseKey(ctx, entry.key)
			}
			return a.fromError(r, err)
		}
		turnID = res.Turn.ID
		// Note where its events start before it runs (after starts it),
		// so that none is missed.
		eventsAfter = l.lastSeq()
		if after != nil {
			after()
		}
		if entry != nil {
			a.idem.succeed(entry, turnID, eventsAfter)
		}
		if stored {
			if err := a.cfg.Keys.CompleteIdempotencyKey(context.WithoutCancel(ctx), idemScope(entry.key), entry.key.key, turnID); err != nil {
				// The turn runs; a retry on another daemon may wait
				// for the key until it expires. Logged, not failed.
				a.log.ErrorContext(ctx, "recording an idempotency key's turn", "key", entry.key.key, "err", err)
			}
		}
	}

	if wo.wait {
		a.await(ctx, th.ID, turnID, l, wo)
		if wo.applied != "" {
			w.Header().Set("Preference-Applied", wo.applied)
		}
	}
	view, p := a.turnView(ctx, th, turnID)
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

// turnExists answers 404 for a turn the thread does not have.
func (a *API) turnExists(ctx context.Context, th api.Thread, turnID string) *problem {
	_, err := a.threads.TurnStatus(ctx, th.ID, turnID)
	switch {
	case apperr.Is(err, apperr.NotFound) || apperr.Is(err, apperr.Invalid):
		return notFound("turn %s not found in thread %s", turnID, th.ID)
	case err != nil:
		return a.fromError(nil, err)
	}
	return nil
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
	if wo.wait {
		if p := a.turnExists(r.Context(), th, turnID); p != nil {
			return p
		}
		l, err := a.logs.attach(r.Context(), th.ID)
		if err != nil {
			return a.fromError(r, err)
		}
		defer l.release()
		a.await(r.Context(), th.ID, turnID, l, wo)
		if wo.applied != "" {
			w.Header().Set("Preference-Applied", wo.applied)
		}
	}
	view, p := a.turnView(r.Context(), th, turnID)
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
	after, err := a.threads.InterruptTurn(ctx, api.TurnInterruptParams{ThreadID: th.ID, TurnID: turnID})
	if err != nil {
		if !apperr.Is(err, apperr.Invalid) {
			return a.fromError(r, err)
		}
		// No running turn, or another one: tell a finished turn from an
		// unknown one.
		if p := a.turnExists(ctx, th, turnID); p != nil {
			return p
		}
		return conflict("turn %s is not running", turnID)
	}
	after()
	if wo.wait {
		a.await(ctx, th.ID, turnID, l, wo)
		if wo.applied != "" {
			w.Header().Set("Preference-Applied", wo.applied)
		}
	}
	view, p := a.turnView(ctx, th, turnID)
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

// turnBody is api.HTTPTurn with the items as raw JSON, as stored, so they
// are not decoded and encoded again on the way out.
// TestTurnBodyMatchesHTTPTurn keeps the two in step.
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

// turnView renders a turn from the thread table's read side.
func (a *API) turnView(ctx context.Context, th api.Thread, turnID string) (turnBody, *problem) {
	rec, err := a.threads.TurnRecord(ctx, th.ID, turnID)
	switch {
	case apperr.Is(err, apperr.NotFound) || apperr.Is(err, apperr.Invalid):
		return turnBody{}, notFound("turn %s not found in thread %s", turnID, th.ID)
	case err != nil:
		return turnBody{}, a.fromError(nil, err)
	}
	return turnBody{
		ID: turnID, ThreadID: th.ID, Status: rec.Status, Error: rec.Error,
		StartedAt: rec.StartedAt, CompletedAt: rec.CompletedAt,
		Items: rec.Items, FinalMessage: finalMessage(rec.Items), Usage: rec.Usage,
	}, nil
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
