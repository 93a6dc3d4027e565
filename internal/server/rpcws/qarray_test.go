package rpcws

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The frames the writer took are cleared from the queue's backing array,
// so an array kept for reuse (queueArrays) holds no frame: a partly
// drained queue clears its head, a drained one all of it and lets go of
// the array.
func TestDrainedQueueHoldsNoFrame(t *testing.T) {
	s := &Stream{}
	a := queueArrays.Get().(*[]outFrame)
	s.qarray, s.queue = a, (*a)[:0]
	for _, d := range []string{"a", "b", "c"} {
		s.queue = append(s.queue, outFrame{data: []byte(d), size: 1})
	}
	whole := s.queue
	s.dropHeadLocked(1)
	require.Len(t, s.queue, 2)
	require.Equal(t, "b", string(s.queue[0].data))
	require.Nil(t, whole[0].data)
	s.dropHeadLocked(2)
	require.Nil(t, s.queue)
	require.Nil(t, s.qarray)
	for _, f := range whole {
		require.Nil(t, f.data)
	}
}
