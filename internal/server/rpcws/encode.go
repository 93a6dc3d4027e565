package rpcws

import (
	"bytes"
	"encoding/json"
	"strconv"
	"sync"
	"unicode/utf8"
)

// Every outbound frame (replies, notifications, server→client requests) is
// encoded here in Codex framing directly, its params or result encoded once
// into a pooled buffer, in the bytes json.Marshal would give: encoding/json
// output is compact and HTML-escaped, and the frames used to be re-encoded
// from it (the tests hold the encoders to encoding/json's framing of the
// same message).

// frameEncoder is a scratch buffer with a JSON encoder writing into it.
type frameEncoder struct {
	buf bytes.Buffer
	enc *json.Encoder
}

// maxPooledFrame bounds the scratch buffers kept for reuse, so that one
// huge frame does not pin its buffer for the life of the process.
const maxPooledFrame = 64 << 10

var encoders = sync.Pool{New: func() any {
	e := new(frameEncoder)
	e.enc = json.NewEncoder(&e.buf)
	return e
}}

func getEncoder() *frameEncoder {
	e := encoders.Get().(*frameEncoder)
	e.buf.Reset()
	return e
}

func putEncoder(e *frameEncoder) {
	if e.buf.Cap() <= maxPooledFrame {
		encoders.Put(e)
	}
}

// value appends v as json.Marshal encodes it.
func (e *frameEncoder) value(v any) error {
	if err := e.enc.Encode(v); err != nil {
		return err
	}
	e.buf.Truncate(e.buf.Len() - 1) // Encode ends the value with a newline
	return nil
}

// str appends s as json.Marshal encodes it. Method names are plain ASCII,
// which needs no escaping; anything else goes through the encoder.
func (e *frameEncoder) str(s string) error {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return e.value(s)
		}
	}
	e.buf.WriteByte('"')
	e.buf.WriteString(s)
	e.buf.WriteByte('"')
	return nil
}

// int appends n.
func (e *frameEncoder) int(n int64) {
	e.buf.Write(strconv.AppendInt(e.buf.AvailableBuffer(), n, 10))
}

// frame returns the encoded frame. It is a copy, as the frame outlives
// the buffer, which goes back to the pool; but a buffer too large to be
// pooled that the frame mostly fills (a big thread/resume reply) is handed
// over instead, so that such a frame is not held twice while it is copied.
func (e *frameEncoder) frame() []byte {
	if n := e.buf.Len(); e.buf.Cap() > maxPooledFrame && n >= e.buf.Cap()/4*3 {
		b := e.buf.Bytes()
		e.buf = bytes.Buffer{} // e.enc writes to &e.buf, which stays
		return b
	}
	return append([]byte(nil), e.buf.Bytes()...)
}

// EncodeNotification returns the frame of a server notification:
// {"method","params","emittedAtMs"}, params as json.Marshal encodes them.
func EncodeNotification(method string, params any, emittedAtMs int64) ([]byte, error) {
	e := getEncoder()
	defer putEncoder(e)
	e.buf.WriteString(`{"method":`)
	if err := e.str(method); err != nil {
		return nil, err
	}
	e.buf.WriteString(`,"params":`)
	if err := e.value(params); err != nil {
		return nil, err
	}
	e.buf.WriteString(`,"emittedAtMs":`)
	e.int(emittedAtMs)
	e.buf.WriteByte('}')
	return e.frame(), nil
}

// EncodeRequest returns the frame of a server→client request:
// {"id","method","params"}, params as json.Marshal encodes them and left
// out when nil.
func EncodeRequest(id int64, method string, params any) ([]byte, error) {
	e := getEncoder()
	defer putEncoder(e)
	e.buf.WriteString(`{"id":`)
	e.int(id)
	e.buf.WriteString(`,"method":`)
	if !utf8.ValidString(method) {
		// Frames used to be decoded and re-encoded, which turned every
		// invalid byte of the method into a literal U+FFFD; keep doing so.
		method = string([]rune(method))
	}
	if err := e.str(method); err != nil {
		return nil, err
	}
	if params != nil {
		e.buf.WriteString(`,"params":`)
		if err := e.value(params); err != nil {
			return nil, err
		}
	}
	e.buf.WriteByte('}')
	return e.frame(), nil
}
