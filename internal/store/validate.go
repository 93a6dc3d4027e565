package store

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/google/uuid"

	"github.com/appserver/appserver/internal/apperr"
)

// Validate checks b without touching storage, so that malformed input fails
// alone and early instead of aborting a transaction shared with others.
// Every backend accepts exactly what passes here. NUL characters (U+0000)
// are refused in text fields, which Postgres cannot store; in JSON values
// they are accepted inside objects, which the SQL backends store with an
// escape and read back unchanged (docs/design.md §4), and refused in any
// other JSON value.
func (b *Batch) Validate() error {
	if b == nil {
		return nil
	}
	for _, t := range b.CreateThreads {
		if t == nil {
			return apperr.New(apperr.Invalid, "thread to create is nil")
		}
		if _, err := uuid.Parse(t.ID); err != nil {
			return apperr.New(apperr.Invalid, "invalid thread id %q", t.ID)
		}
		if t.ForkedFromID != nil {
			if _, err := uuid.Parse(*t.ForkedFromID); err != nil {
				return apperr.New(apperr.Invalid, "thread %s: invalid forkedFromId %q", t.ID, *t.ForkedFromID)
			}
		}
		if err := checkText("thread", t.ID, deref(t.Name), t.Preview, t.Cwd, t.ModelProvider, deref(t.Model), t.Source); err != nil {
			return err
		}
		if err := checkJSON("thread", t.ID, "meta", t.Meta, true); err != nil {
			return err
		}
	}
	for _, q := range b.TakeQueued {
		if q.TurnID == "" {
			return apperr.New(apperr.Invalid, "queued submission %s: taken by no turn", q.ID)
		}
		if !ValidThreadID(q.ThreadID) {
			return apperr.New(apperr.Conflict, "queued submission %s of thread %s is not queued", q.ID, q.ThreadID)
		}
	}
	for _, p := range b.UpdateThreads {
		if !ValidThreadID(p.ID) {
			return apperr.New(apperr.NotFound, "thread %s not found", p.ID)
		}
		if err := checkText("thread", p.ID, deref(p.Name), deref(p.Preview), deref(p.Model)); err != nil {
			return err
		}
		if err := checkJSON("thread", p.ID, "meta", p.Meta, true); err != nil {
			return err
		}
	}
	for _, d := range b.DropTurns {
		if !ValidThreadID(d.ThreadID) {
			return apperr.New(apperr.NotFound, "thread %s not found", d.ThreadID)
		}
		if d.TurnID == "" || !ValidKey(d.TurnID) {
			return apperr.New(apperr.NotFound, "turn %q not found in thread %s", d.TurnID, d.ThreadID)
		}
	}
	for _, t := range b.CreateTurns {
		if t == nil {
			return apperr.New(apperr.Invalid, "turn to create is nil")
		}
		if !ValidThreadID(t.ThreadID) {
			return apperr.New(apperr.NotFound, "thread %s not found", t.ThreadID)
		}
		if t.ID == "" {
			return apperr.New(apperr.Invalid, "turn id is empty")
		}
		if !validStatus(t.Status) {
			return apperr.New(apperr.Invalid, "turn %s: invalid status %q", t.ID, t.Status)
		}
		if err := checkTurnFields(t.ID, t.Error, t.Meta); err != nil {
			return err
		}
	}
	for _, p := range b.UpdateTurns {
		if !ValidThreadID(p.ThreadID) {
			return apperr.New(apperr.NotFound, "thread %s not found", p.ThreadID)
		}
		if p.ID == "" {
			return apperr.New(apperr.Invalid, "turn id is empty")
		}
		if p.Status != "" && !validStatus(p.Status) {
			return apperr.New(apperr.Invalid, "turn %s: invalid status %q", p.ID, p.Status)
		}
		if err := checkTurnFields(p.ID, p.Error, p.Meta); err != nil {
			return err
		}
	}
	for _, it := range b.AppendItems {
		if it == nil {
			return apperr.New(apperr.Invalid, "item to append is nil")
		}
		if !ValidThreadID(it.ThreadID) {
			return apperr.New(apperr.NotFound, "thread %s not found", it.ThreadID)
		}
		if it.ItemID == "" || it.TurnID == "" || it.Type == "" {
			return apperr.New(apperr.Invalid, "item %q: item id, turn id and type are required", it.ItemID)
		}
		if err := checkText("item", it.ItemID, it.ItemID, it.TurnID, it.Type); err != nil {
			return err
		}
		if len(it.Payload) == 0 {
			return apperr.New(apperr.Invalid, "item %s: payload is empty", it.ItemID)
		}
		if err := checkJSON("item", it.ItemID, "payload", it.Payload, false); err != nil {
			return err
		}
	}
	for _, ev := range b.AppendEvents {
		if ev == nil {
			return apperr.New(apperr.Invalid, "event to append is nil")
		}
		if !ValidThreadID(ev.ThreadID) {
			return apperr.New(apperr.NotFound, "thread %s not found", ev.ThreadID)
		}
		if ev.Seq <= 0 || ev.Method == "" {
			return apperr.New(apperr.Invalid, "event %d of thread %s: a positive seq and a method are required", ev.Seq, ev.ThreadID)
		}
		if err := checkText("event", ev.Method, ev.Method); err != nil {
			return err
		}
	}
	for _, a := range b.AppendAudit {
		if err := a.validate(); err != nil {
			return err
		}
	}
	return nil
}

