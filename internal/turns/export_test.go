package turns

// EphemeralThreads returns how many threads the memory store holds.
func (m *Manager) EphemeralThreads() int { return m.mem.Len() }
