package backend

import (
	"context"
	"strings"
	"time"

	"github.com/appserver/appserver/internal/store"
)

// Audit implements the reads and the pruning of the audit log of
// store.Store (migration 00011) once for both SQL backends; entries are
// appended by Write, with the batch they ride.
type Audit struct {
	db      ConsumerDB
	d       Dialect
	observe store.ObserveFunc
	usable  func() error

	prune string
}

const auditColumns = "seq, at, kind, principal, client, node, trace_id, thread_id, turn_id, detail"

// NewAudit returns the audit log of a store in dialect d over db; observe
// and usable are as NewReader's.
func NewAudit(d Dialect, db ConsumerDB, observe store.ObserveFunc, usable func() error) Audit {
	return Audit{
		db: db, d: d, observe: observe, usable: usable,
		prune: "DELETE FROM audit_log WHERE seq IN (SELECT seq FROM audit_log WHERE at < " + d.Param(1) +
			" ORDER BY seq LIMIT " + d.Param(2) + ")",
	}
}

// ListAudit implements store.Store.ListAudit.
func (a Audit) ListAudit(ctx context.Context, q store.AuditQuery) (out []store.AuditEntry, err error) {
	defer func(start time.Time) { Observe(a.observe, store.OpAudit, start, err) }(time.Now())
	if err := a.usable(); err != nil {
		return nil, err
	}
	if err := q.Validate(); err != nil {
		return nil, err
	}
	var where []string
	var args []any
	cond := func(expr string, arg any) {
		args = append(args, arg)
		where = append(where, expr+" "+a.d.Param(len(args)))
	}
	cond("seq >", q.AfterSeq)
	if q.Kind != "" {
		cond("kind =", q.Kind)
	}
	if q.ThreadID != "" {
		cond("thread_id =", CanonicalID(q.ThreadID))
	}
	if q.Principal != nil {
		cond("principal =", *q.Principal)
	}
	if !q.Since.IsZero() {
		cond("at >=", a.d.TimeArg(Time(q.Since)))
	}
	if !q.Until.IsZero() {
		cond("at <", a.d.TimeArg(Time(q.Until)))
	}
	limit := q.Limit
	if limit <= 0 {
		limit = store.DefaultLimit
	}
	args = append(args, min(limit, store.MaxAuditLimit))
	sql := "SELECT " + auditColumns + " FROM audit_log WHERE " + strings.Join(where, " AND ") +
		" ORDER BY seq LIMIT " + a.d.Param(len(args))
	rows, err := a.db.Query(ctx, sql, args...)
	if err != nil {
		return nil, a.db.StorageErr(err)
	}
	defer rows.Close()
	for rows.Next() {
		var e store.AuditEntry
		var at timeCol
		var detail []byte
		if err := rows.Scan(&e.Seq, &at, &e.Kind, &e.Principal, &e.Client, &e.Node, &e.TraceID, &e.ThreadID, &e.TurnID, &detail); err != nil {
			return nil, a.db.StorageErr(err)
		}
		e.At, e.Detail = at.t, rawJSON(detail)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, a.db.StorageErr(err)
	}
	return out, nil
}

// PruneAudit implements store.Store.PruneAudit.
func (a Audit) PruneAudit(ctx context.Context, before time.Time, limit int) (n int64, err error) {
	defer func(start time.Time) { Observe(a.observe, store.OpAudit, start, err) }(time.Now())
	if err := a.usable(); err != nil {
		return 0, err
	}
	n, err = a.db.Exec(ctx, a.prune, a.d.TimeArg(Time(before)), limit)
	if err != nil {
		return 0, a.db.StorageErr(err)
	}
	return n, nil
}
