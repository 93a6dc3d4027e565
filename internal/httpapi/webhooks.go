package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/audit"
	"github.com/appserver/appserver/internal/config"
	"github.com/appserver/appserver/internal/store"
)

// Limits of webhook subscriptions.
const (
	// MaxWebhooksPerOwner bounds the subscriptions of one principal (and
	// the operator's).
	MaxWebhooksPerOwner = 100
	// DefaultDeliveriesPage is a page of a delivery log when no limit is
	// asked.
	DefaultDeliveriesPage = 50
)

// Webhooks keeps the webhook subscriptions (the store) and runs them (the
// webhook sender).
type Webhooks interface {
	PutWebhook(ctx context.Context, w store.Webhook) error
	GetWebhook(ctx context.Context, id string) (store.Webhook, error)
	ListWebhooks(ctx context.Context) ([]store.Webhook, error)
	DeleteWebhook(ctx context.Context, id string) error
	ListWebhookDeliveries(ctx context.Context, webhook string, beforeSeq int64, limit int) ([]store.WebhookDelivery, error)
	// Sync starts and stops this daemon's consumers of the subscriptions
	// after a change.
	Sync(ctx context.Context) error
	// Entry reports whether id is a [[webhooks]] entry's: the operator
	// reads its delivery log.
	Entry(id string) bool
}

// webhooks returns the configured Webhooks, or the 501 of a daemon
// without them.
func (a *API) webhooks() (Webhooks, *problem) {
	if a.cfg.Webhooks == nil {
		return nil, newProblem(http.StatusNotImplemented, api.ProblemNotImplemented, "this daemon keeps no webhook subscriptions")
	}
	return a.cfg.Webhooks, nil
}

// createWebhook serves POST /v1/webhooks.
func (a *API) createWebhook(w http.ResponseWriter, r *http.Request) *problem {
	hooks, p := a.webhooks()
	if p != nil {
		return p
	}
	var req api.HTTPWebhookCreate
	if p := a.decodeBody(w, r, &req, false); p != nil {
		return p
	}
	who := principalOf(r)
	if err := config.CheckWebhookURL(req.URL, false); err != nil {
		return invalid("%v", err)
	}
	if err := config.CheckWebhookEvents(req.Events); err != nil {
		return invalid("%v", err)
	}
	if req.AllowPrivate && !who.IsOperator() {
		return forbidden("allowPrivate is the operator's only: a principal's receiver must be on a public address")
	}
	h := store.Webhook{ID: "wh_" + strings.ReplaceAll(uuid.NewString(), "-", ""), Owner: who.Name(), URL: req.URL,
		Events: slices.Compact(slices.Sorted(slices.Values(req.Events))), AllowPrivate: req.AllowPrivate, CreatedAt: a.now()}
	if req.ThreadID != nil {
		res, err := a.threads.ReadThread(r.Context(), api.ThreadReadParams{ThreadID: *req.ThreadID})
		if err != nil || !who.Sees(res.Thread) {
			if err != nil && !apperr.Is(err, apperr.NotFound) && !apperr.Is(err, apperr.Invalid) {
				return a.fromError(r, err)
			}
			return notFound("thread %s not found", *req.ThreadID)
		}
		h.Thread = res.Thread.ID
	}
	if req.Secret != nil {
		if err := config.CheckWebhookSecret(*req.Secret); err != nil {
			return invalid("secret: %v", err)
		}
		h.Secret = *req.Secret
	} else {
		key := make([]byte, 32)
		_, _ = rand.Read(key) // never fails (crypto/rand)
		h.Secret = "whsec_" + base64.StdEncoding.EncodeToString(key)
	}
	all, err := hooks.ListWebhooks(r.Context())
	if err != nil {
		return a.fromError(r, err)
	}
	if n := len(slices.DeleteFunc(all, func(o store.Webhook) bool { return o.Owner != h.Owner })); n >= MaxWebhooksPerOwner {
		return conflict("%s has %d webhook subscriptions, the most it may have", who, n)
	}
	if err := hooks.PutWebhook(r.Context(), h); err != nil {
		return a.fromError(r, err)
	}
	if err := hooks.Sync(r.Context()); err != nil {
		a.log.Warn("webhooks: starting a new subscription", "webhook", h.ID, "err", err)
	}
	a.cfg.Recorder.Record(r.Context(), audit.Entry{Kind: audit.KindAdmin, ThreadID: h.Thread, Detail: webhookAudit{
		Action: "webhook/create", Webhook: h.ID, URL: h.URL, Events: h.Events, AllowPrivate: h.AllowPrivate,
	}})
	out := webhookOut(h)
	out.Secret = &h.Secret
	w.Header().Set("Location", "/v1/webhooks/"+h.ID)
	writeJSON(w, http.StatusCreated, out)
	return nil
}

// ownWebhook returns the subscription of the path's id if the caller may
// see it: its own, or any for the operator; another's is the same 404 as
// a missing one.
func (a *API) ownWebhook(r *http.Request, hooks Webhooks) (store.Webhook, *problem) {
	id := chi.URLParam(r, "webhookID")
	h, err := hooks.GetWebhook(r.Context(), id)
	if err != nil {
		if apperr.Is(err, apperr.NotFound) {
			return h, notFound("webhook %s not found", id)
		}
		return h, a.fromError(r, err)
	}
	if who := principalOf(r); !who.IsOperator() && h.Owner != who.Name() {
		return store.Webhook{}, notFound("webhook %s not found", id)
	}
	return h, nil
}

