package server

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/server/rpcws"
)

// JSON-RPC error codes as the Codex app-server uses them (docs/protocol.md §2.4).
const (
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternal       = -32603
	CodeOverloaded     = -32001
)

// OverloadedMessage is the exact message of a -32001 answer.
const OverloadedMessage = rpcws.OverloadedMessage

// RPCError is an error answered to the client as a JSON-RPC error object.
type RPCError struct {
	Code    int64
	Message string
	Data    any
}

// Error returns the message.
func (e *RPCError) Error() string { return fmt.Sprintf("jsonrpc error %d: %s", e.Code, e.Message) }

// InvalidRequest returns a -32600 error with a formatted message.
func InvalidRequest(format string, args ...any) *RPCError {
	return &RPCError{Code: CodeInvalidRequest, Message: fmt.Sprintf(format, args...)}
}

// InvalidParams returns a -32602 error with a formatted message.
func InvalidParams(format string, args ...any) *RPCError {
	return &RPCError{Code: CodeInvalidParams, Message: fmt.Sprintf(format, args...)}
}

// toRPCError maps any handler error to what the client sees: RPCErrors as
// they are, domain errors by code (Codex answers domain errors with -32600),
// and anything else as an opaque internal error.
func toRPCError(err error) *RPCError {
	var re *RPCError
	if errors.As(err, &re) {
		return re
	}
	switch apperr.CodeOf(err) {
	case apperr.Forbidden:
		// Beyond a principal's ceiling or roots: the params are refused.
		return &RPCError{Code: CodeInvalidParams, Message: apperr.MessageOf(err)}
	case apperr.Invalid, apperr.NotFound, apperr.Conflict:
		return &RPCError{Code: CodeInvalidRequest, Message: apperr.MessageOf(err)}
	case apperr.Unavailable:
		return &RPCError{Code: CodeInternal, Message: apperr.MessageOf(err)}
	case apperr.Overloaded:
		return &RPCError{Code: CodeOverloaded, Message: OverloadedMessage, Data: map[string]string{"reason": apperr.MessageOf(err)}}
	default:
		return &RPCError{Code: CodeInternal, Message: "internal error"}
	}
}

func (e *RPCError) wire() *rpcws.Error {
	out := &rpcws.Error{Code: e.Code, Message: e.Message}
	if e.Data != nil {
		if raw, err := json.Marshal(e.Data); err == nil {
			out.Data = raw
		}
	}
	return out
}
