package skills

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
)

// SkillFileName is the file that makes a directory a skill.
const SkillFileName = "SKILL.md"

// Defaults of LocalOptions.
const (
	// DefaultCacheTTL is how long a scanned catalog is reused before the
	// next list rescans the roots.
	DefaultCacheTTL = 2 * time.Second
	// DefaultMaxDepth is how far below a root skills are searched.
	DefaultMaxDepth = 6
	// DefaultMaxDirsPerRoot bounds the directories scanned per root.
	DefaultMaxDirsPerRoot = 2000
	// DefaultMaxSkillFileBytes is the largest SKILL.md that is loaded.
	DefaultMaxSkillFileBytes = 1 << 20
	// DefaultMaxResourceBytes is the largest resource skills.read serves.
	DefaultMaxResourceBytes = 1 << 20
)

// frontMatterReadLimit is how much of a SKILL.md the scanner reads: the
// front matter must close within it.
const frontMatterReadLimit = 64 << 10

// maxCachedCwds bounds the per-directory catalog cache.
const maxCachedCwds = 64

// WorkspaceRootDirs are the reference's workspace skill roots, searched in
// the turn's directory and every parent up to the project (git) root,
// nearest first: .agents/skills (current) and .codex/skills (classic).
var WorkspaceRootDirs = []string{filepath.Join(".agents", "skills"), filepath.Join(".codex", "skills")}

// LocalOptions tunes a LocalProvider; zero values take the defaults.
type LocalOptions struct {
	// Now is the clock for the cache; nil uses time.Now.
	Now func() time.Time
	// CacheTTL is how long a scan is reused; 0 means DefaultCacheTTL, a
	// negative value disables the cache.
	CacheTTL time.Duration
	// MaxDepth is how many directory levels below a root are searched.
	MaxDepth int
	// MaxDirsPerRoot bounds the directories read per root.
	MaxDirsPerRoot int
	// MaxSkillFileBytes is the largest SKILL.md loaded; larger is an error.
	MaxSkillFileBytes int64
	// MaxResourceBytes is the largest resource served by Read.
	MaxResourceBytes int64
	// HomeDir expands a leading "~/" in roots; "" uses os.UserHomeDir.
	HomeDir string
}

func (o LocalOptions) withDefaults() LocalOptions {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.CacheTTL == 0 {
		o.CacheTTL = DefaultCacheTTL
	}
	if o.MaxDepth <= 0 {
		o.MaxDepth = DefaultMaxDepth
	}
	if o.MaxDirsPerRoot <= 0 {
		o.MaxDirsPerRoot = DefaultMaxDirsPerRoot
	}
	if o.MaxSkillFileBytes <= 0 {
		o.MaxSkillFileBytes = DefaultMaxSkillFileBytes
	}
	if o.MaxResourceBytes <= 0 {
		o.MaxResourceBytes = DefaultMaxResourceBytes
	}
	if o.HomeDir == "" {
		o.HomeDir, _ = os.UserHomeDir()
	}
	return o
}

// LocalProvider is the local skill authority: it scans skill roots on this
// machine for directories holding a SKILL.md. Configured absolute roots have
// user scope; relative ones and the workspace roots (WorkspaceRootDirs from
// the turn's directory up to its git root) have repo scope and take
// precedence. Skills are deduplicated by name (first root wins) and sorted
// by name, then path. Dot-entries and symlinks below a root are skipped;
// a malformed SKILL.md becomes a warning and a skills/list error.
//
// Packages are skill://local/<root key>/<directory path below the root>;
// the main resource is <package>/SKILL.md and every regular file inside the
// skill directory is a resource <package>/<relative path>.
type LocalProvider struct {
	opts  LocalOptions
	roots []string // configured roots, as given

	mu    sync.Mutex
	gen   uint64
	cache map[string]*localSnapshot // by cwd; only cwds in known
	known []string                  // cwds asked about, oldest first; survives Invalidate
}

// NewLocalProvider returns a provider over the configured roots.
func NewLocalProvider(roots []string, opts LocalOptions) *LocalProvider {
	return &LocalProvider{
		opts:  opts.withDefaults(),
		roots: slices.Clone(roots),
		cache: map[string]*localSnapshot{},
	}
}

// Authority returns {"kind":"local","id":"local"}.
func (p *LocalProvider) Authority() Authority {
	return Authority{Kind: KindLocal, ID: LocalAuthorityID}
}

