package backend_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/store/internal/backend"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestCursorRoundTrip(t *testing.T) {
	c := backend.Cursor{Scope: "threads/created_at", Value: -1234567, ID: "0190a5b2-0000-7000-8000-000000000001"}
	got, err := backend.DecodeCursor(c.Encode(), c.Scope)
	require.NoError(t, err)
	require.Equal(t, c, got)

	_, err = backend.DecodeCursor(c.Encode(), "threads/updated_at")
	require.Equal(t, apperr.Invalid, apperr.CodeOf(err))
	require.Equal(t, "invalid cursor: "+c.Encode(), apperr.MessageOf(err))
}

// FuzzDecodeCursor checks that no input crashes the decoder, that refusals
// are always the documented Invalid error, and that whatever it accepts
// encodes back to an equivalent cursor.
func FuzzDecodeCursor(f *testing.F) {
	f.Add(backend.Cursor{Scope: "items/x", Value: 7}.Encode(), "items/x")
	f.Add(backend.Cursor{Scope: "threads/created_at", Value: 1, ID: "a"}.Encode(), "threads/created_at")
	f.Add("garbage", "items/x")
	f.Add("", "")
	f.Fuzz(func(t *testing.T, s, scope string) {
		c, err := backend.DecodeCursor(s, scope)
		if err != nil {
			require.Equal(t, apperr.Invalid, apperr.CodeOf(err))
			require.Equal(t, "invalid cursor: "+s, apperr.MessageOf(err))
			return
		}
		require.Equal(t, scope, c.Scope)
		again, err := backend.DecodeCursor(c.Encode(), scope)
		require.NoError(t, err)
		require.Equal(t, c, again)
	})
}
