package webhook

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/config"
	"github.com/appserver/appserver/internal/eventlog"
	"github.com/appserver/appserver/internal/hub"
	"github.com/appserver/appserver/internal/service"
	"github.com/appserver/appserver/internal/store"
)

// Defaults of Config.
const (
	DefaultTimeout      = 5 * time.Second
	DefaultFirstBackoff = time.Second
	DefaultMaxBackoff   = 10 * time.Minute
	// DefaultSyncEvery is how often a Sender reads the stored
	// subscriptions, to start those another daemon created and stop those
	// it deleted.
	DefaultSyncEvery = 2 * time.Second
	// DefaultDeliveryLog is how many attempts each webhook's delivery log
	// keeps (the newest).
	DefaultDeliveryLog = 100
	// consumerPrefix starts the event consumer name of each entry.
	consumerPrefix = "webhook:"
)

// Config configures a Sender. Log, Hub, Store and Holder are required
// when Hooks is not empty.
type Config struct {
	// Hooks are the [[webhooks]] entries, validated by config.Load (the
	// secrets read).
	Hooks []config.Webhook
	// Log, Hub, Store and Holder are the event consumers' (see
	// eventlog.ConsumerConfig).
	Log    *eventlog.Log
	Hub    *hub.Hub
	Store  store.Store
	Holder string
	// Registerer receives the metrics; nil registers none.
	Registerer prometheus.Registerer
	// Timeout bounds one attempt (default DefaultTimeout, at most a third
	// of the lease: the lease is renewed between attempts).
	Timeout time.Duration
	// FirstBackoff is the wait after a first failed attempt, doubled after
	// each further one up to MaxBackoff, jittered down by up to half
	// (defaults DefaultFirstBackoff, DefaultMaxBackoff).
	FirstBackoff, MaxBackoff time.Duration
	// LeaseTTL and SaveEvery are the consumers' (0: their defaults).
	LeaseTTL, SaveEvery time.Duration
	// SyncEvery is how often the stored subscriptions are read (default
	// DefaultSyncEvery).
	SyncEvery time.Duration
	// DeliveryLog is how many attempts each webhook's delivery log keeps
	// (default DefaultDeliveryLog).
	DeliveryLog int
	// OwnerOf names the principal that created a thread ("" for the
	// operator's threads): a principal's subscription takes the events of
	// its own threads only. Required when the store may hold
	// subscriptions of principals; nil takes no principal's thread.
	OwnerOf func(ctx context.Context, threadID string) (string, error)
	// Logger receives the failures; nil discards them.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Sender delivers the notices of every configured entry and of every
// subscription in the store. Start runs it; Stop stops it, saving each
// webhook's cursor.
type Sender struct {
	cfg Config
	m   *metrics
	// fixed are the configured entries' subscriptions.
	fixed []*subscription

	// syncMu serialises Sync; lock order: syncMu, then mu.
	syncMu sync.Mutex
	mu     sync.Mutex // guards stored, ctx
	// stored are the running subscriptions of the store, by id.
	stored map[string]*subscription
	// ctx is Start's, nil before Start and after Stop.
	ctx context.Context

	cancel context.CancelFunc
	done   chan struct{}
}

// metrics are the Sender's series.
type metrics struct {
	delivered *prometheus.CounterVec
	failed    *prometheus.CounterVec
	dropped   *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg)
	return &metrics{
		delivered: f.NewCounterVec(prometheus.CounterOpts{
			Name: "appserver_webhook_deliveries_total",
			Help: "Webhook notices delivered (a 2xx answer), by webhook id.",
		}, []string{"webhook"}),
		failed: f.NewCounterVec(prometheus.CounterOpts{
			Name: "appserver_webhook_failures_total",
			Help: "Failed webhook attempts, by webhook id and reason (status: a non-2xx answer; network; refused: the address rule).",
		}, []string{"webhook", "reason"}),
		dropped: f.NewCounterVec(prometheus.CounterOpts{
			Name: "appserver_webhook_dropped_total",
			Help: "Webhook notices given up after retry_for, by webhook id.",
		}, []string{"webhook"}),
	}
}

