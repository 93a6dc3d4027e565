package orchestrate

import (
	"container/list"
	"sync"

	"github.com/appserver/appserver/internal/dynamic"
)

// The bounds of the restored dynamic tool sets kept (restoredTools): at
// most this many sets, of at most this many stored bytes together. A set
// restored takes several times its stored size (the compiled argument
// validators), so the cache holds some tens of MiB at worst.
const (
	maxRestoredSets  = 32
	maxRestoredBytes = 4 << 20
)

// restoredTools keeps the dynamic tool sets of recent turns as restored
// from their threads' records, keyed by the stored form: restoring
// parses, sanitizes and compiles every tool's input schema, 0.8–0.9 ms
// for ten tools (BenchmarkBuildTools/restore-dynamic, where a turn's
// whole Build now takes 18–22 µs), which every turn of a thread with
// dynamic tools used to pay; and threads registering the same tools (a
// web frontend's) share one set. A restored set is never changed
// (dynamic.Tools), so turns may share it. The least recently used sets go
// first when the bounds are reached.
type restoredTools struct {
	restore func([]byte) (*dynamic.Tools, error)

	mu    sync.Mutex
	byKey map[string]*list.Element // of *restoredSet
	lru   list.List                // most recently used first
	bytes int
}

type restoredSet struct {
	key   string
	tools *dynamic.Tools
}

func newRestoredTools(restore func([]byte) (*dynamic.Tools, error)) *restoredTools {
	return &restoredTools{restore: restore, byKey: map[string]*list.Element{}}
}

// get returns the set stored as data, restoring it unless kept. A set that
// does not restore is not kept: its error comes back at every turn.
func (c *restoredTools) get(data []byte) (*dynamic.Tools, error) {
	c.mu.Lock()
	if e, ok := c.byKey[string(data)]; ok {
		c.lru.MoveToFront(e)
		tools := e.Value.(*restoredSet).tools
		c.mu.Unlock()
		return tools, nil
	}
	c.mu.Unlock()
	// Restored without the lock: other turns' sets are not held up.
	tools, err := c.restore(data)
	if err != nil || len(data) > maxRestoredBytes {
		return tools, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byKey[string(data)]; ok { // another turn restored it meanwhile
		c.lru.MoveToFront(e)
		return e.Value.(*restoredSet).tools, nil
	}
	key := string(data)
	c.byKey[key] = c.lru.PushFront(&restoredSet{key: key, tools: tools})
	c.bytes += len(key)
	for c.lru.Len() > maxRestoredSets || c.bytes > maxRestoredBytes {
		old := c.lru.Remove(c.lru.Back()).(*restoredSet)
		delete(c.byKey, old.key)
		c.bytes -= len(old.key)
	}
	return tools, nil
}
