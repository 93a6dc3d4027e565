package transcript

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

// streamChunk is how much of a streamed reply is buffered before it is
// written on: one websocket fragment.
const streamChunk = 64 << 10

// ThreadStream is the result of a method that answers with a thread and
// its turns (thread/read with includeTurns, thread/resume and thread/fork
// unless excludeTurns) for a websocket reply, encoded while the reply is
// written instead of built whole: the thread and its turn rows are read
// when it is made (so that a missing thread or a store outage is still an
// error reply), and the items are paged from the store and encoded a page
// at a time, so a big thread costs one page of items in memory, not the
// thread twice over. Its bytes are those of the result
// built whole (thread/read, thread/resume, thread/fork) as encoding/json
// encodes it.
//
// The items are those stored when it was made: items stored later (by a
// turn still running) have a higher sequence number and are left out, as
// the result built whole at that moment would have, so that the
// notifications queued after the reply do not repeat what it shows.
type ThreadStream struct {
	// ctx bounds the item reads: the connection's, as the reply is
	// written after the request returned.
	ctx        context.Context
	x          Reader
	head, tail []byte // the encoded result before and after the turns
	turns      []store.Turn
	// lastSeq is the sequence number of the thread's last item when the
	// stream was made.
	lastSeq int64
	// index has the position of each turn in turns.
	index map[string]int
	// inOrder is whether the thread's items, in sequence order, come
	// turn by turn in the order of turns, so that one walk through them
	// writes every turn (writeInOrder).
	inOrder bool
}

// Stream makes the ThreadStream of result, which holds th: with turns,
// th's turns are the transcript's, read while the stream is written;
// without, th has none, as a result built whole without turns. ctx bounds
// the item reads and must outlive the call (the connection's).
func (x Reader) Stream(ctx context.Context, result any, th *api.Thread, withTurns bool) (*ThreadStream, error) {
	s := &ThreadStream{ctx: ctx, x: x}
	if withTurns {
		turns, err := x.Turns(ctx)
		if err != nil {
			return nil, err
		}
		last, err := x.Store.ListItems(ctx, store.ItemsQuery{ThreadID: x.ThreadID, Desc: true, Limit: 1})
		if err != nil {
			return nil, err
		}
		s.turns = turns
		if len(last.Items) > 0 {
			s.lastSeq = last.Items[0].Seq
		}
		if s.inOrder, err = s.itemsInOrder(); err != nil {
			return nil, err
		}
	}
	probe := api.Turn{ID: probeID}
	th.Turns = api.List[api.Turn]{probe}
	var err error
	if s.head, s.tail, err = encodeAround(result, probe); err != nil {
		return nil, apperr.Wrap(apperr.Internal, err, "encode thread")
	}
	return s, nil
}

// itemsInOrder fills s.index and reports whether the thread's items come
// turn by turn, reading them once (a page at a time) without decoding
// them. An item of a turn not in s.turns (begun after they were read) is
// left out by either walk, so it does not count.
func (s *ThreadStream) itemsInOrder() (bool, error) {
	s.index = make(map[string]int, len(s.turns))
	for i, tr := range s.turns {
		s.index[tr.ID] = i
	}
	errOutOfOrder := errors.New("item out of turn order")
	last := 0
	err := s.x.EachItem(s.ctx, "", s.lastSeq, func(it store.Item) error {
		i, ok := s.index[it.TurnID]
		if !ok {
			return nil
		}
		if i < last {
			return errOutOfOrder
		}
		last = i
		return nil
	})
	if errors.Is(err, errOutOfOrder) {
		return false, nil
	}
	return err == nil, err
}

// Size is what the stream holds at once while it is written, for the
// connection's outbound byte budget: its buffer and the encoded thread.
// The page of stored items it converts is not counted: its size is not
// known before it is read.
func (s *ThreadStream) Size() int64 {
	return int64(len(s.head) + len(s.tail) + 2*streamChunk) // WriteJSON's buffer
}