// subscription is one entry and its consumer.
type subscription struct {
	id       string
	hook     config.Webhook
	st       store.Store
	keep     int
	signer   *standardwebhooks.Webhook
	client   *http.Client
	consumer *eventlog.Consumer
	first    time.Duration
	most     time.Duration
	m        *metrics
	log      *slog.Logger
	now      func() time.Time
	// failing is the notice being retried, the consumer's goroutine's
	// alone: a thread's later notices wait for it, and the others
	// threads' notices interleave with its retries.
	failing map[string]*retrying
}

// retrying is a notice whose attempts failed.
type retrying struct {
	since    time.Time
	attempts int
}

// ID is the webhook id of an entry: a digest of its url, thread and
// events, which names its event consumer (its cursor and lease) and its
// metrics' label. Changing any of them starts a new cursor.
func ID(h config.Webhook) string {
	events := slices.Clone(h.Events)
	slices.Sort(events)
	sum := sha256.Sum256([]byte(h.URL + "\n" + h.Thread + "\n" + strings.Join(events, ",")))
	return "wh_" + hex.EncodeToString(sum[:8])
}

// New returns a Sender of cfg's entries, and of the subscriptions
// cfg.Store holds once started.
func New(cfg Config) (*Sender, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	lease := cfg.LeaseTTL
	if lease <= 0 {
		lease = eventlog.DefaultConsumerLeaseTTL
	}
	cfg.Timeout = min(cfg.Timeout, lease/3)
	if cfg.FirstBackoff <= 0 {
		cfg.FirstBackoff = DefaultFirstBackoff
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = DefaultMaxBackoff
	}
	if cfg.SyncEvery <= 0 {
		cfg.SyncEvery = DefaultSyncEvery
	}
	if cfg.DeliveryLog <= 0 {
		cfg.DeliveryLog = DefaultDeliveryLog
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Registerer == nil {
		cfg.Registerer = prometheus.NewRegistry()
	}
	s := &Sender{cfg: cfg, m: newMetrics(cfg.Registerer), stored: map[string]*subscription{}}
	seen := map[string]bool{}
	for _, h := range cfg.Hooks {
		id := ID(h)
		if seen[id] {
			return nil, fmt.Errorf("webhook: two entries post the same events of the same threads to %s", h.URL)
		}
		seen[id] = true
		sub, err := s.newSubscription(id, h, nil)
		if err != nil {
			return nil, err
		}
		s.fixed = append(s.fixed, sub)
	}
	return s, nil
}

var _ service.Service = (*Sender)(nil)

// newSubscription returns the subscription of a webhook; owner, when
// set, is the principal whose threads alone it takes.
func (s *Sender) newSubscription(id string, h config.Webhook, owner *string) (*subscription, error) {
	signer, err := standardwebhooks.NewWebhook(h.Secret)
	if err != nil {
		return nil, fmt.Errorf("webhook %s: %w", id, err)
	}
	if h.RetryFor <= 0 {
		h.RetryFor = config.DefaultWebhookRetryFor
	}
	cfg := s.cfg
	sub := &subscription{
		id: id, hook: h, st: cfg.Store, keep: cfg.DeliveryLog, signer: signer, client: newClient(h.AllowPrivate, cfg.Timeout),
		first: cfg.FirstBackoff, most: cfg.MaxBackoff, m: s.m, now: cfg.Now,
		log:     cfg.Logger.With("webhook", id),
		failing: map[string]*retrying{},
	}
	cc := eventlog.ConsumerConfig{
		Log: cfg.Log, Hub: cfg.Hub, Store: cfg.Store, Name: consumerPrefix + id, Holder: cfg.Holder,
		Handle: sub.handle, LeaseTTL: cfg.LeaseTTL, SaveEvery: cfg.SaveEvery, Logger: cfg.Logger, Now: cfg.Now,
	}
	thread := h.Thread
	switch {
	case owner != nil && *owner != "":
		// A principal's: only its own threads, whatever thread it named.
		name, ownerOf := *owner, cfg.OwnerOf
		cc.Match = func(ctx context.Context, id string) (bool, error) {
			if (thread != "" && id != thread) || ownerOf == nil {
				return false, nil
			}
			got, err := ownerOf(ctx, id)
			if apperr.Is(err, apperr.NotFound) {
				return false, nil
			}
			return err == nil && got == name, err
		}
	case thread != "":
		cc.Match = func(_ context.Context, id string) (bool, error) { return id == thread, nil }
	}
	if sub.consumer, err = eventlog.NewConsumer(cc); err != nil {
		return nil, err
	}
	return sub, nil
}

// Start starts every entry's consumer and those of the stored
// subscriptions, then reads the store every SyncEvery.
func (s *Sender) Start(ctx context.Context) error {
	s.mu.Lock()
	started := s.ctx != nil || s.cancel != nil
	s.mu.Unlock()
	if started {
		return nil // started already (or stopped): the life cycle's rule
	}
	for _, sub := range s.fixed {
		if err := sub.consumer.Start(ctx); err != nil {
			return err
		}
	}
	s.mu.Lock()
	s.ctx = ctx
	s.mu.Unlock()
	if err := s.Sync(ctx); err != nil {
		s.cfg.Logger.Warn("webhook: reading the subscriptions", "err", err)
	}
	loop, cancel := context.WithCancel(ctx)
	s.cancel, s.done = cancel, make(chan struct{})
	go s.run(loop)
	return nil
}

// run reads the stored subscriptions every SyncEvery until ctx ends.
func (s *Sender) run(ctx context.Context) {
	defer close(s.done)
	t := time.NewTicker(s.cfg.SyncEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.Sync(ctx); err != nil && ctx.Err() == nil {
				s.cfg.Logger.Warn("webhook: reading the subscriptions", "err", err)
			}
		}
	}
}

