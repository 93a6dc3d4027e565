package cluster

import (
	"context"

	"github.com/appserver/appserver/internal/store"
)

// Fenced returns st with every write of a thread whose lease this node
// holds made conditional on that lease (store.Batch.Fences): once the
// lease expired or was taken over, the database refuses the write, whatever
// this node believes. Writes of threads not leased here pass as they are:
// an idle thread belongs to no node.
func (n *Node) Fenced(st store.Store) store.Store { return fencedStore{Store: st, n: n} }

type fencedStore struct {
	store.Store
	n *Node
}

func (f fencedStore) Write(ctx context.Context, b *store.Batch) error {
	if b.Empty() {
		return nil
	}
	var fences []store.Fence
	add := func(threadID string) {
		for _, fc := range fences {
			if fc.ThreadID == threadID {
				return
			}
		}
		if tok := f.n.fence(threadID); tok != 0 {
			fences = append(fences, store.Fence{ThreadID: threadID, Token: tok})
		}
	}
	for _, u := range b.UpdateThreads {
		add(u.ID)
	}
	for _, d := range b.DropTurns {
		add(d.ThreadID)
	}
	for _, t := range b.CreateTurns {
		add(t.ThreadID)
	}
	for _, u := range b.UpdateTurns {
		add(u.ThreadID)
	}
	for _, it := range b.AppendItems {
		add(it.ThreadID)
	}
	if len(fences) == 0 {
		return f.Store.Write(ctx, b)
	}
	// The records are shared, so that the store fills them back for the
	// caller; only the fences are added.
	fb := *b
	fb.Fences = append(append([]store.Fence(nil), b.Fences...), fences...)
	return f.Store.Write(ctx, &fb)
}