// WriteJSON writes the result to w, the items a page at a time, in
// pieces of about streamChunk bytes.
func (s *ThreadStream) WriteJSON(w io.Writer) error {
	sw := &streamWriter{w: w, buf: make([]byte, 0, 2*streamChunk)}
	sw.buf = append(sw.buf, s.head...)
	var err error
	if s.inOrder {
		err = s.writeInOrder(sw)
	} else {
		err = s.writeByTurn(sw)
	}
	if err != nil {
		return err
	}
	sw.buf = append(sw.buf, s.tail...)
	return sw.flush()
}

// writeInOrder writes the turns from one walk through the thread's items:
// for a thread whose items are grouped by turn, in turn order, as a
// thread's turns, run one at a time, leave them. One page of items is
// read at a time instead of at least one per turn.
func (s *ThreadStream) writeInOrder(sw *streamWriter) error {
	next := 0 // the turns before it are open or written
	var tail []byte
	// open writes the turns up to and including turns[i], closing the
	// turn open before.
	open := func(i int) error {
		for ; next <= i; next++ {
			if next > 0 {
				sw.buf = append(sw.buf, tail...)
				sw.buf = append(sw.buf, ',')
			}
			var head []byte
			var err error
			if head, tail, err = turnAround(s.turns[next]); err != nil {
				return err
			}
			sw.buf = append(sw.buf, head...)
			sw.items = 0
		}
		return nil
	}
	err := s.x.EachItem(s.ctx, "", s.lastSeq, func(it store.Item) error {
		i, ok := s.index[it.TurnID]
		if !ok {
			return nil // of a turn begun after the stream was made
		}
		if err := open(i); err != nil {
			return err
		}
		return sw.item(it)
	})
	if err != nil {
		return err
	}
	if err := open(len(s.turns) - 1); err != nil {
		return err
	}
	if len(s.turns) > 0 {
		sw.buf = append(sw.buf, tail...)
	}
	return nil
}

// writeByTurn writes the turns with a walk through each turn's items.
func (s *ThreadStream) writeByTurn(sw *streamWriter) error {
	for i, tr := range s.turns {
		if i > 0 {
			sw.buf = append(sw.buf, ',')
		}
		head, tail, err := turnAround(tr)
		if err != nil {
			return err
		}
		sw.buf = append(sw.buf, head...)
		sw.items = 0
		if err := s.x.EachItem(s.ctx, tr.ID, s.lastSeq, sw.item); err != nil {
			return err
		}
		sw.buf = append(sw.buf, tail...)
	}
	return nil
}

// turnAround returns the encoding of a turn before and after its items.
func turnAround(tr store.Turn) (head, tail []byte, err error) {
	at, err := TurnToAPI(tr, nil, api.ItemsFull)
	if err != nil {
		return nil, nil, err
	}
	probe := api.ThreadItem{Body: &api.RawThreadItem{JSON: json.RawMessage(`"` + probeID + `"`)}}
	at.Items = api.List[api.ThreadItem]{probe}
	return encodeAround(at, probe)
}

// streamWriter buffers a ThreadStream's bytes and writes them on in
// pieces of about streamChunk bytes.
type streamWriter struct {
	w   io.Writer
	buf []byte
	// items is how many items of the open turn are written.
	items int
}

// item appends a stored item to the open turn, as the whole result
// encodes it: decoded into an api.ThreadItem and encoded again.
func (sw *streamWriter) item(it store.Item) error {
	var ti api.ThreadItem
	if err := json.Unmarshal(it.Payload, &ti); err != nil {
		return apperr.Wrap(apperr.Internal, err, "corrupt item %s", it.ItemID)
	}
	b, err := json.Marshal(ti)
	if err != nil {
		return err
	}
	if sw.items > 0 {
		sw.buf = append(sw.buf, ',')
	}
	sw.items++
	sw.buf = append(sw.buf, b...)
	if len(sw.buf) >= streamChunk {
		return sw.flush()
	}
	return nil
}

// flush writes the buffered bytes on.
func (sw *streamWriter) flush() error {
	if len(sw.buf) == 0 {
		return nil
	}
	_, err := sw.w.Write(sw.buf)
	sw.buf = sw.buf[:0]
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
		return nil, nil, errors.New("transcript: probe not found once in its encoding")
	}
	return b[:i], b[i+len(p):], nil
}
