package skills

import (
	"encoding/base64"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCursorRoundTrip(t *testing.T) {
	k := newCursorCodec()
	want := cursor{kind: cursorRead, offset: 50_000, binding: 42, stamp: 7}
	s := k.encode(want)
	assert.Len(t, s, cursorLen)
	got, err := k.decode(s, cursorRead)
	require.NoError(t, err)
	assert.Equal(t, want, got)
}

func TestCursorTamperEvident(t *testing.T) {
	k := newCursorCodec()
	s := k.encode(cursor{kind: cursorList, offset: 20, stamp: 99})
	raw, err := base64.RawURLEncoding.DecodeString(s)
	require.NoError(t, err)
	for i := range raw {
		for _, bit := range []byte{1, 0x80} {
			forged := append([]byte(nil), raw...)
			forged[i] ^= bit
			_, err := k.decode(base64.RawURLEncoding.EncodeToString(forged), cursorList)
			assert.ErrorIs(t, err, errCursorInvalid, "byte %d bit %x", i, bit)
		}
	}
	for _, bad := range []string{"", "0", "20", s[:len(s)-1], s + "A", "!" + s[1:]} {
		_, err := k.decode(bad, cursorList)
		assert.ErrorIs(t, err, errCursorInvalid, "%q", bad)
	}
	// Another process (another key) cannot mint or reuse cursors.
	_, err = newCursorCodec().decode(s, cursorList)
	assert.ErrorIs(t, err, errCursorInvalid)
	// A list cursor is not a read cursor.
	_, err = k.decode(s, cursorRead)
	assert.ErrorIs(t, err, errCursorKind)
}

func TestHashStringsIsLengthPrefixed(t *testing.T) {
	k := newCursorCodec()
	assert.NotEqual(t, k.hashStrings("ab", "c"), k.hashStrings("a", "bc"))
	assert.Equal(t, k.hashStrings("a", "b"), k.hashStrings("a", "b"))
}
