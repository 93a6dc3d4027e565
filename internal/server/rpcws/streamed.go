package rpcws

import (
	"io"
)

// StreamedFrame is an outbound frame too large to build whole (a
// thread/read reply with every item of a big thread): the stream's writer
// has it write itself into the message while the message is sent, so that
// it holds at once what it buffers, not the whole frame.
type StreamedFrame interface {
	// WriteFrame writes the whole frame to w, in pieces; each Write is
	// sent on its own (one websocket fragment), so it should be given a
	// few tens of KiB at a time. It runs on the stream's writer goroutine.
	// An error after a piece went out cannot be taken back: the connection
	// is closed (1011) rather than left with half a message.
	WriteFrame(w io.Writer) error
	// Size is what the frame counts for in the outbound byte budget while
	// it waits and while it is written: the most it holds in memory at
	// once, not its length, which is unknown until it is written.
	Size() int64
}

// StreamedResult is a reply's result that encodes itself while the reply
// is sent: Conn.Reply, given one, queues the reply as a StreamedFrame.
type StreamedResult interface {
	// WriteJSON writes the result's JSON value to w (see
	// StreamedFrame.WriteFrame).
	WriteJSON(w io.Writer) error
	// Size is as StreamedFrame.Size.
	Size() int64
}

// outFrame is one queued outbound frame: encoded (data) or streamed.
type outFrame struct {
	data     []byte
	streamed StreamedFrame
	// size is what the frame holds of the outbound byte budget.
	size int64
}

// streamedReply is the reply {"id","result"} around a StreamedResult.
type streamedReply struct {
	head   []byte // {"id":…,"result":
	result StreamedResult
}

func (r *streamedReply) Size() int64 { return int64(len(r.head)) + r.result.Size() }

func (r *streamedReply) WriteFrame(w io.Writer) error {
	if _, err := w.Write(r.head); err != nil {
		return err
	}
	if err := r.result.WriteJSON(w); err != nil {
		return err
	}
	_, err := w.Write([]byte{'}'})
	return err
}

// replyStreamed queues the reply to req whose result writes itself.
func (c *Conn) replyStreamed(req *Request, result StreamedResult) error {
	e, err := replyHead(req, "result")
	if err != nil {
		return err
	}
	head := append([]byte(nil), e.buf.Bytes()...)
	putEncoder(e)
	return c.stream.SendStreamed(&streamedReply{head: head, result: result})
}

// StreamFailedReason is the close reason of a connection whose streamed
// frame failed part way (its source, not the socket, failed).
const StreamFailedReason = "reply could not be completed"

// pieceWriter sends the pieces of a streamed frame, each with a
// WriteTimeout of its own: a long frame is bounded in progress, not in
// total time.
type pieceWriter struct {
	s *Stream
	w io.Writer
	// err is the socket's error, which tells a failed write from a failed
	// frame.
	err error
}

func (p *pieceWriter) Write(b []byte) (int, error) {
	if p.err != nil {
		return 0, p.err
	}
	p.s.mu.Lock()
	p.s.armWriteTimerLocked()
	p.s.mu.Unlock()
	n, err := p.w.Write(b)
	if err != nil {
		p.err = err
	}
	return n, err
}

// writeStreamed sends one streamed frame as a message written in pieces
// (a fragmented websocket message). A frame that fails part way closes the
// connection with 1011: the client has a message it will never see the end
// of.
func (s *Stream) writeStreamed(f StreamedFrame) bool {
	// The write timer, re-armed for every piece, bounds the write.
	mw, err := s.f.FrameWriter()
	if err != nil {
		s.log.Debug("write failed", "err", err)
		return false
	}
	pw := &pieceWriter{s: s, w: mw}
	if err := f.WriteFrame(pw); err != nil {
		if pw.err == nil {
			s.log.Error("streamed frame failed part way; closing the connection", "err", err)
			s.mu.Lock()
			if !s.closing {
				s.closeCode, s.closeText = CloseInternalError, StreamFailedReason
			}
			s.mu.Unlock()
		} else {
			s.log.Debug("write failed", "err", err)
		}
		return false
	}
	if err := mw.Close(); err != nil {
		s.log.Debug("write failed", "err", err)
		return false
	}
	if h := s.opts.Hooks.FrameOut; h != nil {
		h()
	}
	return true
}
