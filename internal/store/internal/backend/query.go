package backend

import (
	"strconv"
	"strings"
	"time"
)

// Dialect is what sets the SQL of one backend apart from the other's. The
// query builder and the shared reads take one of the two values below, so
// that the statements of both backends are written once.
type Dialect struct {
	// Name names the dialect in messages and test output.
	Name string
	// Numbered writes parameters as $1, $2, …, which a statement may
	// reference more than once; otherwise each is a ? bound once per use.
	Numbered bool
	// Typed casts parameters whose type the statement leaves open, and binds
	// a set of strings as one text[] parameter.
	Typed bool
	// Position is the function that returns where a substring starts, or 0.
	Position string
	// MicroTimes means time columns hold INTEGER microseconds since the
	// epoch; otherwise they are timestamptz and bind and scan as time.Time.
	MicroTimes bool
}

// Postgres is the dialect of the postgres backend.
var Postgres = Dialect{Name: "postgres", Numbered: true, Typed: true, Position: "strpos"}

// SQLite is the dialect of the sqlite backend.
var SQLite = Dialect{Name: "sqlite", Position: "instr", MicroTimes: true}

// Param returns the text of the n-th parameter of a statement, counting
// from 1.
func (d Dialect) Param(n int) string {
	if d.Numbered {
		return "$" + strconv.Itoa(n)
	}
	return "?"
}

// TimeArg returns t as a time column of d binds it.
func (d Dialect) TimeArg(t time.Time) any {
	if d.MicroTimes {
		return t.UnixMicro()
	}
	return t
}

// cast returns the suffix that types a parameter as typ where d needs it.
func (d Dialect) cast(typ string) string {
	if d.Typed {
		return "::" + typ
	}
	return ""
}

// Query collects the conditions and arguments of one SELECT.
type Query struct {
	d     Dialect
	where []string
	args  []any
}

// NewQuery starts a query in dialect d.
func NewQuery(d Dialect) *Query { return &Query{d: d} }

// arg binds v and returns the text that references it.
func (q *Query) arg(v any) string {
	q.args = append(q.args, v)
	return q.d.Param(len(q.args))
}

// Eq keeps the rows whose column equals v.
func (q *Query) Eq(column string, v any) *Query {
	q.where = append(q.where, column+" = "+q.arg(v))
	return q
}

// Greater keeps the rows whose column is greater than v.
func (q *Query) Greater(column string, v any) *Query {
	q.where = append(q.where, column+" > "+q.arg(v))
	return q
}

// In keeps the rows whose column is one of set; an empty set keeps all.
func (q *Query) In(column string, set []string) *Query { return q.in(column, set, "text") }

// InIDs is In for a column of thread ids (uuid on Postgres, text in
// SQLite).
func (q *Query) InIDs(column string, set []string) *Query { return q.in(column, set, "uuid") }

// in is In with the typed dialect's array element type.
func (q *Query) in(column string, set []string, typ string) *Query {
	switch {
	case len(set) == 0:
	case q.d.Typed:
		q.where = append(q.where, column+" = ANY("+q.arg(set)+"::"+typ+"[])")
	default:
		ps := make([]string, len(set))
		for i, v := range set {
			ps[i] = q.arg(v)
		}
		q.where = append(q.where, column+" IN ("+strings.Join(ps, ", ")+")")
	}
	return q
}

// Contains keeps the rows where any of columns contains term, or any of
// the conditions more builds holds; an empty term keeps all. The columns
// are compared as they are: the caller folds term the way they were
// folded. Each of more gets term and binds the arguments it needs through
// arg, which returns the text that references its value.
func (q *Query) Contains(columns []string, term string, more ...func(term string, arg func(any) string) string) *Query {
	if term == "" {
		return q
	}
	var p string
	ref := func() string {
		if p == "" || !q.d.Numbered {
			p = q.arg(term)
		}
		return p
	}
	ors := make([]string, 0, len(columns)+len(more))
	for _, c := range columns {
		ors = append(ors, q.d.Position+"("+c+", "+ref()+") > 0")
	}
	for _, f := range more {
		ors = append(ors, f(term, q.arg))
	}
	q.where = append(q.where, "("+strings.Join(ors, " OR ")+")")
	return q
}

// Keyset is the order of a listing and the position its page starts after.
type Keyset struct {
	// Column is the sort column.
	Column string
	// Time says Column holds a time, whose cursor Value is microseconds
	// since the epoch; otherwise Column is an integer equal to the Value.
	Time bool
	// ID is the uuid column that breaks ties between equal sort values, and
	// "" when Column alone is unique.
	ID string
	// Desc lists from the greatest value down.
	Desc bool
	// After is the last row of the previous page; nil for the first page.
	After *Cursor
}

// Page returns the statement that selects columns of table in the order of
// k, starting after k.After, with at most limit rows, and its arguments.
func (q *Query) Page(columns, table string, k Keyset, limit int) (string, []any) {
	dir, cmp := " ASC", " > "
	if k.Desc {
		dir, cmp = " DESC", " < "
	}
	if k.After != nil {
		if k.After.Incl {
			cmp = cmp[:2] + "= " // the row itself starts the page
		}
		var value any = k.After.Value
		if k.Time {
			value = q.d.TimeArg(time.UnixMicro(k.After.Value).UTC())
		}
		if k.ID == "" {
			q.where = append(q.where, k.Column+cmp+q.arg(value))
		} else {
			// A row comparison is what lets an index on (sort column, id)
			// seek straight to the page.
			typ := "bigint"
			if k.Time {
				typ = "timestamptz"
			}
			v := q.arg(value) + q.d.cast(typ)
			id := q.arg(CanonicalID(k.After.ID)) + q.d.cast("uuid")
			q.where = append(q.where, "("+k.Column+", "+k.ID+")"+cmp+"("+v+", "+id+")")
		}
	}
	order := k.Column + dir
	if k.ID != "" {
		order += ", " + k.ID + dir
	}
	return q.Select(columns, table) + " ORDER BY " + order + " LIMIT " + strconv.Itoa(limit), q.args
}

// Select returns the statement that selects columns of the rows of table
// the query keeps, in no particular order; its arguments are Args.
func (q *Query) Select(columns, table string) string {
	s := "SELECT " + columns + " FROM " + table
	if len(q.where) > 0 {
		s += " WHERE " + strings.Join(q.where, " AND ")
	}
	return s
}

// Args returns the arguments of the query's parameters, in order.
func (q *Query) Args() []any { return q.args }
