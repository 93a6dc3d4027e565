package clientfs

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/fsguard"
)

// watchHub owns every connection's watches and the one inotify instance
// they share. Lock order: watchHub.mu before watch.mu.
type watchHub struct {
	s *Service

	mu      sync.Mutex
	w       *fsnotify.Watcher // nil until the first watch
	done    chan struct{}     // closed when the event loop has returned
	stopped bool
	dirs    map[string]map[*watch]struct{} // by the directory inotify watches
	// gone are watched directories removed or moved away since: inotify
	// dropped them, and the next watch of one adds it again.
	gone  map[string]bool
	conns map[uint64]map[string]*watch // by connection, then watch id
}

// watch is one fs/watch of one connection.
type watch struct {
	conn  Conn
	id    string
	named string // the path as the client named it, cleaned
	real  string // the same with its symlinks resolved
	dir   string // the directory inotify watches for it
	isDir bool   // real is a directory: changes of its entries count
	wait  time.Duration

	mu      sync.Mutex // guards what follows; held while notifying
	pending map[string]struct{}
	timer   *time.Timer
	closed  bool
}

func newWatchHub(s *Service) *watchHub {
	return &watchHub{s: s, dirs: map[string]map[*watch]struct{}{}, conns: map[uint64]map[string]*watch{}, gone: map[string]bool{}}
}

// Watch starts fs/changed notifications for a file or directory
// (fs/watch): a directory's entries, or the file (which need not exist
// yet) through its directory. Changes are gathered for WatchDelay and
// sent sorted.
func (s *Service) Watch(ctx context.Context, c Conn, p api.FsWatchParams) (api.FsWatchResult, error) {
	h := s.watches
	named := string(p.Path)
	h.mu.Lock()
	_, dup := h.conns[c.ID][p.WatchID]
	n := len(h.conns[c.ID])
	h.mu.Unlock()
	switch {
	case dup:
		return api.FsWatchResult{}, invalid("watchId already exists: %s", p.WatchID)
	case n >= s.cfg.MaxWatchesPerConn:
		return api.FsWatchResult{}, invalid("this connection has %d watches, the most it may have; unwatch some first", n)
	}
	w, err := s.target(ctx, c, named)
	if err != nil {
		return api.FsWatchResult{}, fail(err)
	}
	w.id = p.WatchID
	if err := h.add(w); err != nil {
		return api.FsWatchResult{}, err
	}
	// inotify follows symlinks: a directory swapped for one since it was
	// checked would have the watch report another directory's entries.
	err = s.inTree(ctx, c.Access, func(t *fsguard.Tree) error {
		tg, err := t.Resolve("/", w.dir, fsguard.Read)
		if err == nil && tg.Real != w.dir {
			err = fsguard.ErrSymlinkAppeared
		}
		return err
	})
	if err != nil {
		s.Unwatch(c, api.FsUnwatchParams{WatchID: w.id})
		return api.FsWatchResult{}, fail(err)
	}
	return api.FsWatchResult{Path: named}, nil
}

// target resolves a watch's path and finds the directory to watch for
// it: the path itself when it is a directory, else its nearest existing
// parent.
func (s *Service) target(ctx context.Context, c Conn, named string) (*watch, error) {
	w := &watch{conn: c, named: named, wait: s.cfg.WatchDelay}
	err := s.inTree(ctx, c.Access, func(t *fsguard.Tree) error {
		tg, err := t.Resolve("/", named, fsguard.Read)
		if err != nil {
			return err
		}
		w.real = tg.Real
		return nil
	})
	if err != nil {
		return nil, err
	}
	dir := w.real
	for {
		fi, err := s.guard.Stat(ctx, c.Access, dir)
		if err == nil && fi.IsDir() {
			break
		}
		if err != nil && !errors.Is(err, syscall.ENOENT) && !errors.Is(err, syscall.ENOTDIR) {
			return nil, err
		}
		if dir == "/" {
			return nil, syscall.ENOENT
		}
		dir = filepath.Dir(dir)
	}
	w.dir, w.isDir = dir, dir == w.real
	return w, nil
}

// add registers w, watching its directory if no other watch does.
func (h *watchHub) add(w *watch) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.stopped:
		return apperr.New(apperr.Unavailable, "the daemon is shutting down")
	case h.conns[w.conn.ID][w.id] != nil:
		return invalid("watchId already exists: %s", w.id)
	case len(h.conns[w.conn.ID]) >= h.s.cfg.MaxWatchesPerConn:
		return invalid("this connection has %d watches, the most it may have; unwatch some first", len(h.conns[w.conn.ID]))
	}
	if h.dirs[w.dir] == nil {
		if len(h.dirs) >= h.s.cfg.MaxWatches {
			return apperr.New(apperr.Unavailable, "the daemon watches %d directories, the most it may; try again later", len(h.dirs))
		}
		if err := h.addDirLocked(w.dir); err != nil {
			return fail(err)
		}
		h.dirs[w.dir] = map[*watch]struct{}{}
	} else if h.gone[w.dir] {
		if err := h.addDirLocked(w.dir); err != nil {
			return fail(err)
		}
	}
	delete(h.gone, w.dir)
	h.dirs[w.dir][w] = struct{}{}
	if h.conns[w.conn.ID] == nil {
		h.conns[w.conn.ID] = map[string]*watch{}
	}
	h.conns[w.conn.ID][w.id] = w
	return nil
}

