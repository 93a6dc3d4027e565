package model_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/model"
)

func TestErrorProtocolMapping(t *testing.T) {
	cases := []struct {
		err     *model.Error
		info    string
		message string
		code    apperr.Code
	}{
		{&model.Error{Kind: model.KindUnauthorized, HTTPStatus: 401, Message: "bad key"},
			`"unauthorized"`, "unexpected status 401 Unauthorized: bad key", apperr.Unavailable},
		{&model.Error{Kind: model.KindBadRequest, HTTPStatus: 400, Message: "unknown parameter"},
			`"badRequest"`, "unexpected status 400 Bad Request: unknown parameter", apperr.Invalid},
		{&model.Error{Kind: model.KindModelNotFound, HTTPStatus: 404, Message: "no such model"},
			`"modelNotFound"`, "unexpected status 404 Not Found: no such model", apperr.NotFound},
		{&model.Error{Kind: model.KindRateLimited, HTTPStatus: 429},
			`{"responseTooManyFailedAttempts":{"httpStatusCode":429}}`, "exceeded retry limit, last status: 429 Too Many Requests", apperr.Unavailable},
		{&model.Error{Kind: model.KindServerError, HTTPStatus: 503, Message: "overloaded"},
			`{"responseTooManyFailedAttempts":{"httpStatusCode":503}}`, "exceeded retry limit, last status: 503 Service Unavailable: overloaded", apperr.Unavailable},
		{&model.Error{Kind: model.KindRateLimited, Message: "tokens per min"},
			`"rateLimitExceeded"`, "rate limit exceeded: tokens per min", apperr.Unavailable},
		{&model.Error{Kind: model.KindQuotaExceeded, HTTPStatus: 429},
			`"usageLimitExceeded"`, "Quota exceeded. Check your plan and billing details.", apperr.Unavailable},
		{&model.Error{Kind: model.KindServerOverloaded},
			`"serverOverloaded"`, "Selected model is at capacity. Please try a different model.", apperr.Unavailable},
		{&model.Error{Kind: model.KindContextWindowExceeded, HTTPStatus: 400},
			`"contextWindowExceeded"`, "The model's context window is exhausted. Start a new thread or clear earlier history before retrying.", apperr.Invalid},
		{&model.Error{Kind: model.KindConnectionFailed, Message: "dial tcp: connection refused"},
			`{"httpConnectionFailed":{"httpStatusCode":null}}`, "Connection failed: dial tcp: connection refused", apperr.Unavailable},
		{&model.Error{Kind: model.KindStreamDisconnected, Message: "stream closed before response.completed"},
			`"other"`, "stream disconnected before completion: stream closed before response.completed", apperr.Unavailable},
		{&model.Error{Kind: model.KindMalformed, Message: "bad event"},
			`"other"`, "malformed response from the model provider: bad event", apperr.Unavailable},
	}
	for _, tc := range cases {
		t.Run(string(tc.err.Kind), func(t *testing.T) {
			assert.JSONEq(t, tc.info, string(tc.err.CodexErrorInfo()))
			assert.Equal(t, tc.message, tc.err.TurnErrorMessage())
			wrapped := fmt.Errorf("turn: %w", tc.err)
			msg, info := model.TurnError(wrapped)
			assert.Equal(t, tc.message, msg)
			assert.JSONEq(t, tc.info, string(info))
			assert.Equal(t, tc.code, apperr.CodeOf(wrapped))
			assert.Equal(t, tc.message, apperr.MessageOf(wrapped))
		})
	}
}

func TestTurnErrorOfForeignErrors(t *testing.T) {
	msg, info := model.TurnError(errors.New("secret internals"))
	assert.Equal(t, "internal error", msg)
	assert.JSONEq(t, `"other"`, string(info))

	msg, _ = model.TurnError(context.Canceled)
	assert.Equal(t, "model request canceled", msg)
}

func TestErrorUnwrapsCause(t *testing.T) {
	err := &model.Error{Kind: model.KindCanceled, Err: context.Canceled}
	assert.ErrorIs(t, err, context.Canceled)
	assert.Contains(t, err.Error(), "canceled")
}
