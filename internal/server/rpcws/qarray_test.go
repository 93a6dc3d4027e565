package rpcws

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The frames the writer took are cleared from the queue's backing array,
// so an array kept for reuse (queueArrays) holds no frame: a partly
// drained queue moves its few frames left to the front and clears the
// rest, a drained one lets go of the array, whose box never holds it
// while the queue is in use.
func TestDrainedQueueHoldsNoFrame(t *testing.T) {
	s := &Stream{}
	a := queueArrays.Get().(*[]outFrame)
	s.qarray, s.queue, *a = a, (*a)[:0], nil
	for _, d := range []string{"a", "b", "c"} {
		s.queue = append(s.queue, outFrame{data: []byte(d), size: 1})
	}
	whole := s.queue
	s.dropHeadLocked(1)
	require.Len(t, s.queue, 2)
	require.Equal(t, "b", string(s.queue[0].data))
	// The rest moved to the front: the array keeps its capacity, and the
	// slot the last frame left holds nothing.
	require.Equal(t, cap(whole), cap(s.queue))
	require.Nil(t, whole[2].data)
	s.dropHeadLocked(1)
	require.Equal(t, "c", string(s.queue[0].data))
	require.Equal(t, cap(whole), cap(s.queue))
	s.dropHeadLocked(1)
	require.Nil(t, s.queue)
	require.Nil(t, s.qarray)
	for _, f := range whole {
		require.Nil(t, f.data)
	}
}