// addDirLocked starts inotify on dir, and the event loop with the first
// watch.
func (h *watchHub) addDirLocked(dir string) error {
	if h.w == nil {
		fw, err := fsnotify.NewWatcher()
		if err != nil {
			return err
		}
		h.w, h.done = fw, make(chan struct{})
		go h.loop(fw, h.done)
	}
	return h.w.Add(dir)
}

// Unwatch ends a watch (fs/unwatch); no fs/changed of it follows the
// answer. An unknown id is not an error.
func (s *Service) Unwatch(c Conn, p api.FsUnwatchParams) api.FsUnwatchResult {
	h := s.watches
	h.mu.Lock()
	w := h.conns[c.ID][p.WatchID]
	if w != nil {
		h.removeLocked(w)
	}
	h.mu.Unlock()
	if w != nil {
		w.close()
	}
	return api.FsUnwatchResult{}
}

func (h *watchHub) removeLocked(w *watch) {
	delete(h.conns[w.conn.ID], w.id)
	if len(h.conns[w.conn.ID]) == 0 {
		delete(h.conns, w.conn.ID)
	}
	ws := h.dirs[w.dir]
	delete(ws, w)
	if len(ws) == 0 {
		delete(h.dirs, w.dir)
		delete(h.gone, w.dir)
		if h.w != nil {
			_ = h.w.Remove(w.dir) // gone already when the directory was removed
		}
	}
}

func (h *watchHub) closeConn(id uint64) {
	h.mu.Lock()
	var closed []*watch
	for _, w := range h.conns[id] {
		h.removeLocked(w)
		closed = append(closed, w)
	}
	h.mu.Unlock()
	for _, w := range closed {
		w.close()
	}
}

// stop ends every watch and the event loop, and waits for it.
func (h *watchHub) stop() {
	h.mu.Lock()
	h.stopped = true
	var closed []*watch
	for _, ws := range h.conns {
		for _, w := range ws {
			closed = append(closed, w)
		}
	}
	h.conns, h.dirs, h.gone = map[uint64]map[string]*watch{}, map[string]map[*watch]struct{}{}, map[string]bool{}
	fw, done := h.w, h.done
	h.w = nil
	h.mu.Unlock()
	for _, w := range closed {
		w.close()
	}
	if fw != nil {
		_ = fw.Close()
		<-done
	}
}

// loop hands inotify's events to the watches until the watcher closes.
func (h *watchHub) loop(fw *fsnotify.Watcher, done chan struct{}) {
	defer close(done)
	for {
		select {
		case ev, ok := <-fw.Events:
			if !ok {
				return
			}
			h.dispatch(ev)
		case err, ok := <-fw.Errors:
			if !ok {
				return
			}
			h.s.log.Warn("file watch error", "err", err)
		}
	}
}

// dispatch gives a changed path to the watches it concerns.
func (h *watchHub) dispatch(ev fsnotify.Event) {
	name := ev.Name
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.dirs[name] != nil && ev.Has(fsnotify.Remove|fsnotify.Rename) {
		h.gone[name] = true
	}
	for _, dir := range []string{filepath.Dir(name), name} {
		for w := range h.dirs[dir] {
			if reported, ok := w.concerns(name); ok && h.s.guard.CheckName(w.conn.Access, name, fsguard.Read) == nil {
				w.add(reported)
			}
		}
	}
}

// concerns says whether a change of the real path name is one this watch
// reports, and as which path: the one the client named, or the entry of
// the directory it named.
func (w *watch) concerns(name string) (string, bool) {
	switch {
	case name == w.real:
		return w.named, true
	case w.isDir && filepath.Dir(name) == w.real:
		return filepath.Join(w.named, strings.TrimPrefix(name, w.real+"/")), true
	}
	return "", false
}

// add gathers a changed path, reporting it after the delay.
func (w *watch) add(path string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	if w.pending == nil {
		w.pending = map[string]struct{}{}
	}
	w.pending[path] = struct{}{}
	if w.timer == nil {
		w.timer = time.AfterFunc(w.wait, w.flush)
	}
}

// flush sends what was gathered, sorted.
func (w *watch) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.timer = nil
	if w.closed || len(w.pending) == 0 {
		return
	}
	paths := make([]string, 0, len(w.pending))
	for p := range w.pending {
		paths = append(paths, p)
	}
	w.pending = nil
	slices.Sort(paths)
	w.conn.Notify(api.NotificationFsChanged, api.FsChangedNotification{WatchID: w.id, ChangedPaths: paths})
}

// close stops the watch; once it returns, nothing more is sent for it.
func (w *watch) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
}
