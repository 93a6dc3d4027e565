package skills

import (
	"context"
	"encoding/binary"
	"hash/maphash"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/appserver/appserver/internal/service"
)

// DefaultWatchInterval is how often a Watcher polls the local roots.
const DefaultWatchInterval = 2 * time.Second

// WatcherConfig configures a Watcher.
type WatcherConfig struct {
	// Interval is the polling period; 0 means DefaultWatchInterval.
	Interval time.Duration
	// OnChange is called (from the watcher goroutine, never concurrently)
	// after a local root changed and the local cache was invalidated; the
	// server emits skills/changed from it. Nil only invalidates.
	OnChange func()
	// Cwds are directories whose workspace roots are watched from the
	// start; directories the catalog has listed since are added on their
	// own.
	Cwds []string
	// Logger receives polling problems; nil discards.
	Logger *slog.Logger
}

// Watcher polls the local skill roots (the directories a scan visits and
// their SKILL.md sizes and modification times) and reports changes. It has one goroutine,
// started by Start and ended by Stop.
type Watcher struct {
	cat  *Catalog
	cfg  WatcherConfig
	base service.Base

	last map[string]uint64 // root → fingerprint; owned by the goroutine after Start
}

// NewWatcher returns a stopped watcher over the catalog's local roots.
func (c *Catalog) NewWatcher(cfg WatcherConfig) *Watcher {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultWatchInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Watcher{cat: c, cfg: cfg}
}

// Start takes the first fingerprint of the roots (so a change made after
// Start returns is reported) and starts polling. Without a local provider
// there is nothing to watch and no goroutine is started. A second Start
// does nothing.
func (w *Watcher) Start(ctx context.Context) error {
	_, run, err := w.base.Begin(ctx)
	if !run {
		return err
	}
	if w.cat.local != nil {
		w.last = w.fingerprints()
		w.base.Go(w.run)
	}
	return w.base.Started(nil)
}

// Stop ends polling and waits for the goroutine. It may be called before
// Start and more than once.
func (w *Watcher) Stop() { w.base.Stop(nil) }

func (w *Watcher) run(ctx context.Context) {
	t := time.NewTicker(w.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if w.poll() {
			w.cat.local.Invalidate()
			if w.cfg.OnChange != nil {
				w.cfg.OnChange()
			}
		}
	}
}

// poll fingerprints the roots again and reports whether a root seen before
// changed. Roots that only now come into view (a new cwd) are recorded, not
// reported.
func (w *Watcher) poll() bool {
	now := w.fingerprints()
	changed := false
	for root, fp := range now {
		if old, ok := w.last[root]; ok && old != fp {
			w.cfg.Logger.Debug("skill root changed", slog.String("root", root))
			changed = true
		}
	}
	w.last = now
	return changed
}

// fingerprints hashes every watched root.
func (w *Watcher) fingerprints() map[string]uint64 {
	lp := w.cat.local
	cwds := append([]string{""}, w.cfg.Cwds...)
	cwds = append(cwds, lp.knownCwds()...)
	out := map[string]uint64{}
	for _, cwd := range cwds {
		for _, r := range lp.rootsFor(cwd, nil) {
			if _, done := out[r.path]; !done {
				out[r.path] = lp.fingerprintRoot(w.cat.codec.seed, r.path)
			}
		}
	}
	return out
}

// fingerprintRoot hashes what a scan of root depends on: the directories it
// would visit and their SKILL.md files (size, mode and modification time),
// with the same depth, directory, dot-entry and symlink rules as the scan,
// so changes the scan ignores (hidden entries, other files) do not count.
func (p *LocalProvider) fingerprintRoot(seed maphash.Seed, root string) uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	var buf [8]byte
	writeInt := func(v int64) {
		binary.LittleEndian.PutUint64(buf[:], uint64(v))
		h.Write(buf[:])
	}
	writeStr := func(s string) {
		writeInt(int64(len(s)))
		h.WriteString(s)
	}
	fi, err := os.Stat(root)
	if err != nil || !fi.IsDir() {
		writeStr("absent")
		return h.Sum64()
	}
	type item struct {
		dir   string
		depth int
	}
	queue := []item{{dir: root}}
	for read := 0; len(queue) > 0 && read < p.opts.MaxDirsPerRoot; read++ {
		it := queue[0]
		queue = queue[1:]
		writeStr(it.dir)
		entries, err := os.ReadDir(it.dir)
		if err != nil {
			continue
		}
		isSkill := false
		for _, e := range entries {
			if e.Name() != SkillFileName {
				continue
			}
			isSkill = true
			if fi, err := e.Info(); err == nil {
				writeInt(fi.Size())
				writeInt(fi.ModTime().UnixNano())
				writeInt(int64(fi.Mode()))
			}
		}
		if isSkill || it.depth >= p.opts.MaxDepth {
			continue // the scan does not descend into a skill either
		}
		for _, e := range entries {
			name := e.Name()
			if strings.HasPrefix(name, ".") || e.Type()&fs.ModeSymlink != 0 || !e.IsDir() {
				continue
			}
			queue = append(queue, item{dir: filepath.Join(it.dir, name), depth: it.depth + 1})
		}
	}
	return h.Sum64()
}