// rootSpec is one directory scanned for skills.
type rootSpec struct {
	path  string
	scope api.SkillScope
	key   string // the package URI segment naming this root
	// explicit roots report problems (not a directory, unreadable); the
	// implicit workspace roots are silently absent most of the time.
	explicit bool
}

// localSkill is one loaded skill.
type localSkill struct {
	entry   Entry
	dir     string
	file    string
	modTime time.Time
	size    int64
}

// localSnapshot is the catalog of one cwd at one moment.
type localSnapshot struct {
	gen       uint64
	built     time.Time
	roots     []rootSpec
	skills    []*localSkill
	byPackage map[string]*localSkill
	byFile    map[string]*localSkill
	list      Listing // built once; shared read-only by every List
}

// Roots returns the directories scanned for a turn working in cwd, highest
// precedence first.
func (p *LocalProvider) Roots(cwd string) []string {
	specs := p.rootsFor(cwd, nil)
	out := make([]string, len(specs))
	for i, r := range specs {
		out[i] = r.path
	}
	return out
}

// rootsFor returns the roots scanned for cwd, highest precedence first;
// extra are the roots a client added (skills/extraRoots/set), absolute
// and already checked against what the client may reach; they come after
// the configured ones, with user scope, and a missing one is not an error.
func (p *LocalProvider) rootsFor(cwd string, extra []string) []rootSpec {
	var specs []rootSpec
	seen := map[string]bool{}
	add := func(path string, scope api.SkillScope, explicit bool) {
		path = filepath.Clean(path)
		if seen[path] {
			return
		}
		seen[path] = true
		sum := sha256.Sum256([]byte(path))
		specs = append(specs, rootSpec{path: path, scope: scope, key: string(scope) + "-" + hex.EncodeToString(sum[:5]), explicit: explicit})
	}
	if cwd != "" && filepath.IsAbs(cwd) {
		cwd = filepath.Clean(cwd)
		for _, dir := range workspaceDirs(cwd) {
			for _, rel := range WorkspaceRootDirs {
				add(filepath.Join(dir, rel), api.SkillScopeRepo, false)
			}
		}
		for _, r := range p.roots {
			if r != "" && !filepath.IsAbs(r) && !strings.HasPrefix(r, "~") {
				add(filepath.Join(cwd, r), api.SkillScopeRepo, true)
			}
		}
	}
	for _, r := range p.roots {
		switch {
		case r == "~" || strings.HasPrefix(r, "~/"):
			if p.opts.HomeDir != "" {
				add(filepath.Join(p.opts.HomeDir, strings.TrimPrefix(r, "~")), api.SkillScopeUser, true)
			}
		case filepath.IsAbs(r):
			add(r, api.SkillScopeUser, true)
		}
	}
	for _, r := range extra {
		if filepath.IsAbs(r) {
			add(r, api.SkillScopeUser, false)
		}
	}
	return specs
}

// workspaceDirs returns cwd and its parents up to the nearest directory
// holding .git (the project root), nearest first; just cwd outside a
// repository.
func workspaceDirs(cwd string) []string {
	var dirs []string
	for dir := cwd; ; {
		dirs = append(dirs, dir)
		if _, err := os.Lstat(filepath.Join(dir, ".git")); err == nil {
			return dirs
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return dirs[:1]
		}
		dir = parent
	}
}

// Invalidate drops every cached scan, so the next request rescans.
func (p *LocalProvider) Invalidate() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gen++
	clear(p.cache)
}

// cacheKey names the catalog of q: its directory and its extra roots
// (NUL cannot occur in a path).
func cacheKey(q Query) string {
	key := filepath.Clean(q.Cwd)
	for _, r := range q.ExtraRoots {
		key += "\x00" + filepath.Clean(r)
	}
	return key
}

// knownCwds returns the (at most maxCachedCwds) directories catalogs were
// built for, for the watcher.
func (p *LocalProvider) knownCwds() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	cwds := make([]string, 0, len(p.known))
	for _, key := range p.known {
		cwd, _, _ := strings.Cut(key, "\x00")
		if !slices.Contains(cwds, cwd) {
			cwds = append(cwds, cwd)
		}
	}
	return cwds
}