// Sync starts the consumers of the stored subscriptions not running yet
// and stops those of subscriptions no longer stored. The HTTP API calls it
// after a change, so that this daemon acts at once; the others do within
// SyncEvery. It does nothing before Start or after Stop.
func (s *Sender) Sync(ctx context.Context) error {
	if s.cfg.Store == nil {
		return nil
	}
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	s.mu.Lock()
	runCtx := s.ctx
	s.mu.Unlock()
	if runCtx == nil {
		return nil
	}
	hooks, err := s.cfg.Store.ListWebhooks(ctx)
	if err != nil {
		return err
	}
	keep := make(map[string]bool, len(hooks))
	var errs []error
	for _, w := range hooks {
		keep[w.ID] = true
		s.mu.Lock()
		_, running := s.stored[w.ID]
		s.mu.Unlock()
		if running {
			continue
		}
		owner := w.Owner
		sub, err := s.newSubscription(w.ID, config.Webhook{URL: w.URL, Secret: w.Secret, Events: w.Events, Thread: w.Thread,
			AllowPrivate: w.AllowPrivate}, &owner)
		if err == nil {
			err = sub.consumer.Start(runCtx)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("webhook %s: %w", w.ID, err))
			continue
		}
		s.mu.Lock()
		s.stored[w.ID] = sub
		s.mu.Unlock()
	}
	s.mu.Lock()
	var gone []*subscription
	for id, sub := range s.stored {
		if !keep[id] {
			gone = append(gone, sub)
			delete(s.stored, id)
		}
	}
	s.mu.Unlock()
	for _, sub := range gone {
		sub.stop()
		// Nobody reads this subscription's events again: its lease and
		// cursor go too. Every daemon that ran it deletes them once its
		// own consumer stopped, so a renewal racing the first delete on
		// another daemon does not leave them behind.
		if err := s.cfg.Store.DeleteEventConsumer(ctx, consumerPrefix+sub.id); err != nil {
			errs = append(errs, fmt.Errorf("webhook %s: deleting its event consumer: %w", sub.id, err))
		}
	}
	return errors.Join(errs...)
}

// Entry reports whether id is a configured entry's (ID).
func (s *Sender) Entry(id string) bool {
	return slices.ContainsFunc(s.fixed, func(sub *subscription) bool { return sub.id == id })
}

