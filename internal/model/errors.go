package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/appserver/appserver/internal/apperr"
)

// ErrorKind classifies a failed model call.
type ErrorKind string

// The kinds of model errors.
const (
	// KindUnauthorized: upstream rejected the credentials (401, 403).
	KindUnauthorized ErrorKind = "unauthorized"
	// KindRateLimited: 429 beyond the retry budget, or a rate-limit error
	// inside the stream.
	KindRateLimited ErrorKind = "rate_limited"
	// KindQuotaExceeded: the account is out of quota (insufficient_quota).
	KindQuotaExceeded ErrorKind = "quota_exceeded"
	// KindServerError: 5xx beyond the retry budget.
	KindServerError ErrorKind = "server_error"
	// KindServerOverloaded: upstream says the model is at capacity.
	KindServerOverloaded ErrorKind = "server_overloaded"
	// KindBadRequest: upstream refused the request (other 4xx).
	KindBadRequest ErrorKind = "bad_request"
	// KindModelNotFound: the model does not exist or is not available.
	KindModelNotFound ErrorKind = "model_not_found"
	// KindContextWindowExceeded: the prompt does not fit the model's
	// context window.
	KindContextWindowExceeded ErrorKind = "context_window_exceeded"
	// KindConnectionFailed: no HTTP response was obtained (refused, DNS,
	// TLS, response header timeout).
	KindConnectionFailed ErrorKind = "connection_failed"
	// KindStreamDisconnected: the stream ended, broke, stalled past the
	// idle timeout or reported a failure before the response completed.
	KindStreamDisconnected ErrorKind = "stream_disconnected"
	// KindMalformed: upstream sent something that cannot be decoded.
	KindMalformed ErrorKind = "malformed"
	// KindCanceled: the caller's context ended; Err holds ctx.Err().
	KindCanceled ErrorKind = "canceled"
)

// Error is a failed model call.
type Error struct {
	// Kind classifies the failure.
	Kind ErrorKind
	// HTTPStatus is the upstream HTTP status, 0 when there was none (a
	// connection failure or a failure inside a 200 stream).
	HTTPStatus int
	// Code is the upstream error code (e.g. "context_length_exceeded"),
	// when one was given.
	Code string
	// Message is the upstream error message or a description of the
	// failure; it is safe to show to users.
	Message string
	// Attempts is how many HTTP requests were made, retries included.
	Attempts int
	// RetryAfter is the delay upstream asked for (Retry-After), if any.
	RetryAfter time.Duration
	// retryAfterSet tells a Retry-After of 0 ("now") from none.
	retryAfterSet bool
	// Err is the underlying cause, for logs and errors.Is.
	Err error
}