// snapshot returns the catalog for q.Cwd, scanning when the cache is cold,
// expired or bypassed.
func (p *LocalProvider) snapshot(ctx context.Context, q Query) (*localSnapshot, error) {
	key := cacheKey(q)
	now := p.opts.Now()
	p.mu.Lock()
	snap, gen := p.cache[key], p.gen
	p.mu.Unlock()
	if snap != nil && !q.ForceReload && snap.gen == gen && p.opts.CacheTTL > 0 && now.Sub(snap.built) < p.opts.CacheTTL {
		return snap, nil
	}
	snap, err := p.scanWith(ctx, q, snap)
	if err != nil {
		return nil, err
	}
	snap.gen, snap.built = gen, now
	p.mu.Lock()
	defer p.mu.Unlock()
	if !slices.Contains(p.known, key) {
		p.known = append(p.known, key)
		if len(p.known) > maxCachedCwds {
			delete(p.cache, p.known[0])
			p.known = p.known[1:]
		}
	}
	if p.gen == gen {
		p.cache[key] = snap
	}
	return snap, nil
}

// Scan reads every root for cwd now, bypassing the cache, and returns the
// listing (used by benchmarks and tools that want a fresh view).
func (p *LocalProvider) Scan(ctx context.Context, cwd string) (Listing, error) {
	snap, err := p.scanWith(ctx, Query{Cwd: cwd}, nil)
	if err != nil {
		return Listing{}, err
	}
	return snap.list, nil
}

// List returns the catalog for q.Cwd (cached for CacheTTL). The listing is
// shared: callers must not modify it.
func (p *LocalProvider) List(ctx context.Context, q Query) (Listing, error) {
	snap, err := p.snapshot(ctx, q)
	if err != nil {
		return Listing{}, err
	}
	return snap.list, nil
}

// Lookup confirms that pkg is still a loadable skill: it must be in the
// catalog, and its SKILL.md must still be a regular file with valid front
// matter (re-parsed when it changed since the scan).
func (p *LocalProvider) Lookup(ctx context.Context, q Query, pkg string) (Entry, error) {
	snap, err := p.snapshot(ctx, q)
	if err != nil {
		return Entry{}, err
	}
	sk := snap.byPackage[pkg]
	if sk == nil {
		return Entry{}, ErrPackageUnavailable
	}
	if fi, err := os.Lstat(sk.dir); err != nil || !fi.IsDir() {
		p.Invalidate()
		return Entry{}, ErrPackageUnavailable
	}
	fi, err := os.Lstat(sk.file)
	if err != nil || !fi.Mode().IsRegular() {
		p.Invalidate()
		return Entry{}, ErrPackageUnavailable
	}
	if fi.ModTime().Equal(sk.modTime) && fi.Size() == sk.size {
		return sk.entry, nil
	}
	// Edited since the scan: the package stays available only while its
	// SKILL.md still loads.
	p.Invalidate()
	meta, err := p.loadSkillFile(sk.file, fi)
	if err != nil {
		return Entry{}, fmt.Errorf("%w: %s no longer loads: %v", ErrPackageUnavailable, SkillFileName, err)
	}
	e := sk.entry
	e.Name, e.Description, e.ShortDescription = meta.Name, meta.Description, meta.ShortDescription
	return e, nil
}

