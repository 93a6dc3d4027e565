package store

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/google/uuid"

	"github.com/appserver/appserver/internal/apperr"
)

// Validate checks b without touching storage, so that malformed input fails
// alone and early instead of aborting a transaction shared with others. Both
// backends accept exactly what passes here; in particular NUL characters are
// rejected everywhere because Postgres cannot store them in text or JSONB.
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
	return nil
}

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

// checkJSON accepts nil (when optional) or one valid JSON value without a
// \u0000 escape.
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
	if hasNULEscape(raw) {
		return apperr.New(apperr.Invalid, "%s %s %s contains a \\u0000 character", kind, id, field)
	}
	return nil
}

// hasNULEscape reports whether valid JSON raw contains the escape \u0000. An
// occurrence counts only when preceded by an even number of backslashes;
// otherwise its backslash is itself escaped and the text is a literal "\u0000".
func hasNULEscape(s []byte) bool {
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
