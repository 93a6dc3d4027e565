package clientfs

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/fsguard"
)

// recorder is a connection's notifications.
type recorder struct {
	mu    sync.Mutex
	notes []note
	ch    chan struct{}
}

type note struct {
	method string
	params any
}

func newRecorder() *recorder { return &recorder{ch: make(chan struct{}, 1024)} }

func (r *recorder) notify(method string, params any) {
	r.mu.Lock()
	r.notes = append(r.notes, note{method, params})
	r.mu.Unlock()
	r.ch <- struct{}{}
}

// next waits for the next notification.
func (r *recorder) next(t *testing.T) note {
	t.Helper()
	select {
	case <-r.ch:
	case <-time.After(10 * time.Second):
		t.Fatal("no notification")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.notes[0]
	r.notes = r.notes[1:]
	return n
}

// none checks nothing arrives within d.
func (r *recorder) none(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case <-r.ch:
		r.mu.Lock()
		defer r.mu.Unlock()
		t.Fatalf("unexpected notification %+v", r.notes)
	case <-time.After(d):
	}
}

func (h *host) conn(id uint64, a fsguard.Access, r *recorder) Conn {
	return Conn{ID: id, Access: a, Notify: r.notify}
}

func changed(t *testing.T, n note) api.FsChangedNotification {
	t.Helper()
	require.Equal(t, api.NotificationFsChanged, n.method)
	return n.params.(api.FsChangedNotification)
}

