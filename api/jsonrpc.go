package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
)

// JSON-RPC error codes used by the protocol (docs/protocol.md §2.4).
const (
	// CodeParseError is defined by JSON-RPC but never sent: bad frames are dropped.
	CodeParseError = -32700
	// CodeInvalidRequest covers unknown methods, undecodable params, gating and domain errors.
	CodeInvalidRequest = -32600
	// CodeMethodNotFound answers protocol methods appserver does not implement.
	CodeMethodNotFound = -32601
	// CodeInvalidParams answers a few semantic parameter checks.
	CodeInvalidParams = -32602
	// CodeInternalError answers server-side failures.
	CodeInternalError = -32603
	// CodeServerOverloaded answers requests rejected because the ingress queue is full.
	CodeServerOverloaded = -32001
)

// RequestID is a JSON-RPC request id: a string or a signed 64-bit integer,
// echoed back with the same JSON type. It is comparable, so it can key maps.
type RequestID struct {
	// Str is the id when IsString is true.
	Str string
	// Num is the id when IsString is false.
	Num int64
	// IsString selects between Str and Num.
	IsString bool
}

// IntRequestID returns an integer request id.
func IntRequestID(n int64) RequestID { return RequestID{Num: n} }

// StringRequestID returns a string request id.
func StringRequestID(s string) RequestID { return RequestID{Str: s, IsString: true} }

// String returns the id as text (strings unquoted), for logs and errors.
func (id RequestID) String() string {
	if id.IsString {
		return id.Str
	}
	return strconv.FormatInt(id.Num, 10)
}

// MarshalJSON writes the id as a JSON string or integer.
func (id RequestID) MarshalJSON() ([]byte, error) {
	if id.IsString {
		return json.Marshal(id.Str)
	}
	return strconv.AppendInt(nil, id.Num, 10), nil
}

// errBadRequestID reports an id that is neither a string nor an int64.
var errBadRequestID = errors.New("request id must be a string or a 64-bit integer")

// UnmarshalJSON accepts a JSON string or an integer that fits in int64;
// null, floats, booleans and out-of-range integers are rejected, as 0.169.0
// drops such frames.
func (id *RequestID) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*id = StringRequestID(s)
		return nil
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return errBadRequestID
	}
	*id = IntRequestID(n)
	return nil
}

// ErrorObject is the error member of a JSON-RPC error response.
type ErrorObject struct {
	// Code is one of the Code* constants.
	Code int `json:"code"`
	// Message is the human-readable error text.
	Message string `json:"message"`
	// Data is optional extra detail; omitted when empty.
	Data json.RawMessage `json:"data,omitempty"`
}

// Trace is the optional W3C trace context a client may attach to a request.
type Trace struct {
	// Traceparent is the W3C traceparent header value.
	Traceparent *string `json:"traceparent,omitempty"`
	// Tracestate is the W3C tracestate header value.
	Tracestate *string `json:"tracestate,omitempty"`
}
