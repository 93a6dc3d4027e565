package model

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readAllSSE decodes every event of stream with reads of at most chunk
// bytes (0: unlimited) and returns the events' data and the final error.
func readAllSSE(t *testing.T, stream string, chunk int, limit int) ([]string, error) {
	t.Helper()
	var r io.Reader = strings.NewReader(stream)
	if chunk > 0 {
		r = &chunkReader{s: stream, n: chunk}
	}
	s := newSSEReader(r)
	defer s.release()
	if limit > 0 {
		s.limit = limit
	}
	var out []string
	for {
		data, ok := s.next()
		if !ok {
			return out, s.err
		}
		out = append(out, string(data))
	}
}

type chunkReader struct {
	s string
	n int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if c.s == "" {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), c.n)], c.s)
	c.s = c.s[n:]
	return n, nil
}

func TestSSEReader(t *testing.T) {
	long := strings.Repeat("x", 40<<10) // longer than the reader's buffer
	cases := []struct {
		name, stream string
		want         []string
	}{
		{"one event", "event: a\ndata: {\"x\":1}\n\n", []string{`{"x":1}`}},
		{"crlf", "event: a\r\ndata: one\r\n\r\ndata: two\r\n\r\n", []string{"one", "two"}},
		{"data lines join with newline", "data: a\ndata: b\ndata:c\n\n", []string{"a\nb\nc"}},
		{"only one leading space is dropped", "data:  two spaces\n\n", []string{" two spaces"}},
		{"comments and other fields are ignored", ": ping\nid: 7\nretry: 10\nevent: x\nfoo: bar\ndata: d\n\n", []string{"d"}},
		{"events without data are skipped", "event: a\n\n\n\ndata: d\n\n", []string{"d"}},
		{"empty data still dispatches", "data:\n\n", []string{""}},
		{"a line without a colon is a field with an empty value", "data\ndata: d\n\n", []string{"\nd"}},
		{"an unterminated last event is dropped", "data: a\n\ndata: b\n", []string{"a"}},
		{"an unterminated last line is dropped", "data: a\n\ndata: b", []string{"a"}},
		{"long line", "data: " + long + "\n\ndata: after\n\n", []string{long, "after"}},
		{"empty stream", "", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, chunk := range []int{0, 1, 7} {
				got, err := readAllSSE(t, tc.stream, chunk, 0)
				require.NoError(t, err, "chunk %d", chunk)
				assert.Equal(t, tc.want, got, "chunk %d", chunk)
			}
		})
	}
}

// TestSSEReaderReusesBuffers shows that an event's data is valid only until
// the next one (the buffer is reused), and that a pooled reader starts clean.
func TestSSEReaderReusesBuffers(t *testing.T) {
	s := newSSEReader(strings.NewReader("data: first\n\ndata: second\n\n"))
	first, ok := s.next()
	require.True(t, ok)
	require.Equal(t, "first", string(first))
	second, ok := s.next()
	require.True(t, ok)
	require.Equal(t, "second", string(second))
	assert.Equal(t, "secon", string(first), "the data buffer is reused")
	s.release()

	got, err := readAllSSE(t, "data: x\n\n", 0, 0)
	require.NoError(t, err)
	assert.Equal(t, []string{"x"}, got)
}

func TestSSEReaderErrors(t *testing.T) {
	t.Run("event too large", func(t *testing.T) {
		got, err := readAllSSE(t, "data: ok\n\ndata: 0123456789\ndata: 0123456789\n\n", 0, 16)
		assert.Equal(t, []string{"ok"}, got)
		assert.ErrorContains(t, err, "server-sent event larger than 16 bytes")
	})
	t.Run("line too long", func(t *testing.T) {
		got, err := readAllSSE(t, "data: "+strings.Repeat("y", 40<<10)+"\n\n", 0, 17<<10)
		assert.Empty(t, got)
		assert.ErrorContains(t, err, "line longer than")
	})
	t.Run("read error", func(t *testing.T) {
		boom := errors.New("boom")
		s := newSSEReader(io.MultiReader(strings.NewReader("data: a\n\ndata: b"), iotest.ErrReader(boom)))
		defer s.release()
		data, ok := s.next()
		require.True(t, ok)
		assert.Equal(t, "a", string(data))
		_, ok = s.next()
		assert.False(t, ok)
		assert.ErrorIs(t, s.err, boom)
	})
}
