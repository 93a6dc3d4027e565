package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/reqlog"
)

// problem is an error answered as application/problem+json. Handlers return
// one instead of writing errors themselves, so every error class keeps one
// status and one type.
type problem struct {
	status int
	typ    string
	detail string
	// header is set on the response, e.g. WWW-Authenticate.
	header http.Header
}

func (p *problem) Error() string { return fmt.Sprintf("%d %s: %s", p.status, p.typ, p.detail) }

// titles are the fixed summaries of the problem types.
var titles = map[string]string{
	api.ProblemInvalidRequest:       "Invalid request",
	api.ProblemUnauthorized:         "Unauthorized",
	api.ProblemForbidden:            "Forbidden",
	api.ProblemNotFound:             "Not found",
	api.ProblemMethodNotAllowed:     "Method not allowed",
	api.ProblemConflict:             "Conflict",
	api.ProblemEventsGone:           "Events no longer available",
	api.ProblemPayloadTooLarge:      "Request body too large",
	api.ProblemUnsupportedMediaType: "Unsupported media type",
	api.ProblemIdempotencyKeyReused: "Idempotency key reused",
	api.ProblemInternal:             "Internal error",
	api.ProblemNotImplemented:       "Not implemented",
	api.ProblemUnavailable:          "Service unavailable",
}

func newProblem(status int, typ, format string, args ...any) *problem {
	return &problem{status: status, typ: typ, detail: fmt.Sprintf(format, args...)}
}

func invalid(format string, args ...any) *problem {
	return newProblem(http.StatusBadRequest, api.ProblemInvalidRequest, format, args...)
}

func forbidden(format string, args ...any) *problem {
	return newProblem(http.StatusForbidden, api.ProblemForbidden, format, args...)
}

func notFound(format string, args ...any) *problem {
	return newProblem(http.StatusNotFound, api.ProblemNotFound, format, args...)
}

func conflict(format string, args ...any) *problem {
	return newProblem(http.StatusConflict, api.ProblemConflict, format, args...)
}

func unavailable(format string, args ...any) *problem {
	p := newProblem(http.StatusServiceUnavailable, api.ProblemUnavailable, format, args...)
	p.header = http.Header{"Retry-After": {"5"}}
	return p
}

// body renders the problem for the request it answers.
func (p *problem) body(r *http.Request) api.Problem {
	return api.Problem{Type: p.typ, Title: titles[p.typ], Status: p.status, Detail: p.detail, Instance: r.URL.Path,
		RequestID: reqlog.ID(r.Context())}
}

// writeProblem answers with the problem.
func writeProblem(w http.ResponseWriter, r *http.Request, p *problem) {
	h := w.Header()
	for k, vs := range p.header {
		h[k] = vs
	}
	b, _ := json.Marshal(p.body(r))
	h.Set("Content-Type", api.ProblemContentType)
	h.Set("Content-Length", strconv.Itoa(len(b)+1))
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(p.status)
	_, _ = w.Write(append(b, '\n'))
}

// writeJSON answers with a JSON body.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Our own types always encode; a failure is a bug.
		panic(fmt.Sprintf("httpapi: encode response: %v", err))
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)+1))
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// fromError maps a domain error from the turns layer or the store to a
// problem; internal details go to the log only (r, for the log, may be
// nil).
func (a *API) fromError(r *http.Request, err error) *problem {
	var p *problem
	if errors.As(err, &p) {
		return p
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return unavailable("the request was cancelled")
	}
	switch apperr.CodeOf(err) {
	case apperr.Invalid:
		return invalid("%s", apperr.MessageOf(err))
	case apperr.Forbidden:
		return forbidden("%s", apperr.MessageOf(err))
	case apperr.NotFound:
		return notFound("%s", apperr.MessageOf(err))
	case apperr.Conflict:
		return conflict("%s", apperr.MessageOf(err))
	case apperr.Unavailable, apperr.Overloaded:
		return unavailable("%s", apperr.MessageOf(err))
	}
	if r != nil {
		a.log.ErrorContext(r.Context(), "http api request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	} else {
		a.log.Error("http api request failed", "err", err)
	}
	return newProblem(http.StatusInternalServerError, api.ProblemInternal, "internal error")
}

// isJSONMediaType reports whether a Content-Type names JSON.
func isJSONMediaType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// readBody reads a bounded JSON request body. With optional, a request
// without a body (no Content-Type and nothing to read) yields nil.
func (a *API) readBody(w http.ResponseWriter, r *http.Request, optional bool) ([]byte, *problem) {
	ct := r.Header.Get("Content-Type")
	if ct == "" && optional && (r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody) {
		return nil, nil
	}
	if !isJSONMediaType(ct) {
		if ct == "" {
			return nil, newProblem(http.StatusUnsupportedMediaType, api.ProblemUnsupportedMediaType,
				"the request body must be JSON: send Content-Type: application/json")
		}
		return nil, newProblem(http.StatusUnsupportedMediaType, api.ProblemUnsupportedMediaType,
			"the request body must be application/json, not %q", ct)
	}
	body := http.MaxBytesReader(w, r.Body, a.cfg.MaxBodyBytes)
	b, err := io.ReadAll(body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, newProblem(http.StatusRequestEntityTooLarge, api.ProblemPayloadTooLarge,
				"the request body exceeds %d bytes", a.cfg.MaxBodyBytes)
		}
		return nil, invalid("reading the request body: %v", err)
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		if optional {
			return nil, nil
		}
		return nil, invalid("the request body is empty; a JSON object is required")
	}
	return b, nil
}

// decodeStrict decodes one JSON value into v, rejecting unknown fields,
// type mismatches and trailing data with a message naming the problem.
func decodeStrict(b []byte, v any) *problem {
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return invalid("%s", describeJSONError(err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return invalid("unexpected data after the JSON body")
	}
	return nil
}

// decodeBody reads and strictly decodes a JSON body into v; with optional,
// an absent body leaves v as it is.
func (a *API) decodeBody(w http.ResponseWriter, r *http.Request, v any, optional bool) *problem {
	b, p := a.readBody(w, r, optional)
	if p != nil || b == nil {
		return p
	}
	return decodeStrict(b, v)
}

func describeJSONError(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("malformed JSON at byte %d: %v", se.Offset, se)
	case errors.As(err, &te):
		if te.Field != "" {
			return fmt.Sprintf("field %q: expected %s, got JSON %s", te.Field, te.Type, te.Value)
		}
		return fmt.Sprintf("expected %s, got JSON %s", te.Type, te.Value)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "malformed JSON: unexpected end of the body"
	}
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return "unknown field " + rest
	}
	return strings.TrimPrefix(msg, "json: ")
}
