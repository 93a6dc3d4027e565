package auth

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDecodeSegmentIsStrict(t *testing.T) {
	b, ok := decodeSegment("QUI")
	require.True(t, ok)
	require.Equal(t, "AB", string(b))

	for _, seg := range []string{"QU\nI", "QUI\r", "QUI=", "QUJ", "Q", "QU+I", "QU/I", "QU I"} {
		_, ok := decodeSegment(seg)
		require.False(t, ok, "%q", seg)
	}
}

func TestSaturatingAdd(t *testing.T) {
	require.Equal(t, int64(math.MaxInt64), saturatingAdd(math.MaxInt64-1, 30))
	require.Equal(t, int64(math.MinInt64), saturatingAdd(math.MinInt64+1, -30))
	require.Equal(t, int64(12), saturatingAdd(42, -30))
}