// Read serves a regular file inside the skill directory of pkg. The
// resource's path segments below the package are decoded one by one; dot
// segments, hidden names, separators and NUL bytes are refused, the file is
// opened through an os.Root confined to the skill directory, and no
// component may be a symlink.
func (p *LocalProvider) Read(ctx context.Context, q Query, pkg, resource string) (Resource, error) {
	snap, err := p.snapshot(ctx, q)
	if err != nil {
		return Resource{}, err
	}
	sk := snap.byPackage[pkg]
	if sk == nil {
		return Resource{}, ErrPackageUnavailable
	}
	pu, ru, err := ValidateResourceInPackage(pkg, resource)
	if err != nil {
		return Resource{}, err
	}
	var parts []string
	for _, seg := range ru.Segments[len(pu.Segments):] {
		name, ok := UnescapeSegment(seg)
		if !ok || name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\\\x00") {
			return Resource{}, modelError(apperr.Invalid, "resource path segment %q is not a file name", truncateForMessage(seg, 64))
		}
		if strings.HasPrefix(name, ".") {
			return Resource{}, modelError(apperr.Invalid, "hidden files and directories are not skill resources")
		}
		parts = append(parts, name)
	}
	root, err := os.OpenRoot(sk.dir)
	if err != nil {
		return Resource{}, ErrPackageUnavailable
	}
	defer root.Close()
	for i := range parts {
		rel := filepath.Join(parts[:i+1]...)
		fi, err := root.Lstat(rel)
		if errors.Is(err, fs.ErrNotExist) {
			return Resource{}, modelError(apperr.NotFound, "resource not found in the skill package")
		}
		if err != nil {
			return Resource{}, modelError(apperr.Unavailable, "resource cannot be read")
		}
		last := i == len(parts)-1
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			return Resource{}, modelError(apperr.Invalid, "resource is a symlink; symlinks are not followed")
		case !last && !fi.IsDir():
			return Resource{}, modelError(apperr.NotFound, "resource not found in the skill package")
		case last && !fi.Mode().IsRegular():
			return Resource{}, modelError(apperr.Invalid, "resource is not a regular file")
		case last && fi.Size() > p.opts.MaxResourceBytes:
			return Resource{}, modelError(apperr.Invalid, "resource is larger than the %d-byte read limit", p.opts.MaxResourceBytes)
		}
	}
	f, err := root.Open(filepath.Join(parts...))
	if err != nil {
		return Resource{}, modelError(apperr.Unavailable, "resource cannot be read")
	}
	defer f.Close()
	var text strings.Builder
	if fi, err := f.Stat(); err == nil && fi.Size() <= p.opts.MaxResourceBytes {
		text.Grow(int(fi.Size()) + 1)
	}
	if _, err := io.Copy(&text, io.LimitReader(f, p.opts.MaxResourceBytes+1)); err != nil {
		return Resource{}, modelError(apperr.Unavailable, "resource cannot be read")
	}
	if int64(text.Len()) > p.opts.MaxResourceBytes {
		return Resource{}, modelError(apperr.Invalid, "resource is larger than the %d-byte read limit", p.opts.MaxResourceBytes)
	}
	// The catalog rejects text that is not UTF-8 for every provider.
	return Resource{ID: resource, Text: text.String()}, nil
}

// scanOut accumulates one scan.
type scanOut struct {
	prev     map[string]*localSkill // the previous scan, by SKILL.md path
	skills   []*localSkill
	warnings []string
	errors   []api.SkillErrorInfo
}

func (o *scanOut) fail(path string, err error) {
	o.errors = append(o.errors, api.SkillErrorInfo{Path: path, Message: err.Error()})
	o.warnings = append(o.warnings, fmt.Sprintf("skipped %s: %v", path, err))
}

// scanWith reads every root for cwd. SKILL.md files unchanged (same size
// and modification time) since prev are not parsed again.
func (p *LocalProvider) scanWith(ctx context.Context, q Query, prev *localSnapshot) (*localSnapshot, error) {
	roots := p.rootsFor(q.Cwd, q.ExtraRoots)
	var out scanOut
	if prev != nil {
		out.prev = prev.byFile
	}
	for _, r := range roots {
		if err := p.scanRoot(ctx, r, &out); err != nil {
			return nil, err
		}
	}
	// Highest precedence first: the first skill of a name wins.
	seen := map[string]bool{}
	kept := make([]*localSkill, 0, len(out.skills))
	for _, s := range out.skills {
		if seen[s.entry.Name] {
			continue
		}
		seen[s.entry.Name] = true
		kept = append(kept, s)
	}
	slices.SortFunc(kept, func(a, b *localSkill) int {
		return cmp.Or(cmp.Compare(a.entry.Name, b.entry.Name), cmp.Compare(a.entry.Path, b.entry.Path))
	})
	snap := &localSnapshot{
		roots: roots, skills: kept,
		byPackage: make(map[string]*localSkill, len(kept)),
		byFile:    make(map[string]*localSkill, len(out.skills)),
		list:      Listing{Entries: make([]Entry, len(kept)), Warnings: out.warnings, Errors: out.errors},
	}
	for _, s := range out.skills {
		snap.byFile[s.file] = s
	}
	for i, s := range kept {
		snap.byPackage[s.entry.Package] = s
		snap.list.Entries[i] = s.entry
	}
	return snap, nil
}