// validate refuses an audit entry the store cannot keep: no kind, NUL in
// a text field, or a detail that is not a JSON object.
func (a *AuditEntry) validate() error {
	if a == nil {
		return apperr.New(apperr.Invalid, "audit entry to append is nil")
	}
	if a.Kind == "" {
		return apperr.New(apperr.Invalid, "audit entry: a kind is required")
	}
	if err := checkText("audit entry", a.Kind, a.Kind, a.Principal, a.Client, a.Node, a.TraceID, a.ThreadID, a.TurnID); err != nil {
		return err
	}
	if err := checkJSON("audit entry", a.Kind, "detail", a.Detail, false); err != nil {
		return err
	}
	if first := bytes.TrimLeft(a.Detail, " \t\r\n"); first[0] != '{' {
		return apperr.New(apperr.Invalid, "audit entry %s: detail is not a JSON object", a.Kind)
	}
	return nil
}

// Validate refuses a query the store cannot run: NUL in a filter.
func (q AuditQuery) Validate() error {
	p := ""
	if q.Principal != nil {
		p = *q.Principal
	}
	if strings.IndexByte(q.Kind+q.ThreadID+p, 0) >= 0 {
		return apperr.New(apperr.Invalid, "audit filter contains a NUL character")
	}
	return nil
}

// Validate refuses a query the store cannot run: a NUL character in a
// search term or a filter (Postgres text cannot hold one) is Invalid, with
// the parameter named.
func (q ListThreadsQuery) Validate() error {
	for _, id := range q.IDs {
		if !ValidThreadID(id) {
			return apperr.New(apperr.Invalid, "invalid thread id %q", id)
		}
	}
	if strings.IndexByte(q.SearchTerm, 0) >= 0 {
		return apperr.New(apperr.Invalid, "search term contains a NUL character")
	}
	for _, c := range q.Cwds {
		if strings.IndexByte(c, 0) >= 0 {
			return apperr.New(apperr.Invalid, "cwd filter contains a NUL character")
		}
	}
	for _, p := range q.ModelProviders {
		if strings.IndexByte(p, 0) >= 0 {
			return apperr.New(apperr.Invalid, "model provider filter contains a NUL character")
		}
	}
	return nil
}

// ValidKey reports whether a turn or item id can be stored; one that
// cannot (it holds a NUL character) is simply not found.
func ValidKey(id string) bool { return strings.IndexByte(id, 0) < 0 }

// ValidThreadID reports whether id can name a thread; ids that cannot are
// simply not found, never a storage error.
func ValidThreadID(id string) bool {
	_, err := uuid.Parse(id)
	return err == nil
}

func validStatus(s string) bool {
	switch s {
	case TurnInProgress, TurnCompleted, TurnInterrupted, TurnFailed:
		return true
	}
	return false
}

func checkTurnFields(id string, errJSON, meta json.RawMessage) error {
	if err := checkText("turn", id, id); err != nil {
		return err
	}
	if err := checkJSON("turn", id, "error", errJSON, true); err != nil {
		return err
	}
	return checkJSON("turn", id, "meta", meta, true)
}

// checkText rejects NUL characters in values. It and checkJSON take the
// record's kind and id (and field) apart instead of one message prefix, so
// that the prefix is built only for an error: every store write is
// validated, twice through the GroupCommitter, and nearly always passes.
func checkText(kind, id string, values ...string) error {
	for _, v := range values {
		if strings.IndexByte(v, 0) >= 0 {
			return apperr.New(apperr.Invalid, "%s %s: text contains a NUL character", kind, id)
		}
	}
	return nil
}

// checkJSON accepts nil (when optional) or one valid JSON value; one that
// holds U+0000 must be an object (the only values the SQL backends escape).
func checkJSON(kind, id, field string, raw json.RawMessage, optional bool) error {
	if len(raw) == 0 {
		if optional {
			return nil
		}
		return apperr.New(apperr.Invalid, "%s %s %s is empty", kind, id, field)
	}
	if !json.Valid(raw) {
		return apperr.New(apperr.Invalid, "%s %s %s is not valid JSON", kind, id, field)
	}
	if HasNULEscape(raw) {
		if first := bytes.TrimLeft(raw, " \t\r\n"); first[0] != '{' {
			return apperr.New(apperr.Invalid, "%s %s %s holds a \\u0000 character outside an object", kind, id, field)
		}
	}
	if bytes.Contains(raw, nulMarkJSON) {
		var members map[string]json.RawMessage
		if json.Unmarshal(raw, &members) == nil {
			if _, ok := members[nulMark]; ok {
				return apperr.New(apperr.Invalid, "%s %s %s has the member %q, which the store reserves", kind, id, field, nulMark)
			}
		}
	}
	return nil
}

