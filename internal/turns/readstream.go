package turns

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/store"
)

// streamChunk is how much of a streamed thread/read result is buffered
// before it is written on: one websocket fragment.
const streamChunk = 64 << 10

// ThreadReadStream is the result of thread/read with includeTurns for a
// websocket reply, encoded while the reply is written instead of built
// whole: the thread and its turn rows are read when it is made (so that a
// missing thread or a store outage is still an error reply), and each
// turn's items are paged from the store and encoded a page at a time, so
// a big thread costs one page of items in memory, not the thread twice
// over. Its bytes are those of ReadThread's result as encoding/json
// encodes it.
//
// The items are those stored when it was made: items stored later (by a
// turn still running) have a higher sequence number and are left out, as
// ReadThread would have, so that the notifications queued after the reply
// do not repeat what it shows.
type ThreadReadStream struct {
	// ctx bounds the item reads: the connection's, as the reply is
	// written after the request returned.
	ctx        context.Context
	x          transcript
	head, tail []byte // the encoded result before and after the turns
	turns      []store.Turn
	// lastSeq is the sequence number of the thread's last item when the
	// stream was made.
	lastSeq int64
}

// StreamThread returns what ReadThread returns (with includeTurns), as a
// ThreadReadStream whose items are read while it is written; ctx must
// outlive the call (the connection's).
func (m *Manager) StreamThread(ctx context.Context, p api.ThreadReadParams) (*ThreadReadStream, error) {
	th, x, err := m.readTarget(ctx, p)
	if err != nil {
		return nil, err
	}
	turns, err := x.turns(ctx)
	if err != nil {
		return nil, err
	}
	last, err := x.store.ListItems(ctx, store.ItemsQuery{ThreadID: x.id, Desc: true, Limit: 1})
	if err != nil {
		return nil, err
	}
	s := &ThreadReadStream{ctx: ctx, x: x, turns: turns}
	if len(last.Items) > 0 {
		s.lastSeq = last.Items[0].Seq
	}
	probe := api.Turn{ID: probeID}
	th.Turns = api.List[api.Turn]{probe}
	if s.head, s.tail, err = encodeAround(api.ThreadReadResult{Thread: th}, probe); err != nil {
		return nil, apperr.Wrap(apperr.Internal, err, "encode thread")
	}
	return s, nil
}

// Size is what the stream holds at once while it is written, for the
// connection's outbound byte budget: its buffer and the encoded thread.
// The page of stored items it converts is not counted: its size is not
// known before it is read.
func (s *ThreadReadStream) Size() int64 {
	return int64(len(s.head) + len(s.tail) + streamChunk)
}

// WriteJSON writes the result to w, a turn's items a page at a time, in
// pieces of about streamChunk bytes.
func (s *ThreadReadStream) WriteJSON(w io.Writer) error {
	buf := make([]byte, 0, 2*streamChunk)
	buf = append(buf, s.head...)
	probe := api.ThreadItem{Body: &api.RawThreadItem{JSON: json.RawMessage(`"` + probeID + `"`)}}
	for i, tr := range s.turns {
		if i > 0 {
			buf = append(buf, ',')
		}
		at, err := turnToAPI(tr, nil, api.ItemsFull)
		if err != nil {
			return err
		}
		at.Items = api.List[api.ThreadItem]{probe}
		head, tail, err := encodeAround(at, probe)
		if err != nil {
			return err
		}
		buf = append(buf, head...)
		n := 0
		err = s.x.eachItem(s.ctx, tr.ID, s.lastSeq, func(it store.Item) error {
			var ti api.ThreadItem
			if err := json.Unmarshal(it.Payload, &ti); err != nil {
				return apperr.Wrap(apperr.Internal, err, "corrupt item %s", it.ItemID)
			}
			b, err := json.Marshal(ti)
			if err != nil {
				return err
			}
			if n > 0 {
				buf = append(buf, ',')
			}
			n++
			buf = append(buf, b...)
			if len(buf) >= streamChunk {
				if _, err := w.Write(buf); err != nil {
					return err
				}
				buf = buf[:0]
			}
			return nil
		})
		if err != nil {
			return err
		}
		buf = append(buf, tail...)
	}
	buf = append(buf, s.tail...)
	_, err := w.Write(buf)
	return err
}

// probeID is the id of the element whose place in an encoding
// encodeAround finds: random, so that no content of a thread holds it.
var probeID = func() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand panics instead)
	return "probe-" + hex.EncodeToString(b[:])
}()

// encodeAround encodes v, one of whose lists holds probe alone, and
// returns the encoding before and after probe: the encoding of v with
// that list's elements to be written in between. Finding the element
// rather than its key keeps it right whatever the order of v's fields.
func encodeAround(v, probe any) (head, tail []byte, err error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, nil, err
	}
	p, err := json.Marshal(probe)
	if err != nil {
		return nil, nil, err
	}
	i := bytes.Index(b, p)
	if i < 0 || bytes.Contains(b[i+len(p):], p) {
		return nil, nil, errors.New("turns: probe not found once in its encoding")
	}
	return b[:i], b[i+len(p):], nil
}
