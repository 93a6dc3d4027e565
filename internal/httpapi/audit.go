package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/principal"
	"github.com/appserver/appserver/internal/store"
)

// Pages of the audit log.
const (
	// DefaultAuditPage is a page of GET /v1/audit when no limit is asked.
	DefaultAuditPage = 100
	// JSONLContentType is the media type of the audit log's export.
	JSONLContentType = "application/jsonl"
)

// AuditLog reads the audit log (the store).
type AuditLog interface {
	ListAudit(ctx context.Context, q store.AuditQuery) ([]store.AuditEntry, error)
}

// listAudit serves GET /v1/audit: a page of the audit log, oldest first,
// filtered by kind, thread, principal and time; with format=jsonl, every
// entry that matches, one JSON object a line. The operator reads every
// entry; a principal its own only (principal names it), and naming
// another is 403.
func (a *API) listAudit(w http.ResponseWriter, r *http.Request) *problem {
	if a.cfg.Audit == nil {
		return newProblem(http.StatusNotImplemented, api.ProblemNotImplemented, "this daemon keeps no audit log")
	}
	q, p := auditQuery(r, principalOf(r))
	if p != nil {
		return p
	}
	switch f := r.URL.Query().Get("format"); f {
	case "":
	case "jsonl":
		return a.exportAudit(w, r, q)
	default:
		return invalid("query parameter format must be jsonl, got %q", f)
	}
	limit, p := pageLimit(r, DefaultAuditPage, store.MaxAuditLimit)
	if p != nil {
		return p
	}
	q.Limit = limit + 1
	page, err := a.cfg.Audit.ListAudit(r.Context(), q)
	if err != nil {
		return a.fromError(r, err)
	}
	out := api.HTTPAuditList{Data: api.List[api.HTTPAuditEntry]{}}
	if len(page) > limit {
		page = page[:limit]
		c := strconv.FormatInt(page[limit-1].Seq, 10)
		out.NextCursor = &c
	}
	for _, e := range page {
		out.Data = append(out.Data, auditOut(e))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// exportAudit writes every entry q matches as JSON Lines, a store page at
// a time; a failure after the first line ends the body early (the status
// is sent), which the missing last newline shows.
func (a *API) exportAudit(w http.ResponseWriter, r *http.Request, q store.AuditQuery) *problem {
	q.Limit = store.MaxAuditLimit
	page, err := a.cfg.Audit.ListAudit(r.Context(), q)
	if err != nil {
		return a.fromError(r, err)
	}
	w.Header().Set("Content-Type", JSONLContentType)
	w.Header().Set("Content-Disposition", `attachment; filename="audit.jsonl"`)
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	for len(page) > 0 {
		for _, e := range page {
			if err := enc.Encode(auditOut(e)); err != nil {
				return nil // the client went away
			}
		}
		if len(page) < q.Limit {
			return nil
		}
		q.AfterSeq = page[len(page)-1].Seq
		if page, err = a.cfg.Audit.ListAudit(r.Context(), q); err != nil {
			a.log.Warn("audit export cut short", "err", err)
			return nil
		}
	}
	return nil
}

// auditQuery reads the filters and the cursor of a request by who.
func auditQuery(r *http.Request, who principal.Principal) (store.AuditQuery, *problem) {
	v := r.URL.Query()
	q := store.AuditQuery{Kind: v.Get("kind"), ThreadID: v.Get("thread")}
	if name, ok := v["principal"]; ok {
		n := name[0]
		if n == principal.OperatorLogName {
			n = ""
		}
		q.Principal = &n
	}
	if !who.IsOperator() {
		own := who.Name()
		if q.Principal != nil && *q.Principal != own {
			return q, forbidden("%s reads its own audit entries only", who)
		}
		q.Principal = &own
	}
	for _, t := range []struct {
		name string
		into *time.Time
	}{{"since", &q.Since}, {"until", &q.Until}} {
		s := v.Get(t.name)
		if s == "" {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return q, invalid("query parameter %s %q is not an RFC 3339 time", t.name, s)
		}
		*t.into = at
	}
	seq, p := seqCursor(r)
	if p != nil {
		return q, p
	}
	q.AfterSeq = seq
	return q, nil
}

// auditOut is an entry as the API shows it.
func auditOut(e store.AuditEntry) api.HTTPAuditEntry {
	opt := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	return api.HTTPAuditEntry{
		Seq: e.Seq, At: rfc3339(e.At), Kind: e.Kind, Principal: opt(e.Principal), Client: e.Client, Node: e.Node,
		TraceID: opt(e.TraceID), ThreadID: opt(e.ThreadID), TurnID: opt(e.TurnID), Detail: e.Detail,
	}
}