// Running reports whether this Sender runs the consumer of webhook id.
func (s *Sender) Running(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.stored[id]
	return ok
}

// Stop stops every webhook's consumer, which saves its cursor and gives
// its lease back. It tolerates a Sender never started and repeated calls.
func (s *Sender) Stop() {
	if s.cancel != nil {
		s.cancel()
		<-s.done
	}
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	s.mu.Lock()
	s.ctx = nil
	stored := s.stored
	s.stored = map[string]*subscription{}
	s.mu.Unlock()
	for _, sub := range s.fixed {
		sub.stop()
	}
	for _, sub := range stored {
		sub.stop()
	}
}

// stop stops the subscription's consumer.
func (sub *subscription) stop() {
	sub.consumer.Stop()
	sub.client.CloseIdleConnections()
}

// Notice is the body of a webhook request: the Standard Webhooks payload
// shape.
type Notice struct {
	// Type is the event type (config.WebhookEventTypes).
	Type string `json:"type"`
	// Timestamp is when the event was emitted (RFC 3339, milliseconds).
	Timestamp string `json:"timestamp"`
	// Data is the event: the params of its notification (turn/completed's
	// threadId and turn; the approval's threadId, method and params; the
	// archived thread's threadId) and its sequence number in the thread's
	// event log.
	Data json.RawMessage `json:"data"`
}

// noticeOf maps a logged event to the notice it makes, if any.
func noticeOf(ev *hub.Notification) (typ string, data json.RawMessage, ok bool) {
	switch ev.Method {
	case api.MethodTurnCompleted, hub.MethodRequestOffered, hub.MethodThreadArchived, hub.MethodThreadUnarchived:
	default:
		return "", nil, false // most events (deltas, items) make none: not decoded
	}
	var f struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(ev.Frame(), &f); err != nil {
		return "", nil, false
	}
	switch f.Method {
	case api.MethodTurnCompleted:
		var p struct {
			Turn struct {
				Status api.TurnStatus `json:"status"`
			} `json:"turn"`
		}
		if json.Unmarshal(f.Params, &p) != nil {
			return "", nil, false
		}
		switch p.Turn.Status {
		case api.TurnCompleted:
			typ = config.WebhookTurnCompleted
		case api.TurnFailed:
			typ = config.WebhookTurnFailed
		case api.TurnInterrupted:
			typ = config.WebhookTurnInterrupted
		default:
			return "", nil, false
		}
		return typ, f.Params, true
	case hub.MethodRequestOffered:
		var o hub.Offer
		if json.Unmarshal(f.Params, &o) != nil || hub.KindOf(o.Method) != hub.KindApproval {
			return "", nil, false
		}
		data, err := json.Marshal(struct {
			ThreadID string          `json:"threadId"`
			Method   string          `json:"method"`
			Params   json.RawMessage `json:"params"`
		}{ev.ThreadID, o.Method, o.Params})
		return config.WebhookApprovalRequested, data, err == nil
	case hub.MethodThreadArchived:
		return config.WebhookThreadArchived, f.Params, true
	case hub.MethodThreadUnarchived:
		return config.WebhookThreadUnarchived, f.Params, true
	}
	return "", nil, false
}

// EventID is the webhook-id of the notice of a thread's event: stable
// across attempts, restarts and daemons, so a receiver drops repeats.
func EventID(threadID string, seq int64) string {
	return "evt_" + threadID + "_" + strconv.FormatInt(seq, 10)
}