// HasNULEscape reports whether valid JSON raw holds U+0000, which JSON
// spells \u0000. An occurrence counts only when preceded by an even number
// of backslashes; otherwise its backslash is itself escaped and the text is
// a literal "\u0000".
func HasNULEscape(s []byte) bool {
	for off := 0; ; {
		i := bytes.Index(s[off:], []byte(`\u0000`))
		if i < 0 {
			return false
		}
		i += off
		n := 0
		for j := i - 1; j >= 0 && s[j] == '\\'; j-- {
			n++
		}
		if n%2 == 0 {
			return true
		}
		off = i + 1
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// CredentialDigestSize is the size of a Credential's digest: a SHA-256.
const CredentialDigestSize = 32

// ValidateCredentialKey checks the kind and digest that name a credential.
func ValidateCredentialKey(kind CredentialKind, digest []byte) error {
	if kind != CredentialTicket && kind != CredentialSession {
		return apperr.New(apperr.Invalid, "unknown credential kind %q", kind)
	}
	if len(digest) != CredentialDigestSize {
		return apperr.New(apperr.Invalid, "a credential digest is %d bytes, got %d", CredentialDigestSize, len(digest))
	}
	return nil
}

// Validate checks c before it is stored.
func (c *Credential) Validate() error {
	if err := ValidateCredentialKey(c.Kind, c.Digest); err != nil {
		return err
	}
	return checkText("credential of", string(c.Kind), c.Subject, c.Origin)
}

// Validate checks w before it is stored.
func (w *Webhook) Validate() error {
	if w.ID == "" || w.URL == "" {
		return apperr.New(apperr.Invalid, "a webhook needs an id and a url")
	}
	for _, e := range w.Events {
		if e == "" || strings.ContainsRune(e, ',') {
			return apperr.New(apperr.Invalid, "webhook %s: bad event type %q", w.ID, e)
		}
	}
	if err := checkText("webhook", w.ID, w.ID, w.Owner, w.URL, w.Thread, w.Secret); err != nil {
		return err
	}
	return checkText("webhook", w.ID, w.Events...)
}

// Validate checks d before it is logged.
func (d *WebhookDelivery) Validate() error {
	if d.Webhook == "" {
		return apperr.New(apperr.Invalid, "a webhook delivery needs its webhook's id")
	}
	return checkText("webhook delivery of", d.Webhook, d.Webhook, d.EventID, d.EventType, d.Error)
}

// MaxQueuedClientID and MaxQueuedPayload bound a queued entry's client id
// and payload, in bytes.
const (
	MaxQueuedClientID = 256
	MaxQueuedPayload  = 1 << 20
)

// CheckQueued checks the fields of a queued entry the caller sets.
func CheckQueued(q *QueuedSubmission) error {
	switch {
	case q.ID == "" || strings.IndexByte(q.ID, 0) >= 0 || len(q.ID) > MaxQueuedClientID:
		return apperr.New(apperr.Invalid, "invalid queued submission id %q", q.ID)
	case strings.IndexByte(q.ClientID, 0) >= 0 || len(q.ClientID) > MaxQueuedClientID:
		return apperr.New(apperr.Invalid, "clientUserMessageId: at most %d bytes and no NUL character", MaxQueuedClientID)
	case len(q.Payload) > MaxQueuedPayload:
		return apperr.New(apperr.Invalid, "queued submission: more than %d bytes", MaxQueuedPayload)
	case !json.Valid(q.Payload):
		return apperr.New(apperr.Invalid, "queued submission: payload is no JSON value")
	}
	return nil
}

// CheckReorder checks that ids name each of the stored entries once.
func CheckReorder(stored []QueuedSubmission, ids []string) error {
	want := make(map[string]bool, len(stored))
	for _, q := range stored {
		want[q.ID] = true
	}
	for _, id := range ids {
		if !want[id] {
			return apperr.New(apperr.Invalid, "queue reorder must include every queued submission exactly once")
		}
		delete(want, id)
	}
	if len(want) > 0 {
		return apperr.New(apperr.Invalid, "queue reorder must include every queued submission exactly once")
	}
	return nil
}

// QueuedNotFound is the error of an entry that is not queued.
func QueuedNotFound(id string) error {
	return apperr.New(apperr.NotFound, "queued submission not found: %s", id)
}
