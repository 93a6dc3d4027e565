package backend

import (
	"bytes"
	"time"

	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/store"
)

// A row of the events table holds one event or, when its first_seq is set
// (migration 00012), events first_seq to seq of its thread that one
// commit stored together: their frames joined by EventSeparator, the first
// event's method, the newest event's time. Numbers between first_seq and
// seq that the row holds no event of (numbers handed out to deltas, which
// the embedded store does not keep) are told where they fall by a line of
// '0' bytes one shorter than their count, an empty line for one number
// (migration 00016): a frame starts with '{'. A row's data is thus the
// bytes of its frames and one more for each number past first_seq, which
// PruneThreadEvents counts on. The embedded store writes such rows (one
// per thread and commit instead of one per event); Postgres writes one
// row per event. Both read them here.

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

// AppendEventRun appends to dst the data of a row holding run, events of
// one thread in increasing Seq, each joinable (JoinableEvent): their
// frames, with a line for the numbers skipped between two of them.
func AppendEventRun(dst []byte, run []store.Event) []byte {
	for k := range run {
		if k > 0 {
			dst = append(dst, EventSeparator)
			if skipped := run[k].Seq - run[k-1].Seq - 1; skipped > 0 {
				for range skipped - 1 {
					dst = append(dst, skipByte)
				}
				dst = append(dst, EventSeparator)
			}
		}
		dst = append(dst, run[k].Data...)
	}
	return dst
}

// skipByte fills the line that tells skipped numbers.
const skipByte = '0'

// EventJoinSize is what joining next after prev adds to a row's data
// (AppendEventRun): its frame, and a byte for each number from prev's.
func EventJoinSize(prev, next *store.Event) int {
	return len(next.Data) + int(next.Seq-prev.Seq)
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
	for line := 0; ; line++ {
		frame, rest, more := bytes.Cut(data, []byte{EventSeparator})
		if len(frame) == 0 || frame[0] == skipByte {
			// The numbers skipped before the next frame: one more than
			// the line's bytes.
			n := int64(len(frame)) + 1
			if !more || line == 0 || n > last-seq || bytes.Count(frame, []byte{skipByte}) != len(frame) {
				return out, apperr.New(apperr.Internal, "events %d to %d of thread %s: a bad line of skipped numbers after %d", first, last, thread, seq-1)
			}
			seq += n
			data = rest
			continue
		}
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
