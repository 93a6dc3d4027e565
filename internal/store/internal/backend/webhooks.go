package backend

import (
	"context"
	"strings"
	"time"

	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/store"
)

// Webhooks implements the webhook subscriptions and delivery logs of
// store.Store (migration 00008) once for both SQL backends; each
// statement commits on its own.
type Webhooks struct {
	db      ConsumerDB
	d       Dialect
	observe store.ObserveFunc
	usable  func() error

	insert, get, list, del, delLog, appendLog, prune, page, pageBefore string
}

const webhookColumns = "id, owner, url, events, thread_id, secret, allow_private, created_at"

const deliveryColumns = "seq, event_id, event_type, attempted_at, status, error, duration_us, next_retry_at"

// NewWebhooks returns the webhooks of a store in dialect d over db;
// observe and usable are as NewReader's.
func NewWebhooks(d Dialect, db ConsumerDB, observe store.ObserveFunc, usable func() error) Webhooks {
	p := d.Param
	params := func(n int) string {
		ps := make([]string, n)
		for i := range ps {
			ps[i] = p(i + 1)
		}
		return strings.Join(ps, ", ")
	}
	return Webhooks{
		db: db, d: d, observe: observe, usable: usable,
		insert:    "INSERT INTO webhooks (" + webhookColumns + ") VALUES (" + params(8) + ") ON CONFLICT (id) DO NOTHING",
		get:       "SELECT " + webhookColumns + " FROM webhooks WHERE id = " + p(1),
		list:      "SELECT " + webhookColumns + " FROM webhooks ORDER BY created_at, id",
		del:       "DELETE FROM webhooks WHERE id = " + p(1),
		delLog:    "DELETE FROM webhook_deliveries WHERE webhook = " + p(1),
		appendLog: "INSERT INTO webhook_deliveries (webhook, event_id, event_type, attempted_at, status, error, duration_us, next_retry_at) VALUES (" + params(8) + ")",
		// The newest keep rows stay; with fewer, the subquery is NULL and
		// deletes nothing.
		prune: "DELETE FROM webhook_deliveries WHERE webhook = " + p(1) + " AND seq <= (SELECT seq FROM webhook_deliveries WHERE webhook = " + p(2) +
			" ORDER BY seq DESC LIMIT 1 OFFSET " + p(3) + ")",
		page:       "SELECT " + deliveryColumns + " FROM webhook_deliveries WHERE webhook = " + p(1) + " ORDER BY seq DESC LIMIT " + p(2),
		pageBefore: "SELECT " + deliveryColumns + " FROM webhook_deliveries WHERE webhook = " + p(1) + " AND seq < " + p(2) + " ORDER BY seq DESC LIMIT " + p(3),
	}
}

// PutWebhook implements store.Store.PutWebhook.
func (w Webhooks) PutWebhook(ctx context.Context, h store.Webhook) (err error) {
	defer func(start time.Time) { Observe(w.observe, store.OpWebhook, start, err) }(time.Now())
	if err := w.usable(); err != nil {
		return err
	}
	if err := h.Validate(); err != nil {
		return err
	}
	n, err := w.db.Exec(ctx, w.insert, h.ID, h.Owner, h.URL, strings.Join(h.Events, ","), h.Thread, h.Secret, h.AllowPrivate,
		w.d.TimeArg(Time(h.CreatedAt)))
	if err != nil {
		return w.db.StorageErr(err)
	}
	if n != 1 {
		return apperr.New(apperr.Conflict, "webhook %q exists", h.ID)
	}
	return nil
}

// scanWebhook reads one row of webhookColumns.
func scanWebhook(r Row) (store.Webhook, error) {
	var h store.Webhook
	var events string
	var created timeCol
	if err := r.Scan(&h.ID, &h.Owner, &h.URL, &events, &h.Thread, &h.Secret, &h.AllowPrivate, &created); err != nil {
		return h, err
	}
	if events != "" {
		h.Events = strings.Split(events, ",")
	}
	h.CreatedAt = created.t
	return h, nil
}

// GetWebhook implements store.Store.GetWebhook.
func (w Webhooks) GetWebhook(ctx context.Context, id string) (h store.Webhook, err error) {
	defer func(start time.Time) { Observe(w.observe, store.OpWebhook, start, err) }(time.Now())
	if err := w.usable(); err != nil {
		return h, err
	}
	h, err = scanWebhook(w.db.QueryRow(ctx, w.get, id))
	switch {
	case w.db.NoRows(err):
		return store.Webhook{}, apperr.New(apperr.NotFound, "webhook %q not found", id)
	case err != nil:
		return store.Webhook{}, w.db.StorageErr(err)
	}
	return h, nil
}

