package turns

import "github.com/appserver/appserver/internal/turns/subagents"

// EphemeralThreads returns how many threads the memory store holds.
func (m *Manager) EphemeralThreads() int { return m.mem.(interface{ Len() int }).Len() }

// ChildrenOf returns the Children of parentID, as its turns' tools get it.
func ChildrenOf(m *Manager, parentID string) *subagents.Children {
	return m.sub.Of(subagents.Parent{ThreadID: parentID})
}