// listWebhooks serves GET /v1/webhooks.
func (a *API) listWebhooks(w http.ResponseWriter, r *http.Request) *problem {
	hooks, p := a.webhooks()
	if p != nil {
		return p
	}
	all, err := hooks.ListWebhooks(r.Context())
	if err != nil {
		return a.fromError(r, err)
	}
	who := principalOf(r)
	out := api.HTTPWebhookList{Data: api.List[api.HTTPWebhook]{}}
	for _, h := range all {
		if who.IsOperator() || h.Owner == who.Name() {
			out.Data = append(out.Data, webhookOut(h))
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// getWebhook serves GET /v1/webhooks/{id}.
func (a *API) getWebhook(w http.ResponseWriter, r *http.Request) *problem {
	hooks, p := a.webhooks()
	if p != nil {
		return p
	}
	h, p := a.ownWebhook(r, hooks)
	if p != nil {
		return p
	}
	writeJSON(w, http.StatusOK, webhookOut(h))
	return nil
}

// deleteWebhook serves DELETE /v1/webhooks/{id}.
func (a *API) deleteWebhook(w http.ResponseWriter, r *http.Request) *problem {
	hooks, p := a.webhooks()
	if p != nil {
		return p
	}
	h, p := a.ownWebhook(r, hooks)
	if p != nil {
		return p
	}
	if err := hooks.DeleteWebhook(r.Context(), h.ID); err != nil {
		if apperr.Is(err, apperr.NotFound) {
			return notFound("webhook %s not found", h.ID)
		}
		return a.fromError(r, err)
	}
	a.cfg.Recorder.Record(r.Context(), audit.Entry{Kind: audit.KindAdmin, ThreadID: h.Thread, Detail: webhookAudit{
		Action: "webhook/delete", Webhook: h.ID, URL: h.URL, Events: h.Events, AllowPrivate: h.AllowPrivate,
	}})
	if err := hooks.Sync(r.Context()); err != nil {
		a.log.Warn("webhooks: stopping a deleted subscription", "webhook", h.ID, "err", err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// webhookAudit is the detail of the admin entry of a subscription made
// or deleted (never its secret): where the events of whose threads go.
type webhookAudit struct {
	Action       string   `json:"action"`
	Webhook      string   `json:"webhook"`
	URL          string   `json:"url"`
	Events       []string `json:"events"`
	AllowPrivate bool     `json:"allowPrivate"`
}

// listDeliveries serves GET /v1/webhooks/{id}/deliveries: a subscription's
// attempts, or for the operator a [[webhooks]] entry's, newest first.
func (a *API) listDeliveries(w http.ResponseWriter, r *http.Request) *problem {
	hooks, p := a.webhooks()
	if p != nil {
		return p
	}
	id := chi.URLParam(r, "webhookID")
	if !principalOf(r).IsOperator() || !hooks.Entry(id) {
		if _, p := a.ownWebhook(r, hooks); p != nil {
			return p
		}
	}
	limit, p := pageLimit(r, DefaultDeliveriesPage, store.MaxWebhookDeliveriesLimit)
	if p != nil {
		return p
	}
	before, p := seqCursor(r)
	if p != nil {
		return p
	}
	page, err := hooks.ListWebhookDeliveries(r.Context(), id, before, limit+1)
	if err != nil {
		return a.fromError(r, err)
	}
	out := api.HTTPWebhookDeliveryList{Data: api.List[api.HTTPWebhookDelivery]{}}
	if len(page) > limit {
		page = page[:limit]
		c := strconv.FormatInt(page[limit-1].Seq, 10)
		out.NextCursor = &c
	}
	for _, d := range page {
		out.Data = append(out.Data, deliveryOut(d))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// rfc3339 formats a webhook time.
func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func webhookOut(h store.Webhook) api.HTTPWebhook {
	out := api.HTTPWebhook{ID: h.ID, URL: h.URL, Events: slices.Clone(h.Events), AllowPrivate: h.AllowPrivate, CreatedAt: rfc3339(h.CreatedAt)}
	if out.Events == nil {
		out.Events = []string{}
	}
	if h.Thread != "" {
		out.ThreadID = &h.Thread
	}
	if h.Owner != "" {
		out.Owner = &h.Owner
	}
	return out
}

func deliveryOut(d store.WebhookDelivery) api.HTTPWebhookDelivery {
	out := api.HTTPWebhookDelivery{EventID: d.EventID, EventType: d.EventType, At: rfc3339(d.At),
		DurationMs: float64(d.Duration.Microseconds()) / 1000}
	if d.Status != 0 {
		out.Status = &d.Status
	}
	if d.Error != "" {
		out.Error = &d.Error
	}
	if d.NextRetry != nil {
		s := rfc3339(*d.NextRetry)
		out.NextRetryAt = &s
	}
	return out
}
