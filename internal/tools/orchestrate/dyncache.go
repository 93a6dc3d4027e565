package orchestrate

import (
	"container/list"
	"sync"

	"github.com/appserver/appserver/internal/dynamic"
)

// The bounds of the restored dynamic tool sets kept (restoredTools): at
// most this many sets, of at most this many stored bytes together. A
// restored set keeps about 20 times its stored size alive with ordinary
// schemas (the compiled argument validators) and up to some 125 times
// with schemas made to be large, so the cache holds a few MiB in common
// use and about 125 MiB at worst.
const (
	maxRestoredSets  = 32
	maxRestoredBytes = 1 << 20
)

// restoredTools keeps the dynamic tool sets of the threads that ran turns
// recently, as restored from their records: restoring parses, sanitizes
// and compiles every tool's input schema, 0.8–0.9 ms for ten tools
// (BenchmarkBuildTools/restore-dynamic, where a turn's whole Build now
// takes 18–22 µs), which every turn of a thread with dynamic tools used to
// pay. A set is kept per thread and never shared with another thread,
// even one that registered the same tools: a tool's argument validator
// validates one call at a time, and a call with large arguments may take
// it for seconds, which must hold up no other thread's calls. A thread
// runs one turn at a time, so its own turns never wait on each other. The
// least recently used sets go first when the bounds are reached.
type restoredTools struct {
	restore func([]byte) (*dynamic.Tools, error)

	mu    sync.Mutex
	byKey map[string]*list.Element // of *restoredSet
	lru   list.List                // most recently used first
	bytes int                      // the stored forms' bytes kept
}

type restoredSet struct {
	key   string // thread id, NUL, stored form
	size  int    // of the stored form
	tools *dynamic.Tools
}

func newRestoredTools(restore func([]byte) (*dynamic.Tools, error)) *restoredTools {
	return &restoredTools{restore: restore, byKey: map[string]*list.Element{}}
}

// get returns thread threadID's tools, stored as data, restoring them
// unless kept. A set that does not restore is not kept: its error comes
// back at every turn.
func (c *restoredTools) get(threadID string, data []byte) (*dynamic.Tools, error) {
	key := threadID + "\x00" + string(data)
	c.mu.Lock()
	if e, ok := c.byKey[key]; ok {
		c.lru.MoveToFront(e)
		tools := e.Value.(*restoredSet).tools
		c.mu.Unlock()
		return tools, nil
	}
	c.mu.Unlock()
	// Restored without the lock: other threads' turns are not held up.
	tools, err := c.restore(data)
	if err != nil || len(data) > maxRestoredBytes {
		return tools, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byKey[key]; ok { // restored meanwhile
		c.lru.MoveToFront(e)
		return e.Value.(*restoredSet).tools, nil
	}
	c.byKey[key] = c.lru.PushFront(&restoredSet{key: key, size: len(data), tools: tools})
	c.bytes += len(data)
	for c.lru.Len() > maxRestoredSets || c.bytes > maxRestoredBytes {
		old := c.lru.Remove(c.lru.Back()).(*restoredSet)
		delete(c.byKey, old.key)
		c.bytes -= old.size
	}
	return tools, nil
}
