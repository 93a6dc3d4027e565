package backend

import (
	"bytes"
	"time"

	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/store"
)

// A row of the events table holds one event or, when its first_seq is set
// (migration 00012), the events first_seq to seq of its thread, every
// number present, that one commit stored together: their frames joined by
// EventSeparator, the first event's method, the newest event's time. The
// embedded store writes such rows (one per thread and commit instead of one
// per event); Postgres writes one row per event. Both read them here.

// EventSeparator joins the frames of a row that holds several events. The
// frames are compact JSON, which has no raw newline byte; a frame that has
// one is stored in a row of its own (JoinableEvent).
const EventSeparator = '\n'

// FrameMethod returns the method a notification frame starts with, as our
// encoder writes it: {"method":"<name>",... ok is false for anything else
// (another key first, white space, an escape in the name): such a frame
// cannot share a row, whose events take their methods from their frames.
func FrameMethod(frame []byte) (method string, ok bool) {
	m, ok := frameMethod(frame)
	return string(m), ok
}

func frameMethod(frame []byte) ([]byte, bool) {
	const prefix = `{"method":"`
	if !bytes.HasPrefix(frame, []byte(prefix)) {
		return nil, false
	}
	rest := frame[len(prefix):]
	end := bytes.IndexByte(rest, '"')
	if end <= 0 || bytes.IndexByte(rest[:end], '\\') >= 0 {
		return nil, false
	}
	return rest[:end], true
}

// JoinableEvent reports whether ev may share a row with other events: its
// frame holds no separator and starts with its own method, so that reading
// the row gives back the same event.
func JoinableEvent(ev *store.Event) bool {
	m, ok := frameMethod(ev.Data)
	return ok && string(m) == ev.Method && bytes.IndexByte(ev.Data, EventSeparator) < 0
}

// splitEventRow appends to out the events of a row (thread, first..last,
// method, data, created) with Seq greater than afterSeq. first is 0 for a
// row of one event.
func splitEventRow(out []store.Event, thread string, first, last int64, method string, data []byte, created time.Time, afterSeq int64) ([]store.Event, error) {
	if first == 0 || first == last {
		return append(out, store.Event{ThreadID: thread, Seq: last, Method: method, Data: data, CreatedAt: created}), nil
	}
	if first > last {
		return out, apperr.New(apperr.Internal, "events %d to %d of thread %s: a row with its numbers reversed", first, last, thread)
	}
	seq := first
	for {
		frame, rest, more := bytes.Cut(data, []byte{EventSeparator})
		if seq > afterSeq {
			m, ok := method, seq == first
			if !ok {
				m, ok = FrameMethod(frame)
			}
			if !ok {
				return out, apperr.New(apperr.Internal, "event %d of thread %s: a stored frame without its method", seq, thread)
			}
			// Capped, so that appending to one event's data cannot
			// overwrite the next one's.
			out = append(out, store.Event{ThreadID: thread, Seq: seq, Method: m, Data: frame[:len(frame):len(frame)], CreatedAt: created})
		}
		if !more {
			break
		}
		data = rest
		if seq++; seq > last {
			return out, apperr.New(apperr.Internal, "events %d to %d of thread %s: the row holds more frames", first, last, thread)
		}
	}
	if seq != last {
		return out, apperr.New(apperr.Internal, "events %d to %d of thread %s: the row holds fewer frames", first, last, thread)
	}
	return out, nil
}