// Error describes the failure for logs.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("model: ")
	b.WriteString(string(e.Kind))
	if e.HTTPStatus != 0 {
		fmt.Fprintf(&b, " (HTTP %d)", e.HTTPStatus)
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	if e.Err != nil && (e.Message == "" || !strings.Contains(e.Message, e.Err.Error())) {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the cause and the equivalent *apperr.Error, so that
// errors.Is(err, context.Canceled) and apperr.CodeOf both work.
func (e *Error) Unwrap() []error {
	errs := make([]error, 0, 2)
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return append(errs, &apperr.Error{Code: e.appCode(), Message: e.TurnErrorMessage()})
}

func (e *Error) appCode() apperr.Code {
	switch e.Kind {
	case KindBadRequest, KindContextWindowExceeded:
		return apperr.Invalid
	case KindModelNotFound:
		return apperr.NotFound
	default:
		return apperr.Unavailable
	}
}

// Retryable reports whether repeating the same request may succeed.
func (e *Error) Retryable() bool {
	switch e.Kind {
	case KindConnectionFailed:
		return true
	case KindRateLimited, KindServerError:
		// Only HTTP-level failures: an in-stream rate limit already
		// consumed part of a response.
		return e.HTTPStatus != 0
	}
	return false
}

// TurnErrorMessage returns the text for the protocol's TurnError.message,
// worded as Codex words it; a cut stream reads
// "stream disconnected before completion: <upstream message>".
func (e *Error) TurnErrorMessage() string {
	switch e.Kind {
	case KindStreamDisconnected:
		return "stream disconnected before completion: " + e.Message
	case KindContextWindowExceeded:
		return "The model's context window is exhausted. Start a new thread or clear earlier history before retrying."
	case KindQuotaExceeded:
		return "Quota exceeded. Check your plan and billing details."
	case KindServerOverloaded:
		return "Selected model is at capacity. Please try a different model."
	case KindConnectionFailed:
		return "Connection failed: " + e.Message
	case KindMalformed:
		return "malformed response from the model provider: " + e.Message
	case KindCanceled:
		return "model request canceled"
	case KindRateLimited, KindServerError:
		if e.HTTPStatus == 0 {
			if e.Kind == KindRateLimited {
				return "rate limit exceeded: " + e.Message
			}
			return "stream disconnected before completion: " + e.Message
		}
		return withDetail("exceeded retry limit, last status: "+statusText(e.HTTPStatus), e.Message)
	}
	if e.HTTPStatus != 0 {
		return withDetail("unexpected status "+statusText(e.HTTPStatus), e.Message)
	}
	return e.Message
}

// CodexErrorInfo returns the protocol's CodexErrorInfo for this error: a JSON
// string such as "unauthorized", or a single-key object such as
// {"httpConnectionFailed":{"httpStatusCode":null}}.
//
// A stream that broke before completion maps to "other", which is what
// codex-cli 0.169.0 sent (docs/protocol.md §3.3), not to the
// responseStreamDisconnected object.
func (e *Error) CodexErrorInfo() json.RawMessage {
	switch e.Kind {
	case KindUnauthorized:
		return infoString("unauthorized")
	case KindBadRequest:
		return infoString("badRequest")
	case KindModelNotFound:
		return infoString("modelNotFound")
	case KindContextWindowExceeded:
		return infoString("contextWindowExceeded")
	case KindQuotaExceeded:
		return infoString("usageLimitExceeded")
	case KindServerOverloaded:
		return infoString("serverOverloaded")
	case KindConnectionFailed:
		return infoObject("httpConnectionFailed", e.HTTPStatus)
	case KindRateLimited, KindServerError:
		if e.HTTPStatus != 0 {
			return infoObject("responseTooManyFailedAttempts", e.HTTPStatus)
		}
		if e.Kind == KindRateLimited {
			return infoString("rateLimitExceeded")
		}
	}
	return infoString("other")
}

// TurnError returns the TurnError message and CodexErrorInfo for any error a
// Client returned; errors that are not *Error map to "other" with a generic
// message so internal details stay in the log.
func TurnError(err error) (message string, codexErrorInfo json.RawMessage) {
	var me *Error
	if errors.As(err, &me) {
		return me.TurnErrorMessage(), me.CodexErrorInfo()
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return "model request canceled", infoString("other")
	}
	return "internal error", infoString("other")
}

func infoString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

func infoObject(key string, status int) json.RawMessage {
	var code any
	if status != 0 {
		code = status
	}
	b, _ := json.Marshal(map[string]map[string]any{key: {"httpStatusCode": code}})
	return b
}

func statusText(status int) string {
	if t := http.StatusText(status); t != "" {
		return fmt.Sprintf("%d %s", status, t)
	}
	return fmt.Sprint(status)
}

func withDetail(s, detail string) string {
	if detail == "" {
		return s
	}
	return s + ": " + detail
}

// classifyStatus maps an HTTP error response to an error kind, refined by the
// upstream error code or type where OpenAI defines one.
func classifyStatus(status int, code, typ string) ErrorKind {
	switch {
	case code == "context_length_exceeded":
		return KindContextWindowExceeded
	case code == "insufficient_quota" || typ == "insufficient_quota":
		return KindQuotaExceeded
	case code == "model_not_found":
		return KindModelNotFound
	case code == "server_is_overloaded" || code == "slow_down":
		return KindServerOverloaded
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return KindUnauthorized
	case status == http.StatusTooManyRequests:
		return KindRateLimited
	case status == http.StatusRequestTimeout || status >= 500:
		return KindServerError
	default:
		return KindBadRequest
	}
}

// classifyStreamFailure maps an error reported inside a stream
// (response.failed, an "error" event) to an error kind.
func classifyStreamFailure(code, typ string) ErrorKind {
	switch {
	case code == "context_length_exceeded":
		return KindContextWindowExceeded
	case code == "insufficient_quota" || typ == "insufficient_quota":
		return KindQuotaExceeded
	case code == "rate_limit_exceeded" || typ == "rate_limit_exceeded":
		return KindRateLimited
	case code == "server_is_overloaded" || code == "slow_down":
		return KindServerOverloaded
	case code == "model_not_found":
		return KindModelNotFound
	case code == "invalid_prompt" || typ == "invalid_request_error":
		return KindBadRequest
	default:
		return KindStreamDisconnected
	}
}