// A directory's watch reports its entries' changes, a file's watch the
// file (created later, too), each gathered and sorted; after fs/unwatch,
// and once the connection closed, nothing is sent and the watcher is
// released.
func TestWatch(t *testing.T) {
	h := newHost(t, Config{WatchDelay: 50 * time.Millisecond})
	ctx := context.Background()
	rec := newRecorder()
	c := h.conn(1, h.ci, rec)
	res, err := h.svc.Watch(ctx, c, api.FsWatchParams{WatchID: "dir", Path: api.AbsolutePath(h.ws)})
	require.NoError(t, err)
	require.Equal(t, h.ws, res.Path)
	_, err = h.svc.Watch(ctx, c, api.FsWatchParams{WatchID: "dir", Path: api.AbsolutePath(h.ws)})
	requireCode(t, err, apperr.Invalid, "watchId already exists: dir")

	require.NoError(t, os.WriteFile(filepath.Join(h.ws, "b"), []byte("b"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(h.ws, "a"), []byte("a"), 0o644))
	n := changed(t, rec.next(t))
	require.Equal(t, "dir", n.WatchID)
	require.Equal(t, []string{filepath.Join(h.ws, "a"), filepath.Join(h.ws, "b")}, []string(n.ChangedPaths))

	later := filepath.Join(h.ws, "later.txt")
	_, err = h.svc.Watch(ctx, c, api.FsWatchParams{WatchID: "file", Path: api.AbsolutePath(later)})
	require.NoError(t, err)
	h.svc.Unwatch(c, api.FsUnwatchParams{WatchID: "dir"})
	require.NoError(t, os.WriteFile(filepath.Join(h.ws, "other"), nil, 0o644))
	require.NoError(t, os.WriteFile(later, []byte("now"), 0o644))
	n = changed(t, rec.next(t))
	require.Equal(t, api.FsChangedNotification{WatchID: "file", ChangedPaths: api.List[string]{later}}, n)
	rec.none(t, 200*time.Millisecond)

	h.svc.CloseConn(1)
	require.NoError(t, os.WriteFile(later, []byte("again"), 0o644))
	rec.none(t, 200*time.Millisecond)
	h.svc.watches.mu.Lock()
	require.Empty(t, h.svc.watches.conns)
	require.Empty(t, h.svc.watches.dirs)
	h.svc.watches.mu.Unlock()
	// Unknown ids are fine.
	h.svc.Unwatch(c, api.FsUnwatchParams{WatchID: "nope"})
}

// A watch reaches what its caller may read: a principal's stays in its
// roots, the operator's never reports the daemon's own files.
func TestWatchPathRule(t *testing.T) {
	h := newHost(t, Config{WatchDelay: 20 * time.Millisecond})
	ctx := context.Background()
	rec := newRecorder()
	_, err := h.svc.Watch(ctx, h.conn(1, h.ci, rec), api.FsWatchParams{WatchID: "w", Path: api.AbsolutePath(h.other)})
	requireCode(t, err, apperr.Forbidden, "outside the workspace roots")
	_, err = h.svc.Watch(ctx, h.conn(1, h.operator, rec), api.FsWatchParams{WatchID: "w", Path: api.AbsolutePath(h.data)})
	requireCode(t, err, apperr.Forbidden, "protected path of the daemon")

	// Watching the directory that holds the data directory: its changes
	// are left out, the others reported.
	_, err = h.svc.Watch(ctx, h.conn(2, h.operator, rec), api.FsWatchParams{WatchID: "base", Path: api.AbsolutePath(filepath.Dir(h.data))})
	require.NoError(t, err)
	require.NoError(t, os.Chmod(h.data, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(filepath.Dir(h.data), "x"), nil, 0o644))
	n := changed(t, rec.next(t))
	require.Equal(t, []string{filepath.Join(filepath.Dir(h.data), "x")}, []string(n.ChangedPaths))
}

func TestWatchBounds(t *testing.T) {
	h := newHost(t, Config{MaxWatchesPerConn: 2, MaxWatches: 2})
	ctx := context.Background()
	rec := newRecorder()
	c := h.conn(1, h.operator, rec)
	for i, p := range []string{h.ws, h.other} {
		_, err := h.svc.Watch(ctx, c, api.FsWatchParams{WatchID: string(rune('a' + i)), Path: api.AbsolutePath(p)})
		require.NoError(t, err)
	}
	_, err := h.svc.Watch(ctx, c, api.FsWatchParams{WatchID: "c", Path: api.AbsolutePath(h.ws)})
	requireCode(t, err, apperr.Invalid, "this connection has 2 watches")
	_, err = h.svc.Watch(ctx, h.conn(2, h.operator, rec), api.FsWatchParams{WatchID: "c", Path: "/tmp"})
	requireCode(t, err, apperr.Unavailable, "watches 2 directories")
	_, err = h.svc.Watch(ctx, h.conn(2, h.operator, rec), api.FsWatchParams{WatchID: "c", Path: api.AbsolutePath(h.ws)})
	require.NoError(t, err, "a directory already watched costs nothing more")

	h.svc.Stop()
	_, err = h.svc.Watch(ctx, h.conn(3, h.operator, rec), api.FsWatchParams{WatchID: "d", Path: api.AbsolutePath(h.ws)})
	requireCode(t, err, apperr.Unavailable, "shutting down")
}

// A watched directory removed and made again is watched again by the next
// watch of it (inotify drops a removed directory's watch).
func TestWatchDirectoryMadeAgain(t *testing.T) {
	h := newHost(t, Config{WatchDelay: 20 * time.Millisecond})
	ctx := context.Background()
	rec := newRecorder()
	c := h.conn(1, h.operator, rec)
	dir := filepath.Join(h.ws, "d")
	require.NoError(t, os.Mkdir(dir, 0o755))
	_, err := h.svc.Watch(ctx, c, api.FsWatchParams{WatchID: "a", Path: api.AbsolutePath(dir)})
	require.NoError(t, err)
	require.NoError(t, os.Remove(dir))
	require.Equal(t, []string{dir}, []string(changed(t, rec.next(t)).ChangedPaths))
	require.NoError(t, os.Mkdir(dir, 0o755))
	_, err = h.svc.Watch(ctx, c, api.FsWatchParams{WatchID: "b", Path: api.AbsolutePath(dir)})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "f"), nil, 0o644))
	for {
		n := changed(t, rec.next(t))
		if n.WatchID == "b" {
			require.Equal(t, []string{filepath.Join(dir, "f")}, []string(n.ChangedPaths))
			break
		}
	}
}
