package rpcws

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/jsonscan"
)

// An inbound frame is decoded once: jsonscan finds the envelope's members
// in one pass over the frame (which also validates it as encoding/json
// would), and the request keeps slices of the frame for its id, method and
// params, plus the params' top-level members, so that later checks
// (resource key, required and gated fields) read those slices instead of
// decoding the params again. Only the handler's typed decode of the params
// decodes them.
//
// Frames the strict scan does not settle (a key with an escape or in
// another letter case, a repeated key, nesting past jsonscan.MaxDepth,
// whitespace JSON does not allow) go to encoding/json, whose struct
// decoding defined what was accepted before: both paths accept the same
// frames and find the same members (FuzzEnvelopeMatchesEncodingJSON).

// envelope holds the members of one inbound message: nil when the key is
// absent, the value's bytes (JSON null included) otherwise.
type envelope struct {
	id, method, params, result, err []byte
}

var envelopeNames = []string{"id", "method", "params", "result", "error"}

var errShape = errors.New("not a request, notification or response")

// scanEnvelope finds the envelope of frame, which must be one JSON object.
func scanEnvelope(frame []byte, e *envelope) error {
	var buf [8]jsonscan.Member
	var vals [5][]byte
	if members, ok := jsonscan.Object(frame, buf[:0]); ok && jsonscan.Pick(members, envelopeNames, vals[:]) {
		*e = envelope{id: vals[0], method: vals[1], params: vals[2], result: vals[3], err: vals[4]}
		return nil
	}
	return decodeEnvelope(frame, e)
}

