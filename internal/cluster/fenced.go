package cluster

import (
	"context"
	"slices"

	"github.com/appserver/appserver/internal/apperr"
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

// maxRefence bounds how often a write is tried again under newer fences.
const maxRefence = 3

func (f fencedStore) Write(ctx context.Context, b *store.Batch) error {
	if b.Empty() {
		return nil
	}
	fences := f.fences(b, nil)
	for attempt := 0; ; attempt++ {
		if len(fences) == 0 {
			return f.Store.Write(ctx, b)
		}
		// The records are shared, so that the store fills them back for
		// the caller; only the fences are added.
		fb := *b
		fb.Fences = append(append([]store.Fence(nil), b.Fences...), fences...)
		err := f.Store.Write(ctx, &fb)
		if err == nil || !apperr.Is(err, apperr.Conflict) || attempt == maxRefence {
			return err
		}
		// A write that is not its thread's turn's own (a client setting
		// the thread's goal or name) takes the fence of a lease held when
		// it is made. If the turn ends and gives the lease back before the
		// write commits, the database refuses the write: it goes again,
		// fenced on the thread having no live lease at all (Token 0), which
		// holds after a give-back and fails while another node holds the
		// lease, whether or not this node noticed it was taken. (A turn
		// another node's failover scan settled leaves no live lease: the
		// thread is idle, and the write lands as on any idle thread.) A
		// write can also be refused while this node takes the lease again
		// for its next turn; the caller then sees the Conflict. A lease
		// still held here under the same token was lost, and its refusal
		// stands. A refused write stored nothing, so it can be made again.
		now := f.fences(b, fences)
		if slices.Equal(now, fences) {
			return err
		}
		fences = now
	}
}

// fences are the fences of the threads b writes, each once: the token of
// the lease this node holds, or, for a thread fenced in before but whose
// lease was given back since, Token 0 (the thread must have no live
// lease).
func (f fencedStore) fences(b *store.Batch, before []store.Fence) []store.Fence {
	var fences []store.Fence
	add := func(threadID string) {
		for _, fc := range fences {
			if fc.ThreadID == threadID {
				return
			}
		}
		if tok := f.n.fence(threadID); tok != 0 {
			fences = append(fences, store.Fence{ThreadID: threadID, Token: tok})
			return
		}
		for _, fc := range before {
			if fc.ThreadID == threadID {
				fences = append(fences, store.Fence{ThreadID: threadID})
				return
			}
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
	return fences
}
