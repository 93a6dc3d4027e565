package loop

import (
	"errors"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// The first commit's announcement runs on the goroutine that hands the
// answer over when the turn has not settled yet, and on the turn's own
// when it has: never on a goroutine of its own, and once.
func TestFirstCommitAnnouncedInline(t *testing.T) {
	announcement := func(fc *FirstCommit, ran *int) *roundCommit {
		c := &roundCommit{done: make(chan error, 1), inline: true}
		c.run = func() {
			<-fc.ready
			if fc.failed() {
				c.done <- fc.err
				return
			}
			*ran++
			c.done <- nil
		}
		return c
	}

	// The answer goes first: Answered runs it, before it returns.
	fc := NewFirstCommit()
	var ran int
	c := announcement(fc, &ran)
	fc.whenAnswered(c.start)
	require.Zero(t, ran, "nothing before the answer")
	fc.Stored(nil)
	fc.Answered()
	require.Equal(t, 1, ran, "run by Answered")
	require.NoError(t, c.wait())
	require.Equal(t, 1, ran, "run once")

	// The turn settles first: it runs it once the answer went; Answered
	// then leaves it to the turn.
	fc = NewFirstCommit()
	ran = 0
	c = announcement(fc, &ran)
	fc.whenAnswered(c.start)
	fc.Stored(nil)
	done := make(chan error)
	go func() { done <- c.wait() }()
	for !c.claimed.Load() {
		runtime.Gosched()
	}
	fc.Answered()
	require.NoError(t, <-done)
	require.Equal(t, 1, ran)

	// Registered after the answer went: run at once.
	fc = NewFirstCommit()
	ran = 0
	c = announcement(fc, &ran)
	fc.Stored(nil)
	fc.Answered()
	fc.whenAnswered(c.start)
	require.Equal(t, 1, ran)

	// A failed write is never answered: the turn's settle runs it and gets
	// the failure; nothing is announced.
	fc = NewFirstCommit()
	ran = 0
	c = announcement(fc, &ran)
	fc.whenAnswered(c.start)
	fc.Stored(errors.New("disk full"))
	require.ErrorContains(t, c.wait(), "disk full")
	require.Zero(t, ran)
}
