package turns

// HistoryInMemory reports whether a loaded thread holds its model history.
func HistoryInMemory(m *Manager, threadID string) bool {
	t := m.loaded(threadID)
	if t == nil {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.historyLoaded
}

// RequestBuffers returns the length and capacity of the request slices a
// loaded thread keeps for its next turn (loop.Run.UseRequestBuffers).
func RequestBuffers(m *Manager, threadID string) (n, c int) {
	t := m.loaded(threadID)
	if t == nil {
		return 0, 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.reqInput), cap(t.reqInput)
}
