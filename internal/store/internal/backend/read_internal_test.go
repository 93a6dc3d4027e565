package backend

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Both drivers hand a time column to timeCol: SQLite as microseconds,
// Postgres as a time.Time in the session's zone; both read back as UTC.
func TestTimeColScan(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 6000, time.UTC)
	var c timeCol
	require.NoError(t, c.Scan(at.UnixMicro()))
	require.Equal(t, at, c.t)
	require.Equal(t, &at, c.ptr())

	require.NoError(t, c.Scan(at.In(time.FixedZone("x", -7200))))
	require.Equal(t, at, c.t)
	require.Equal(t, time.UTC, c.t.Location())

	require.NoError(t, c.Scan(nil))
	require.Nil(t, c.ptr(), "NULL is an absent time")

	require.EqualError(t, c.Scan("2030-01-02"), "cannot scan string into a time")
}