// handle posts the notice of an event, if the entry takes it; a failed
// attempt is retried after a backoff until retry_for, then dropped.
func (sub *subscription) handle(ctx context.Context, ev *hub.Notification) error {
	typ, data, ok := noticeOf(ev)
	if !ok || (len(sub.hook.Events) > 0 && !slices.Contains(sub.hook.Events, typ)) {
		return nil
	}
	id := EventID(ev.ThreadID, ev.Seq)
	body, err := json.Marshal(Notice{Type: typ, Timestamp: eventlog.EmittedAt(ev).UTC().Format("2006-01-02T15:04:05.000Z07:00"), Data: withSeq(data, ev.Seq)})
	if err != nil {
		return nil // cannot happen: the parts are valid JSON
	}
	at := sub.now()
	status, err := sub.post(ctx, id, body)
	attempt := store.WebhookDelivery{Webhook: sub.id, EventID: id, EventType: typ, At: at, Status: status, Duration: sub.now().Sub(at)}
	if err == nil {
		delete(sub.failing, id)
		sub.m.delivered.WithLabelValues(sub.id).Inc()
		sub.record(ctx, attempt)
		return nil
	}
	if ctx.Err() != nil {
		return err
	}
	attempt.Error = err.Error()
	sub.m.failed.WithLabelValues(sub.id, reason(err)).Inc()
	r := sub.failing[id]
	if r == nil {
		r = &retrying{since: sub.now()}
		sub.failing[id] = r
	}
	r.attempts++
	if sub.now().Sub(r.since) >= sub.hook.RetryFor {
		delete(sub.failing, id)
		sub.m.dropped.WithLabelValues(sub.id).Inc()
		sub.log.Warn("webhook: notice dropped after retry_for", "id", id, "type", typ, "attempts", r.attempts, "err", err)
		sub.record(ctx, attempt)
		return nil
	}
	wait := backoff(sub.first, sub.most, r.attempts)
	next := sub.now().Add(wait)
	attempt.NextRetry = &next
	sub.record(ctx, attempt)
	sub.log.Info("webhook: attempt failed; retrying", "id", id, "type", typ, "attempt", r.attempts, "retry_in", wait, "err", err)
	return eventlog.RetryIn(wait, err)
}

// record adds an attempt to the webhook's delivery log; a failure to
// log does not fail the delivery.
func (sub *subscription) record(ctx context.Context, d store.WebhookDelivery) {
	if sub.st == nil {
		return
	}
	if err := sub.st.AppendWebhookDelivery(ctx, d, sub.keep); err != nil {
		sub.log.Warn("webhook: logging an attempt", "id", d.EventID, "err", err)
	}
}

// statusError is a receiver's answer that is not a success.
type statusError struct{ code int }

func (e statusError) Error() string { return "the receiver answered " + strconv.Itoa(e.code) }

// reason is the failure label of an attempt's error.
func reason(err error) string {
	var se statusError
	switch {
	case errors.As(err, &se):
		return "status"
	case errors.Is(err, errRefusedAddress):
		return "refused"
	}
	return "network"
}

// post makes one signed attempt; status is the receiver's answer, 0 for
// none.
func (sub *subscription) post(ctx context.Context, id string, body []byte) (status int, err error) {
	now := sub.now()
	sig, err := sub.signer.Sign(id, now, body)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, sub.hook.URL, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "appserver-webhook")
	req.Header.Set(standardwebhooks.HeaderWebhookID, id)
	req.Header.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(now.Unix(), 10))
	req.Header.Set(standardwebhooks.HeaderWebhookSignature, sig)
	resp, err := sub.client.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, statusError{resp.StatusCode}
	}
	return resp.StatusCode, nil
}

// backoff is the wait after the attempts-th failed attempt: first doubled
// per further attempt up to most, less a random part of up to half.
func backoff(first, most time.Duration, attempts int) time.Duration {
	d := first
	for i := 1; i < attempts && d < most; i++ {
		d *= 2
	}
	d = min(d, most)
	return d - rand.N(d/2+1)
}

// withSeq adds the event's sequence number to a notice's data object.
func withSeq(data json.RawMessage, seq int64) json.RawMessage {
	data = bytes.TrimSpace(data)
	if len(data) < 2 || data[0] != '{' {
		return data
	}
	out := make([]byte, 0, len(data)+24)
	out = append(out, `{"seq":`...)
	out = strconv.AppendInt(out, seq, 10)
	if inner := bytes.TrimSpace(data[1 : len(data)-1]); len(inner) > 0 {
		out = append(out, ',')
		out = append(out, inner...)
	}
	return append(out, '}')
}