// ListWebhooks implements store.Store.ListWebhooks.
func (w Webhooks) ListWebhooks(ctx context.Context) (out []store.Webhook, err error) {
	defer func(start time.Time) { Observe(w.observe, store.OpWebhook, start, err) }(time.Now())
	if err := w.usable(); err != nil {
		return nil, err
	}
	rows, err := w.db.Query(ctx, w.list)
	if err != nil {
		return nil, w.db.StorageErr(err)
	}
	defer rows.Close()
	for rows.Next() {
		h, err := scanWebhook(rows)
		if err != nil {
			return nil, w.db.StorageErr(err)
		}
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return nil, w.db.StorageErr(err)
	}
	return out, nil
}

// DeleteWebhook implements store.Store.DeleteWebhook.
func (w Webhooks) DeleteWebhook(ctx context.Context, id string) (err error) {
	defer func(start time.Time) { Observe(w.observe, store.OpWebhook, start, err) }(time.Now())
	if err := w.usable(); err != nil {
		return err
	}
	n, err := w.db.Exec(ctx, w.del, id)
	if err != nil {
		return w.db.StorageErr(err)
	}
	if n == 0 {
		return apperr.New(apperr.NotFound, "webhook %q not found", id)
	}
	if _, err := w.db.Exec(ctx, w.delLog, id); err != nil {
		return w.db.StorageErr(err)
	}
	return nil
}

// AppendWebhookDelivery implements store.Store.AppendWebhookDelivery.
func (w Webhooks) AppendWebhookDelivery(ctx context.Context, dl store.WebhookDelivery, keep int) (err error) {
	defer func(start time.Time) { Observe(w.observe, store.OpWebhook, start, err) }(time.Now())
	if err := w.usable(); err != nil {
		return err
	}
	if err := dl.Validate(); err != nil {
		return err
	}
	if keep < 1 {
		return apperr.New(apperr.Invalid, "a webhook's delivery log keeps at least one attempt, got %d", keep)
	}
	var next any
	if dl.NextRetry != nil {
		next = w.d.TimeArg(Time(*dl.NextRetry))
	}
	if _, err := w.db.Exec(ctx, w.appendLog, dl.Webhook, dl.EventID, dl.EventType, w.d.TimeArg(Time(dl.At)), dl.Status, dl.Error,
		dl.Duration.Microseconds(), next); err != nil {
		return w.db.StorageErr(err)
	}
	if _, err := w.db.Exec(ctx, w.prune, dl.Webhook, dl.Webhook, keep); err != nil {
		return w.db.StorageErr(err)
	}
	return nil
}

// ListWebhookDeliveries implements store.Store.ListWebhookDeliveries.
func (w Webhooks) ListWebhookDeliveries(ctx context.Context, webhook string, beforeSeq int64, limit int) (out []store.WebhookDelivery, err error) {
	defer func(start time.Time) { Observe(w.observe, store.OpWebhook, start, err) }(time.Now())
	if err := w.usable(); err != nil {
		return nil, err
	}
	limit = max(1, min(limit, store.MaxWebhookDeliveriesLimit))
	var rows Rows
	if beforeSeq > 0 {
		rows, err = w.db.Query(ctx, w.pageBefore, webhook, beforeSeq, limit)
	} else {
		rows, err = w.db.Query(ctx, w.page, webhook, limit)
	}
	if err != nil {
		return nil, w.db.StorageErr(err)
	}
	defer rows.Close()
	for rows.Next() {
		dl := store.WebhookDelivery{Webhook: webhook}
		var at, next timeCol
		var micros int64
		if err := rows.Scan(&dl.Seq, &dl.EventID, &dl.EventType, &at, &dl.Status, &dl.Error, &micros, &next); err != nil {
			return nil, w.db.StorageErr(err)
		}
		dl.At, dl.Duration, dl.NextRetry = at.t, time.Duration(micros)*time.Microsecond, next.ptr()
		out = append(out, dl)
	}
	if err := rows.Err(); err != nil {
		return nil, w.db.StorageErr(err)
	}
	return out, nil
}
