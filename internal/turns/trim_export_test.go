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