// decodeEnvelope is scanEnvelope by encoding/json, for the frames the scan
// leaves to it.
func decodeEnvelope(frame []byte, e *envelope) error {
	data := bytes.TrimSpace(frame)
	if len(data) == 0 || data[0] != '{' {
		return errShape
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method json.RawMessage `json:"method"`
		Params json.RawMessage `json:"params"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return err
	}
	*e = envelope{id: m.ID, method: m.Method, params: m.Params, result: m.Result, err: m.Error}
	return nil
}

func isNull(raw []byte) bool { return string(bytes.TrimSpace(raw)) == "null" }

// request checks the envelope of a request or notification (one with a
// method) and fills r.
func (e *envelope) request(r *Request) error {
	if e.id != nil && isNull(e.id) {
		return errors.New("null id")
	}
	method, ok := jsonscan.Text(bytes.TrimSpace(e.method))
	if !ok {
		return errors.New("method is not a string")
	}
	if e.result != nil || e.err != nil {
		return errShape
	}
	if e.id != nil {
		id := bytes.TrimSpace(e.id)
		if !validRequestID(id) {
			return errors.New("id is neither a string nor a 64-bit integer")
		}
		r.rawID = id
	}
	r.Method = method
	r.Params = e.params
	if p := bytes.TrimSpace(e.params); len(p) > 0 && p[0] == '{' {
		r.members, r.membersOK = jsonscan.Object(p, r.memberBuf[:0])
	}
	return nil
}

// validRequestID accepts a JSON string or an integer in the int64 range.
func validRequestID(raw []byte) bool {
	if len(raw) > 0 && raw[0] == '"' {
		_, ok := jsonscan.Text(raw)
		return ok
	}
	_, ok := parseInt64(raw)
	return ok
}

// parseInt64 parses what strconv.ParseInt accepts in base 10, without the
// string conversion.
func parseInt64(raw []byte) (int64, bool) {
	neg := false
	if len(raw) > 0 && (raw[0] == '-' || raw[0] == '+') {
		neg = raw[0] == '-'
		raw = raw[1:]
	}
	if len(raw) == 0 || len(raw) > 19 {
		return 0, false
	}
	var n uint64
	for _, c := range raw {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	if neg {
		return -int64(n), n <= 1<<63
	}
	return int64(n), n <= math.MaxInt64
}

// response is a client's answer to a server→client request.
type response struct {
	id     api.RequestID
	result json.RawMessage // nil for an error reply
	err    *Error
}

// response checks the envelope of a response (a message without a method)
// and returns it. Ids are strings or integers in [0, MaxInt64]: the server's
// own ids are never negative, and a negative id has always been refused as
// malformed rather than counted as an unknown answer.
func (e *envelope) response() (*response, error) {
	if e.id == nil {
		return nil, errShape
	}
	if isNull(e.id) {
		return nil, errors.New("null id")
	}
	if (e.result != nil) == (e.err != nil) {
		return nil, errShape
	}
	r := &response{result: e.result}
	if e.err != nil {
		var obj struct {
			Code    *int64 `json:"code"`
			Message string `json:"message"`
		}
		if err := json.Unmarshal(e.err, &obj); err != nil || obj.Code == nil {
			return nil, errors.New("malformed error object")
		}
		r.err = &Error{Code: *obj.Code, Message: obj.Message}
	}
	id, err := responseID(e.id)
	if err != nil {
		return nil, err
	}
	r.id = id
	return r, nil
}

// responseID parses the id of a response, as response accepts it.
func responseID(id []byte) (api.RequestID, error) {
	raw := bytes.TrimSpace(id)
	if len(raw) > 0 && raw[0] == '"' {
		s, ok := jsonscan.Text(raw)
		if !ok {
			return api.RequestID{}, errors.New("malformed string id")
		}
		return api.StringRequestID(s), nil
	}
	if len(raw) == 0 || raw[0] == '-' || raw[0] == '+' {
		return api.RequestID{}, errors.New("response id is neither a string nor an integer in [0, 2^63)")
	}
	n, ok := parseInt64(raw)
	if !ok {
		return api.RequestID{}, errors.New("response id is neither a string nor an integer in [0, 2^63)")
	}
	return api.IntRequestID(n), nil
}

// appendID appends the id of a reply: the request's id as the client wrote
// it, so that every integer (-0 included) comes back as sent. A string
// that holds an escape, a byte that is not ASCII or a character
// encoding/json escapes is written as encoding/json writes its value, as
// replies always did: escapes in their shortest form, invalid UTF-8 as
// U+FFFD.
func appendID(e *frameEncoder, raw []byte) error {
	if len(raw) == 0 || raw[0] != '"' {
		e.buf.Write(raw)
		return nil
	}
	if _, escaped, high, ok := jsonscan.String(raw, 0); ok && !escaped && !high && !bytes.ContainsAny(raw, "<>&") {
		e.buf.Write(raw)
		return nil
	}
	s, _ := jsonscan.Text(raw)
	return e.value(s)
}

// idText returns the id as text (strings unquoted), for logs.
func idText(raw []byte) string {
	if len(raw) > 0 && raw[0] == '"' {
		s, _ := jsonscan.Text(raw)
		return s
	}
	return string(raw)
}

// scanPrefix finds what it can of the envelope of a frame of which only
// prefix, its start, is known: the members before the first one that runs
// past the prefix. Result and error are set (to their partial bytes) as
// soon as their key is seen. Keys written with escapes are not matched.
func scanPrefix(prefix []byte) envelope {
	var e envelope
	i := jsonscan.Space(prefix, 0)
	if i >= len(prefix) || prefix[i] != '{' {
		return e
	}
	i = jsonscan.Space(prefix, i+1)
	for i < len(prefix) && prefix[i] == '"' {
		end, _, _, ok := jsonscan.String(prefix, i)
		if !ok {
			return e
		}
		key := string(prefix[i+1 : end-1])
		i = jsonscan.Space(prefix, end)
		if i >= len(prefix) || prefix[i] != ':' {
			return e
		}
		i = jsonscan.Space(prefix, i+1)
		end, ok = jsonscan.Value(prefix, i)
		switch key {
		case "result":
			e.result = prefix[i:end]
		case "error":
			e.err = prefix[i:end]
		}
		next := jsonscan.Space(prefix, end)
		// A value the prefix ends with (a number) may go on past it.
		if !ok || next >= len(prefix) {
			return e
		}
		switch key {
		case "id":
			e.id = prefix[i:end]
		case "method":
			e.method = prefix[i:end]
		}
		if prefix[next] != ',' {
			return e
		}
		i = jsonscan.Space(prefix, next+1)
	}
	return e
}
