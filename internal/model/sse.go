package model

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
)

// maxSSEEvent bounds the data of one server-sent event (the SDK's decoder
// used the same bound).
const maxSSEEvent = 32 << 20

// sseReader decodes a text/event-stream body: lines ending in "\n" or
// "\r\n"; "data:" fields are joined with "\n" and an empty line dispatches
// the event; comments (":…"), "event:", "id:", "retry:" and unknown fields
// are ignored (both wire APIs carry an event's type in its data), and so
// are events without data. It keeps its buffers between events and, through
// a pool, between streams: a tool-calling turn reads one stream per round.
type sseReader struct {
	br    *bufio.Reader
	line  []byte // a line longer than br's buffer, assembled
	data  []byte // the current event's data
	limit int    // the largest event (and line) accepted
	err   error
}

var sseReaders = sync.Pool{New: func() any { return &sseReader{br: bufio.NewReaderSize(nil, 16<<10)} }}

// newSSEReader returns a reader of r; release it when done.
func newSSEReader(r io.Reader) *sseReader {
	s := sseReaders.Get().(*sseReader)
	s.br.Reset(r)
	s.limit, s.err = maxSSEEvent, nil
	return s
}

// release returns s to the pool; s and any data it returned must not be
// used afterwards.
func (s *sseReader) release() {
	s.br.Reset(nil)
	if cap(s.line) > 64<<10 {
		s.line = nil
	}
	if cap(s.data) > 64<<10 {
		s.data = nil
	}
	sseReaders.Put(s)
}

// next returns the next event's data, valid until the following call, or
// false at the end of the stream or on an error (see err). A final event not
// followed by an empty line is dropped, as the stream ended mid-event.
func (s *sseReader) next() ([]byte, bool) {
	if s.err != nil {
		return nil, false
	}
	s.data = s.data[:0]
	hasData := false
	for {
		line, err := s.readLine()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			s.err = err
			return nil, false
		}
		if len(line) == 0 {
			if hasData {
				return s.data, true
			}
			continue
		}
		name, value, _ := bytes.Cut(line, []byte(":"))
		if string(name) != "data" {
			continue
		}
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
		if hasData {
			s.data = append(s.data, '\n')
		}
		if len(s.data)+len(value) > s.limit {
			s.err = fmt.Errorf("server-sent event larger than %d bytes", s.limit)
			return nil, false
		}
		s.data = append(s.data, value...)
		hasData = true
	}
}

// readLine returns the next line without its line ending; it is valid
// until the next call. A last line without a line ending is returned as
// such; then io.EOF.
func (s *sseReader) readLine() ([]byte, error) {
	line, err := s.br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		s.line = append(s.line[:0], line...)
		for errors.Is(err, bufio.ErrBufferFull) {
			if len(s.line) > s.limit {
				return nil, fmt.Errorf("server-sent event line longer than %d bytes", s.limit)
			}
			line, err = s.br.ReadSlice('\n')
			s.line = append(s.line, line...)
		}
		line = s.line
	}
	if err != nil && (!errors.Is(err, io.EOF) || len(line) == 0) {
		return nil, err
	}
	line = bytes.TrimSuffix(line, []byte("\n"))
	return bytes.TrimSuffix(line, []byte("\r")), nil
}
