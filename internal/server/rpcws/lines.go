package rpcws

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"sync"
	"time"
)

// ErrFrameTooLarge is the read error of a line longer than the framer's
// read limit: the connection ends, as a websocket does on a message over
// its limit.
var ErrFrameTooLarge = errors.New("rpcws: inbound message over the read limit")

// errNewlineInFrame refuses a frame that would break newline framing. The
// encoders write compact JSON, so this is a bug rather than input.
var errNewlineInFrame = errors.New("rpcws: outbound frame contains a newline")

// linesFramer is a Framer of newline-delimited JSON (stdio://, as the
// reference's default transport): one message per line each way. Blank
// lines are skipped; a last line the peer ends without a newline is a
// message. There are no close frames: closing closes r and w when they are
// io.Closers (which also ends a read waiting on r), so the peer reads EOF.
type linesFramer struct {
	in    *bufio.Reader
	r     io.Reader
	w     io.Writer
	limit int64
	line  lineReader
	// pending holds the lines written with more set, sent with the next
	// write; nil between batches, so an idle connection holds no buffer.
	pending []byte
	// closeOnce closes r and w once, from Close or Abort.
	closeOnce sync.Once
}

// Lines returns the Framer of newline-delimited JSON read from r and
// written to w; an inbound line may be up to readLimit bytes (0 means
// 16 MiB).
func Lines(r io.Reader, w io.Writer, readLimit int64) Framer {
	if readLimit <= 0 {
		readLimit = DefaultReadLimit
	}
	f := &linesFramer{in: bufio.NewReaderSize(r, readChunk), r: r, w: w, limit: readLimit}
	f.line.f = f
	return f
}

func (f *linesFramer) NextReader() (io.Reader, bool, error) {
	for {
		b, err := f.in.Peek(1)
		if err != nil {
			return nil, false, err
		}
		switch b[0] {
		case '\n':
			_, _ = f.in.Discard(1)
			continue
		case '\r':
			if b, _ := f.in.Peek(2); len(b) == 2 && b[1] == '\n' {
				_, _ = f.in.Discard(2)
				continue
			}
		}
		f.line.n, f.line.done = 0, false
		return &f.line, true, nil
	}
}

// lineReader reads one line, without its newline, then io.EOF.
type lineReader struct {
	f    *linesFramer
	n    int64 // bytes of the line read so far
	done bool
}

func (l *lineReader) Read(p []byte) (int, error) {
	if l.done {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	in := l.f.in
	if in.Buffered() == 0 {
		// io.EOF here ends the peer's last line, which had no newline.
		if _, err := in.Peek(1); err != nil {
			return 0, err
		}
	}
	b, _ := in.Peek(min(in.Buffered(), len(p)))
	end := bytes.IndexByte(b, '\n')
	if end >= 0 {
		b = b[:end]
	}
	n := copy(p, b)
	l.n += int64(n)
	if l.n > l.f.limit {
		return 0, ErrFrameTooLarge
	}
	if end >= 0 {
		_, _ = in.Discard(n + 1)
		l.done = true
		return n, io.EOF
	}
	_, _ = in.Discard(n)
	return n, nil
}

func (f *linesFramer) WriteFrame(p []byte, more bool) error {
	if bytes.IndexByte(p, '\n') >= 0 {
		return errNewlineInFrame
	}
	if more && len(f.pending)+len(p) < maxBatch {
		f.pending = append(append(f.pending, p...), '\n')
		return nil
	}
	if len(p) < maxBatch {
		buf := append(append(f.pending, p...), '\n')
		f.pending = nil
		_, err := f.w.Write(buf)
		return err
	}
	// A large frame is written where it is rather than copied.
	if err := f.flush(); err != nil {
		return err
	}
	if _, err := f.w.Write(p); err != nil {
		return err
	}
	_, err := f.w.Write([]byte{'\n'})
	return err
}

// flush writes what is pending.
func (f *linesFramer) flush() error {
	if len(f.pending) == 0 {
		return nil
	}
	buf := f.pending
	f.pending = nil
	_, err := f.w.Write(buf)
	return err
}

func (f *linesFramer) FrameWriter() (io.WriteCloser, error) {
	if err := f.flush(); err != nil {
		return nil, err
	}
	return linePieces{f.w}, nil
}

// linePieces writes one message in pieces and ends it with a newline.
type linePieces struct{ w io.Writer }

func (l linePieces) Write(p []byte) (int, error) {
	if bytes.IndexByte(p, '\n') >= 0 {
		return 0, errNewlineInFrame
	}
	return l.w.Write(p)
}

func (l linePieces) Close() error {
	_, err := l.w.Write([]byte{'\n'})
	return err
}

func (f *linesFramer) Close(CloseCode, string, time.Duration) {
	if err := f.flush(); err != nil {
		f.Abort()
		return
	}
	f.closeAll()
}

func (f *linesFramer) Abort() { f.closeAll() }

// closeAll closes the writer, so the peer reads EOF, and the reader, which
// ends a read waiting on it.
func (f *linesFramer) closeAll() {
	f.closeOnce.Do(func() {
		if c, ok := f.w.(io.Closer); ok {
			_ = c.Close()
		}
		if c, ok := f.r.(io.Closer); ok {
			_ = c.Close()
		}
	})
}