// scanRoot walks one root breadth-first. A directory holding SKILL.md is a
// skill and is not descended into.
func (p *LocalProvider) scanRoot(ctx context.Context, r rootSpec, out *scanOut) error {
	fi, err := os.Stat(r.path) // the root itself may be a symlink
	if err != nil {
		if r.explicit && !errors.Is(err, fs.ErrNotExist) {
			out.fail(r.path, fmt.Errorf("skill root cannot be read: %s", osReason(err)))
		}
		return nil
	}
	if !fi.IsDir() {
		if r.explicit {
			out.fail(r.path, errors.New("skill root is not a directory"))
		}
		return nil
	}
	type item struct {
		dir   string
		rel   []string
		depth int
	}
	queue := []item{{dir: r.path}}
	read := 0
	for len(queue) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		it := queue[0]
		queue = queue[1:]
		if read >= p.opts.MaxDirsPerRoot {
			out.warnings = append(out.warnings, fmt.Sprintf("stopped scanning %s after %d directories", r.path, p.opts.MaxDirsPerRoot))
			return nil
		}
		read++
		entries, err := os.ReadDir(it.dir)
		if err != nil {
			out.fail(it.dir, fmt.Errorf("directory cannot be read: %s", osReason(err)))
			continue
		}
		if i, found := slices.BinarySearchFunc(entries, SkillFileName, func(e fs.DirEntry, name string) int {
			return strings.Compare(e.Name(), name)
		}); found {
			p.loadSkill(r, it.dir, it.rel, entries[i], out)
			continue
		}
		if it.depth >= p.opts.MaxDepth {
			continue
		}
		for _, e := range entries {
			name := e.Name()
			if strings.HasPrefix(name, ".") || e.Type()&fs.ModeSymlink != 0 || !e.IsDir() {
				continue
			}
			rel := append(slices.Clip(it.rel), name)
			queue = append(queue, item{dir: filepath.Join(it.dir, name), rel: rel, depth: it.depth + 1})
		}
	}
	return nil
}

// loadSkill loads the SKILL.md entry e of dir; failures are recorded, never
// fatal.
func (p *LocalProvider) loadSkill(r rootSpec, dir string, rel []string, e fs.DirEntry, out *scanOut) {
	file := filepath.Join(dir, SkillFileName)
	if e.Type()&fs.ModeSymlink != 0 {
		out.fail(file, errors.New("SKILL.md is a symlink; symlinks are not followed"))
		return
	}
	fi, err := e.Info()
	if err != nil {
		out.fail(file, errors.New("SKILL.md cannot be read"))
		return
	}
	var meta SkillMeta
	if old := out.prev[file]; old != nil && old.modTime.Equal(fi.ModTime()) && old.size == fi.Size() {
		meta = SkillMeta{Name: old.entry.Name, Description: old.entry.Description, ShortDescription: old.entry.ShortDescription}
	} else if meta, err = p.loadSkillFile(file, fi); err != nil {
		out.fail(file, err)
		return
	}
	segs := make([]string, 0, len(rel)+1)
	segs = append(segs, r.key)
	for _, name := range rel {
		segs = append(segs, EscapeSegment(name))
	}
	pkg := URI{Host: LocalAuthorityID, Segments: segs}.String()
	out.skills = append(out.skills, &localSkill{
		entry: Entry{
			Package:          pkg,
			Name:             meta.Name,
			Description:      meta.Description,
			ShortDescription: meta.ShortDescription,
			MainResource:     pkg + "/" + SkillFileName,
			Enabled:          true,
			Path:             file,
			Scope:            r.scope,
		},
		dir:     dir,
		file:    file,
		modTime: fi.ModTime(),
		size:    fi.Size(),
	})
}

// loadSkillFile parses the front matter of a SKILL.md whose Lstat info is fi.
func (p *LocalProvider) loadSkillFile(file string, fi fs.FileInfo) (SkillMeta, error) {
	if !fi.Mode().IsRegular() {
		return SkillMeta{}, errors.New("SKILL.md is not a regular file")
	}
	if fi.Size() > p.opts.MaxSkillFileBytes {
		return SkillMeta{}, fmt.Errorf("SKILL.md is larger than %d bytes", p.opts.MaxSkillFileBytes)
	}
	f, err := os.Open(file)
	if err != nil {
		return SkillMeta{}, errors.New("SKILL.md cannot be read")
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, frontMatterReadLimit))
	if err != nil {
		return SkillMeta{}, errors.New("SKILL.md cannot be read")
	}
	meta, err := ParseSkillFile(data)
	if errors.Is(err, errNoFrontMatter) && len(data) == frontMatterReadLimit {
		return SkillMeta{}, fmt.Errorf("front matter does not close within the first %d bytes", frontMatterReadLimit)
	}
	return meta, err
}

// osReason is the cause of a filesystem error without the path, which the
// caller reports separately.
func osReason(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
