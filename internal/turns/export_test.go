package turns

import "time"

// SetMaxCommitDelay sets how long a round's commit may wait for the next
// request to be written, until the returned function restores it. Call it
// before any turn starts.
func SetMaxCommitDelay(d time.Duration) (restore func()) {
	old := maxCommitDelay
	maxCommitDelay = d
	return func() { maxCommitDelay = old }
}

// EphemeralThreads returns how many threads the memory store holds.
func (m *Manager) EphemeralThreads() int { return m.mem.Len() }
